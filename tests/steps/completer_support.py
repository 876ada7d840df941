"""A three-step resumable checkout (charge, ship, email) whose steps' effects are counted
durably on either store, and a holder that can be frozen inside a step (a process that died
there, as far as the key can tell, until the test lets it go on as a zombie).

The effect of each step commits with its recovery point: on PostgreSQL a row inserted in
`step.transaction`, on DynamoDB an item added with `step.put` (each run writes an item of its
own, so a second commit shows as a second item). `ran` counts every call of a step's function,
committed or not.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from exactly_once.held_lock import OnceLock
from exactly_once.steps.resumable import Resumable, resumable
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store

STEPS = ("charge", "ship", "email")


class ProviderDown(Exception):
    """The email provider is unavailable: a retryable failure."""


class Books:
    """The steps' committed effects, on the test's backend."""

    def __init__(self, store: Store, request: pytest.FixtureRequest) -> None:
        self.backend = store.backend
        self.name = f"effects_{uuid.uuid4().hex[:8]}"
        if self.backend == "dynamodb":
            self.client = request.getfixturevalue("ddb")
            self.name = request.getfixturevalue("ledger_table")
        else:
            self.dsn = request.getfixturevalue("pg_dsn")
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f"CREATE TABLE {self.name} (order_id text, step text)")

    def record(self, step: Step, order_id: str) -> None:
        if self.backend == "dynamodb":
            item = {
                "pk": {"S": order_id},
                "sk": {"S": f"{step.name}#{uuid.uuid4().hex}"},
                "step": {"S": step.name},
            }
            step.put(self.name, item)
        else:
            step.transaction.execute(
                f"INSERT INTO {self.name} VALUES (%s, %s)",  # noqa: S608
                (order_id, step.name),
            )

    def effects(self, order_id: str) -> Counter[str]:
        if self.backend == "dynamodb":
            got = self.client.query(
                TableName=self.name,
                KeyConditionExpression="pk = :k",
                ExpressionAttributeValues={":k": {"S": order_id}},
                ConsistentRead=True,
            )
            return Counter(item["step"]["S"] for item in got["Items"])
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                f"SELECT step FROM {self.name} WHERE order_id = %s",  # noqa: S608
                (order_id,),
            ).fetchall()
        return Counter(str(row[0]) for row in rows)


class Freeze:
    """Stops the holder that reaches step `at` (before its effect) until `thaw`."""

    def __init__(self, at: str) -> None:
        self.at = at
        self.reached = threading.Event()
        self._thawed = threading.Event()
        self._owner: int | None = None

    def hit(self, name: str) -> None:
        if name == self.at and self._owner is None:
            self._owner = threading.get_ident()  # only the first holder to get here freezes
            self.reached.set()
            self._thawed.wait(60)

    def thaw(self) -> None:
        self._thawed.set()


class Checkout:
    """The resumable and what it did: `ran` counts each step function's calls."""

    def __init__(
        self,
        scope: str,
        books: Books,
        store: Store,
        *,
        freeze: Freeze | None = None,
        failing: set[str] | None = None,
        during: dict[str, Callable[[], Any]] | None = None,
    ) -> None:
        self.books = books
        self.freeze = freeze
        self.failing = failing if failing is not None else set()
        self.during = during or {}
        self.ran: Counter[str] = Counter()
        self.resumable: Resumable[dict[str, str], dict[str, str]] = resumable(
            scope, store=store, lease_s=10
        )(self._checkout)

    def _checkout(self, lock: OnceLock, order: dict[str, str]) -> dict[str, str]:
        done = {"order": order["id"]}
        for name in STEPS:
            done[name] = lock.step(name, self._step(name, order["id"]))
        return done

    def _step(self, name: str, order_id: str) -> Callable[[Step], str]:
        def run(step: Step) -> str:
            self.ran[name] += 1
            if name in self.during:
                self.during.pop(name)()
            if self.freeze is not None:
                self.freeze.hit(name)
            if name in self.failing:
                raise ProviderDown(f"{name}: the provider is down")
            self.books.record(step, order_id)
            return f"{name}-{order_id}-fence-{step.fence}"

        return run


class Holder(threading.Thread):
    """`checkout.run` in a thread of its own; `error` is what it raised, if anything."""

    def __init__(self, run: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._run = run
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._run()
        except BaseException as exc:  # what the holder learns is the test's to check
            self.error = exc


def once_each(counts: Counter[str]) -> bool:
    """Every step's effect committed exactly once, and nothing else."""
    return dict(counts) == dict.fromkeys(STEPS, 1)
