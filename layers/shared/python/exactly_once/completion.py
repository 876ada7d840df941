"""Recording an outcome durably: once the work has happened, losing the write would let a
later takeover run it again (completion), or keep every retry out until the lease ends (a
failure). Retried past botocore's own retries, but bounded, and only while the invocation has
time left (a local script without a Lambda context cannot spin forever)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from exactly_once.errors import CommitFailed, CommitUnknown, LockInherited, PermanentError
from exactly_once.lease import remaining_ms
from exactly_once.stores.records import WriteResult

COMPLETE_ATTEMPTS = 4  # each is botocore's own retries


def write_durably(
    write: Callable[[], WriteResult],
    context: Any,
    reserve_ms: float,
    attempts: int = COMPLETE_ATTEMPTS,
) -> WriteResult:
    """`write()`, tried up to `attempts` times while more than `reserve_ms` plus the next
    back-off is left; the last error is raised when it never got through. Every write it is
    used for is fenced and recognises its own lost reply, so trying again is safe, except a
    completion whose transaction did not commit, or may not have (CommitFailed, CommitUnknown):
    the business writes went with it, so a plain retry could record work that never happened."""
    delay = 0.1
    for _ in range(attempts - 1):
        try:
            return write()
        except (CommitFailed, CommitUnknown, PermanentError, LockInherited):
            raise  # the same write cannot fare better: see the docstring, and errors.py
        except Exception:
            if remaining_ms(context) < reserve_ms + delay * 1000:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    return write()  # the last try: what it raises is the caller's
