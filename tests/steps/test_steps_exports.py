"""The resumables' public names come from the package root, as `resumable` and
`complete_abandoned` do, and load on first use: `import exactly_once` stays as lean as it was
(a queue consumer's cold start never loads the steps' modules)."""

from __future__ import annotations

import subprocess
import sys

import exactly_once

NAMES = ("NotFinished", "Completer", "Resumable", "resumable", "complete_abandoned")


def _run(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def test_the_resumables_names_import_from_the_root_as_the_objects_themselves() -> None:
    from exactly_once.steps.completer import Completer
    from exactly_once.steps.resumable import NotFinished

    assert set(NAMES) <= set(exactly_once.__all__)
    assert exactly_once.NotFinished is NotFinished
    assert exactly_once.Completer is Completer


def test_import_exactly_once_loads_no_step_module_until_a_name_is_used() -> None:
    code = (
        "import sys, exactly_once\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.steps')))\n"
        "from exactly_once import NotFinished, Completer\n"
        "print(NotFinished.__module__, Completer.__module__)\n"
    )
    assert _run(code) == [
        "[]",
        "exactly_once.steps.resumable exactly_once.steps.completer",
    ]
