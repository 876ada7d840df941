"""The checkout example (examples/checkout_steps/) on both stores: a process killed between
two steps, or inside one, and a rerun that completes the order with each effect once.

Each test kills a real process with `os._exit` at one point of the checkout
(tests/examples/checkout_service.py), then runs the example itself (`python -m
examples.checkout_steps`) until the order is checked out: the reruns meet the dead holder's
lease until it ends (2 s), then take the key over and resume after the last finished step.
The books are the fake provider's charges, the shipments table and the outbox.

The one effect that happens twice is the documented limit: a crash inside the email step,
after the mailer (which does not deduplicate) sent and before the step's recovery point was
written, sends the email again. That case also shows that the books see a double.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from examples.checkout_steps.outside import Mailer, PaymentProvider, read_lines
from examples.checkout_steps.shipments import create_dynamodb_table, create_postgres_table
from tests.examples.checkout_service import CRASH_POINTS, CRASHED
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
ORDER = ("o-1001", "4200", "ada@example.com")
TRY_AGAIN = 75


@dataclass
class Books:
    """What the outside world and the shipments table hold for the order."""

    charges: list[dict[str, Any]]
    payment_calls: list[dict[str, Any]]
    shipments: list[str]
    emails: list[dict[str, Any]]


@dataclass
class Shop:
    env: dict[str, str]
    count_shipments: Any

    def books(self) -> Books:
        folder = self.env["CHECKOUT_FOLDER"]
        provider, mailer = PaymentProvider(folder), Mailer(folder)
        return Books(
            read_lines(provider.charges),
            read_lines(provider.calls),
            self.count_shipments(),
            read_lines(mailer.outbox),
        )


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("IDEMPOTENCY_TABLE", "IDEMPOTENCY_DSN")}
    env.update(
        {
            "CHECKOUT_FOLDER": str(tmp_path / "outside"),
            "CHECKOUT_SCOPE": f"checkout-{uuid.uuid4().hex[:8]}",
            "CHECKOUT_LEASE_S": "2",
        }
    )
    return env


@pytest.fixture(params=["dynamodb", "postgres"])
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Shop:
    env = base_env(tmp_path)
    if request.param == "dynamodb":
        local = request.getfixturevalue("dynamodb_local")
        ddb = request.getfixturevalue("ddb")
        table = f"shipments-{uuid.uuid4().hex[:8]}"
        create_dynamodb_table(ddb, table)
        env.update(
            {
                "IDEMPOTENCY_TABLE": request.getfixturevalue("idempotency_table"),
                "SHIPMENTS_TABLE": table,
                "AWS_ENDPOINT_URL_DYNAMODB": local.endpoint,
            }
        )

        def dynamodb_rows() -> list[str]:
            items = ddb.query(
                TableName=table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": ORDER[0]}},
                ConsistentRead=True,
            )["Items"]
            return [item["sk"]["S"].removeprefix("shipment#") for item in items]

        return Shop(env, dynamodb_rows)
    dsn = request.getfixturevalue("pg_dsn")
    schema = f"shop_{uuid.uuid4().hex[:8]}"
    create_postgres_table(dsn, schema)
    env.update({"IDEMPOTENCY_DSN": dsn, "SHIPMENTS_SCHEMA": schema})

    def postgres_rows() -> list[str]:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                sql.SQL("SELECT id FROM {} WHERE order_id = %s ORDER BY id").format(
                    sql.Identifier(schema, "shipments")
                ),
                (ORDER[0],),
            ).fetchall()
        return [f"shp_{row[0]}" for row in rows]

    return Shop(env, postgres_rows)


def run(module: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *ORDER],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def printed(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    line = result.stdout.strip().splitlines()[-1]
    return json.loads(line)  # type: ignore[no-any-return]


def run_until_done(env: dict[str, str]) -> dict[str, Any]:
    """Run the example until it checks the order out (it answers 'busy' while the dead
    holder's lease lasts); returns what the finishing run printed."""
    runs: list[subprocess.CompletedProcess[str]] = []

    def finished() -> dict[str, Any] | None:
        result = run("examples.checkout_steps", env)
        runs.append(result)
        assert result.returncode in (0, TRY_AGAIN), result.stdout + result.stderr
        return printed(result) if result.returncode == 0 else None

    return wait_until(finished, lambda: [r.stdout + r.stderr for r in runs[-2:]], interval_s=0.2)


def test_a_checkout_without_crashes_runs_each_step_once(shop: Shop) -> None:
    done = run_until_done(shop.env)
    assert done["outcome"] == "done"
    books = shop.books()
    assert [c["id"] for c in books.charges] == [done["detail"]["charge"]]
    assert books.shipments == [done["detail"]["shipment"]]
    assert [e["id"] for e in books.emails] == [done["detail"]["email"]]
    # A second run is a duplicate: the stored receipt, nothing run.
    again = run("examples.checkout_steps", shop.env)
    assert again.returncode == 0, again.stderr
    assert printed(again) == {"outcome": "already_done", "detail": done["detail"]}
    assert len(shop.books().payment_calls) == 1


@pytest.mark.parametrize("crash_at", CRASH_POINTS)
def test_a_rerun_after_a_crash_completes_with_each_effect_once(shop: Shop, crash_at: str) -> None:
    crashed = run("tests.examples.checkout_service", {**shop.env, "CRASH_AT": crash_at})
    assert crashed.returncode == CRASHED, crashed.stdout + crashed.stderr
    before = shop.books()

    done = run_until_done(shop.env)
    assert done["outcome"] == "done"
    books = shop.books()

    # Charged once: by the crashed run, whose step either finished (its recovery point gives
    # the charge back) or died after the provider's reply (the rerun sends the same step key,
    # and the provider answers with the first charge).
    assert len(before.charges) == 1
    assert books.charges == before.charges
    assert done["detail"]["charge"] == books.charges[0]["id"]
    calls = [c["idempotency_key"] for c in books.payment_calls]
    assert calls == [books.charges[0]["idempotency_key"]] * (
        2 if crash_at == "inside_charge" else 1
    )

    # One shipment, committed with its step's recovery point: a crash inside the step left
    # nothing behind (the row's transaction, or the Put, never committed).
    assert books.shipments == [done["detail"]["shipment"]]
    if crash_at in ("before_email", "inside_email"):
        assert before.shipments == books.shipments  # the crashed run's, given back
    else:
        assert before.shipments == []

    # The email: once, unless the crash came after the mailer sent and before the step's
    # recovery point (a mailer that does not deduplicate sends it again: the documented limit).
    sent = [e["id"] for e in books.emails]
    if crash_at == "inside_email":
        assert len(before.emails) == 1
        assert sent == [before.emails[0]["id"], done["detail"]["email"]]
    else:
        assert sent == [done["detail"]["email"]]

    # And the order is done: a further run gets the receipt back and runs nothing.
    again = run("examples.checkout_steps", shop.env)
    assert printed(again) == {"outcome": "already_done", "detail": done["detail"]}
    assert shop.books() == books


def test_the_command_says_its_usage_and_needs_a_person_for_a_permanent_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from types import SimpleNamespace

    from exactly_once.errors import PermanentError, StepOrderError
    from examples.checkout_steps.__main__ import cli, main

    assert cli(["--help"], {}) == 2
    assert cli(["o-1", "ten", "a@b"], {"CHECKOUT_FOLDER": "/x"}) == 2
    assert cli(["o-1", "10", "a@b"], {}) == 2
    assert "usage:" in capsys.readouterr().err

    def raising(error: Exception) -> Any:
        def run(order: Any) -> Any:
            raise error

        return SimpleNamespace(run=run)

    assert main(["o-1", "10", "a@b"], raising(StepOrderError("changed"))) == 1
    assert main(["o-1", "10", "a@b"], raising(PermanentError("no"))) == 1
    assert main(["o-1", "10", "a@b"], raising(TimeoutError("later"))) == TRY_AGAIN
