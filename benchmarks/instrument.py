"""botocore event hooks shared by both consumers: a fixed network latency and a call counter.

Hooks go on each client's own event emitter, so both libraries' clients are treated the same
and no global botocore state changes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any


def add_latency(client: Any, seconds: float, sleep: Callable[[float], object] = time.sleep) -> None:
    """Sleep before every HTTP attempt, modelling an in-region round trip.

    `before-send` fires once per attempt (retries included) and the sleep releases the GIL,
    so concurrent requests overlap their waits as real network I/O would. `sleep` is
    replaceable so a test can see which requests were delayed without timing them.
    """

    def wait(**_: Any) -> None:
        sleep(seconds)

    client.meta.events.register("before-send", wait)


class CallCounter:
    """Counts API calls ("dynamodb.UpdateItem": n) seen by the clients it is attached to.

    `before-call` fires once per API call, before retries, which is what a caller pays for.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # records run on several threads
        self._counts: Counter[str] = Counter()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call", self._seen)

    def _seen(self, event_name: str, **_: Any) -> None:
        service, operation = event_name.split(".", 2)[1:]
        with self._lock:
            self._counts[f"{service}.{operation}"] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def total(self, service: str) -> int:
        prefix = f"{service}."
        with self._lock:
            return sum(n for name, n in self._counts.items() if name.startswith(prefix))
