"""The fenced idempotency store on PostgreSQL: the DynamoDB store's state machine and outcomes,
plus a transaction that commits the holder's business writes with its COMPLETED record.

- Acquire is ONE statement: `INSERT … ON CONFLICT (id) DO UPDATE … WHERE <acquirable>`, whose
  `RETURNING` row is the lock; a refusal returns the row that refused it from the same
  statement (read `FOR SHARE`, so its latest version, not the statement's snapshot), so a
  duplicate costs one round trip, as on DynamoDB. A row inserted after the snapshot is not
  seen at all, and a row that looks acquirable is never trusted: the statement runs again.
- Every later write is an UPDATE fenced on the lock token and IN_PROGRESS; a refusal whose row
  carries our token in the state the write leaves is our own earlier attempt whose reply was
  lost (the same rule as DynamoDB's ALL_OLD check), so retrying any write is safe.
- Time is the server's clock (clock.py): every lease and TTL comparison and every timestamp
  a statement writes is its `statement_timestamp()`, so application servers whose clocks
  disagree cannot take over each other's live leases. The lease ends the store returns are
  the ones it wrote, in the server's time. A store given `clock=` (tests that move time)
  decides by that clock instead, as the DynamoDB store always does.

The class is joined here from one module per job, each built on base.py (the pools, running a
statement, reading one record): statements.py holds the SQL as text, acquisition.py the
acquire, transactions.py the holder's lent transaction and the completion that commits it,
writes.py the fenced writes, steps.py a step's recovery point with its transaction,
batch_acquire.py and batch_finish.py a batch's acquisitions and
outcomes in one statement each (batch_statements.py), operations.py the operator's listings
and reset, ids.py the record ids as PostgreSQL text holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from exactly_once.errors import ConfigurationError
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.batch_acquire import BatchAcquiring
from exactly_once.stores.postgres.batch_finish import BatchFinishing
from exactly_once.stores.postgres.operations import Operations
from exactly_once.stores.postgres.steps import StepTransactions
from exactly_once.stores.records import AcquireRequest, Acquisition, Finish, WriteResult

if TYPE_CHECKING:
    from exactly_once.config import StoreSettings


class PostgresStore(BatchAcquiring, BatchFinishing, StepTransactions, Operations):
    """Lock, complete and fail idempotency records with fenced statements on PostgreSQL.

    Constructed as base.StoreBase says (`conninfo`, the lifetimes, `clock=`, the two pools)."""

    backend = "postgres"

    @classmethod
    def configured(cls, settings: StoreSettings) -> PostgresStore:
        if not settings.dsn:
            raise ConfigurationError("no PostgreSQL DSN is configured (IDEMPOTENCY_DSN)")
        return cls(
            settings.dsn,
            record_ttl_s=settings.record_ttl_s,
            failed_ttl_s=settings.failed_ttl_s,
            result_cap_bytes=settings.result_cap_bytes,
        )

    @property
    def name(self) -> str:
        return connections.describe(self.conninfo)

    def acquire_many(self, requests: Sequence[AcquireRequest]) -> list[Acquisition | Exception]:
        """A batch's keys in one statement (batch_acquire.py): one round trip."""
        return self._acquire_batch(requests)

    def finish_many(self, finishes: Sequence[Finish]) -> list[WriteResult | Exception]:
        """A batch's outcomes in one statement (batch_finish.py): one round trip."""
        return self._finish_batch(finishes)
