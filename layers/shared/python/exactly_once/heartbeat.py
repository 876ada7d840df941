"""Heartbeat leases: a long holder keeps its key by a short lease renewed in the background.

Why: a lease as long as the invocation (its remaining time plus the margin) strands the key for
the whole timeout when the holder dies early. On a 10-minute function that ran out of memory,
both of Lambda's async retries (about 1 and 3 minutes later) would find the key in progress,
and the event would end in the on-failure DLQ. With a heartbeat the store records a short lease
(LeasePolicy.heartbeat_ms, default 30 s), renewed every third of it while the holder lives, so
a dead holder's key is free within one heartbeat lease whatever the function's timeout.

- Fenced: a renewal is the store's `extend`, conditioned on the lock's token. One that is
  refused (the lease lapsed and another holder took the key) stops this lock's beat and marks
  it `lost`; the holder's completion is then refused as any zombie's is (LeaseLost).
- Bounded: no renewal carries the lease past the end the long lease would have had (the
  invocation's deadline plus the margin), so a holder whose handler hangs while its process
  lives loses the key when Lambda would have killed it. A frozen sandbox freezes this thread
  with it, so a frozen holder's short lease simply lapses.
- Transient failures (a throttled or unreachable store) are logged and tried again at the next
  beat: two thirds of the lease are left when a beat is missed.
- One daemon thread serves every lock the process holds (a batch of ten holds ten locks, not
  ten threads). It starts on first use, is forgotten in a fork child or a restored snapshot
  (the clone must never renew its parent's locks: lifecycle.on_clone), and is stopped before
  a snapshot (lifecycle.on_snapshot).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from exactly_once import lifecycle, observability

if TYPE_CHECKING:
    from exactly_once.stores.protocol import Store
    from exactly_once.stores.records import Lock

RENEWALS_PER_LEASE = 3  # renew every third of the lease: one missed beat still leaves a third


def short_lease(lease_ms: int, heartbeat_ms: int | None) -> int | None:
    """The heartbeat lease to acquire with instead of `lease_ms`, or None when `lease_ms` is
    short enough to hold as it is (or the heartbeat is off)."""
    if heartbeat_ms is None or lease_ms <= heartbeat_ms:
        return None
    return heartbeat_ms


class Beat:
    """One held lock's renewals. `lock` is the latest (the token never changes, its lease end
    does); `lost` says a renewal was refused because another holder owns the key now.

    A plain class rather than a dataclass(eq=False), whose generated __init__ and __repr__ were
    compiled at every cold start (~0.3 ms) for a consumer that may never hold a heartbeat.
    """

    __slots__ = (
        "due",
        "generation",
        "lease_ms",
        "lock",
        "lost",
        "renewals",
        "stopped",
        "store",
        "until",
    )

    def __init__(
        self,
        store: Store,
        lock: Lock,
        lease_ms: int,
        until: float,  # time.monotonic() past which no renewal may reach
        due: float,  # time.monotonic() of the next renewal
        generation: int | None = None,  # the process generation (lifecycle) it was made in
        renewals: int = 0,
        lost: bool = False,
        stopped: bool = False,
    ) -> None:
        self.store = store
        self.lock = lock
        self.lease_ms = lease_ms
        self.until = until
        self.due = due
        self.generation = lifecycle.generation() if generation is None else generation
        self.renewals = renewals
        self.lost = lost
        self.stopped = stopped

    def __repr__(self) -> str:
        return (
            f"Beat(lock={self.lock!r}, lease_ms={self.lease_ms}, until={self.until}, "
            f"due={self.due}, renewals={self.renewals}, lost={self.lost}, stopped={self.stopped})"
        )

    @property
    def period_s(self) -> float:
        return self.lease_ms / 1000 / RENEWALS_PER_LEASE

    def stop(self) -> None:
        """The holder is done with the key (outcome written, or given up): no more renewals."""
        _heart.stop(self)

    def reach(self, lock: Lock, seconds: float) -> None:
        """The holder extended its lease itself: keep the key alive at least that long."""
        self.lock = lock
        self.until = max(self.until, time.monotonic() + seconds)


class _Heart:
    """The process's one renewal thread and the beats it serves."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._beats: list[Beat] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._generation = lifecycle.generation()

    def hold(self, store: Store, lock: Lock, lease_ms: int, until: float) -> Beat:
        beat = Beat(store, lock, lease_ms, until, 0.0)
        beat.due = time.monotonic() + beat.period_s
        with self._cond:
            self._beats.append(beat)
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(
                    target=self._run, name="exactly-once-heartbeat", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return beat

    def stop(self, beat: Beat) -> None:
        beat.stopped = True
        if beat.generation != lifecycle.generation():
            return  # the parent's beat, copied into a clone: nothing here serves it
        with self._cond:
            if beat in self._beats:
                self._beats.remove(beat)
            self._cond.notify_all()

    def reach(self, lock: Lock, seconds: float) -> None:
        with self._cond:
            beats = [b for b in self._beats if b.lock.token == lock.token and not b.stopped]
        for beat in beats:
            beat.reach(lock, seconds)

    def held(self) -> int:
        """How many locks are being renewed (for tests and diagnostics)."""
        with self._cond:
            return len(self._beats)

    def _run(self) -> None:
        while True:
            with self._cond:
                due = self._due()
                if due is None:
                    return
            for beat in due:
                self._renew(beat)

    def _due(self) -> list[Beat] | None:
        """Wait (holding the condition) until some beats are due; None when stopping."""
        # A clone's heart is a new one: this (the parent's, or the snapshot's) serves no more.
        while not self._stopping and self._generation == lifecycle.generation():
            now = time.monotonic()
            due = [b for b in self._beats if b.due <= now]
            if due:
                return due
            self._cond.wait(min((b.due for b in self._beats), default=now + 3600) - now)
        return None

    def _renew(self, beat: Beat) -> None:
        if beat.stopped:  # its holder stopped it after this round began: the key is given up
            self._drop(beat)
            return
        left_ms = int((beat.until - time.monotonic()) * 1000)
        if left_ms <= 0:  # the holder's budget is spent: let the lease lapse where it ends
            self._drop(beat)
            return
        try:
            written = beat.store.extend(beat.lock, min(beat.lease_ms, left_ms))
        except Exception as exc:  # throttled, unreachable: the next beat tries again
            observability.logger().warning(
                "lease renewal failed; retried at the next beat",
                extra={"record_id": beat.lock.record_id, "error": repr(exc)},
            )
            beat.due = time.monotonic() + beat.period_s
            return
        if written.ok and written.lock is not None:
            if not beat.stopped:
                beat.lock = written.lock
                beat.renewals += 1
            beat.due = time.monotonic() + beat.period_s
            return
        current = written.current
        if not beat.stopped and (current is None or current.lock_token != beat.lock.token):
            beat.lost = True
            observability.logger().warning(
                "lease lost: a renewal was refused, another holder owns the key",
                extra={
                    "record_id": beat.lock.record_id,
                    "fence": beat.lock.fence,
                    "holder": None if current is None else current.owner,
                },
            )
        self._drop(beat)  # lost, or our own outcome is written: nothing left to renew

    def _drop(self, beat: Beat) -> None:
        with self._cond:
            if beat in self._beats:
                self._beats.remove(beat)

    def halt(self) -> None:
        """Stop the thread (before a snapshot); the next `hold` starts another."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


_heart = _Heart()


def hold(store: Store, lock: Lock, lease_ms: int, until: float) -> Beat:
    """Renew `lock` (acquired with a `lease_ms` lease) in the background until its holder
    stops the beat, a renewal is refused, or time.monotonic() reaches `until`."""
    return _heart.hold(store, lock, lease_ms, until)


def reach(lock: Lock, seconds: float) -> None:
    """A holder extended `lock`'s lease itself through its context (`extend_lease`): the beat
    renewing that lock, if any, keeps the key alive that long too. Without this its next
    renewal cut the extension back to a heartbeat lease, and its renewals stopped at the
    budget the lock was taken with, so a live holder that asked for more time lost its key."""
    _heart.reach(lock, seconds)


def held() -> int:
    return _heart.held()


def _forget() -> None:
    """In a clone: a fresh heart with no beats; the parent's thread did not come along, and
    the parent's locks are the parent's to renew."""
    global _heart
    _heart = _Heart()


def _halt() -> None:
    """Before a snapshot: no thread may be inside a renewal when the memory is copied."""
    _heart.halt()


lifecycle.on_clone(_forget)
lifecycle.on_snapshot(_halt)
