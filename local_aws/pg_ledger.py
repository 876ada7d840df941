"""The examples' effect ledger read from PostgreSQL, for the reports of a local stack whose
store is PostgreSQL: there `record_effect` writes `exactly_once.ledger` in the holder's
transaction, not the DynamoDB ledger table.

Counted by the server (one row per key), with the same filters the DynamoDB reader applies: a
run's keys carry its run id, and a scope's entries have `sk` = "<scope>#<effect>".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

# strpos/starts_with, not LIKE: a run id or a scope with `_` or `%` must match only itself.
_COUNTS = """
SELECT pk, count(*) FROM exactly_once.ledger
WHERE (%(run)s::text IS NULL OR strpos(pk, %(run)s) > 0)
  AND (%(scope)s::text IS NULL OR starts_with(sk, %(scope)s))
GROUP BY pk
"""


@dataclass(frozen=True)
class PostgresLedger:
    """The ledger in the database `dsn` names (migrated: `exactly_once.ledger` exists)."""

    dsn: str

    def counts(self, contains: str | None = None, scope: str | None = None) -> Counter[str]:
        """Entries per key; only keys containing `contains`, only entries under `scope`."""
        from exactly_once.stores.postgres import connections

        params = {"run": contains, "scope": None if scope is None else f"{scope}#"}
        with connections.connect(self.dsn) as conn:
            rows = conn.execute(_COUNTS, params).fetchall()
        return Counter({str(pk): int(n) for pk, n in rows})
