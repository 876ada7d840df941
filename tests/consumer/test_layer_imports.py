"""The layer's modules import one another without a cycle, not even for type checking.

A cycle hidden under TYPE_CHECKING still ties two modules together (processor.py and
effects.py once did, over RecordContext): each can only be understood, and moved, with the
other. Read from the source, so imports inside functions and TYPE_CHECKING blocks count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import exactly_once

PACKAGE = Path(exactly_once.__file__).parent


def module_name(path: Path) -> str:
    return "exactly_once" if path.stem == "__init__" else f"exactly_once.{path.stem}"


def imports_of(path: Path) -> set[str]:
    """The layer's modules that `path` imports, wherever in the file the import is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "exactly_once"}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: a relative import this check cannot follow"
            if node.module == "exactly_once":  # `from exactly_once import clients`: a submodule
                found |= {
                    f"exactly_once.{a.name}" if (PACKAGE / f"{a.name}.py").exists() else node.module
                    for a in node.names
                }
            elif node.module and node.module.startswith("exactly_once."):
                found.add(node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path) for path in sorted(PACKAGE.glob("*.py"))}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the path that closes it, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, set())):
            cycle = visit(imported, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return None


def test_the_layer_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "exactly_once.context" in graph["exactly_once.processor"]  # the graph is read
    assert "exactly_once.context" in graph["exactly_once.effects"]  # TYPE_CHECKING too
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_queue_consumer_never_loads_the_http_modules() -> None:
    """The HTTP entry point loads on first use: a queue consumer's cold start stays as lean."""
    import subprocess
    import sys

    code = (
        "import sys, exactly_once\n"
        "from exactly_once import sqs_consumer, RecordContext\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.http')))\n"
        "exactly_once.idempotent_api\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.http'))[:1])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]", "['exactly_once.http_api']"]


def test_the_once_lock_is_the_consumers_state_machine_and_its_name_stays_the_function() -> None:
    """The queue consumer runs on the once lock, so it loads with it; its module is not called
    `once`, because importing a submodule sets it as the package's attribute and would hide
    the function."""
    import subprocess
    import sys

    code = (
        "import sys, exactly_once\n"
        "from exactly_once import sqs_consumer, RecordContext\n"
        "print('exactly_once.once_lock' in sys.modules)\n"
        "from exactly_once import once\n"
        "import exactly_once.once_lock\n"
        "from exactly_once import once as again\n"
        "print(once is again is exactly_once.once, once.__module__)\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.http')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["True", "True exactly_once.once_lock", "[]"]
