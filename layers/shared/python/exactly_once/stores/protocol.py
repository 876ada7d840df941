"""What every idempotency store promises, and which one an entry point's configuration picks.

DynamoDB (`IDEMPOTENCY_TABLE`) or PostgreSQL (`IDEMPOTENCY_DSN`): the entry points, the lock and
the operator tools use only the `Store` protocol, so nothing else in user code changes. The
PostgreSQL modules and psycopg load only when it is selected: a DynamoDB consumer's cold start
imports exactly what it did before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from exactly_once.config import StoreSettings
from exactly_once.errors import ConfigurationError
from exactly_once.stores.records import (
    AcquireRequest,
    Acquisition,
    ErrorInfo,
    Finish,
    Lock,
    StepPoint,
    StoredRecord,
    WriteResult,
)
from exactly_once.stores.schema import Status

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class Store(Protocol):
    """One fenced record per (scope, key): the same outcomes on every backend."""

    record_ttl_s: int
    failed_ttl_s: int
    result_cap_bytes: int

    @property
    def backend(self) -> str:
        """ "dynamodb" or "postgres"."""

    @property
    def name(self) -> str:
        """Where the records are, for people: a table name, or a database without secrets."""

    def acquire(
        self,
        scope: str,
        key: str,
        *,
        lease_ms: int,
        owner: str,
        fingerprint: str | None = None,
        block_takeover: bool = False,
        replay_nonce: str | None = None,
        expected_duration_ms: int | None = None,
        resume_id: str | None = None,
    ) -> Acquisition: ...

    def acquire_many(self, requests: Sequence[AcquireRequest]) -> list[Acquisition | Exception]:
        """`acquire` for each request, in as few round trips as the backend allows (a batch's
        keys, all distinct), in order. Each answer is what `acquire` would have returned for
        it, or the exception it would have raised: one key's error never fails another's."""

    def complete(self, lock: Lock, result: Any = None) -> WriteResult: ...

    def finish_many(self, finishes: Sequence[Finish]) -> list[WriteResult | Exception]:
        """`complete` or `fail` for each holder, in as few round trips as the backend allows,
        in order; each answer is that write's result or the exception it would have raised."""

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult: ...

    def release(self, lock: Lock, reason: str = "released by its holder") -> WriteResult: ...

    def extend(self, lock: Lock, lease_ms: int) -> WriteResult: ...

    def get(self, scope: str, key: str) -> StoredRecord | None: ...

    def get_by_id(self, record_id: str) -> StoredRecord | None: ...

    def list_pending(
        self, status: Status, *, stuck_only: bool = False, limit: int | None = None
    ) -> Iterator[StoredRecord]: ...

    def list_overdue(self, *, limit: int | None = None) -> Iterator[StoredRecord]: ...

    def reset(self, scope: str, key: str) -> bool: ...

    def transaction(self, lock: Lock) -> Any:
        """The open transaction the holder's business writes go in (committed with its
        completion); a store that cannot offer one raises ConfigurationError."""

    def discard(self, lock: Lock) -> None:
        """Roll back the holder's open transaction, if any: its work ended without an outcome
        of its own to commit (a lease lost, a crash path)."""

    def record_step(
        self, lock: Lock, point: StepPoint, writes: Sequence[dict[str, Any]] = ()
    ) -> WriteResult:
        """Write a step's recovery point, fenced on `lock` and only into an empty position,
        committing the step's writes with it (PostgreSQL: its open `step_transaction`;
        DynamoDB: `writes`, TransactWriteItems entries). OK for our own point already there
        (a lost reply); LEASE_LOST when the key has another holder."""

    def step_transaction(self, lock: Lock) -> Any:
        """The open transaction of the holder's running step (PostgreSQL store only)."""

    def discard_step(self, lock: Lock) -> None:
        """Roll back the running step's transaction, if any (the step raised)."""


def open_store(settings: StoreSettings, dynamodb_client: DynamoDBClient | None = None) -> Store:
    """The store the settings name: PostgreSQL for a DSN, else the DynamoDB table."""
    if settings.dsn and settings.table_name:
        raise ConfigurationError(
            "both a DynamoDB table and a PostgreSQL DSN are configured: pick one (a store that "
            "changed silently would forget every key)"
        )
    if settings.dsn:
        from exactly_once.stores.postgres.store import PostgresStore

        return PostgresStore.configured(settings)
    if not settings.table_name:
        raise ConfigurationError("set IDEMPOTENCY_TABLE (DynamoDB) or IDEMPOTENCY_DSN (PostgreSQL)")
    from exactly_once.stores.dynamodb.store import IdempotencyStore

    return IdempotencyStore.configured(settings, dynamodb_client)
