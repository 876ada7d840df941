"""`moto_server`, with one race in its SQS closed: a message sent during a delete can vanish.

moto 5.2.5's `Queue.delete_message` rebuilds the queue's message list from a snapshot without
the lock that `add_message` appends under, so a message appended between the snapshot and the
reassignment is dropped, although SendMessage(Batch) reported it sent. A chaos run saw exactly
that: two messages of one SendMessageBatch never received by anyone (no record, no effect, not
in any queue). Real SQS has no such race, so the local stack must not have it either; patching
the one method here is smaller than forking moto, and harmless once moto fixes it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from moto.server import main
from moto.sqs.models import Queue

_unlocked = Queue.delete_message


@functools.wraps(_unlocked)
def _delete_message(self: Queue, receipt_handle: str) -> None:
    with self._messages_lock:  # the Condition add_message appends under
        _unlocked(self, receipt_handle)


def patch() -> None:
    Queue.delete_message = _delete_message  # type: ignore[method-assign]


def run(argv: list[str] | None = None) -> Any:
    patch()
    return main(argv)


if __name__ == "__main__":
    sys.exit(run())
