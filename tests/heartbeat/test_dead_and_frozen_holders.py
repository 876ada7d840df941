"""A holder in another process, with a 10-minute invocation budget and a 2 s heartbeat lease.

Killed (kill -9), its key must be free for another acquirer soon after, not after the ten
minutes its lease used to last. Frozen (SIGSTOP, as a frozen Lambda sandbox), it loses the key
once its short lease lapses, another takes it over, and once thawed neither its renewals nor its
completion may touch the new holder's record (fenced). Waits poll the store with a bound; the
bound (90 s) is far below the old 10-minute lease and far above the 2 s one, so only a key that
stays stranded fails it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from exactly_once.claims import Claim, claim
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import StoredRecord
from exactly_once.stores.schema import Status
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
HEARTBEAT_MS = 2_000
BOUND_S = 90.0  # >> 2 s heartbeat lease, << the 605 s lease of a 10-minute budget


@contextmanager
def holder(backend: str, where: str, scope: str, key: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.heartbeat.holder", backend, where, scope, key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "LEASE_HEARTBEAT_MS": str(HEARTBEAT_MS),
            "POWERTOOLS_METRICS_DISABLED": "true",
        },
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.communicate()


def said(proc: subprocess.Popen[str]) -> str:
    """The holder's next answer."""
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    while line.startswith("{"):  # the library's JSON log lines and metrics share stdout
        line = proc.stdout.readline().strip()
    if not line:
        assert proc.stderr is not None
        raise AssertionError(f"the holder said nothing; stderr: {proc.stderr.read()}")
    return line


def tell(proc: subprocess.Popen[str], command: str) -> str:
    assert proc.stdin is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    return said(proc)


def acquired_fence(proc: subprocess.Popen[str]) -> int:
    word, fence = said(proc).split()
    assert word == "acquired"
    return int(fence)


def successor(store: Store, scope: str, key: str) -> Claim | None:
    """Another invocation trying the key: its claim when it got it, else None."""
    taken = claim(store, scope, key, lease_ms=60_000, owner="successor")
    return taken if taken.acquired else None


def taken_over(store: Store, scope: str, key: str, fence: int) -> Claim:
    """The successor's claim, waited for within the bound: a takeover, at a higher fence."""
    taken = wait_until(
        lambda: successor(store, scope, key),
        lambda: store.get(scope, key),
        bound_s=BOUND_S,
    )
    assert taken.takeover
    assert taken.lock.fence > fence
    return taken


def completed(store: Store, scope: str, key: str) -> StoredRecord:
    record = store.get(scope, key)
    assert record is not None
    assert record.status is Status.COMPLETED
    return record


def test_a_killed_holder_frees_its_key_within_a_heartbeat_lease(
    backend: str, where: str, store: Store, scope: str
) -> None:
    key = f"oom-{uuid.uuid4().hex[:8]}"
    with holder(backend, where, scope, key) as proc:
        fence = acquired_fence(proc)
        assert successor(store, scope, key) is None  # held while it lives
        proc.kill()  # SIGKILL: out of memory, no cleanup of any kind
        proc.wait()
    taken = taken_over(store, scope, key, fence)
    taken.lock.succeed("second run")
    completed(store, scope, key)


def test_a_frozen_holder_loses_its_key_and_is_fenced_when_it_thaws(
    backend: str, where: str, store: Store, scope: str
) -> None:
    key = f"frozen-{uuid.uuid4().hex[:8]}"
    with holder(backend, where, scope, key) as proc:
        fence = acquired_fence(proc)
        os.kill(proc.pid, signal.SIGSTOP)  # its heartbeat thread freezes with it
        taken = taken_over(store, scope, key, fence)
        os.kill(proc.pid, signal.SIGCONT)
        assert tell(proc, "wait-lost") == "lost"  # its next renewal was refused
        assert tell(proc, "succeed") == "lease-lost"  # and so is its completion
        record = store.get(scope, key)
        assert record is not None
        assert record.status is Status.IN_PROGRESS
        assert record.lock_token == taken.lock.store_lock.token
        assert record.fence == taken.lock.fence
        # the thawed holder's renewal did not move the successor's lease
        assert record.lease_expires_at_ms == taken.lock.store_lock.lease_expires_at_ms
    taken.lock.succeed("the successor's")
    assert completed(store, scope, key).result == "the successor's"
