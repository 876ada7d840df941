"""Close the books of a three-step run, from durable state only: the log, the DLQ, the records.

Each step's effect is an execution-log entry of its own (a new sort key every time, detail
kind "step"), so the entries per (key, step) count the executions of that step that took
effect, whatever the lock and the steps did. The verdict (`StepsVerdict`) holds when:

* every planned key has exactly one entry for each of charge, ship and email (none is a lost
  step, two a double one), and its idempotency record is COMPLETED;
* every call to the outside world for a (key, step) carried the same step idempotency key, so
  a provider that deduplicates on it acted once (the calls themselves may repeat: a crash
  inside a step, or a zombie, calls again);
* every message was processed (its key has all three steps) or is in the DLQ with its reason,
  and nothing is left IN_PROGRESS past its lease or FAILED-but-retryable
  (accounting.account, on the keys that finished all three steps).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from exactly_once import Status
from fault_injection import accounting
from fault_injection.run_stores import DynamoRunStore, PostgresRunStore, RunStore
from fault_injection.steps_effects import PROVIDER, STEP
from fault_injection.steps_workload import STEPS
from fault_injection.workload import Plan

if TYPE_CHECKING:
    from exactly_once.stores.protocol import Store

Pair = tuple[str, str]  # (business key, step name)


@dataclass(frozen=True)
class StepEntry:
    """One log entry: a step's effect, or a call to the outside world."""

    key: str
    step: str
    kind: str  # STEP or PROVIDER
    scope: str
    idempotency_key: str | None
    entry: accounting.LedgerEntry


@dataclass
class StepsVerdict(accounting.Verdict):
    """accounting.Verdict per (key, step): `doubles` maps a key to the most executions any of
    its steps had, `missing` holds keys with no step at all."""

    steps_exactly_once: Counter[str] = field(default_factory=Counter)  # step -> keys
    step_doubles: dict[Pair, int] = field(default_factory=dict)  # executions of that step
    incomplete: dict[str, list[str]] = field(default_factory=dict)  # key -> steps never run
    not_completed: list[str] = field(default_factory=list)  # all steps, record not COMPLETED
    provider_calls: int = 0  # calls to the outside world (none: the consumer makes none)
    provider_repeats: int = 0  # (key, step)s whose outside call was made again, same key
    provider_split: dict[Pair, int] = field(default_factory=dict)  # distinct keys sent, > 1

    @property
    def ok(self) -> bool:
        return super().ok and not (self.incomplete or self.not_completed or self.provider_split)


def parse(pk: str, fence: int, detail_text: str, written_at_ms: int) -> StepEntry | None:
    """A log row as a StepEntry; None for a row that is neither kind."""
    try:
        detail = json.loads(detail_text)
    except ValueError:
        return None
    if not isinstance(detail, dict) or detail.get("kind") not in (STEP, PROVIDER):
        return None
    entry = accounting.LedgerEntry(pk, fence, accounting.writer_pid(detail), written_at_ms)
    key = detail.get("idempotency_key")
    return StepEntry(
        pk,
        str(detail.get("step")),
        str(detail["kind"]),
        str(detail.get("scope", "")),
        key if isinstance(key, str) else None,
        entry,
    )


def read_log(store: RunStore) -> list[StepEntry]:
    """Every step and provider entry of the run's log."""
    rows: list[tuple[str, int, str, int]] = []
    if isinstance(store, DynamoRunStore):
        for page in store.ddb.get_paginator("scan").paginate(
            TableName=store.ledger_table, ConsistentRead=True
        ):
            for item in page.get("Items", []):
                rows.append(
                    (
                        item["pk"]["S"],
                        int(item.get("fence", {}).get("N", "0")),
                        str(item.get("detail", {}).get("S", "{}")),
                        int(item.get("written_at_ms", {}).get("N", "0")),
                    )
                )
    elif isinstance(store, PostgresRunStore):
        import psycopg

        with psycopg.connect(store.dsn) as conn:
            query = "SELECT pk, fence, detail, written_at_ms FROM exactly_once.ledger"
            for pk, fence, detail, at_ms in conn.execute(query):
                rows.append((str(pk), int(fence), str(detail), int(at_ms)))
    else:
        raise TypeError(f"no step log reader for {type(store).__name__}")
    return [e for e in (parse(*row) for row in rows) if e is not None]


@contextmanager
def records_of(store: RunStore) -> Iterator[Store]:
    """The layer's own view of the run's idempotency records (on PostgreSQL on a pool of its
    own, closed after: the process-wide one may be a test session's)."""
    if isinstance(store, DynamoRunStore):
        from exactly_once import IdempotencyStore

        yield IdempotencyStore(store.idempotency, client=store.ddb)
    elif isinstance(store, PostgresRunStore):
        from psycopg_pool import ConnectionPool

        from exactly_once.stores.postgres.store import PostgresStore

        pool: Any
        with ConnectionPool(store.dsn, min_size=0, max_size=1, kwargs={"autocommit": True}) as pool:
            yield PostgresStore(store.dsn, pool=pool)
    else:
        raise TypeError(f"no record reader for {type(store).__name__}")


def account(
    plan: Plan,
    sent: dict[int, str],
    store: RunStore,
    dead_letters: list[accounting.DeadLetter],
    left_in_queue: int,
    killed_pids: set[int],
    paused_pids: set[int],
) -> StepsVerdict:
    log = read_log(store)
    effects: dict[Pair, list[accounting.LedgerEntry]] = {}
    calls: dict[Pair, list[str | None]] = {}
    scopes: dict[str, str] = {}
    for e in log:
        if e.kind == STEP:
            effects.setdefault((e.key, e.step), []).append(e.entry)
            scopes[e.key] = e.scope
        else:
            calls.setdefault((e.key, e.step), []).append(e.idempotency_key)
    finished = {k for k in plan.keys if all((k, s) in effects for s in STEPS)}
    # Messages processed / dead-lettered / lost, and the records left behind, as in the
    # orders run, with "took effect" meaning all three steps did.
    base = accounting.account(
        plan,
        sent,
        {k: effects[(k, STEPS[0])] for k in finished},
        dead_letters,
        store.unfinished(),
        left_in_queue,
        killed_pids,
        paused_pids,
    )
    verdict = StepsVerdict(**{f.name: getattr(base, f.name) for f in fields(accounting.Verdict)})
    verdict.exactly_once, verdict.doubles, verdict.double_causes = 0, {}, Counter()
    verdict.missing = set()
    for key in plan.keys:
        counts = {s: len(effects.get((key, s), [])) for s in STEPS}
        if not any(counts.values()):
            verdict.missing.add(key)
            continue
        never = [s for s, n in counts.items() if n == 0]
        if never:
            verdict.incomplete[key] = never
        for step, n in counts.items():
            verdict.steps_exactly_once[step] += n == 1
            if n > 1:
                verdict.step_doubles[(key, step)] = n
                verdict.double_causes[
                    accounting.cause_of(effects[(key, step)], killed_pids, paused_pids)
                ] += 1
        if max(counts.values()) > 1:
            verdict.doubles[key] = max(counts.values())
        elif not never:
            verdict.exactly_once += 1
    with records_of(store) as records:
        for key in sorted(finished):
            record = records.get(scopes[key], key)
            if record is None or record.status is not Status.COMPLETED:
                verdict.not_completed.append(key)
    for pair, sent_keys in calls.items():
        if pair[0] not in plan.keys:
            continue
        verdict.provider_calls += len(sent_keys)
        verdict.provider_repeats += len(sent_keys) > 1
        if len(set(sent_keys)) > 1:
            verdict.provider_split[pair] = len(set(sent_keys))
    return verdict
