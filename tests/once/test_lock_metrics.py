"""`Started` and `Finished`: one EMF document per lock event, written at once, so that
"started minus finished" over a window counts work that began and never recorded an outcome
(the stack alarms on it). Each entry point takes its locks through `claim`, so these are
every entry point's."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from exactly_once import IdempotencyStore, LeaseLost, begin, once
from tests.once.conftest import raising, run

if TYPE_CHECKING:
    from tests.conftest import FakeClock


def lock_events(out: str, scope: str) -> list[str]:
    """The lock metrics for `scope`, in the order they were written."""
    names = []
    for line in out.splitlines():
        if '"_aws"' not in line:
            continue
        doc = json.loads(line)
        if doc.get("scope") == scope:
            names += [m["Name"] for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return names


def test_a_finished_lock_is_started_then_finished(
    store: IdempotencyStore, scope: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with once(scope, "a", store=store):
        pass
    with pytest.raises(ValueError, match="no"):
        run(once(scope, "b", store=store), raising(ValueError("no")))
    assert lock_events(capsys.readouterr().out, scope) == ["Started", "Finished"] * 2


def test_a_holder_that_dies_leaves_started_without_finished(
    store: IdempotencyStore, scope: str, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    begin(scope, "crashed", lease_s=10, store=store)  # and never heard from again
    assert lock_events(capsys.readouterr().out, scope) == ["Started"]
    clock.advance(11)
    with once(scope, "crashed", store=store) as claim:  # the takeover finishes it
        assert claim.takeover
    events = lock_events(capsys.readouterr().out, scope)
    assert events == ["Started", "Finished"]  # over both windows: 2 started, 1 finished


def test_refusals_and_a_zombies_refused_write_are_not_counted(
    store: IdempotencyStore, scope: str, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    zombie = begin(scope, "k", lease_s=10, store=store)
    clock.advance(11)
    successor = begin(scope, "k", store=store)
    assert begin(scope, "k", store=store).acquired is False  # in progress: no lock, no event
    with pytest.raises(LeaseLost):
        zombie.lock.succeed("late")
    successor.lock.succeed("on time")
    assert begin(scope, "k", store=store).acquired is False  # completed: no event
    assert lock_events(capsys.readouterr().out, scope) == ["Started", "Started", "Finished"]


def test_metrics_can_be_switched_off_for_scripts(
    store: IdempotencyStore,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    with once(scope, "quiet", store=store):
        pass
    assert lock_events(capsys.readouterr().out, scope) == []
