"""A beat its holder stopped is never renewed again, even one the renewal thread had already
picked among the beats due: the holder gave the key up (an abandoned lock: its completion could
not be written), and one more renewal would strand the key another heartbeat lease."""

from __future__ import annotations

import time
from typing import Any

from exactly_once import heartbeat
from exactly_once.stores.records import Lock, WriteResult, WriteStatus
from tests.waiting import wait_until


def lock(token: str) -> Lock:
    return Lock(f"s#{token}", token, 1, 1, int(time.time() * 1000) + 3_000, scope="s")


class StopsTheOther:
    """A store whose renewal of the first lock is where the other's holder stops its beat."""

    def __init__(self) -> None:
        self.renewed: list[str] = []
        self.other: heartbeat.Beat | None = None

    def extend(self, held: Lock, lease_ms: int) -> WriteResult:
        self.renewed.append(held.token)
        if held.token == "first" and self.other is not None:
            self.other.stop()  # the other holder is done meanwhile
        return WriteResult(WriteStatus.OK, lock=held)


def test_a_beat_stopped_while_others_renew_is_not_renewed() -> None:
    store = StopsTheOther()
    until = time.monotonic() + 60
    shared: Any = store
    first = heartbeat.hold(shared, lock("first"), 300, until)
    store.other = heartbeat.hold(shared, lock("other"), 300, until)
    with heartbeat._heart._cond:  # both due now, in one round; the first renewed first
        first.due = store.other.due = 0.0
        heartbeat._heart._cond.notify_all()
    wait_until(lambda: first.renewals >= 1, lambda: store.renewed)
    first.stop()
    assert store.other.stopped
    assert "other" not in store.renewed
