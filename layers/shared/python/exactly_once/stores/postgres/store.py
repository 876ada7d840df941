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
"""

# S608: every statement is composed from this module's constants; values are always bound
# parameters, never text.
# ruff: noqa: S608
from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from exactly_once import lifecycle
from exactly_once.errors import CommitFailed, CommitUnknown, ConfigurationError
from exactly_once.keys import hashed_key, storable_key
from exactly_once.stores import schema
from exactly_once.stores.codec import sanitise
from exactly_once.stores.lifetimes import DAY_S, check_limits, overdue
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.clock import LEASE, NOW_MS, NOW_S, TTL_WITH_LEASE
from exactly_once.stores.postgres.rows import COLUMNS, record_from_row
from exactly_once.stores.postgres.session import session_settings
from exactly_once.stores.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

    from exactly_once.config import StoreSettings

T = TypeVar("T")
STALE_READS = 3  # a refusal whose row looks acquirable: run the statement again this often
ATTEMPTS = 3  # a statement whose connection broke is tried this often (it is fenced: safe)
PAGE = 500

# Acquirable, as on DynamoDB: a TTL-expired row (a new generation, unless it is a live lease or
# a takeover that is blocked), an expired lease (unless blocked), a retryable FAILED row, or a
# permanently FAILED one with its own replay nonce; never one with another fingerprint.
_ACQUIRE = f"""
WITH acquired AS (
    INSERT INTO exactly_once.records AS r (
        id, scope, status, lock_token, fence, attempts, owner, lease_expires_at_ms,
        created_at_ms, updated_at_ms, expires_at_s, pending_at_ms, fingerprint, expected_by_ms,
        resume_id)
    VALUES (%(id)s, %(scope)s, 'IN_PROGRESS', %(tok)s, {NOW_MS} + 1, 1, %(owner)s, {LEASE},
        {NOW_MS}, {NOW_MS}, {TTL_WITH_LEASE}, {LEASE}, %(fp)s,
        {NOW_MS} + %(xdur)s::bigint, %(rid)s)
    ON CONFLICT (id) DO UPDATE SET
        status = 'IN_PROGRESS',
        lock_token = excluded.lock_token,
        owner = excluded.owner,
        lease_expires_at_ms = excluded.lease_expires_at_ms,
        updated_at_ms = excluded.updated_at_ms,
        expires_at_s = excluded.expires_at_s,
        pending_at_ms = excluded.pending_at_ms,
        acquired_over = CASE WHEN r.expires_at_s < {NOW_S} THEN NULL ELSE r.status END,
        resumed = COALESCE(r.status = 'IN_PROGRESS' AND r.resume_id = %(rid)s, false),
        resume_id = excluded.resume_id,
        fence = CASE WHEN r.expires_at_s < {NOW_S}
            THEN GREATEST(r.fence, {NOW_MS}) + 1 ELSE r.fence + 1 END,
        attempts = CASE WHEN r.expires_at_s < {NOW_S} THEN 1 ELSE r.attempts + 1 END,
        created_at_ms = CASE WHEN r.expires_at_s < {NOW_S}
            THEN excluded.created_at_ms ELSE r.created_at_ms END,
        fingerprint = CASE WHEN r.expires_at_s < {NOW_S}
            THEN excluded.fingerprint ELSE COALESCE(excluded.fingerprint, r.fingerprint) END,
        expected_by_ms = CASE WHEN r.expires_at_s < {NOW_S}
            THEN excluded.expected_by_ms ELSE COALESCE(excluded.expected_by_ms, r.expected_by_ms)
            END,
        result = NULL, result_sha256 = NULL, result_size = NULL, result_omitted = NULL,
        error_type = NULL, error_message = NULL, error_retryable = NULL, error_at_ms = NULL,
        replay_nonce = NULL
    WHERE (r.expires_at_s < {NOW_S} AND NOT (r.status = 'IN_PROGRESS'
            AND (r.lease_expires_at_ms >= {NOW_MS} OR %(block)s)
            AND NOT COALESCE(r.resume_id = %(rid)s, false)))
        OR (r.expires_at_s >= {NOW_S}
            AND (%(fp)s::text IS NULL OR r.fingerprint IS NULL OR r.fingerprint = %(fp)s)
            AND ((NOT %(block)s AND r.status = 'IN_PROGRESS' AND r.lease_expires_at_ms < {NOW_MS})
                OR (r.status = 'FAILED' AND r.error_retryable)
                OR (r.status = 'FAILED' AND r.replay_nonce = %(nonce)s)
                OR (r.status = 'IN_PROGRESS' AND r.resume_id = %(rid)s)))
    RETURNING {COLUMNS}
),
refused AS (
    -- FOR SHARE reads the row's latest version, the one that refused us (we hold its lock),
    -- rather than this statement's snapshot, which may predate a commit we waited for.
    SELECT {COLUMNS} FROM exactly_once.records
    WHERE id = %(id)s AND NOT EXISTS (SELECT FROM acquired) FOR SHARE
)
SELECT true AS won, {NOW_MS} AS now_ms, {COLUMNS} FROM acquired
UNION ALL
SELECT false AS won, {NOW_MS} AS now_ms, {COLUMNS} FROM refused
"""

_FENCED = "WHERE id = %(id)s AND lock_token = %(tok)s AND status = 'IN_PROGRESS'"
# One statement: the write, and the row that refused it (for the lost-reply check), read FOR
# SHARE so that it is the row's latest version: a write that waited on the row (its own earlier
# attempt, or a takeover) is judged by what that left, not by the statement's snapshot.
_FENCED_WRITE = """
WITH written AS (
    UPDATE exactly_once.records SET {sets} {fenced} RETURNING replay_nonce, lease_expires_at_ms),
refused AS (
    SELECT replay_nonce, lease_expires_at_ms, status, lock_token FROM exactly_once.records
    WHERE id = %(id)s AND NOT EXISTS (SELECT FROM written) FOR SHARE
)
SELECT true AS won, replay_nonce, lease_expires_at_ms, NULL AS status, NULL AS lock_token
FROM written
UNION ALL
SELECT false, replay_nonce, lease_expires_at_ms, status, lock_token FROM refused
"""
_MARK_FAILED = (
    "status = 'FAILED', error_type = %(etype)s, error_message = %(emsg)s, "
    f"error_retryable = %(eretry)s, error_at_ms = {NOW_MS}, updated_at_ms = {NOW_MS}, "
    f"expires_at_s = {NOW_S} + %(failed_ttl_s)s::bigint, pending_at_ms = {NOW_MS}"
)


def db_key(key: str) -> str:
    """A key as PostgreSQL text holds it. Text cannot hold NUL (DynamoDB strings can), so a key
    with one is kept as its SHA-256, as over-long keys already are (keys.storable_key). The
    entry points pass keys through storable_key first, so no plain key here starts with
    `sha256:` and none can name a hashed key's row."""
    return key if "\x00" not in key else hashed_key(key)


def _db_id(scope: str, key: str) -> str:
    return schema.record_id(scope, db_key(key))


def _reconnect_helps(exc: Exception) -> bool:
    """A broken or unobtainable connection (no SQLSTATE, or class 08, or the server shutting
    down) is worth another try; an error the server raised for the statement is not: a lock
    timeout would only wait again."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03"}


@dataclass(frozen=True)
class _Request:
    """One call to `acquire`: what it asks for, and the given clock's reading it decides by
    (None: the server's clock, read by each statement)."""

    record_id: str
    scope: str
    token: str
    fingerprint: str | None
    block_takeover: bool
    replay_nonce: str | None
    at_ms: int | None
    resume_id: str | None = None

    def lock(self, row: dict[str, Any]) -> Lock:
        """The lock the row grants: its fence, attempt and the lease end it was written with."""
        return Lock(
            self.record_id,
            self.token,
            int(row["fence"]),
            int(row["attempts"]),
            int(row["lease_expires_at_ms"]),
            self.scope,
        )


class PostgresStore:
    """Lock, complete and fail idempotency records with fenced statements on PostgreSQL."""

    backend = "postgres"

    def __init__(
        self,
        conninfo: str,
        *,
        record_ttl_s: int = 15 * DAY_S,
        failed_ttl_s: int = 30 * DAY_S,
        result_cap_bytes: int = 64 * 1024,
        clock: Callable[[], float] | None = None,
        pool: ConnectionPool[Connection[Any]] | None = None,
        transaction_pool: ConnectionPool[Connection[Any]] | None = None,
    ) -> None:
        """`pool` runs the store's statements, `transaction_pool` lends the holders their
        transactions (by default the process's two pools for the DSN, connections.pool).

        Leases and expiries are decided by the database server's clock. `clock` (epoch
        seconds) replaces it for tests that move time: every statement then decides by its
        reading, as the DynamoDB store does by the caller's clock."""
        check_limits(record_ttl_s, failed_ttl_s, result_cap_bytes)
        self.conninfo = conninfo
        self.record_ttl_s = record_ttl_s
        self.failed_ttl_s = failed_ttl_s
        self.result_cap_bytes = result_cap_bytes
        self._clock = clock
        self._pool = self._given_pool = pool
        self._transaction_pool = self._given_transaction_pool = transaction_pool
        self._generation = lifecycle.generation()
        # The holders' open business transactions, by lock token.
        self._open: dict[str, Connection[Any]] = {}
        self._open_lock = threading.Lock()

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

    @property
    def pool(self) -> ConnectionPool[Connection[Any]]:
        self._follow_clones()
        if self._pool is None:
            self._pool = connections.pool(self.conninfo, connections.STATEMENTS)
        return self._pool

    @property
    def transaction_pool(self) -> ConnectionPool[Connection[Any]]:
        self._follow_clones()
        if self._transaction_pool is None:
            self._transaction_pool = connections.pool(self.conninfo, connections.TRANSACTIONS)
        return self._transaction_pool

    def _follow_clones(self) -> None:
        """In a clone (fork, SnapStart restore) fetch the process's pools again: the old ones'
        connections belong to the parent. Pools given to the store are kept."""
        if self._generation == lifecycle.generation():
            return
        with _CLONE_LOCK:  # a batch's first records may all get here at once in a restored copy
            if self._generation == lifecycle.generation():
                return
            # A given pool that the layer closed before a snapshot (connections.pool's own).
            self._pool = None if _closed(self._given_pool) else self._given_pool
            self._transaction_pool = (
                None if _closed(self._given_transaction_pool) else self._given_transaction_pool
            )
            # The parent's holders' transactions are not ours to end: forget them.
            self._open = {}
            self._open_lock = threading.Lock()
            self._generation = lifecycle.generation()  # last: the unlocked check reads it

    def _at(self) -> int | None:
        """The `at_ms` every statement binds: the given clock's reading, or None (the
        server's clock, clock.NOW_MS)."""
        return None if self._clock is None else int(self._clock() * 1000)

    def _now_ms(self) -> int:
        """The clock's reading here, for the few decisions made in Python (list_overdue)."""
        at_ms = self._at()
        if at_ms is not None:
            return at_ms
        sql = f"SELECT {NOW_MS} AS now_ms"
        rows = self._run(lambda conn: self._rows(conn, sql, {"at_ms": None}))
        return int(rows[0]["now_ms"])

    def _run(self, statement: Callable[[Connection[Any]], T]) -> T:
        """`statement` on a pooled connection, tried again when the connection broke.

        Every statement here is fenced or recognises its own earlier attempt, so running one
        again after a lost reply is safe; errors that are not the connection's surface at once.
        """
        import psycopg

        for attempt in range(1, ATTEMPTS + 1):
            try:
                with self.pool.connection() as conn:
                    return statement(conn)
            except psycopg.OperationalError as exc:
                if attempt == ATTEMPTS or not _reconnect_helps(exc):
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")  # the loop returns or raises

    @staticmethod
    def _rows(conn: Connection[Any], sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        from psycopg.rows import dict_row

        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql.encode(), params)  # composed from constants, values bound
            return cur.fetchall() if cur.description else []

    # -- acquisition -------------------------------------------------------------------------

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
    ) -> Acquisition:
        """Take the record in one statement; a refusal comes back with the row that refused.

        `resume_id`: as on DynamoDB, an IN_PROGRESS row with the same id is this holder's own
        lock from an earlier invocation, resumed with a new token and fence."""
        req = _Request(
            record_id=_db_id(scope, key),
            scope=scope,
            token=secrets.token_hex(16),
            fingerprint=fingerprint,
            block_takeover=block_takeover,
            replay_nonce=replay_nonce or None,
            at_ms=self._at(),
            # Text as PostgreSQL can hold it, as keys are (a NUL or a lone surrogate: hashed).
            resume_id=db_key(storable_key(resume_id)) if resume_id else None,
        )
        params = {
            "id": req.record_id,
            "scope": sanitise(scope),
            "tok": req.token,
            "owner": sanitise(owner),
            "at_ms": req.at_ms,
            "lease_ms": lease_ms,
            "record_ttl_s": self.record_ttl_s,
            "fp": fingerprint,
            "xdur": expected_duration_ms,
            "block": block_takeover,
            "nonce": req.replay_nonce,
            "rid": req.resume_id,
        }
        import psycopg

        for _ in range(STALE_READS):
            try:
                rows = self._run(lambda conn: self._rows(conn, _ACQUIRE, params))
            except psycopg.errors.LockNotAvailable:
                # A holder's transaction holds the row (a completion committing, or a frozen
                # holder): in progress, as DynamoDB would say of a live lease.
                return Acquisition(AcquireStatus.IN_PROGRESS, record=self.get_by_id(req.record_id))
            if not rows:
                continue  # the conflicting row is newer than this statement's snapshot
            row = rows[0]
            record = record_from_row(row)
            if row["won"]:
                return Acquisition(
                    AcquireStatus.ACQUIRED,
                    lock=req.lock(row),
                    takeover=row["acquired_over"] == Status.IN_PROGRESS,
                    retry=row["acquired_over"] == Status.FAILED,
                    resumed=bool(row["resumed"]),
                )
            if record.lock_token == req.token:
                # Our own insert committed and its reply was lost; the retry met it.
                return Acquisition(AcquireStatus.ACQUIRED, lock=req.lock(row))
            verdict = self._refused(record, req, int(row["now_ms"]))
            if verdict is not None:
                return verdict
        # Contended: the row kept changing under us. Judge by its latest state; one that still
        # looks acquirable is in progress (the queue redelivers, the API answers 409).
        read = self._read(req.record_id)
        current = None if read is None else read[0]
        verdict = (
            None
            if read is None
            else self._refused(read[0], replace(req, block_takeover=False), read[1])
        )
        return verdict or Acquisition(AcquireStatus.IN_PROGRESS, record=current)

    def _refused(self, record: StoredRecord, req: _Request, now_ms: int) -> Acquisition | None:
        """What a refusal means, in the DynamoDB store's order; None when the row would have
        been acquirable (so it is older than what refused us). `now_ms`: the clock the row was
        read by (the statement's)."""
        expired = record.is_expired(now_ms // 1000) and not record.lease_live(now_ms)
        own = req.resume_id is not None and record.resume_id == req.resume_id
        if expired:
            if req.block_takeover and record.status is Status.IN_PROGRESS and not own:
                return self._block(record, req)
            return None
        if req.fingerprint is not None and record.fingerprint not in (None, req.fingerprint):
            return Acquisition(AcquireStatus.FINGERPRINT_MISMATCH, record=record)
        if record.status is Status.COMPLETED:
            return Acquisition(AcquireStatus.ALREADY_COMPLETED, record=record)
        if record.status is Status.FAILED:
            error = record.error
            if (error is not None and error.retryable) or (
                req.replay_nonce is not None and record.replay_nonce == req.replay_nonce
            ):
                return None
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record)
        if own:
            return None  # this holder's own lock: it would have been resumed
        if record.lease_expired(now_ms):
            return self._block(record, req) if req.block_takeover else None
        return Acquisition(AcquireStatus.IN_PROGRESS, record=record)

    def _block(self, record: StoredRecord, req: _Request) -> Acquisition:
        """Mark an expired lease FAILED for a person instead of taking it over (payments): its
        holder may have done the work and died before completing, and only a person can tell.
        A fresh token, so the blocked holder's late write is "lease lost", never its own."""
        error = ErrorInfo(
            "LeaseExpired",
            f"lease of {record.owner} (fence {record.fence}) expired before completion; "
            "takeover is blocked for this consumer, so a person must check and reset or replay",
            retryable=False,
        )
        params = {
            **self._failure_params(error),
            "at_ms": req.at_ms,
            "id": record.record_id,
            "tok": record.lock_token or "",
            "nonce": secrets.token_hex(16),
            "blocked": secrets.token_hex(16),
        }
        sql = (
            f"UPDATE exactly_once.records SET {_MARK_FAILED}, replay_nonce = %(nonce)s, "
            f"lock_token = %(blocked)s {_FENCED} AND lease_expires_at_ms < {NOW_MS} "
            f"RETURNING {COLUMNS}"
        )
        rows = self._run(lambda conn: self._rows(conn, sql, params))
        if rows:
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record_from_row(rows[0]))
        # The old holder finished (or someone else moved it) in between: report that state.
        read = self._read(record.record_id)
        if read is None:
            return Acquisition(AcquireStatus.IN_PROGRESS)  # gone: the next delivery takes it
        current, now_ms = read
        verdict = self._refused(current, replace(req, block_takeover=False), now_ms)
        return verdict or Acquisition(AcquireStatus.IN_PROGRESS, record=current)

    # -- the holder's transaction ------------------------------------------------------------

    def transaction(self, lock: Lock) -> Connection[Any]:
        """The connection whose open transaction commits with this lock's completion.

        BEGIN is sent here, so a `with conn.transaction():` block of the holder's is a savepoint
        inside it, never a commit of its own; commit, rollback and close are refused while the
        connection is lent (connections.HolderConnection). The record's row is not locked by
        it: a takeover stays possible while the business writes run, and the completion,
        fenced on the token, then fails and rolls them back. The holder's statements run under
        the database's own statement_timeout, not the store's (`_BEGIN`).
        """
        lock.own()  # a fork child's copy of the parent's lock is refused (LockInherited)
        with self._open_lock:
            conn = self._open.get(lock.token)
        if conn is not None:
            return conn
        # Never wait for a pooled connection under the lock: the holders that would give one
        # back take the lock to complete, and would wait for us in turn. A token is one
        # holder's, used by one thread at a time, so no one else opens it meanwhile.
        conn = self.transaction_pool.getconn()
        try:
            conn.execute(_BEGIN)
        except BaseException:
            self.transaction_pool.putconn(conn)
            raise
        connections.lend(conn, lent=True)
        with self._open_lock:
            self._open[lock.token] = conn
        return conn

    def discard(self, lock: Lock) -> None:
        if lock.inherited:
            return  # the parent's transaction, on the parent's socket: never ours to end
        conn = self._take(lock)
        if conn is not None:
            self._finish_quietly(conn)

    def _take(self, lock: Lock) -> Connection[Any] | None:
        with self._open_lock:
            return self._open.pop(lock.token, None)

    def _finish(self, conn: Connection[Any]) -> None:
        """Take the connection back: roll back what is still open, return it to the pool."""
        from psycopg.pq import TransactionStatus

        connections.lend(conn, lent=False)
        try:
            if conn.info.transaction_status is not TransactionStatus.IDLE:
                conn.rollback()
        finally:
            self.transaction_pool.putconn(conn)  # a broken connection is discarded by the pool

    def _finish_quietly(self, conn: Connection[Any]) -> None:
        with contextlib.suppress(Exception):  # broken: the pool has discarded it
            self._finish(conn)

    def _complete_in(
        self, conn: Connection[Any], lock: Lock, params: dict[str, Any]
    ) -> WriteResult:
        """The completion as the last statement of the holder's transaction, and the COMMIT,
        sent together in one round trip (`_COMPLETE_AND_COMMIT`).

        Fenced: a holder whose lease was taken over finds no row to update, the statement
        fails, and everything it wrote rolls back with it. A reply that never came is settled
        by reading the row (`_settle`).
        """
        import psycopg

        try:
            # Read here, inside: the settings are first read by this statement behind RDS
            # Proxy (IDEMPOTENCY_PG_SESSION_SETTINGS=server), and a malformed one must not
            # keep the connection, already taken from `_open`, out of its pool.
            bounded = {**params, "timeout_ms": session_settings()["statement_timeout"]}
            conn.execute(_bound(conn, _COMPLETE_AND_COMMIT, bounded))
        except psycopg.errors.DivisionByZero:  # no row matched: the lease was lost
            self._finish_quietly(conn)
            return WriteResult(WriteStatus.LEASE_LOST, current=self.get_by_id(lock.record_id))
        except Exception as exc:
            self._finish_quietly(conn)
            return self._settle(lock, exc)
        except BaseException:
            # Interrupted (KeyboardInterrupt, SystemExit, a cancellation), before or after the
            # server ran it: the connection still goes back (rolled back, or discarded by the
            # pool when mid-statement), and the interruption goes on; the row says what
            # committed.
            self._finish_quietly(conn)
            raise
        self._finish(conn)  # committed: nothing is left to roll back
        return WriteResult(WriteStatus.OK, lock=lock)

    def _settle(self, lock: Lock, cause: Exception) -> WriteResult:
        """A completion that raised: it committed or it did not, and the row says which.

        COMPLETED under our token: done (the reply was lost). IN_PROGRESS under our token:
        nothing committed, the holder still holds the key (CommitFailed: it fails the key, or
        its lease ends). Another holder's: ours could never commit (lease lost). Unreadable:
        CommitUnknown, and the record settles it later.
        """
        try:
            current = self.get_by_id(lock.record_id)
        except Exception as unreadable:
            raise CommitUnknown(
                f"{lock.record_id}: the commit's reply was lost ({type(cause).__name__}) and "
                f"the record cannot be read ({type(unreadable).__name__})"
            ) from cause
        if current is None or current.lock_token != lock.token:
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        if current.status is Status.COMPLETED:
            return WriteResult(WriteStatus.OK, lock=lock)
        raise CommitFailed(
            f"{lock.record_id}: the transaction did not commit ({type(cause).__name__}: {cause})"
        ) from cause

    # -- fenced writes -----------------------------------------------------------------------

    def complete(self, lock: Lock, result: Any = None) -> WriteResult:
        """Mark COMPLETED with the result (stored_result.StoredResult); in the holder's open
        transaction when it has one, so its business writes commit with it."""
        lock.own()  # before taking the transaction: an inherited one is the parent's
        kept = StoredResult.of(result, self.result_cap_bytes)
        params = {
            "id": lock.record_id,
            "tok": lock.token,
            "at_ms": self._at(),
            "record_ttl_s": self.record_ttl_s,
            "res": kept.text,
            "rsha": kept.sha256,
            "rsize": kept.size,
            "romit": kept.omitted,
        }
        conn = self._take(lock)
        if conn is not None:
            return self._complete_in(conn, lock, params)
        return self._fenced_write(lock, _COMPLETE, params, leaves=Status.COMPLETED)

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult:
        """Keep the record FAILED with the error; an open transaction is rolled back first.
        A permanent failure gets a fresh nonce that only a real DLQ replay presents."""
        lock.own()  # before the rollback: an inherited transaction is the parent's
        self.discard(lock)
        params = {**self._failure_params(error), "at_ms": self._at(), "id": lock.record_id}
        params["tok"] = lock.token
        params["nonce"] = None if error.retryable else secrets.token_hex(16)
        sets = f"{_MARK_FAILED}, replay_nonce = %(nonce)s"
        return self._fenced_write(lock, sets, params, leaves=Status.FAILED)

    def _failure_params(self, error: ErrorInfo) -> dict[str, Any]:
        return {
            "etype": sanitise(error.type[:256]),
            "emsg": sanitise(error.message[: ErrorInfo.MAX_MESSAGE]),
            "eretry": error.retryable,
            "failed_ttl_s": self.failed_ttl_s,
        }

    def release(self, lock: Lock, reason: str = "released by its holder") -> WriteResult:
        """A retryable FAILED record rather than a deletion: deleting would reset the fence."""
        return self.fail(lock, ErrorInfo("Released", reason, retryable=True))

    def extend(self, lock: Lock, lease_ms: int) -> WriteResult:
        """Renew the lease (on its own connection: the holder's transaction stays open). The
        lock handed back carries the lease end the statement wrote."""
        params = {
            "id": lock.record_id,
            "tok": lock.token,
            "at_ms": self._at(),
            "lease_ms": lease_ms,
            "record_ttl_s": self.record_ttl_s,
        }
        sets = (
            f"lease_expires_at_ms = {LEASE}, pending_at_ms = {LEASE}, "
            f"updated_at_ms = {NOW_MS}, expires_at_s = {TTL_WITH_LEASE}"
        )
        return self._fenced_write(lock, sets, params, leaves=Status.IN_PROGRESS)

    def _fenced_write(
        self, lock: Lock, sets: str, params: dict[str, Any], leaves: Status
    ) -> WriteResult:
        lock.own()  # extend's check (complete and fail made theirs before their rollback)
        sql = _FENCED_WRITE.format(sets=sets, fenced=_FENCED)
        rows = self._run(lambda conn: self._rows(conn, sql, params))
        # Won, or refused by our own earlier attempt that committed and whose reply was lost.
        if rows and (
            rows[0]["won"] or (rows[0]["lock_token"] == lock.token and rows[0]["status"] == leaves)
        ):
            held = replace(lock, lease_expires_at_ms=int(rows[0]["lease_expires_at_ms"]))
            return WriteResult(WriteStatus.OK, lock=held, replay_nonce=rows[0]["replay_nonce"])
        return WriteResult(WriteStatus.LEASE_LOST, current=self.get_by_id(lock.record_id))

    # -- reads and operator actions ----------------------------------------------------------

    def get(self, scope: str, key: str) -> StoredRecord | None:
        """The live record, or None when absent or expired (cleanup deletes expired rows)."""
        return self.get_by_id(_db_id(scope, key))

    def get_by_id(self, record_id: str) -> StoredRecord | None:
        read = self._read(record_id)
        return None if read is None else read[0]

    def _read(self, record_id: str) -> tuple[StoredRecord, int] | None:
        """The live record and the clock reading it was judged live by; None when absent or
        expired."""
        sql = f"SELECT {NOW_MS} AS now_ms, {COLUMNS} FROM exactly_once.records WHERE id = %(id)s"
        params = {"id": record_id, "at_ms": self._at()}
        rows = self._run(lambda conn: self._rows(conn, sql, params))
        if not rows:
            return None
        record, now_ms = record_from_row(rows[0]), int(rows[0]["now_ms"])
        return None if record.is_expired(now_ms / 1000) else (record, now_ms)

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
        sql = (
            f"SELECT {COLUMNS} FROM exactly_once.records WHERE status = %(status)s "
            f"AND status <> 'COMPLETED' AND expires_at_s >= {NOW_S} "
            f"AND (NOT %(stuck)s OR pending_at_ms < {NOW_MS}) "
            "AND (pending_at_ms, id) > (%(after_at)s, %(after_id)s) "
            "ORDER BY pending_at_ms, id LIMIT %(page)s"
        )
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
        sql = (
            f"UPDATE exactly_once.records SET error_retryable = true, updated_at_ms = {NOW_MS} "
            "WHERE id = %(id)s AND status = 'FAILED' RETURNING 1"
        )
        params = {"id": _db_id(scope, key), "at_ms": self._at()}
        return bool(self._run(lambda conn: self._rows(conn, sql, params)))


_COMPLETE = (
    f"status = 'COMPLETED', updated_at_ms = {NOW_MS}, "
    f"expires_at_s = {NOW_S} + %(record_ttl_s)s::bigint, "
    "pending_at_ms = NULL, result = %(res)s, result_sha256 = %(rsha)s, "
    "result_size = %(rsize)s, result_omitted = %(romit)s"
)
# The holder's transaction: its business statements run under the database's own
# statement_timeout (the lent connections are opened without the store's, and behind RDS Proxy
# its init query's is undone for the transaction), so slow business work is not cut off by a
# bound meant for the store's short statements. One round trip, as BEGIN alone was.
_BEGIN = "BEGIN; SET LOCAL statement_timeout TO DEFAULT"
# The holder's completion and its COMMIT as one simple-protocol query (one round trip), bounded
# by the store's statement_timeout again: when the fence refuses, `1 / count(*)` divides by
# zero, the transaction aborts, and the COMMIT after it never runs. Multi-statement queries
# cannot carry bound parameters, so `_bound` quotes the values client-side (psycopg's own
# literal quoting). Each statement of the query gets the timeout in effect when it starts.
_COMPLETE_AND_COMMIT = (
    "SET LOCAL statement_timeout = %(timeout_ms)s; "
    f"WITH done AS (UPDATE exactly_once.records SET {_COMPLETE} {_FENCED} RETURNING 1) "
    "SELECT 1 / count(*) FROM done; COMMIT"
)


def _bound(conn: Any, statement: str, params: dict[str, Any]) -> bytes:
    """`statement` with its `%(name)s` parameters as quoted literals."""
    from psycopg import sql

    template = statement.replace("{", "{{").replace("}", "}}")
    template = re.sub(r"%\((\w+)\)s", r"{\1}", template)
    values = {name: sql.Literal(value) for name, value in params.items()}
    return sql.SQL(template).format(**values).as_string(conn).encode()


def _closed(pool: ConnectionPool[Connection[Any]] | None) -> bool:
    return pool is not None and pool.closed


_CLONE_LOCK = threading.Lock()


def _new_clone_lock() -> None:
    global _CLONE_LOCK
    _CLONE_LOCK = threading.Lock()


lifecycle.on_clone(_new_clone_lock)
