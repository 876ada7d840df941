"""32 threads racing on each of 100 keys: exactly one winner per key, on both stores."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from exactly_once import AcquireStatus
from exactly_once.stores.protocol import Store

THREADS = 32
KEYS = 100


def test_32_threads_racing_acquire_have_exactly_one_winner_per_key(
    store: Store, scope: str
) -> None:
    def race(key: str, barrier: threading.Barrier) -> AcquireStatus:
        barrier.wait()
        return store.acquire(scope, key, lease_ms=60_000, owner="racer").status

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for n in range(KEYS):
            barrier = threading.Barrier(THREADS)
            futures = [pool.submit(race, f"key-{n}", barrier) for _ in range(THREADS)]
            outcomes = [future.result() for future in futures]
            assert outcomes.count(AcquireStatus.ACQUIRED) == 1, (n, outcomes)
            assert outcomes.count(AcquireStatus.IN_PROGRESS) == THREADS - 1, (n, outcomes)
