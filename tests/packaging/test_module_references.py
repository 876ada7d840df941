"""What the library's prose names still exists: a docstring or comment that sends a reader to
a module the rooms replaced misleads just where the code is being read.

- Every dotted name under `exactly_once` in the library, README.md, docs/ and the rooms that
  name its modules (the CDK constructs' layer handlers, the operator's tools, the local stack)
  resolves: to a module, or to an attribute of one (`exactly_once.ledger.append_effect`).
  The PostgreSQL schema's tables share the prefix (`exactly_once.records`) and are told apart
  by name.
- No docstring or comment of the library names one of the flat entry-point modules the rooms
  replaced (`http_api`, `sns_messages`, …): those names are unmistakable, and nothing by
  those names exists any more.
"""

from __future__ import annotations

import importlib
import io
import re
import tokenize
from pathlib import Path

import exactly_once
from tests.packaging.support import REPO

LAYER = Path(exactly_once.__file__).parent
DOTTED = re.compile(r"\bexactly_once(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# The PostgreSQL schema `exactly_once` and its tables: SQL, not Python.
SQL_NAMES = {"exactly_once.records", "exactly_once.schema_migrations"}
FLAT_ENTRY_MODULES = re.compile(
    r"\b(?:http_api|http_caller|http_config|http_fingerprint|http_keys|http_request"
    r"|http_response|sns_handler|sns_messages)\b"
)


def resolves(dotted: str) -> bool:
    """`dotted` is a module, or a module followed by attributes it has."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[end:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def prose_files() -> list[Path]:
    """The library, the docs, and the rooms that name its modules in strings: the handlers
    the constructs deploy from the layer (`exactly_once.stores.postgres.cleanup.handler`),
    the operator's tools, the local stack."""
    rooms = ("exactly_once_cdk", "exactly_once_ops", "exactly_once_cli", "local_aws")
    return [
        *sorted(LAYER.rglob("*.py")),
        *(path for room in rooms for path in sorted((REPO / room).rglob("*.py"))),
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
    ]


# The upgrade page's table names the 0.2.0 paths on purpose: they are the ones that moved. Only
# the table is exempt (each row one line), never the prose after it.
UPGRADING = REPO / "docs" / "upgrading.md"
UPGRADE_TABLE = re.compile(r"^# Upgrading from 0\.2\.0\n.*?\n\n(?:\|[^\n]*\n)+", re.S | re.M)


def names_in(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return set(DOTTED.findall(UPGRADE_TABLE.sub("", text) if path.suffix == ".md" else text))


def unresolved(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(path.parents[1])}: {name}"
        for path in paths
        for name in sorted(names_in(path))
        if name.rstrip(".") not in SQL_NAMES and not resolves(name.rstrip("."))
    ]


def prose(path: Path) -> list[tuple[int, str]]:
    """The comments and string literals of a Python file, with their line numbers."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [
        (token.start[0], token.string)
        for token in tokens
        if token.type in (tokenize.COMMENT, tokenize.STRING)
    ]


def mentions(path: Path) -> list[tuple[int, str]]:
    """Each flat entry-point module name in `path`'s prose, with the line it is on."""
    return [
        (line + text[: match.start()].count("\n"), match.group())
        for line, text in prose(path)
        for match in FLAT_ENTRY_MODULES.finditer(text)
    ]


def flat_module_mentions(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(LAYER)}:{line}: {name}"
        for path in paths
        for line, name in mentions(path)
    ]


def test_every_dotted_exactly_once_name_in_the_prose_resolves() -> None:
    files = prose_files()
    assert any("exactly_once.ledger.append_effect" in f.read_text() for f in files)  # read
    assert any(f.name == "postgres_jobs.py" for f in files)  # the deployed handler strings
    assert unresolved(files) == []


def test_an_unresolved_name_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "old.md"
    doc.write_text(
        "Run `exactly_once.postgres.cleanup.handler`, `exactly_once.ledger.append_effect`\n"
        "and `exactly_once.effects.put_twice`; the rows are in exactly_once.records.\n"
    )
    assert unresolved([doc]) == [
        "docs/old.md: exactly_once.effects.put_twice",
        "docs/old.md: exactly_once.postgres.cleanup.handler",
    ]


def test_no_docstring_or_comment_names_a_flat_entry_point_module() -> None:
    assert flat_module_mentions(sorted(LAYER.rglob("*.py"))) == []


def test_a_flat_module_name_in_prose_is_caught_and_a_parameter_is_not(tmp_path: Path) -> None:
    module = tmp_path / "exactly_once" / "hooks.py"
    module.parent.mkdir()
    module.write_text(
        '"""Retried as sns_messages.unwrap says."""\n\n\n'
        "def after_call(http_response=None):  # the reply (see http_api.py)\n"
        "    return http_response\n"
    )
    assert mentions(module) == [(1, "sns_messages"), (4, "http_api")]


def test_the_upgrade_table_names_only_paths_that_moved() -> None:
    """Its left column is what 0.2.0 had: none of those modules may still exist (else the
    table misleads), and its right column resolves like any other name."""
    table = UPGRADE_TABLE.search(UPGRADING.read_text(encoding="utf-8"))
    assert table is not None
    rows = [line.split("|")[1:3] for line in table.group().splitlines() if line.startswith("| `")]
    old = {n.rstrip(".") for left, _ in rows for n in DOTTED.findall(left)}
    new = {n.rstrip(".") for _, right in rows for n in DOTTED.findall(right)}
    assert "exactly_once.postgres" in old  # the table is read
    assert "exactly_once.stores.postgres" in new
    assert sorted(n for n in old if resolves(n) and n not in new) == []
    assert sorted(n for n in new if not resolves(n)) == []


def test_only_the_upgrade_table_is_exempt_not_the_prose_after_it() -> None:
    """The names after the table (`exactly_once.once_lock` stays) are still checked: a pattern
    that ran on past the table's last row would exempt the rest of the page unseen."""
    assert {"exactly_once.ledger", "exactly_once.once_lock"} <= names_in(UPGRADING)
    assert "exactly_once.postgres" not in {n.rstrip(".") for n in names_in(UPGRADING)}
