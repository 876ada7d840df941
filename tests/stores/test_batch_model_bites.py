"""The batch rules of the state-machine model catch a broken `finish_many` (a mutation test).

The model (test_state_machine.py with batch_model.py) runs on each store with its batched
finish broken on purpose, and must fail: a finish that drops the lock-token condition (a
zombie's write lands over its successor's lock), and one that reports a zombie's refused write
as written. Without this, a model whose checks never fire would pass just as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from exactly_once.stores.records import Finish, WriteResult, WriteStatus
from tests.stores.test_state_machine import Backend, StateMachine
from tests.stores.test_state_machine import backend as backend

Break = Callable[[pytest.MonkeyPatch, str], None]


def _store_class(name: str) -> type[Any]:
    if name == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore

        return IdempotencyStore
    from exactly_once.stores.postgres.store import PostgresStore

    return PostgresStore


def drop_the_token_condition(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The batch's write is fenced on IN_PROGRESS alone, not on the holder's token."""
    if name == "dynamodb":
        from exactly_once.stores.dynamodb import batched

        monkeypatch.setattr(batched, "HOLDS_LOCK", "#st = :ip")
        return
    from exactly_once.stores.postgres import batch_statements

    fenced = "r.lock_token = k.tok AND "
    assert fenced in batch_statements.FINISH_MANY
    monkeypatch.setattr(
        batch_statements, "FINISH_MANY", batch_statements.FINISH_MANY.replace(fenced, "")
    )


def report_a_zombie_written(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A refused write (the lease was lost) is answered OK, as if the zombie still held."""
    cls = _store_class(name)
    finish_many = cls.finish_many

    def lying(self: Any, finishes: Sequence[Finish]) -> list[WriteResult | Exception]:
        return [
            WriteResult(WriteStatus.OK, lock=finish.lock)
            if isinstance(answer, WriteResult) and not answer.ok
            else answer
            for finish, answer in zip(finishes, finish_many(self, finishes), strict=True)
        ]

    monkeypatch.setattr(cls, "finish_many", lying)


BREAKS: dict[str, Break] = {
    "token-condition-dropped": drop_the_token_condition,
    "zombie-reported-written": report_a_zombie_written,
}


@pytest.fixture(params=sorted(BREAKS))
def broken(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Backend]:
    with pytest.MonkeyPatch.context() as patch:
        BREAKS[request.param](patch, backend.name)
        yield backend


def test_the_model_fails_on_a_broken_batched_finish(broken: Backend) -> None:
    machine = type(f"Broken{broken.name.title()}", (StateMachine,), {"backend": broken})
    # The property that must fail: a refused write changed the record (a zombie wrote), or an
    # answer was not the prediction (a zombie's write reported OK).
    bitten = (
        r"a refused write \(a zombie's\) changed the record|^\(WriteResult\(status=<WriteStatus.OK"
    )
    with pytest.raises(AssertionError, match=bitten):
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=200,
                stateful_step_count=30,
                derandomize=True,
                deadline=None,
                database=None,
                phases=[Phase.generate],  # found is enough: no shrinking
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                print_blob=False,
            ),
        )
