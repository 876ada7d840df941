"""Who imports whom, read from the source: imports inside functions and under TYPE_CHECKING
count too, since they tie modules together as much as any other.

Used by the layer's rules (tests/packaging/test_import_rules.py) and by the local stack's
(tests/local/), so both read imports the same way.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    """`root`'s package name plus the dotted path of `path` inside it."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_in(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Every import statement of `path` as (module, names): `import a.b` gives ("a.b", ()),
    `from a import b, c` gives ("a", ("b", "c")). A relative import is refused: the rules
    read absolute names only."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise ValueError(f"{path}: a relative import these rules cannot follow")
            found.append((node.module or "", tuple(alias.name for alias in node.names)))
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` and the modules of that package it imports.
    `from pkg import sub` counts as importing `pkg.sub` (and `pkg` only for names that are
    not submodules)."""
    modules = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for module, names in imports_in(path):
            subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in modules}
            edges |= subs
            if module in modules and len(subs) < max(len(names), 1):
                edges.add(module)
        graph[name] = edges
    return graph


def outside_imports(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` and the top-level names it imports from outside."""
    return {
        module_name(root, path): {m.split(".")[0] for m, _ in imports_in(path)} - {root.name}
        for path in sorted(root.rglob("*.py"))
    }


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
