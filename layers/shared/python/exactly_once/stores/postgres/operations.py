"""What operators ask of the store (`eonce`, the lock monitor): pending records listed in
pages, overdue ones, and a reset.

Apart from the holder's path because nothing here is fenced or runs on a Lambda's hot path:
these read the partial index of pending rows, oldest first, and the reset is the one write a
person makes (a FAILED record made retryable).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from exactly_once.stores.lifetimes import overdue
from exactly_once.stores.postgres import statements
from exactly_once.stores.postgres.base import StoreBase
from exactly_once.stores.postgres.ids import db_id
from exactly_once.stores.postgres.rows import record_from_row
from exactly_once.stores.records import StoredRecord
from exactly_once.stores.schema import Status

PAGE = 500


class Operations(StoreBase):
    """The store's `list_pending`, `list_overdue` and `reset`."""

    def list_pending(
        self, status: Status, *, stuck_only: bool = False, limit: int | None = None
    ) -> Iterator[StoredRecord]:
        """IN_PROGRESS or FAILED records from the partial index, oldest first, in pages.

        `stuck_only` keeps IN_PROGRESS records whose lease has expired.
        """
        if status is Status.COMPLETED:
            raise ValueError("completed records are not in the pending index")
        params: dict[str, Any] = {
            "status": status.value,
            "at_ms": self._at(),
            "stuck": stuck_only and status is Status.IN_PROGRESS,
            "after_at": -1,
            "after_id": "",
            "page": PAGE,
        }
        sql = statements.LIST_PENDING
        found = 0
        while True:
            rows = self._run(lambda conn: self._rows(conn, sql, params))
            for row in rows:
                yield record_from_row(row)
                found += 1
                if limit is not None and found >= limit:
                    return
            if len(rows) < PAGE:
                return
            params["after_at"], params["after_id"] = rows[-1]["pending_at_ms"], rows[-1]["id"]

    def list_overdue(self, *, limit: int | None = None) -> Iterator[StoredRecord]:
        """IN_PROGRESS records past the completion their holder expected (`expected_by`)."""
        return overdue(self.list_pending, self._now_ms(), limit)

    def reset(self, scope: str, key: str) -> bool:
        """Make a FAILED record retryable again so the next delivery or a replay runs it."""
        sql = statements.RESET
        params = {"id": db_id(scope, key), "at_ms": self._at()}
        return bool(self._run(lambda conn: self._rows(conn, sql, params)))

    def _now_ms(self) -> int:
        """The clock's reading here, for the few decisions made in Python (list_overdue)."""
        at_ms = self._at()
        if at_ms is not None:
            return at_ms
        sql = statements.NOW
        rows = self._run(lambda conn: self._rows(conn, sql, {"at_ms": None}))
        return int(rows[0]["now_ms"])
