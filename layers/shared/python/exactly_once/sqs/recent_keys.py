"""Keys this process claimed lately: a hint that a key's next delivery is a duplicate.

A store that writes a new key and an existing one differently (DynamoDB: INSERT or UPDATE)
tries the likely one first, and a wrong guess costs one more round trip, never a wrong outcome
(`AcquireRequest.likely_taken`). A producer's resend or SQS's redelivery often reaches the same
warm process, so the keys it claimed in its last few thousand records are a cheap guess.
Bounded, so a long-lived process keeps a fixed size; not shared between processes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from exactly_once import lifecycle

SIZE = 4096

_keys: OrderedDict[tuple[str, str], None] = OrderedDict()
_guard = threading.Lock()


def seen(scope: str, key: str) -> bool:
    with _guard:
        return (scope, key) in _keys


def remember(scope: str, key: str) -> None:
    with _guard:
        _keys[(scope, key)] = None
        _keys.move_to_end((scope, key))
        while len(_keys) > SIZE:
            _keys.popitem(last=False)


def _forget() -> None:
    """In a fork child the lock may be held by a thread that no longer exists."""
    global _guard
    _guard = threading.Lock()


lifecycle.on_clone(_forget)
