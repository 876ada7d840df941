"""A three-step business function (charge, ship, email) and the books that count its effects,
on either store, for the steps' entry-point and crash tests.

Two kinds of effect are counted, both durably (a crashed process's count survives it):
- the step's own write, which commits with its recovery point: on PostgreSQL a row inserted in
  `step.transaction`, on DynamoDB an item added with `step.put` (each run writes an item of
  its own, so a second run shows as a second item rather than overwriting the first);
- the provider's log: every call to the outside world, written at once and never rolled back,
  with the step's idempotency key (a provider deduplicates on it).

`record_plain` is the same effect written with the fence off (a plain function that redoes its
work), so the tests can show that the counts would catch a double.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from exactly_once.context import LockedContext
from exactly_once.steps.step import Step

STEPS = ("charge", "ship", "email")


class Books(Protocol):
    """Where a step's effects are written and counted."""

    def record(self, step: Step, order_id: str) -> None:
        """The step's effect, committed with its recovery point."""

    def record_plain(self, order_id: str, name: str) -> None:
        """The same effect committed on its own (no step around it)."""

    def call_provider(self, order_id: str, name: str, idempotency_key: str) -> None:
        """A call to the outside world: logged at once, whatever happens after."""

    def effects(self, order_id: str) -> Counter[str]:
        """How many effects of each step were committed for the order."""

    def provider_calls(self, order_id: str) -> list[tuple[str, str]]:
        """(step, idempotency key) of every provider call made for the order."""

    def describe(self) -> dict[str, str]:
        """What a child process needs to open the same books (`open_books`)."""


@dataclass
class DynamoBooks:
    """A ledger table on DynamoDB Local (pk, sk); provider calls under "provider#<order>"."""

    client: Any
    table: str

    def _item(self, pk: str, name: str, **extra: str) -> dict[str, Any]:
        item = {"pk": {"S": pk}, "sk": {"S": f"{name}#{uuid.uuid4().hex}"}, "step": {"S": name}}
        return {**item, **{k: {"S": v} for k, v in extra.items()}}

    def record(self, step: Step, order_id: str) -> None:
        step.put(self.table, self._item(order_id, step.name, fence=str(step.fence)))

    def record_plain(self, order_id: str, name: str) -> None:
        self.client.put_item(TableName=self.table, Item=self._item(order_id, name))

    def call_provider(self, order_id: str, name: str, idempotency_key: str) -> None:
        item = self._item(f"provider#{order_id}", name, idem=idempotency_key)
        self.client.put_item(TableName=self.table, Item=item)

    def _items(self, pk: str) -> list[dict[str, Any]]:
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :k",
            ExpressionAttributeValues={":k": {"S": pk}},
            ConsistentRead=True,
        )
        return list(got["Items"])

    def effects(self, order_id: str) -> Counter[str]:
        return Counter(item["step"]["S"] for item in self._items(order_id))

    def provider_calls(self, order_id: str) -> list[tuple[str, str]]:
        items = self._items(f"provider#{order_id}")
        return sorted((item["step"]["S"], item["idem"]["S"]) for item in items)

    def describe(self) -> dict[str, str]:
        return {
            "backend": "dynamodb",
            "endpoint": str(self.client.meta.endpoint_url),
            "table": self.table,
        }


@dataclass
class PostgresBooks:
    """Two business tables on the real PostgreSQL server: the steps' rows and the provider's."""

    dsn: str
    table: str = field(default_factory=lambda: f"steps_{uuid.uuid4().hex[:8]}")

    def create(self) -> PostgresBooks:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (order_id text, step text)")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table}_provider "
                "(order_id text, step text, idem text)"
            )
        return self

    def record(self, step: Step, order_id: str) -> None:
        step.transaction.execute(
            f"INSERT INTO {self.table} (order_id, step) VALUES (%s, %s)",  # noqa: S608
            (order_id, step.name),
        )

    def record_plain(self, order_id: str, name: str) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                f"INSERT INTO {self.table} (order_id, step) VALUES (%s, %s)",  # noqa: S608
                (order_id, name),
            )

    def call_provider(self, order_id: str, name: str, idempotency_key: str) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                f"INSERT INTO {self.table}_provider VALUES (%s, %s, %s)",  # noqa: S608
                (order_id, name, idempotency_key),
            )

    def effects(self, order_id: str) -> Counter[str]:
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                f"SELECT step FROM {self.table} WHERE order_id = %s",  # noqa: S608
                (order_id,),
            ).fetchall()
        return Counter(str(row[0]) for row in rows)

    def provider_calls(self, order_id: str) -> list[tuple[str, str]]:
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                f"SELECT step, idem FROM {self.table}_provider WHERE order_id = %s",  # noqa: S608
                (order_id,),
            ).fetchall()
        return sorted((str(step), str(idem)) for step, idem in rows)

    def describe(self) -> dict[str, str]:
        return {"backend": "postgres", "dsn": self.dsn, "table": self.table}


def open_books(described: dict[str, str]) -> Books:
    """The books `describe` named, opened again (in a child process)."""
    if described["backend"] == "postgres":
        return PostgresBooks(described["dsn"], described["table"])
    import boto3

    client = boto3.client("dynamodb", endpoint_url=described["endpoint"], region_name="us-east-1")
    return DynamoBooks(client, described["table"])


class Faults:
    """Failures planned at points of the work ("after:ship", "in:email"), each raised once."""

    def __init__(self, **planned: BaseException | Callable[[], Any]) -> None:
        self.planned = {point.replace("_", ":", 1): what for point, what in planned.items()}

    def hit(self, point: str) -> None:
        what = self.planned.pop(point, None)
        if isinstance(what, BaseException):
            raise what
        if what is not None:
            what()  # a crash: os._exit, in the crash tests' child


def three_steps(
    books: Books,
    ctx: LockedContext,
    order_id: str,
    faults: Faults | None = None,
    names: Sequence[str] = STEPS,
) -> dict[str, str]:
    """The business function: each step calls the provider with its idempotency key and makes
    its durable effect; returns each step's key (read back from its recovery point on a
    resume)."""
    plan = faults or Faults()

    def step_fn(name: str) -> Callable[[Step], dict[str, str]]:
        def run(step: Step) -> dict[str, str]:
            books.call_provider(order_id, name, step.idempotency_key)
            books.record(step, order_id)
            plan.hit(f"in:{name}")
            return {"step": name, "key": step.idempotency_key}

        return run

    done: dict[str, str] = {}
    for name in names:
        done[name] = ctx.step(name, step_fn(name))["key"]
        plan.hit(f"after:{name}")
    return done


def plain_steps(
    books: Books, order_id: str, faults: Faults | None = None, names: Sequence[str] = STEPS
) -> None:
    """The same work with the fence off: every run does every step again."""
    plan = faults or Faults()
    for name in names:
        books.call_provider(order_id, name, f"plain-{name}")
        books.record_plain(order_id, name)
        plan.hit(f"in:{name}")
        plan.hit(f"after:{name}")


def doubles(counts: Counter[str]) -> dict[str, int]:
    """The verdict: steps whose effect was committed more than once."""
    return {name: n for name, n in counts.items() if n > 1}


def once_each(counts: Counter[str], names: Sequence[str] = STEPS) -> bool:
    """Every step's effect exactly once, and nothing else."""
    return dict(counts) == dict.fromkeys(names, 1)
