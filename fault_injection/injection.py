"""Faults a record triggers from inside the business function: crash, pause, transient error.

The plan writes them into the message body (`crash`, `pause`: a point name; `failTimes`), so
every consumer under test meets the same faults for the same seed. A crash or pause fires once
per body and point: the first time any worker reaches that point with it, whichever delivery
that is (a marker file in the run's event directory says it fired). Only once, or a crashing
body would kill every worker that picks it up until SQS gave up on it; not "on delivery one",
because a first delivery can miss the point (its batch died on another record's crash, or a
throttle failed it), and then a planned fault would silently never happen.

Faults fire one at a time per process (`_firing`), and a pause holds that turn until the
supervisor has woken it: a SIGSTOP takes hold only when the kernel next stops each thread, so a
crash fired meanwhile by another record of the same batch could kill the process before it ever
froze, and the planned zombie would never happen (CI saw 1 pause where 2 were planned).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from fault_injection import events

BEFORE_EFFECT = "before-effect"  # after acquire, before the side effect
AFTER_EFFECT = "after-effect"  # the side effect is written, the completion is not
BEFORE_DELETE = "before-delete"  # completed, but the SQS delete has not happened
CRASH_POINTS = (BEFORE_EFFECT, AFTER_EFFECT, BEFORE_DELETE)
PAUSE_POINTS = (BEFORE_EFFECT, AFTER_EFFECT)
WAKE_WAIT_S = 900.0  # a paused worker gives up waiting for its wake marker after this

_firing = threading.Lock()
_pauses = 0  # this process's pauses so far: its n-th waits for wake marker n


class InjectedTransientError(RuntimeError):
    """The consumer's own failure that succeeds on a later delivery."""


def crash(point: str, key: str | None) -> None:
    """SIGKILL this worker process: no cleanup, no completion, no delete, as on a real crash."""
    events.record("crash", point=point, key=key)
    os.kill(os.getpid(), signal.SIGKILL)


def pause(point: str, key: str | None) -> None:
    """SIGSTOP this worker; the supervisor sends SIGCONT once its lease is long gone.

    Every record of the batch stops with it, wherever it is: a whole invocation turns zombie.
    Returns only once the supervisor has woken it (`wake`), so the stop has surely taken hold.
    """
    global _pauses
    events.record("pause", point=point, key=key)
    _pauses += 1
    os.kill(os.getpid(), signal.SIGSTOP)
    _wait_for_wake(_pauses)
    events.record("resumed", point=point, key=key)


def wake(pid: int, directory: str | Path | None) -> None:
    """SIGCONT a paused worker, first leaving the marker its `pause` waits for."""
    if directory:
        woken = len(list(Path(directory).glob(f"woken-{pid}-*")))
        Path(directory, f"woken-{pid}-{woken + 1}").touch()
    os.kill(pid, signal.SIGCONT)


def _wait_for_wake(n: int) -> None:
    """Wait for wake marker `n` (none to wait for outside a chaos run: a unit test)."""
    directory = os.environ.get(events.EVENT_DIR_ENV)
    if not directory:
        return
    marker = Path(directory, f"woken-{os.getpid()}-{n}")
    deadline = time.monotonic() + WAKE_WAIT_S
    while not marker.exists():
        if time.monotonic() >= deadline:  # woken by someone else (a manual `kill -CONT`)
            events.record("wake-missed", pause=n)
            return
        time.sleep(0.01)


def at_point(body: Any, point: str, key: str | None, receive_count: int) -> None:
    """Fire the body's crash or pause if it is planned for `point` and has not fired yet."""
    if not isinstance(body, dict) or point not in (body.get("crash"), body.get("pause")):
        return
    with _firing:
        if not _first_time(body, point, receive_count):
            return
        if body.get("crash") == point:
            crash(point, key)
        if body.get("pause") == point:
            pause(point, key)


def _first_time(body: dict[str, Any], point: str, receive_count: int) -> bool:
    """Claim this body's fault at `point` for this process (atomic: O_CREAT | O_EXCL).

    Without an event directory (a unit test) the first delivery stands in for "first time".
    """
    directory = os.environ.get(events.EVENT_DIR_ENV)
    if not directory:
        return receive_count == 1
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]
    marker = os.path.join(directory, f"fired-{digest}-{point}")
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def maybe_fail(body: Any, key: str | None, receive_count: int) -> None:
    """Raise while the delivery count is within the body's `failTimes`."""
    fail_times = body.get("failTimes", 0) if isinstance(body, dict) else 0
    if isinstance(fail_times, int) and receive_count <= fail_times:
        events.record("transient", key=key, receive_count=receive_count)
        raise InjectedTransientError(f"injected transient failure on delivery {receive_count}")


def receive_count(record: Any) -> int:
    """ApproximateReceiveCount from a Lambda SQS record (1 when absent or unreadable)."""
    attributes = record.get("attributes") if isinstance(record, dict) else None
    raw = attributes.get("ApproximateReceiveCount") if isinstance(attributes, dict) else None
    try:
        return int(raw) if raw is not None else 1
    except (TypeError, ValueError):
        return 1
