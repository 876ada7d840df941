"""The PostgreSQL store decides leases by the server's clock (postgres/clock.py): a process whose
own clock runs ten minutes ahead cannot take over, block, list as stuck, clean up or read as
expired a lease that is live on the server, and what it writes carries the server's time.

The skewed process is a real one: its `time.time` runs ahead before the library is imported,
as on an application server whose clock drifted. Its bounds come from the server's clock, read
before it started and after it ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from exactly_once import AcquireStatus, Status
from exactly_once.stores.postgres.store import PostgresStore

SKEW_S = 600
RECORD_TTL_S = 60  # so that a skewed reader would judge the live records expired
LEASE_MS = 60_000


def _server_ms(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
        found = row.fetchone()
    assert found is not None
    return int(found[0])


def _row(dsn: str, record_id: str) -> dict[str, Any] | None:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT status, lock_token, lease_expires_at_ms, updated_at_ms, expires_at_s, "
            "error_at_ms FROM exactly_once.records WHERE id = %s",
            (record_id,),
        ).fetchone()


_SKEWED = """
import json, sys, time
_real = time.time
time.time = lambda: _real() + {skew}  # before the library is imported: the process's clock
from exactly_once import AcquireStatus, ErrorInfo, Status
from exactly_once.stores.postgres.cleanup import delete_expired
from exactly_once.stores.postgres.store import PostgresStore

dsn, scope, live, blocked, own, failed = sys.argv[1:]
store = PostgresStore(dsn, record_ttl_s={ttl}, failed_ttl_s={ttl})
out = {{}}
ours = lambda records: [r.record_id for r in records if r.record_id.startswith(scope + "#")]
out["pending"] = ours(store.list_pending(Status.IN_PROGRESS))
out["stuck"] = ours(store.list_pending(Status.IN_PROGRESS, stuck_only=True))
out["overdue"] = ours(store.list_overdue())
out["visible"] = store.get(scope, live) is not None
delete_expired(dsn)
out["takeover"] = store.acquire(scope, live, lease_ms=30_000, owner="skewed").status.value
out["blocked"] = store.acquire(
    scope, blocked, lease_ms=30_000, owner="skewed", block_takeover=True
).status.value
got = store.acquire(scope, own, lease_ms=30_000, owner="skewed")
out["acquired_lease"] = got.lock.lease_expires_at_ms
extended = store.extend(got.lock, 45_000)
out["extended_lease"] = extended.lock.lease_expires_at_ms
assert store.complete(extended.lock, {{"n": 1}}).ok
out["own"] = store.get(scope, own) is not None
fail = store.acquire(scope, failed, lease_ms=30_000, owner="skewed")
assert store.fail(fail.lock, ErrorInfo("X", "x", retryable=False)).ok
print(json.dumps(out))
"""


def _run_skewed(dsn: str, *args: str) -> dict[str, Any]:
    script = textwrap.dedent(_SKEWED).format(skew=SKEW_S, ttl=RECORD_TTL_S)
    ran = subprocess.run(
        [sys.executable, "-c", script, dsn, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "POWERTOOLS_METRICS_DISABLED": "true"},
    )
    assert ran.returncode == 0, ran.stderr
    result: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def test_a_process_whose_clock_runs_ahead_decides_by_the_servers_clock(
    pg_dsn: str, scope: str
) -> None:
    names = ("live", "blocked", "listed", "own", "fail")
    keys = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in names}
    ids = {name: f"{scope}#{key}" for name, key in keys.items()}
    holder = PostgresStore(pg_dsn, record_ttl_s=RECORD_TTL_S, failed_ttl_s=RECORD_TTL_S)
    # "listed" lives past the skew (the default TTL), so the skewed listing shows it either way.
    holders = {"live": holder, "blocked": holder, "listed": PostgresStore(pg_dsn)}
    held = {}
    for name, store in holders.items():
        got = store.acquire(
            scope,
            keys[name],
            lease_ms=LEASE_MS,
            owner="holder",
            expected_duration_ms=LEASE_MS,  # not overdue for the next minute
        )
        assert got.lock is not None
        held[name] = got.lock
    before = _server_ms(pg_dsn)

    out = _run_skewed(pg_dsn, scope, keys["live"], keys["blocked"], keys["own"], keys["fail"])

    after = _server_ms(pg_dsn)
    # The live leases stay their holder's: not taken over, not failed for a person, not stuck,
    # not overdue, not expired to a reader, not deleted.
    assert out["takeover"] == AcquireStatus.IN_PROGRESS.value
    assert out["blocked"] == AcquireStatus.IN_PROGRESS.value
    assert ids["listed"] in out["pending"]
    assert ids["listed"] not in out["stuck"]
    assert ids["listed"] not in out["overdue"]
    for name in ("live", "blocked", "listed"):
        row = _row(pg_dsn, ids[name])
        assert row is not None
        assert (row["status"], row["lock_token"]) == (Status.IN_PROGRESS.value, held[name].token)
    assert out["visible"]
    assert out["own"]
    # What the skewed process wrote carries the server's time, and the locks it was handed
    # carry the lease ends it wrote.
    own = _row(pg_dsn, ids["own"])
    assert own is not None
    assert before + 30_000 <= out["acquired_lease"] <= after + 30_000
    assert before + 45_000 <= out["extended_lease"] <= after + 45_000
    assert own["lease_expires_at_ms"] == out["extended_lease"]
    assert own["status"] == Status.COMPLETED.value
    assert before <= own["updated_at_ms"] <= after
    assert own["expires_at_s"] <= after // 1000 + RECORD_TTL_S
    failed = _row(pg_dsn, ids["fail"])
    assert failed is not None
    assert before <= failed["error_at_ms"] <= after
    assert failed["expires_at_s"] <= after // 1000 + RECORD_TTL_S
    # The holder, on the server's clock too, still completes.
    assert holder.complete(held["live"], "done").ok
    assert holders["listed"].complete(held["listed"], "done").ok


def test_a_lock_carries_the_lease_end_the_server_wrote(pg_dsn: str, scope: str) -> None:
    store = PostgresStore(pg_dsn)
    key = f"k-{uuid.uuid4().hex[:8]}"
    got = store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    row = _row(pg_dsn, f"{scope}#{key}")
    assert row is not None
    assert got.lock.lease_expires_at_ms == row["lease_expires_at_ms"]
    extended = store.extend(got.lock, 90_000)
    assert extended.lock is not None
    row = _row(pg_dsn, f"{scope}#{key}")
    assert row is not None
    assert extended.lock.lease_expires_at_ms == row["lease_expires_at_ms"]
    assert extended.lock.lease_expires_at_ms >= got.lock.lease_expires_at_ms + 60_000
