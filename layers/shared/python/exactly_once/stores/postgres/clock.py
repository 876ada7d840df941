"""The clock the PostgreSQL store decides leases and expiries by: the server's, by default.

Every application server reads the same clock then, so one whose own clock runs ahead cannot
judge a live lease expired and take it over, nor write leases and TTLs that others misread.
`statement_timestamp()` is fixed for the whole statement (all of a multi-statement message), so
every comparison and every timestamp one statement writes agree; a statement that first waited
on a row lock judges by when it arrived, which only ever makes a lease look younger.

A store given a clock of its own (tests that move time) binds its reading as `%(at_ms)s`, and
the same SQL decides by that instead.
"""

from __future__ import annotations

from exactly_once.stores.lifetimes import TTL_BEYOND_LEASE_S

# Epoch milliseconds, truncated as Python's int() truncates the caller's clock.
NOW_MS = (
    "COALESCE(%(at_ms)s::bigint, floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint)"
)
NOW_S = f"({NOW_MS} / 1000)"
# The lease a write grants: `%(lease_ms)s` from now.
LEASE = f"({NOW_MS} + %(lease_ms)s::bigint)"
# lifetimes.record_ttl in SQL: `%(record_ttl_s)s` from now, never before the lease ends (+ margin).
TTL_WITH_LEASE = (
    f"GREATEST({NOW_S} + %(record_ttl_s)s::bigint, {LEASE} / 1000 + {TTL_BEYOND_LEASE_S})"
)
