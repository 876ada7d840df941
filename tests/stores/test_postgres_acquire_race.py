"""The acquire's refusal reports the row version that refused it, not its snapshot's.

In READ COMMITTED, a statement reads the snapshot taken when it started. An acquire that waits
on the row (a holder's completion is committing) is refused by the version committed during
the wait; the row it reports must be that one, or a key just completed would be reported as
still in progress (the queue would hide the message until the old lease ends).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg

from exactly_once import AcquireStatus, Status
from exactly_once.stores.postgres.store import PostgresStore
from tests.conftest import FakeClock
from tests.waiting import wait_until


def test_a_refusal_after_waiting_on_a_committing_holder_reports_its_outcome(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store = PostgresStore(pg_dsn, clock=clock)
    key = f"k-{uuid.uuid4().hex[:8]}"
    holder = store.acquire(scope, key, lease_ms=60_000, owner="first")
    assert holder.lock is not None
    # The holder's completion is written in its transaction, not yet committed: the row is
    # locked (a connection of the test's own plays the holder's transaction here).
    completing = psycopg.connect(pg_dsn)
    completing.execute(
        "UPDATE exactly_once.records SET status = 'COMPLETED' WHERE id = %s",
        (holder.lock.record_id,),
    )
    got: dict[str, Any] = {}

    def second() -> None:
        got["acquisition"] = store.acquire(scope, key, lease_ms=60_000, owner="second")

    racer = threading.Thread(target=second)
    racer.start()

    def waiting_on_the_row() -> bool:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%WITH acquired%%'"
            ).fetchone()
        return bool(row and row[0])

    wait_until(waiting_on_the_row, lambda: "the second acquire never waited on the row")
    completing.commit()
    completing.close()
    racer.join(timeout=60)
    acquisition = got["acquisition"]
    assert acquisition.status is AcquireStatus.ALREADY_COMPLETED, acquisition
    assert acquisition.record is not None
    assert acquisition.record.status is Status.COMPLETED
