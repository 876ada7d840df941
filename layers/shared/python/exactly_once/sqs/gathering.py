"""Completions gathered across a batch and written in one round trip (`Store.finish_many`).

Why gathered rather than sent as each record finishes: Lambda answers SQS only when the whole
batch is done, so a completion written early makes nothing finish sooner; written together,
ten completions cost one request instead of ten, and the request's signing and parsing are
paid once. A record stays IN_PROGRESS (its lease renewed, its duplicates deferred) until the
batch's write answers; its result is provisional until then and is replaced by what the write
says (`write`). A lock whose holder never ran (a FIFO group stopped before it, too little time
left) is released in the same request, so its key is free at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from exactly_once import observability
from exactly_once.outcomes import RecordResult
from exactly_once.stores.records import Finish, WriteResult

if TYPE_CHECKING:
    from exactly_once.held_lock import OnceLock
    from exactly_once.stores.protocol import Store

Settle = Callable[[WriteResult | Exception], RecordResult]


class _Gathered:
    """One record's gathered outcome. A plain class: a frozen dataclass compiles six generated
    methods at every cold start (~0.8 ms), and nothing compares, hashes or copies these."""

    __slots__ = ("finish", "lock", "settle", "slot")

    def __init__(
        self,
        slot: int,  # which record: the caller's id for it (the batch: its message object's id)
        lock: OnceLock,
        finish: Finish,
        settle: Settle | None,  # None: a release, whose record's result stands as it is
    ) -> None:
        self.slot = slot
        self.lock = lock
        self.finish = finish
        self.settle = settle


class Gathering:
    """One batch's outcomes waiting for their write; records add to it from several threads."""

    def __init__(self) -> None:
        self._items: list[_Gathered] = []
        self._guard = threading.Lock()

    def add(self, slot: int, lock: OnceLock, finish: Finish, settle: Settle) -> None:
        with self._guard:
            self._items.append(_Gathered(slot, lock, finish, settle))

    def release(self, lock: OnceLock, reason: str) -> None:
        """A lock the batch took for a record that never ran: freed in the same write."""
        with self._guard:
            self._items.append(_Gathered(0, lock, lock.released(reason), None))

    def write(self, store: Store) -> dict[int, RecordResult]:
        """Send every gathered outcome in one `finish_many`; the settled result of each
        gathered completion (the record's final result), by its slot."""
        with self._guard:
            items, self._items = self._items, []
        if not items:
            return {}
        try:
            answers = store.finish_many([item.finish for item in items])
        except Exception as exc:  # each lock then tries its own write (OnceLock.settle)
            answers = [exc] * len(items)
        settled: dict[int, RecordResult] = {}
        for item, answer in zip(items, answers, strict=True):
            if item.settle is not None:
                settled[item.slot] = item.settle(answer)
            else:
                _settle_release(item, answer)
        return settled


def _settle_release(item: _Gathered, answer: WriteResult | Exception) -> None:
    """A release that did not get through leaves the key to its lease, as before batching."""
    try:
        item.lock.settle(item.finish, answer)
    except Exception as exc:
        observability.logger().warning(
            "could not release an unused lock; it frees when its lease ends",
            extra={"key": item.lock.key, "error": repr(exc)},
        )
