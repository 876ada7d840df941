"""The import rules see an import by name as well as an import statement.

`importlib.import_module("x")` and `__import__("x")` tie two modules together as much as
`import x` does, so a room that reached another room, or the local stack that reached `infra`,
that way would slip past rules that read statements only. A name the rules cannot read (built
at run time) is refused, as a relative import is; the one computed name they accept is the
façade's lazy import of its own submodules (`f"{__name__}.…"`), which cannot leave the package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import import_graph, imports_in, outside_imports
from tests.packaging.test_import_rules import (
    LAYER,
    RUNTIME_DEPENDENCIES,
    app_imports,
    foreign_imports,
    room_violations,
)


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package `exactly_once` (or whatever the first path part names) made of `files`."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / next(iter(files)).split("/")[0]


ROOMS = {
    "exactly_once/__init__.py": "",
    "exactly_once/sqs/__init__.py": "",
    "exactly_once/sns/__init__.py": "",
    "exactly_once/sns/messages.py": "",
}


@pytest.mark.parametrize(
    "call",
    [
        'importlib.import_module("exactly_once.sns.messages")',
        'import_module("exactly_once.sns.messages")',
        '__import__("exactly_once.sns.messages")',
    ],
)
def test_a_room_reached_by_name_is_a_crossing(tmp_path: Path, call: str) -> None:
    root = package(
        tmp_path,
        {
            **ROOMS,
            "exactly_once/sqs/late.py": (
                "import importlib\nfrom importlib import import_module\n\n"
                f"def envelope():\n    return {call}\n"
            ),
        },
    )
    assert room_violations(import_graph(root)) == [
        "exactly_once.sqs.late -> exactly_once.sns.messages"
    ]


def test_an_outside_package_reached_by_name_is_caught(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {
            **ROOMS,
            "exactly_once/sqs/late.py": (
                "import importlib\n\ndef cdk():\n"
                '    return importlib.import_module("exactly_once_cdk.layer")\n'
            ),
        },
    )
    assert foreign_imports(outside_imports(root), RUNTIME_DEPENDENCIES) == [
        "exactly_once.sqs.late imports exactly_once_cdk"
    ]


def test_the_app_reached_by_name_from_the_local_stack_is_caught(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {
            "local_aws/__init__.py": "",
            "local_aws/stack.py": 'CONSUMERS = __import__("infra.consumers").consumers.CONSUMERS\n',
        },
    )
    assert app_imports(outside_imports(root)) == ["local_aws.stack imports infra"]


@pytest.mark.parametrize(
    "call",
    [
        "importlib.import_module(name)",
        'importlib.import_module("exactly_once." + name)',
        '__import__(f"infra.{name}")',
    ],
)
def test_a_name_built_at_run_time_is_refused(tmp_path: Path, call: str) -> None:
    path = tmp_path / "late.py"
    path.write_text(f"import importlib\n\ndef load(name):\n    return {call}\n")
    with pytest.raises(ValueError, match="computed name"):
        imports_in(path)


@pytest.mark.parametrize(
    "statement",
    [
        "from . import messages",
        'importlib.import_module(".messages", __package__)',
    ],
)
def test_a_relative_import_is_refused(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "late.py"
    path.write_text(f"import importlib\n\n{statement}\n")
    with pytest.raises(ValueError, match="relative import"):
        imports_in(path)


def test_the_facades_lazy_imports_of_its_own_submodules_are_read() -> None:
    """The façade imports its lazy names by a computed name under its own `__name__`: that
    cannot leave the package, so the rules accept it (and the real layer parses)."""
    assert imports_in(LAYER / "__init__.py")  # no refusal
    assert "importlib" in outside_imports(LAYER)["exactly_once"]


def test_a_finder_is_not_an_import(tmp_path: Path) -> None:
    """`importlib.util.find_spec` asks whether a module exists without importing it."""
    path = tmp_path / "probe.py"
    path.write_text('import importlib.util\n\nFOUND = importlib.util.find_spec("infra")\n')
    assert imports_in(path) == [("importlib.util", ())]
