"""Helpers for the steps' fault tests and model: faulty stores of both backends, and a durable
effect per step that commits with the step's recovery point (or not at all).

- DynamoDB: a client of the test's own, whose step writes (UpdateItem without writes,
  TransactWriteItems with them) meet faults through botocore's `before-send` hook: a reply lost
  after the write was applied (botocore retries it), a throttle, or a cancelled transaction
  whose reason is a throttle. The effect is a `step.put` into a ledger table, one item per
  committed run (a fresh sort key each time, so a second commit would show as a second item).
- PostgreSQL: the store's pools wrapped (fault_injection/pg_faults.py), with the step's
  statement (its point and COMMIT) told apart as the kind "step", so a fault can meet exactly
  it: applied and its reply lost ("lose"), or the connection dropped before it ("fail");
  reads ("read") can fail too, for a record unreadable after a lost reply. The effect is a row
  inserted in `step.transaction`, with no unique key, so a second commit would show.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from botocore.httpsession import URLLib3Session

from exactly_once.steps.runner import steps_of
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store
from fault_injection.pg_faults import FaultyConnection, FaultyPool, _FaultyCursor, kind_of
from fault_injection.throttling import error_response, throttle_response
from tests.conftest import FakeClock, make_ddb_client

if TYPE_CHECKING:
    from exactly_once.context import LockedContext

STEP_WRITES = ("UpdateItem", "TransactWriteItems")
ATTEMPTS = 2  # botocore attempts per DynamoDB call: a lost reply is retried once
CANCELLED_BY_THROTTLE = json.dumps(
    {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "message": "Transaction cancelled, please refer cancellation reasons for specific "
        "reasons [ThrottlingError, None] (injected)",
        "CancellationReasons": [
            {"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity"},
            {"Code": "None"},
        ],
    }
).encode("utf-8")


@dataclass
class Faults:
    """What the next step writes meet; each count is spent one request (or statement) at a
    time. `hits` lists what was injected, in order."""

    lose: int = 0  # DynamoDB: applied, reply lost; PostgreSQL: the step's COMMIT ran, reply lost
    throttle: int = 0  # DynamoDB: ProvisionedThroughputExceeded
    cancel: int = 0  # DynamoDB: TransactionCanceled, a ThrottlingError inside
    fail: int = 0  # PostgreSQL: the connection drops before the step's statement is sent
    unreadable: int = 0  # PostgreSQL: reads of the record fail (connection dropped)
    unreadable_after_lose: int = 0  # PostgreSQL: `unreadable`, armed by a lost step reply
    only: str | None = None  # DynamoDB: the one operation the faults meet (None: both)
    hits: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.lose = self.throttle = self.cancel = self.fail = self.unreadable = 0
        self.unreadable_after_lose = 0


# -- DynamoDB ------------------------------------------------------------------------------


def ddb_store(endpoint: str, table: str, clock: FakeClock, faults: Faults, **kw: Any) -> Store:
    """An IdempotencyStore on a client of its own whose step writes meet `faults`."""
    from exactly_once.stores.dynamodb.store import IdempotencyStore

    client = make_ddb_client(endpoint, max_attempts=ATTEMPTS)
    session = URLLib3Session()

    def before_send(request: Any, event_name: str = "", **_: Any) -> Any:
        operation = event_name.rsplit(".", 1)[-1]
        if operation not in STEP_WRITES or faults.only not in (None, operation):
            return None
        if operation == "UpdateItem" and b"step#" not in bytes(request.body or b""):
            return None  # an acquire's, a completion's: not a step's
        if faults.throttle > 0:
            faults.throttle -= 1
            faults.hits.append(f"throttle {operation}")
            return throttle_response(str(request.url))
        if faults.cancel > 0 and operation == "TransactWriteItems":
            faults.cancel -= 1
            faults.hits.append("cancel")
            return error_response(str(request.url), 400, CANCELLED_BY_THROTTLE)
        if faults.lose > 0:
            faults.lose -= 1
            faults.hits.append(f"lose {operation}")
            session.send(request)  # applied; the reply never arrives
            return error_response(str(request.url), 500, b'{"__type": "InternalServerError"}')
        return None

    client.meta.events.register("before-send.dynamodb", before_send)
    kw.setdefault("clock", clock)
    return IdempotencyStore(table, client=client, **kw)


@dataclass
class DdbEffects:
    """A step's durable effect on DynamoDB: an item put with its recovery point."""

    ddb: Any
    table: str

    def write(self, step: Step, holder: LockedContext, tag: str) -> None:
        generation = steps_of(holder).generation
        step.put(
            self.table,
            {
                "pk": {"S": f"{holder.scope}#{holder.key}"},
                "sk": {"S": f"{generation}#{step.position}#{uuid.uuid4().hex}"},
                "fence": {"N": str(step.fence)},
                "tag": {"S": tag},
            },
            new_only=("pk", "sk"),
        )

    def rows(self, scope: str, key: str) -> list[tuple[int, int, int, str]]:
        """(generation, position, fence, tag) of every effect committed for the key."""
        items = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"{scope}#{key}"}},
            ConsistentRead=True,
        )["Items"]
        rows = []
        for item in items:
            generation, position, _run = item["sk"]["S"].split("#")
            rows.append((int(generation), int(position), int(item["fence"]["N"]), item["tag"]["S"]))
        return sorted(rows)


# -- PostgreSQL ----------------------------------------------------------------------------


def step_kind(sql: Any) -> str:
    """kind_of, with the step's own statement (its point and its COMMIT) as "step"."""
    text = sql.decode() if isinstance(sql, bytes) else str(sql)
    if "UPDATE exactly_once.records SET steps" in text:
        return "step"
    return kind_of(sql)


class _StepConnection(FaultyConnection):
    def execute(self, sql: Any, params: Any = None) -> Any:
        return self._apply(step_kind(sql), lambda: self._real.execute(sql, params))

    def cursor(self, **kwargs: Any) -> _FaultyCursor:
        return _StepCursor(self._real.cursor(**kwargs), self)


class _StepCursor(_FaultyCursor):
    def execute(self, sql: Any, params: Any = None) -> _StepCursor:
        self._conn._apply(step_kind(sql), lambda: self._real.execute(sql, params))
        return self


class StepFaultPool(FaultyPool):
    """A FaultyPool whose connections tell the step's statement apart."""

    def connection(self) -> Any:
        from contextlib import contextmanager

        @contextmanager
        def wrapped() -> Any:
            with self.real.connection() as conn:
                yield _StepConnection(conn, self)

        return wrapped()

    def getconn(self) -> _StepConnection:
        return _StepConnection(self.real.getconn(), self)

    def sibling(self, real: Any) -> StepFaultPool:
        other = StepFaultPool(real, self.decide, self.on_fault)
        other.injected, other._lock = self.injected, self._lock
        return other


def pg_store(dsn: str, clock: FakeClock, faults: Faults, **kw: Any) -> Store:
    """A PostgresStore whose step statements and reads meet `faults`."""
    from exactly_once.stores.postgres import connections
    from exactly_once.stores.postgres.store import PostgresStore

    def decide(kind: str) -> str | None:
        if kind == "step" and faults.fail > 0:
            faults.fail -= 1
            faults.hits.append("fail step")
            return "fail"
        if kind == "step" and faults.lose > 0:
            faults.lose -= 1
            faults.hits.append("lose step")
            faults.unreadable, faults.unreadable_after_lose = faults.unreadable_after_lose, 0
            return "lose"
        if kind == "read" and faults.unreadable > 0:
            faults.unreadable -= 1
            faults.hits.append("unreadable")
            return "fail"
        return None

    statements = StepFaultPool(connections.pool(dsn, connections.STATEMENTS), decide)
    kw.setdefault("clock", clock)
    pools: dict[str, Any] = {
        "pool": statements,
        "transaction_pool": statements.sibling(connections.pool(dsn, connections.TRANSACTIONS)),
    }
    steps = getattr(connections, "STEPS", None)  # the steps' own pool, where the store has one
    if steps is not None:
        pools["step_pool"] = statements.sibling(connections.pool(dsn, steps))
    return PostgresStore(dsn, **pools, **kw)


@dataclass
class PgEffects:
    """A step's durable effect on PostgreSQL: a row inserted in `step.transaction`."""

    dsn: str
    table: str = field(default_factory=lambda: f"step_effects_{uuid.uuid4().hex[:8]}")
    _reads: Any = None  # one connection for the test's reads, not one per read

    def create(self) -> PgEffects:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                f"CREATE TABLE {self.table} (id serial PRIMARY KEY, record_id text, "
                "generation bigint, position int, fence bigint, tag text)"
            )
        return self

    def write(self, step: Step, holder: LockedContext, tag: str) -> None:
        generation = steps_of(holder).generation
        step.transaction.execute(
            f"INSERT INTO {self.table} (record_id, generation, position, fence, tag) "  # noqa: S608
            "VALUES (%s, %s, %s, %s, %s)",
            (f"{holder.scope}#{holder.key}", generation, step.position, step.fence, tag),
        )

    def rows(self, scope: str, key: str) -> list[tuple[int, int, int, str]]:
        import psycopg

        if self._reads is None or self._reads.closed:
            self._reads = psycopg.connect(self.dsn, autocommit=True)
        found = self._reads.execute(
            f"SELECT generation, position, fence, tag FROM {self.table} "  # noqa: S608
            "WHERE record_id = %s ORDER BY generation, position, fence, tag",
            (f"{scope}#{key}",),
        ).fetchall()
        return [(int(g), int(p), int(f), str(t)) for g, p, f, t in found]

    def close(self) -> None:
        if self._reads is not None:
            self._reads.close()


class Effects(Protocol):
    def write(self, step: Step, holder: LockedContext, tag: str) -> None: ...

    def rows(self, scope: str, key: str) -> list[tuple[int, int, int, str]]: ...


Maker = Callable[..., Store]
