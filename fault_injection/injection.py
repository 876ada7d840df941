"""Faults a record triggers from inside the business function: crash, pause, transient error.

The plan writes them into the message body (`crash`, `pause`: a point name; `failTimes`), so
every consumer under test meets the same faults for the same seed. Crashes and pauses fire on
the message's first delivery only (ApproximateReceiveCount 1): otherwise a crashing body would
kill every worker that picks it up until SQS gave up on it.
"""

from __future__ import annotations

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
    """Fire the body's crash or pause if it is planned for `point` and this is delivery one."""
    if receive_count != 1 or not isinstance(body, dict):
        return
    if body.get("crash") == point:
        crash(point, key)
    if body.get("pause") == point:
        pause(point, key)


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
