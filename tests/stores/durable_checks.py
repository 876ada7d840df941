"""The fork and durable-suspension promises both state-machine tests check (tests/store/
test_model.py on DynamoDB, tests/stores/test_state_machine.py on both stores): one statement of
each, so the two models cannot come to expect different things of a clone or a replay."""

from __future__ import annotations

from dataclasses import replace

from exactly_once.stores.records import AcquireStatus, Acquisition, Lock, StoredRecord
from exactly_once.stores.schema import Status


def forked_copy(lock: Lock) -> Lock:
    """The holder's Lock as a fork child (or any other process handed it) has it: taken by
    another process than this one, so the store must refuse it (LockInherited)."""
    clone = replace(lock, process="another-process")
    assert clone.inherited
    return clone


def assert_left_for_the_replay(record: StoredRecord | None, lock: Lock, execution: str) -> None:
    """A suspended invocation writes no outcome: while the record is still its lock's, it stays
    IN_PROGRESS under its execution (the resume_id its replay presents)."""
    if record is not None and record.lock_token == lock.token:
        assert (record.status, record.resume_id) == (Status.IN_PROGRESS, execution)


def still_suspended(record: StoredRecord | None, now_s: float, suspended: Lock) -> bool:
    """The record is live, IN_PROGRESS and still the suspended lock's: a replay resumes it."""
    return (
        record is not None
        and not record.is_expired(now_s)
        and record.status is Status.IN_PROGRESS
        and record.lock_token == suspended.token
    )


def assert_resumed(got: Acquisition, suspended: Lock) -> None:
    """A replay took its own suspended lock over, with a higher fence."""
    assert got.status is AcquireStatus.ACQUIRED, got.status
    assert got.resumed, "a replay did not resume its own suspended lock"
    assert got.lock is not None
    assert got.lock.fence > suspended.fence
