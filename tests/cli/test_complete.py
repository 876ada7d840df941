"""`eonce complete --module MODULE:NAME --dsn ...`: the completer by hand, on the PostgreSQL
store, with a resumable defined in the user's own module (imported from the current
directory). A key still failing exits 1; usage errors are one line and exit 2."""

from __future__ import annotations

import importlib
import json
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from exactly_once.stores.postgres.migrations import migrate
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.schema import Status
from tests.cli.support import Invoke

MODULE = """
from exactly_once import resumable

DOWN = {{"email"}}
RAN = []


@resumable("{scope}", lease_s=30)
def checkout(lock, order):
    done = {{}}
    for name in ("charge", "ship", "email"):
        def run(step, name=name):
            RAN.append(name)
            if name in DOWN:
                raise RuntimeError(name + " provider down")
            return name + "-" + order["id"]
        done[name] = lock.step(name, run)
    return done


not_resumable = 42
"""


@pytest.fixture
def store(new_database: str) -> PostgresStore:
    migrate(new_database)
    return PostgresStore(new_database)


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The user's module, in the current directory, with a resumable of a scope of its own."""
    name = f"shop_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE.format(scope=f"cli-{name}"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_complete_finishes_a_failed_key_once_the_provider_is_back(
    cli: Invoke, store: PostgresStore, shop: ModuleType
) -> None:
    with pytest.raises(RuntimeError, match="email provider down"):
        shop.checkout.run("o-1", {"id": "o-1"}, store=store)
    spec = f"{shop.__name__}:checkout"

    dry = cli("complete", "--module", spec, "--dsn", store.conninfo, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"FAILED     cli-{shop.__name__}#o-1" in dry.output
    assert "1 key(s) would be taken" in dry.output

    still = cli("complete", "--module", spec, "--dsn", store.conninfo)
    assert still.exit_code == 1, still.output  # still failing: a cron job's alarm
    assert "failing" in still.output
    assert "RuntimeError: email provider down" in still.output
    assert "0 completed, 1 still failing, 0 skipped" in still.output

    shop.DOWN.clear()
    done = cli("complete", "--module", shop.__name__, "--dsn", store.conninfo, "--json")
    assert done.exit_code == 0, done.output
    [outcome] = json.loads(done.stdout)["outcomes"]  # the metric lines went to stderr
    assert (outcome["key"], outcome["outcome"], outcome["resumed_after"]) == ("o-1", "completed", 2)
    assert shop.RAN == ["charge", "ship", "email", "email", "email"]
    record = store.get(f"cli-{shop.__name__}", "o-1")
    assert record is not None
    assert record.status is Status.COMPLETED
    assert record.result == {"charge": "charge-o-1", "ship": "ship-o-1", "email": "email-o-1"}


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_here:checkout", "cannot import no_such_module_here"),
        ("{module}:not_resumable", "not_resumable is int, not a function decorated"),
        ("{module}:missing", "missing is nothing"),
        (":checkout", "expected MODULE or MODULE:NAME"),
    ],
)
def test_complete_refuses_what_is_not_a_resumable_in_one_line(
    cli: Invoke, shop: ModuleType, spec: str, says: str
) -> None:
    result = cli("complete", "--module", spec.format(module=shop.__name__), "--dsn", "x")
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output
