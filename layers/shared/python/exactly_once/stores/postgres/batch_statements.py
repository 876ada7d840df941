"""The batch's SQL, as text: a batch's keys acquired in one statement, their outcomes written in
one more.

Each is the single statement's rule (statements.py) over many rows, with each key's values
bound as arrays and unnested, so a batch of N keys is one round trip whatever N is:

- ACQUIRE_MANY is ACQUIRE's `INSERT … ON CONFLICT (id) DO UPDATE SET <ACQUIRE_SET> WHERE
  <ACQUIRABLE>` with the rows coming from the arrays, in id order (two batches racing for the
  same keys lock their rows in the same order, so they never deadlock). The refusing rows come
  back from the same statement, read FOR SHARE as ACQUIRE's are (their latest version).
- FINISH_MANY completes or fails each key (`done`), fenced on its token and IN_PROGRESS as
  FENCED is. It locks the batch's rows first, in id order (FOR UPDATE), and hands back the
  refusing ones as they were locked: their latest version, so a lost reply is recognised by
  its own token and a zombie learns who holds the key now, without another round trip.

Both begin as the single statements do ("WITH acquired…", "WITH written…"): the chaos harness
(fault_injection/pg_faults.py) and the benchmark's wire counter (benchmarks/pg_wire.py) tell
statements apart by how their text begins, so a batch meets the same faults and is named as
the write it does. A batch never resumes (`%(rid)s` is bound NULL): AcquireRequest has no
`resume_id`.
"""

# S608: composed from constants only; values are bound parameters.
# ruff: noqa: S608
from __future__ import annotations

from exactly_once.stores.lifetimes import TTL_BEYOND_LEASE_S
from exactly_once.stores.postgres.clock import NOW_MS, NOW_S
from exactly_once.stores.postgres.rows import COLUMNS
from exactly_once.stores.postgres.statements import ACQUIRE_SET, acquirable

# Each key's own lease and its TTL (clock.LEASE and clock.TTL_WITH_LEASE, per row).
_LEASE = f"({NOW_MS} + k.lease_ms)"
_TTL_WITH_LEASE = (
    f"GREATEST({NOW_S} + %(record_ttl_s)s::bigint, {_LEASE} / 1000 + {TTL_BEYOND_LEASE_S})"
)


def _own(column: str) -> str:
    """The conflicting key's own value of `column` (ON CONFLICT's WHERE sees only the row and
    `excluded`, so the values that are no column are looked up by id)."""
    return f"(SELECT k.{column} FROM acquired_keys k WHERE k.id = excluded.id)"


ACQUIRE_MANY = f"""
WITH acquired_keys AS MATERIALIZED (
    SELECT * FROM unnest(%(ids)s::text[], %(scopes)s::text[], %(toks)s::text[],
        %(owners)s::text[], %(leases)s::bigint[], %(fps)s::text[], %(xdurs)s::bigint[],
        %(blocks)s::boolean[], %(nonces)s::text[])
        AS k(id, scope, tok, owner, lease_ms, fp, xdur, block, nonce)
),
acquired AS (
    INSERT INTO exactly_once.records AS r (
        id, scope, status, lock_token, fence, attempts, owner, lease_expires_at_ms,
        created_at_ms, updated_at_ms, expires_at_s, pending_at_ms, fingerprint, expected_by_ms,
        resume_id)
    SELECT k.id, k.scope, 'IN_PROGRESS', k.tok, {NOW_MS} + 1, 1, k.owner, {_LEASE},
        {NOW_MS}, {NOW_MS}, {_TTL_WITH_LEASE}, {_LEASE}, k.fp,
        {NOW_MS} + k.xdur, %(rid)s
    FROM acquired_keys k ORDER BY k.id
    ON CONFLICT (id) DO UPDATE SET{ACQUIRE_SET}
    WHERE {acquirable(_own("block"), "excluded.fingerprint", _own("nonce"))}
    RETURNING {COLUMNS}
),
refused AS (
    -- FOR SHARE: the latest version of each row that refused us (we hold its lock), as ACQUIRE.
    SELECT {COLUMNS} FROM exactly_once.records
    WHERE id = ANY(%(ids)s::text[]) AND id NOT IN (SELECT id FROM acquired) FOR SHARE
)
SELECT true AS won, {NOW_MS} AS now_ms, {COLUMNS} FROM acquired
UNION ALL
SELECT false AS won, {NOW_MS} AS now_ms, {COLUMNS} FROM refused
"""

# COMPLETE or FAIL (statements.COMPLETE, statements.FAIL) per key, each leaving the other's
# columns as they were.
_FINISH_SET = f"""
        status = CASE WHEN k.done THEN 'COMPLETED' ELSE 'FAILED' END,
        updated_at_ms = {NOW_MS},
        expires_at_s = {NOW_S} + CASE WHEN k.done
            THEN %(record_ttl_s)s::bigint ELSE %(failed_ttl_s)s::bigint END,
        pending_at_ms = CASE WHEN k.done THEN NULL ELSE {NOW_MS} END,
        result = CASE WHEN k.done THEN k.res ELSE r.result END,
        result_sha256 = CASE WHEN k.done THEN k.rsha ELSE r.result_sha256 END,
        result_size = CASE WHEN k.done THEN k.rsize ELSE r.result_size END,
        result_omitted = CASE WHEN k.done THEN k.romit ELSE r.result_omitted END,
        error_type = CASE WHEN k.done THEN r.error_type ELSE k.etype END,
        error_message = CASE WHEN k.done THEN r.error_message ELSE k.emsg END,
        error_retryable = CASE WHEN k.done THEN r.error_retryable ELSE k.eretry END,
        error_at_ms = CASE WHEN k.done THEN r.error_at_ms ELSE {NOW_MS} END,
        replay_nonce = CASE WHEN k.done THEN r.replay_nonce ELSE k.nonce END"""


def _written_columns() -> str:
    """COLUMNS for a written row: only what the holder is handed back (its lease end and
    replay nonce), not the result it just sent."""
    kept = {"id", "status", "lock_token", "replay_nonce", "lease_expires_at_ms"}
    names = [name.strip() for name in COLUMNS.split(",")]
    return ", ".join(name if name in kept else f"NULL AS {name}" for name in names)


FINISH_MANY = f"""
WITH written_keys AS MATERIALIZED (
    SELECT * FROM unnest(%(ids)s::text[], %(toks)s::text[], %(done)s::boolean[],
        %(res)s::text[], %(rsha)s::text[], %(rsize)s::bigint[], %(romit)s::text[],
        %(etype)s::text[], %(emsg)s::text[], %(eretry)s::boolean[], %(nonce)s::text[])
        AS k(id, tok, done, res, rsha, rsize, romit, etype, emsg, eretry, nonce)
),
locked AS MATERIALIZED (
    -- Each row locked in id order (the lock is taken above the sort); for a refused key, what
    -- its row holds now.
    SELECT {COLUMNS} FROM exactly_once.records
    WHERE id = ANY(%(ids)s::text[]) ORDER BY id FOR UPDATE
),
written AS (
    UPDATE exactly_once.records AS r SET{_FINISH_SET}
    FROM locked l JOIN written_keys k ON k.id = l.id
    WHERE r.id = l.id AND r.lock_token = k.tok AND r.status = 'IN_PROGRESS'
    RETURNING r.id, r.status, r.lock_token, r.replay_nonce, r.lease_expires_at_ms
)
SELECT true AS won, {NOW_MS} AS now_ms, {_written_columns()} FROM written
UNION ALL
SELECT false AS won, {NOW_MS} AS now_ms, {COLUMNS} FROM locked
WHERE id NOT IN (SELECT id FROM written)
"""
