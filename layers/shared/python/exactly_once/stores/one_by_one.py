"""A batch's acquisitions and outcomes as one call per key: the reference every batched path is
held to, and what a store falls back to for a key its batch cannot carry.

Each key's error is caught and handed back in its place, so one throttled key never fails the
others; an exception that is not an `Exception` (KeyboardInterrupt) still propagates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from exactly_once.stores.records import AcquireRequest, Acquisition, Finish, WriteResult

if TYPE_CHECKING:
    from exactly_once.stores.protocol import Store


def acquire_each(store: Store, requests: Sequence[AcquireRequest]) -> list[Acquisition | Exception]:
    answers: list[Acquisition | Exception] = []
    for req in requests:
        try:
            answers.append(store.acquire(req.scope, req.key, **req.arguments()))
        except Exception as exc:
            answers.append(exc)
    return answers


def finish_one(store: Store, finish: Finish) -> WriteResult:
    if finish.error is None:
        return store.complete(finish.lock, finish.result)
    return store.fail(finish.lock, finish.error)


def finish_each(store: Store, finishes: Sequence[Finish]) -> list[WriteResult | Exception]:
    answers: list[WriteResult | Exception] = []
    for finish in finishes:
        try:
            answers.append(finish_one(store, finish))
        except Exception as exc:
            answers.append(exc)
    return answers
