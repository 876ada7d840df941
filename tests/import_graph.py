"""Who imports whom, read from the source: imports inside functions and under TYPE_CHECKING
count too, since they tie modules together as much as any other.

Used by the import rules (tests/packaging/test_import_rules.py and test_dynamic_imports.py),
for the library and the local stack alike, so both are read the same way.
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
    """Every import of `path` as (module, names): `import a.b` gives ("a.b", ()),
    `from a import b, c` gives ("a", ("b", "c")), and an import by name
    (`importlib.import_module("a.b")`, `__import__("a.b")`) gives ("a.b", ()) as the statement
    would: it ties the modules together just the same. A relative import is refused, and so is
    a name built at run time: the rules read absolute names only. The one computed name they
    accept is a package's own submodule (`f"{__name__}.…"`, the façade's lazy names), which
    cannot leave the package."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise ValueError(f"{path}: a relative import these rules cannot follow")
            found.append((node.module or "", tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Call) and _imports_by_name(node.func) and node.args:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if name.value.startswith("."):
                    raise ValueError(
                        f"{path}:{node.lineno}: a relative import these rules cannot follow"
                    )
                found.append((name.value, ()))
            elif not _own_submodule(name):
                raise ValueError(
                    f"{path}:{node.lineno}: an import by a computed name these rules cannot follow"
                )
    return found


def _imports_by_name(func: ast.expr) -> bool:
    """`importlib.import_module`, `import_module` or `__import__`."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module" or func.attr == "__import__"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def _own_submodule(name: ast.expr) -> bool:
    """`f"{__name__}.…"`: a submodule of the importing package itself."""
    return (
        isinstance(name, ast.JoinedStr)
        and len(name.values) > 1
        and isinstance(first := name.values[0], ast.FormattedValue)
        and isinstance(first.value, ast.Name)
        and first.value.id == "__name__"
        and isinstance(dot := name.values[1], ast.Constant)
        and str(dot.value).startswith(".")
    )


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
