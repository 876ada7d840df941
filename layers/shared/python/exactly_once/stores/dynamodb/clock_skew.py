"""How far this process's clock is from DynamoDB's, read from the responses' `Date` header.

Why: a DynamoDB condition cannot read the server's time, so the store decides leases by this
process's clock (`#lease < :now_ms`). A clock running ahead of the others by more than the
lease margin sees a live holder's lease as expired and takes its key over while it still runs.
Every DynamoDB response carries the server's `Date`, so the skew is measured for free: no extra
call, just a botocore hook on the client the store uses (`install`).

`Date` has a resolution of one second, and the server wrote it somewhere between this process
sending the request and receiving the reply, so one response bounds the skew (server minus
local) to [Date - received, Date + 1 - sent]. The estimate is the intersection of the bounds
seen; when a new one does not meet it (the clock was stepped) it starts again from that one.
Only a skew that is certainly beyond the margin counts.

What the store does with it (request.py's takeover condition, acquisition.py's reading of a
refusal): while this process's clock is certainly AHEAD of DynamoDB's by more than the lease
margin, it refuses to take over an IN_PROGRESS record whose lease looks expired (or blocks it
for a person): the record is reported in progress and is left to a process whose clock is
right, or to this one once its clock is. A warning is logged once each time the skew goes
beyond the margin. A clock BEHIND by as much is warned about too:
its own leases end early for the others, which fencing covers (its late completion is refused).
The process's wall clock (time.time) is what is measured; a store given a clock of its own
(tests) is judged by the same estimate.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from exactly_once import lifecycle, observability

HOOK_ID = "exactly-once-clock-skew"
_SENT = "exactly_once_sent_at"

_lock = threading.Lock()
_low: float | None = None  # seconds: server - local is at least this
_high: float | None = None  # ... and at most this
_warned = False


def observe(date: str, sent: float, received: float) -> None:
    """One response's `Date`, with the local times its request was sent and its reply came."""
    global _low, _high
    from email.utils import parsedate_to_datetime  # loaded with the first response, not before

    try:
        server = parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError, IndexError):
        return  # no usable Date: nothing learnt
    low, high = server - received, server + 1 - sent
    with _lock:
        if _low is None or _high is None or max(_low, low) > min(_high, high):
            _low, _high = low, high  # the first, or the clock moved: start again
        else:
            _low, _high = max(_low, low), min(_high, high)


def bounds() -> tuple[float, float] | None:
    """(low, high) in seconds of server minus local time, or None before any response."""
    with _lock:
        return None if _low is None or _high is None else (_low, _high)


def ahead_ms() -> float:
    """How far this clock is certainly ahead of DynamoDB's (0 when not certainly ahead)."""
    found = bounds()
    return 0.0 if found is None else max(0.0, -found[1] * 1000)


def behind_ms() -> float:
    """How far this clock is certainly behind DynamoDB's (0 when not certainly behind)."""
    found = bounds()
    return 0.0 if found is None else max(0.0, found[0] * 1000)


def too_far_ahead(margin_ms: float) -> bool:
    """This clock is certainly ahead by more than `margin_ms`: it must not take leases over.
    Warns once each time the skew (either way) goes beyond the margin."""
    global _warned
    ahead, behind = ahead_ms(), behind_ms()
    beyond = max(ahead, behind) > margin_ms
    if beyond and not _warned:
        _warned = True
        observability.logger().warning(
            "this process's clock is off from DynamoDB's by more than the lease margin"
            + ("; expired leases are not taken over meanwhile" if ahead else ""),
            extra={"ahead_ms": round(ahead), "behind_ms": round(behind), "margin_ms": margin_ms},
        )
    elif not beyond:
        _warned = False
    return ahead > margin_ms


def install(client: Any) -> None:
    """Measure on every call `client` makes (registered once per client)."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is None:  # not a botocore client (a test's stand-in): nothing to measure
        return
    events.register("before-call.dynamodb", _before_call, unique_id=HOOK_ID + "-sent")
    events.register("after-call.dynamodb", _after_call, unique_id=HOOK_ID)


def _before_call(context: dict[str, Any] | None = None, **_: Any) -> None:
    # Before botocore's retries: a retried call only widens its bounds, never falsifies them.
    if context is not None:
        context[_SENT] = time.time()


def _after_call(http_response: Any = None, context: dict[str, Any] | None = None, **_: Any) -> None:
    received = time.time()
    sent = (context or {}).get(_SENT)
    headers = getattr(http_response, "headers", None)
    date = headers.get("Date") if headers is not None else None
    if sent is not None and date:
        observe(date, sent, received)


def reset() -> None:
    """Forget the estimate (tests; a clone keeps it: the copy runs on the same clock)."""
    global _low, _high, _warned
    with _lock:
        _low = _high = None
        _warned = False


def _forget_lock() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork


lifecycle.on_clone(_forget_lock)
