"""Faults a record triggers from inside the business function: crash, pause, transient error.

The plan writes them into the message body (`crash`, `pause`: a point name; `failTimes`), so
every consumer under test meets the same faults for the same seed. A crash or pause fires once
per body and point: the first time any worker reaches that point with it, whichever delivery
that is (a marker file in the run's event directory says it fired). Only once, or a crashing
body would kill every worker that picks it up until SQS gave up on it; not "on delivery one",
because a first delivery can miss the point (its batch died on another record's crash, or a
throttle failed it), and then a planned fault would silently never happen.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from typing import Any

from fault_injection import events

BEFORE_EFFECT = "before-effect"  # after acquire, before the side effect
AFTER_EFFECT = "after-effect"  # the side effect is written, the completion is not
BEFORE_DELETE = "before-delete"  # completed, but the SQS delete has not happened
CRASH_POINTS = (BEFORE_EFFECT, AFTER_EFFECT, BEFORE_DELETE)
PAUSE_POINTS = (BEFORE_EFFECT, AFTER_EFFECT)


class InjectedTransientError(RuntimeError):
    """The consumer's own failure that succeeds on a later delivery."""


def crash(point: str, key: str | None) -> None:
    """SIGKILL this worker process: no cleanup, no completion, no delete, as on a real crash."""
    events.record("crash", point=point, key=key)
    os.kill(os.getpid(), signal.SIGKILL)


def pause(point: str, key: str | None) -> None:
    """SIGSTOP this worker; the supervisor sends SIGCONT once its lease is long gone.

    Every record of the batch stops with it, wherever it is: a whole invocation turns zombie.
    """
    events.record("pause", point=point, key=key)
    os.kill(os.getpid(), signal.SIGSTOP)
    events.record("resumed", point=point, key=key)


def at_point(body: Any, point: str, key: str | None, receive_count: int) -> None:
    """Fire the body's crash or pause if it is planned for `point` and has not fired yet."""
    if not isinstance(body, dict) or point not in (body.get("crash"), body.get("pause")):
        return
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
