"""Where the CLI, the constructs or the local stack tell people to install something from PyPI,
they name this project's distribution and its extra (`exactly-once-sqs[postgres]`), never the
bare dependencies: installing those alone gives versions the package was not tested with, and
`pip install exactly-once` would fetch an unrelated project."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import typer

from exactly_once_cli import store_target
from tests.packaging.support import REPO

SOURCES = ("exactly_once_cli", "exactly_once_ops", "exactly_once_cdk", "local_aws")
PIP_INSTALL = re.compile(r"pip install\s+(?P<what>\S+)")
# The distribution, with extras or not, quoted either way: 'exactly-once-sqs[cdk,cli]'.
DISTRIBUTION = re.compile(r"""^['"]?exactly-once-sqs(\[[a-z,]+\])?['"]?[`'".,;)]*$""")


def string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string in a module's code, f-strings' literal parts and docstrings included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def pip_hints(package: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        for line, text in string_constants(path):
            for match in PIP_INSTALL.finditer(text):
                found.append((f"{path.relative_to(REPO)}:{line}", match["what"]))
    return found


@pytest.mark.parametrize("package", SOURCES)
def test_every_pip_install_hint_names_the_distribution(package: str) -> None:
    wrong = [(where, what) for where, what in pip_hints(package) if not DISTRIBUTION.match(what)]
    assert wrong == []


def test_the_scan_sees_the_hints_it_judges() -> None:
    """The scan finds the known hints (so an empty `wrong` above is not an empty scan), and the
    pattern refuses a bare dependency and the unrelated `exactly-once` project."""
    hints = {what for _, what in pip_hints("exactly_once_cli")}
    assert "'exactly-once-sqs[cli]'" in hints
    assert "'exactly-once-sqs[postgres]'" in hints
    assert {what for _, what in pip_hints("exactly_once_cdk")} >= {"'exactly-once-sqs[cdk]'"}
    for bad in ("'psycopg[binary]'", "psycopg-pool", "exactly-once", "'exactly-once[cli]'"):
        assert not DISTRIBUTION.match(bad), bad


def test_a_dsn_without_the_postgres_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` -> ModuleNotFoundError
    with pytest.raises(typer.Exit), store_target.database_errors("postgresql://db.example/app"):
        pass
    err = " ".join(capsys.readouterr().err.split())
    assert "the PostgreSQL store needs psycopg, which is not installed" in err
    assert "pip install 'exactly-once-sqs[postgres]'" in err
