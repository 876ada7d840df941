"""The PostgreSQL store's SQL, as text: every statement it runs.

Kept in one place because the statements are read together: the acquire, the fenced writes
and the completion share the fence condition (`FENCED`) and the failure's columns
(`MARK_FAILED`), and each is one round trip whose shape the store's guarantees rest on. The
chaos harness (fault_injection/pg_faults.py) tells statements apart by how their text begins,
so this text changes only on purpose. Every statement is composed from these constants and
the clock's (clock.py); values are always bound parameters, never text.
"""

# S608: composed from constants only; values are bound parameters.
# ruff: noqa: S608
from __future__ import annotations

from exactly_once.stores.postgres.clock import LEASE, NOW_MS, NOW_S, TTL_WITH_LEASE
from exactly_once.stores.postgres.rows import COLUMNS

# What an acquire writes over a conflicting row: a new lock (a new generation when the row's TTL
# expired), the previous outcome cleared. Shared with the batch's (batch_statements.py).
ACQUIRE_SET = f"""
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
        replay_nonce = NULL,
        steps = CASE WHEN r.expires_at_s < {NOW_S} THEN NULL ELSE r.steps END"""

# Acquirable, as on DynamoDB: a TTL-expired row (a new generation, unless it is a live lease or
# a takeover that is blocked), an expired lease (unless blocked), a retryable FAILED row, or a
# permanently FAILED one with its own replay nonce; never one with another fingerprint.
# `{block}`, `{fp}` and `{nonce}` are the request's: bound parameters here, each key's own in
# the batch's statement.
ACQUIRABLE = f"""(r.expires_at_s < {NOW_S} AND NOT (r.status = 'IN_PROGRESS'
            AND (r.lease_expires_at_ms >= {NOW_MS} OR {{block}})
            AND NOT COALESCE(r.resume_id = %(rid)s, false)))
        OR (r.expires_at_s >= {NOW_S}
            AND ({{fp}}::text IS NULL OR r.fingerprint IS NULL OR r.fingerprint = {{fp}})
            AND ((NOT {{block}} AND r.status = 'IN_PROGRESS' AND r.lease_expires_at_ms < {NOW_MS})
                OR (r.status = 'FAILED' AND r.error_retryable)
                OR (r.status = 'FAILED' AND r.replay_nonce = {{nonce}})
                OR (r.status = 'IN_PROGRESS' AND r.resume_id = %(rid)s)))"""


def acquirable(block: str, fp: str, nonce: str) -> str:
    """ACQUIRABLE with the request's values as these SQL expressions."""
    return ACQUIRABLE.replace("{block}", block).replace("{fp}", fp).replace("{nonce}", nonce)


ACQUIRE = f"""
WITH acquired AS (
    INSERT INTO exactly_once.records AS r (
        id, scope, status, lock_token, fence, attempts, owner, lease_expires_at_ms,
        created_at_ms, updated_at_ms, expires_at_s, pending_at_ms, fingerprint, expected_by_ms,
        resume_id)
    VALUES (%(id)s, %(scope)s, 'IN_PROGRESS', %(tok)s, {NOW_MS} + 1, 1, %(owner)s, {LEASE},
        {NOW_MS}, {NOW_MS}, {TTL_WITH_LEASE}, {LEASE}, %(fp)s,
        {NOW_MS} + %(xdur)s::bigint, %(rid)s)
    ON CONFLICT (id) DO UPDATE SET{ACQUIRE_SET}
    WHERE {acquirable("%(block)s", "%(fp)s", "%(nonce)s")}
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

FENCED = "WHERE id = %(id)s AND lock_token = %(tok)s AND status = 'IN_PROGRESS'"
# One statement: the write, and the row that refused it (for the lost-reply check), read FOR
# SHARE so that it is the row's latest version: a write that waited on the row (its own earlier
# attempt, or a takeover) is judged by what that left, not by the statement's snapshot.
# `{sets}` is COMPLETE, FAIL or EXTEND, `{fenced}` is FENCED.
FENCED_WRITE = """
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
MARK_FAILED = (
    "status = 'FAILED', error_type = %(etype)s, error_message = %(emsg)s, "
    f"error_retryable = %(eretry)s, error_at_ms = {NOW_MS}, updated_at_ms = {NOW_MS}, "
    f"expires_at_s = {NOW_S} + %(failed_ttl_s)s::bigint, pending_at_ms = {NOW_MS}"
)
COMPLETE = (
    f"status = 'COMPLETED', updated_at_ms = {NOW_MS}, "
    f"expires_at_s = {NOW_S} + %(record_ttl_s)s::bigint, "
    "pending_at_ms = NULL, result = %(res)s, result_sha256 = %(rsha)s, "
    "result_size = %(rsize)s, result_omitted = %(romit)s"
)
FAIL = f"{MARK_FAILED}, replay_nonce = %(nonce)s"
EXTEND = (
    f"lease_expires_at_ms = {LEASE}, pending_at_ms = {LEASE}, "
    f"updated_at_ms = {NOW_MS}, expires_at_s = {TTL_WITH_LEASE}"
)
# An expired lease marked FAILED for a person instead of taken over (block_takeover), under a
# fresh token: the blocked holder's late write is "lease lost", never its own.
BLOCK = (
    f"UPDATE exactly_once.records SET {MARK_FAILED}, replay_nonce = %(nonce)s, "
    f"lock_token = %(blocked)s {FENCED} AND lease_expires_at_ms < {NOW_MS} "
    f"RETURNING {COLUMNS}"
)

# The holder's transaction: its business statements run under the database's own
# statement_timeout (the lent connections are opened without the store's, and behind RDS Proxy
# its init query's is undone for the transaction), so slow business work is not cut off by a
# bound meant for the store's short statements. One round trip, as BEGIN alone was.
BEGIN = "BEGIN; SET LOCAL statement_timeout TO DEFAULT"
# The holder's completion and its COMMIT as one simple-protocol query (one round trip), bounded
# by the store's statement_timeout again: when the fence refuses, `1 / count(*)` divides by
# zero, the transaction aborts, and the COMMIT after it never runs. Multi-statement queries
# cannot carry bound parameters, so transactions.bound quotes the values client-side
# (psycopg's own literal quoting). Each statement of the query gets the timeout in effect when
# it starts.
COMPLETE_AND_COMMIT = (
    "SET LOCAL statement_timeout = %(timeout_ms)s; "
    f"WITH done AS (UPDATE exactly_once.records SET {COMPLETE} {FENCED} RETURNING 1) "
    "SELECT 1 / count(*) FROM done; COMMIT"
)

# A step's recovery point, fenced and only into an empty position, as the last statement of the
# step's transaction with its COMMIT (one round trip, as COMPLETE_AND_COMMIT): when the fence or
# the position refuses, `1 / count(*)` divides by zero and nothing of the step commits.
STEP_AND_COMMIT = (
    "SET LOCAL statement_timeout = %(timeout_ms)s; "
    "WITH done AS (UPDATE exactly_once.records SET "
    "steps = COALESCE(steps, '{}'::jsonb) || jsonb_build_object(%(pos)s::text, %(point)s::jsonb), "
    f"updated_at_ms = {NOW_MS} {FENCED} AND NOT COALESCE(steps ? %(pos)s::text, false) "
    "RETURNING 1) SELECT 1 / count(*) FROM done; COMMIT"
)

# Reads and operator actions.
NOW = f"SELECT {NOW_MS} AS now_ms"
READ = f"SELECT {NOW_MS} AS now_ms, {COLUMNS} FROM exactly_once.records WHERE id = %(id)s"
LIST_PENDING = (
    f"SELECT {COLUMNS} FROM exactly_once.records WHERE status = %(status)s "
    f"AND status <> 'COMPLETED' AND expires_at_s >= {NOW_S} "
    f"AND (NOT %(stuck)s OR pending_at_ms < {NOW_MS}) "
    "AND (pending_at_ms, id) > (%(after_at)s, %(after_id)s) "
    "ORDER BY pending_at_ms, id LIMIT %(page)s"
)
RESET = (
    f"UPDATE exactly_once.records SET error_retryable = true, updated_at_ms = {NOW_MS} "
    "WHERE id = %(id)s AND status = 'FAILED' RETURNING 1"
)
