"""The layer on its two stores, side by side: round trips and latency per record, DynamoDB vs
PostgreSQL, for a new key, a duplicate, and a new key whose effect commits with it.

The same `@sqs_consumer(key="orderId")` runs on both, with the same business function; only
`table_name=` or `dsn=` differs. The effect is `exactly_once.ledger.record_effect`: on DynamoDB
one TransactWriteItems (the ledger item, conditioned on holding the lock), on PostgreSQL an
INSERT in `ctx.transaction`, committed with the completion.

Round trips are counted where they happen: DynamoDB API calls by the botocore hook the other
rows use (one HTTP request each), PostgreSQL flights by the proxy in front of the server
(pg_proxy.py). Both get the same injected latency per round trip. Every path is checked, not
assumed: the business function runs once per new key, never for a duplicate, no record fails.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from benchmarks.calls import CountingWork
from benchmarks.consumers import Consumer
from benchmarks.errors import BenchmarkInvalid
from benchmarks.instrument import CallCounter
from benchmarks.pg_proxy import RoundTripProxy
from benchmarks.pg_wire import STARTUP, TERMINATE
from benchmarks.rig import Rig
from benchmarks.settings import Settings, invocation_context
from benchmarks.sqs_events import new_batch
from exactly_once import RecordContext, sqs_consumer
from exactly_once.ledger import record_effect

WARMUP_ROUNDS = (3, 40)  # at least, at most: until a round opens no connection, prepares nothing
TIMING_WARMUP = 3  # single-record invocations per consumer before the timed ones


class Backend(StrEnum):
    DYNAMODB = "DynamoDB"
    POSTGRES = "PostgreSQL"


class StoreCase(StrEnum):
    NEW = "new key"
    DUPLICATE = "duplicate"
    EFFECT = "new key + effect"


BACKENDS = (Backend.DYNAMODB, Backend.POSTGRES)


@dataclass(frozen=True)
class RoundTrips:
    backend: Backend
    case: StoreCase
    records: int
    trips: dict[str, int]  # "dynamodb.UpdateItem" or a PostgreSQL flight label -> count

    def per_record(self, label: str | None = None) -> float:
        """Round trips per record (of one label, or all; start-up and terminate are none)."""
        counted = {k: n for k, n in self.trips.items() if k not in (STARTUP, TERMINATE)}
        if label is not None:
            return counted.get(label, 0) / self.records
        return sum(counted.values()) / self.records

    def per_batch(self, label: str | None = None) -> int:
        """Round trips of the whole batch of `records` (each case is one batch)."""
        return round(self.per_record(label) * self.records)

    def batch_breakdown(self) -> str:
        """E.g. "acquire 1 + fenced write 1" for the whole batch, in the order first seen."""
        parts = [
            f"{name.split('.', 1)[-1]} {n}"
            for name, n in self.trips.items()
            if name not in (STARTUP, TERMINATE)
        ]
        return " + ".join(parts) or "none"

    def breakdown(self) -> str:
        """E.g. "acquire 1 + fenced write 1" per record."""
        parts = [  # in the order they were first seen: the order a record makes them
            f"{name.split('.', 1)[-1]} {n / self.records:g}"
            for name, n in self.trips.items()
            if name not in (STARTUP, TERMINATE)
        ]
        return " + ".join(parts) or "none"


@dataclass
class StoreResults:
    round_trips: list[RoundTrips]
    latency: dict[tuple[Backend, StoreCase], list[float]]  # seconds per single-record batch
    local_round_trip_s: dict[str, float]  # PostgreSQL without injected latency: direct, proxied
    connections_opened: int  # PostgreSQL start-ups while counting and timing (after warm-up)
    warmup_rounds: int
    server_version: str
    records: int = 0
    repetitions: int = 0
    # Ledger entries the "new key + effect" batch left committed, per backend (one per record
    # when every effect committed with its record's completion).
    effects_committed: dict[Backend, int] = field(default_factory=dict)

    def trips(self, backend: Backend, case: StoreCase) -> RoundTrips:
        for found in self.round_trips:
            if (found.backend, found.case) == (backend, case):
                return found
        raise KeyError((backend, case))

    def median(self, backend: Backend, case: StoreCase) -> float:
        return statistics.median(self.latency[(backend, case)])


@dataclass
class PostgresRig:
    """The PostgreSQL side: the server's DSN, the proxy in front of it, the DSN through it."""

    direct_dsn: str
    proxy: RoundTripProxy
    dsn: str  # through the proxy: what the consumers use


@contextlib.contextmanager
def postgres_rig(server_dsn: str, latency_s: float) -> Iterator[PostgresRig]:
    """A counting proxy with `latency_s` per round trip in front of `server_dsn` (migrated)."""
    from psycopg.conninfo import conninfo_to_dict

    from exactly_once.stores.postgres import connections

    params = conninfo_to_dict(server_dsn)
    host, port = str(params.get("host") or "127.0.0.1"), int(str(params.get("port") or 5432))
    with RoundTripProxy(host, port, latency_s) as proxy:
        dsn = proxy.dsn(str(params.get("dbname") or "postgres"), str(params.get("user")))
        try:
            yield PostgresRig(server_dsn, proxy, dsn)
        finally:
            connections.pool(dsn).close()  # the store's pool for the proxied DSN, ours alone


def _consumer(
    rig: Rig,
    pg: PostgresRig,
    backend: Backend,
    work: CountingWork,
    *,
    effect: bool,
    counter: CallCounter | None = None,
) -> Consumer:
    """A fresh layer consumer on `backend`; with `effect`, the business function first records
    its effect with `record_effect` (fenced on DynamoDB, in the transaction on PostgreSQL)."""

    def handle(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
        if effect:
            record_effect(ctx, {"amount": body.get("amount")}, rig.ledger_table)
        return work(body)

    sqs = rig.client("sqs", counter)
    scope = f"{rig.scope}-stores"
    if backend is Backend.DYNAMODB:
        dynamodb = rig.client("dynamodb", counter)
        wrap = sqs_consumer(
            key="orderId",
            table_name=rig.layer_table,
            scope=scope,
            dynamodb_client=dynamodb,
            sqs_client=sqs,
        )
    else:
        wrap = sqs_consumer(key="orderId", dsn=pg.dsn, scope=scope, sqs_client=sqs)
    return wrap(handle)


def _run(
    consumer: Consumer, batch: dict[str, Any], work: CountingWork, runs: int, what: str
) -> None:
    response = consumer(batch, invocation_context())
    if response.get("batchItemFailures") or work.runs != runs:
        raise BenchmarkInvalid(f"{what} misbehaved: {response}, runs={work.runs}")


def warm_postgres(consumers: list[tuple[Consumer, CountingWork]], proxy: RoundTripProxy) -> int:
    """Run batches until a whole round opens no connection and prepares no statement (psycopg
    prepares a statement after its fifth run on a connection); returns the rounds it took."""
    least, most = WARMUP_ROUNDS
    for round_number in range(1, most + 1):
        with proxy.counting() as counter:
            for consumer, work in consumers:
                batch, before = new_batch(10), work.runs
                _run(consumer, batch, work, before + 10, "PostgreSQL warm-up")
                _run(consumer, batch, work, before + 10, "PostgreSQL warm-up duplicates")
        seen = counter.snapshot()
        settled = not any(k == STARTUP or k.startswith("prepare") for k in seen)
        if round_number >= least and settled:
            return round_number
    raise BenchmarkInvalid(f"PostgreSQL never settled in {most} warm-up rounds: {seen}")


def ledger_entries(rig: Rig, pg: PostgresRig, backend: Backend) -> int:
    """The effect ledger's committed entries on `backend` (its table holds this run's alone)."""
    if backend is Backend.POSTGRES:
        import psycopg

        with psycopg.connect(pg.direct_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM exactly_once.ledger").fetchone()
        return int(row[0]) if row else 0
    client = rig.client("dynamodb", latency=False)
    count, start = 0, None
    while True:
        page = client.scan(
            TableName=rig.ledger_table,
            Select="COUNT",
            ConsistentRead=True,
            **({"ExclusiveStartKey": start} if start else {}),
        )
        count += int(page["Count"])
        start = page.get("LastEvaluatedKey")
        if not start:
            return count


def count_round_trips(
    rig: Rig, pg: PostgresRig, records: int
) -> tuple[list[RoundTrips], int, int, dict[Backend, int]]:
    """(round trips per backend and case, PostgreSQL warm-up rounds, connections opened, the
    ledger entries each backend's effect batch committed)."""
    found: list[RoundTrips] = []
    committed: dict[Backend, int] = {}
    pg_plain, pg_effect = CountingWork(), CountingWork()
    pg_consumers = {
        False: _consumer(rig, pg, Backend.POSTGRES, pg_plain, effect=False),
        True: _consumer(rig, pg, Backend.POSTGRES, pg_effect, effect=True),
    }
    rounds = warm_postgres(
        [(pg_consumers[False], pg_plain), (pg_consumers[True], pg_effect)], pg.proxy
    )
    opened = 0
    for backend in BACKENDS:
        for effect in (False, True):
            counter = CallCounter()
            work = CountingWork()
            if backend is Backend.DYNAMODB:
                consumer = _consumer(rig, pg, backend, work, effect=effect, counter=counter)
            else:
                consumer, work = pg_consumers[effect], pg_effect if effect else pg_plain
            cases = [StoreCase.EFFECT] if effect else [StoreCase.NEW, StoreCase.DUPLICATE]
            batch, runs = new_batch(records), work.runs + records
            before = ledger_entries(rig, pg, backend) if effect else 0
            for case in cases:
                counter.reset()
                with pg.proxy.counting() as wire:
                    _run(consumer, batch, work, runs, f"{backend} {case}")
                trips = counter.snapshot() if backend is Backend.DYNAMODB else wire.snapshot()
                opened += trips.get(STARTUP, 0) if backend is Backend.POSTGRES else 0
                found.append(RoundTrips(backend, case, records, trips))
            if effect:
                committed[backend] = ledger_entries(rig, pg, backend) - before
    return found, rounds, opened, committed


def measure_latency(
    rig: Rig, pg: PostgresRig, repetitions: int
) -> tuple[dict[tuple[Backend, StoreCase], list[float]], int]:
    """Seconds per single-record invocation, both backends interleaved case by case, the one
    that goes first alternating; and the PostgreSQL connections opened meanwhile."""
    consumers: dict[tuple[Backend, bool], tuple[Consumer, CountingWork]] = {}
    for backend in BACKENDS:
        for effect in (False, True):
            work = CountingWork()
            consumers[(backend, effect)] = (
                _consumer(rig, pg, backend, work, effect=effect),
                work,
            )
    for consumer, work in consumers.values():
        for _ in range(TIMING_WARMUP):
            _run(consumer, new_batch(1), work, work.runs + 1, "latency warm-up")
    samples: dict[tuple[Backend, StoreCase], list[float]] = {
        (b, c): [] for b in BACKENDS for c in StoreCase
    }
    with pg.proxy.counting() as wire:
        for repetition in range(repetitions):
            order = BACKENDS if repetition % 2 == 0 else BACKENDS[::-1]
            for backend in order:
                plain, plain_work = consumers[(backend, False)]
                batch = new_batch(1)
                samples[(backend, StoreCase.NEW)].append(
                    _timed(plain, batch, plain_work, plain_work.runs + 1)
                )
                samples[(backend, StoreCase.DUPLICATE)].append(
                    _timed(plain, batch, plain_work, plain_work.runs)
                )
                writer, writer_work = consumers[(backend, True)]
                samples[(backend, StoreCase.EFFECT)].append(
                    _timed(writer, new_batch(1), writer_work, writer_work.runs + 1)
                )
    return samples, wire.snapshot().get(STARTUP, 0)


def _timed(consumer: Consumer, batch: dict[str, Any], work: CountingWork, runs: int) -> float:
    started = time.perf_counter()
    _run(consumer, batch, work, runs, "a timed record")
    return time.perf_counter() - started


def postgres_round_trip_s(pg: PostgresRig, calls: int = 60) -> dict[str, float]:
    """Median `SELECT 1` on a warm connection, no injected latency: direct, and through the
    counting proxy (the difference is the proxy's own forwarding)."""
    import psycopg

    def median_of(dsn: str) -> float:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(10):
                conn.execute("SELECT 1")
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                conn.execute("SELECT 1")
                times.append(time.perf_counter() - started)
        return statistics.median(times)

    latency, pg.proxy.latency_s = pg.proxy.latency_s, 0.0
    try:
        return {"direct": median_of(pg.direct_dsn), "through the proxy": median_of(pg.dsn)}
    finally:
        pg.proxy.latency_s = latency


def server_version(pg: PostgresRig) -> str:
    import psycopg

    with psycopg.connect(pg.direct_dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


def measure(rig: Rig, server_dsn: str, settings: Settings) -> StoreResults:
    with postgres_rig(server_dsn, settings.latency_ms / 1000) as pg:
        trips, rounds, opened, committed = count_round_trips(rig, pg, settings.call_records)
        latency, opened_timing = measure_latency(rig, pg, settings.store_repetitions)
        return StoreResults(
            round_trips=trips,
            latency=latency,
            local_round_trip_s=postgres_round_trip_s(pg),
            connections_opened=opened + opened_timing,
            warmup_rounds=rounds,
            server_version=server_version(pg),
            records=settings.call_records,
            repetitions=settings.store_repetitions,
            effects_committed=committed,
        )
