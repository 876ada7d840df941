"""A holder in a process of its own, for the killed and frozen holder tests.

`python -m tests.heartbeat.holder <backend> <where> <scope> <key>`: takes the key with `begin`
as a Lambda handler with ten minutes left would (the heartbeat settings come from the
environment: LEASE_HEARTBEAT_MS), prints `acquired <fence>`, then obeys lines on stdin:

- `wait-lost`: wait (bounded) until a background renewal was refused, print `lost` or `held`;
- `succeed`: record the outcome, print `succeeded` or `lease-lost`.

`<where>` is `endpoint|table` for DynamoDB Local, the DSN for PostgreSQL.
"""

from __future__ import annotations

import sys
import time

from exactly_once import begin
from exactly_once.effects import LeaseLost
from exactly_once.stores.protocol import Store

BUDGET_MS = 600_000  # a 10-minute function that has just started


class TenMinutesLeft:
    function_name = "long-handler"
    aws_request_id = "req-1"

    def __init__(self) -> None:
        self._deadline = time.monotonic() + BUDGET_MS / 1000

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)


def open_store(backend: str, where: str) -> Store:
    if backend == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore
        from tests.conftest import make_ddb_client

        endpoint, table = where.split("|", 1)
        return IdempotencyStore(table, client=make_ddb_client(endpoint))
    from exactly_once.stores.postgres.store import PostgresStore

    return PostgresStore(where)


def main(backend: str, where: str, scope: str, key: str) -> int:
    claim = begin(scope, key, store=open_store(backend, where), lambda_context=TenMinutesLeft())
    if not claim.acquired:
        print(f"refused {claim.status}", flush=True)
        return 2
    lock = claim.lock
    print(f"acquired {lock.fence}", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "wait-lost":
            deadline = time.monotonic() + 60
            while not getattr(lock, "heartbeat_lost", False) and time.monotonic() < deadline:
                time.sleep(0.05)
            print("lost" if getattr(lock, "heartbeat_lost", False) else "held", flush=True)
        elif command == "succeed":
            try:
                lock.succeed("done")
            except LeaseLost:
                print("lease-lost", flush=True)
            else:
                print("succeeded", flush=True)
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
