"""The long-lived local stack end to end: up, send, status drains, break, replay, heal, down.

One `eonce up` for the module (the deploy costs ~11 s); `up` and `down` run as the console
script in subprocesses, as a user runs them, the other commands through the CLI runner with
the environment `eonce env` prints. The tests build on each other and run in file order.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from exactly_once import IdempotencyStore
from exactly_once_cli.app import app
from exactly_once_ops.api_client import ApiClient
from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths, UpState
from local_aws.processes import (
    ProcessId,
    descendants,
    session_members,
    stat,
    still_running,
    wait_gone,
)
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
EONCE = ROOT / ".venv" / "bin" / "eonce"
WAIT_S = 180  # generous: these are waits for a condition, never timing assertions


@dataclass
class Up:
    paths: StatePaths
    state: UpState
    env: dict[str, str]  # the process environment plus the exports `up` printed
    output: str

    def client(self, service: str) -> Any:
        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.state.dynamodb_endpoint_url
            if service == "dynamodb"
            else self.state.endpoint_url,
            region_name=self.state.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def outputs(self, name: str) -> str:
        return self.state.outputs[name]


def eonce(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EONCE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def exports(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.strip().startswith("export "):
            key, _, value = line.strip().removeprefix("export ").partition("=")
            found[key] = value
    return found


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    state_dir = tmp_path_factory.mktemp("up-state")
    env = {
        **os.environ,
        STATE_DIR_ENV: str(state_dir),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "COLUMNS": "200",
    }
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "EONCE_STACK"):
        env.pop(key, None)
    started = eonce(env, "up")
    assert started.returncode == 0, started.stdout + started.stderr
    paths = StatePaths(state_dir)
    state = paths.running()
    assert state is not None, started.stdout
    try:
        yield Up(paths, state, {**env, **exports(started.stdout)}, started.stdout)
    finally:
        if paths.holder():  # the down test failed or did not run: leave nothing behind
            eonce(env, "down")


def cli(up: Up, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args), env=up.env)
    assert result.exit_code == code, result.output
    return result.output


def status(up: Up) -> dict[str, dict[str, Any]]:
    document = json.loads(cli(up, "status", "--json"))
    assert document["local"]["pid"] == up.state.pid
    return {c["consumer"]: c for c in document["consumers"]}


def wait_for(up: Up, done: Callable[[dict[str, dict[str, Any]]], bool]) -> dict[str, Any]:
    """Poll `status` until `done` holds; fail with the last status after WAIT_S."""
    seen: list[dict[str, dict[str, Any]]] = []

    def finished() -> dict[str, dict[str, Any]] | None:
        seen.append(status(up))
        return seen[-1] if done(seen[-1]) else None

    return wait_until(
        finished, lambda: json.dumps(seen[-1:], indent=2), bound_s=WAIT_S, interval_s=0.5
    )


def settled(orders: dict[str, Any]) -> bool:
    return bool(orders["queue"]["visible"] == 0 and orders["queue"]["in_flight"] == 0)


def test_up_prints_exports_and_publishes_its_state(up: Up) -> None:
    env = exports(up.output)
    assert env["AWS_ENDPOINT_URL"] == up.state.endpoint_url
    assert env["AWS_ENDPOINT_URL_DYNAMODB"] == up.state.dynamodb_endpoint_url
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
    assert env["AWS_ACCESS_KEY_ID"] == env["AWS_SECRET_ACCESS_KEY"] == "testing"
    assert exports(cli(up, "env")) == env == up.state.environment
    assert up.state.pid == up.paths.holder()
    assert up.paths.stats.is_file()
    # The stack itself says where its tables are (DynamoDB Local, not moto).
    assert up.outputs("LocalDynamoDbEndpoint") == up.state.dynamodb_endpoint_url
    (stack,) = up.client("cloudformation").describe_stacks(StackName=up.state.stack)["Stacks"]
    described = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    assert described["LocalDynamoDbEndpoint"] == up.state.dynamodb_endpoint_url


def test_the_api_is_served_and_named_in_the_state(up: Up) -> None:
    url = up.outputs("PaymentsApiUrl")
    assert f"API          PaymentsApi at {url}" in up.output
    client = ApiClient(url).as_caller("AKIAUPTEST")
    body = {"accountId": "acct-up", "amount": "3.00"}
    first = client.request("POST", "/payments", body=body, key="up-once")
    again = client.request("POST", "/payments", body=body, key="up-once")
    assert first.status == 201
    assert again.replayed
    assert again.body == first.body
    assert (
        client.request("POST", "/payments", body={**body, "amount": "4"}, key="up-once").status
        == 422
    )
    ledger = up.client("dynamodb").scan(TableName=up.outputs("LedgerTableName"))["Items"]
    assert [i["pk"]["S"] for i in ledger if "up-once" in i["pk"]["S"]] == [
        "iam:arn:aws:iam::123456789012:user/AKIAUPTEST|up-once"
    ]


def test_a_second_up_says_one_is_running(up: Up) -> None:
    again = eonce(up.env, "up")
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [
        f"error: a local stack is already up (pid {up.state.pid} at {up.state.endpoint_url}); "
        "`eonce down` stops it"
    ]


def test_100_sent_messages_drain_and_count_as_processed(up: Up) -> None:
    cli(up, "send", "--consumer", "orders", "--count", "100")
    consumers = wait_for(
        up, lambda c: settled(c["orders"]) and c["orders"]["since_start"]["processed"] >= 100
    )
    orders = consumers["orders"]
    assert orders["since_start"] == {"processed": 100, "duplicate": 0, "permanent": 0}
    assert orders["dead_letters"]["visible"] == 0
    assert (orders["in_progress"], orders["failed"]) == (0, 0)
    table = cli(up, "status")  # the human view of the same
    assert "processed" in table
    assert "100" in table


def test_dead_letters_replay_and_heal(up: Up) -> None:
    run = uuid.uuid4().hex[:6]
    store = IdempotencyStore(up.outputs("IdempotencyTableName"), client=up.client("dynamodb"))
    assert store.acquire("orders", f"held-{run}", lease_ms=600_000, owner="w:1").acquired
    cli(up, "send", "--consumer", "orders", "--body", "not json")  # NonJsonBody
    cli(
        up,
        "send",
        "--consumer",
        "orders",
        "--body",
        json.dumps({"orderId": f"neg-{run}", "amount": -1}),
    )
    # A good order that ended up in the DLQ (say, while a bug was deployed): replay heals it.
    dlq = up.outputs("OrdersDeadLetterQueueUrl")
    good = json.dumps({"orderId": f"healed-{run}", "amount": 3})
    up.client("sqs").send_message(QueueUrl=dlq, MessageBody=good)
    broken = wait_for(
        up,
        lambda c: (
            settled(c["orders"])
            and c["orders"]["dead_letters"]["visible"] == 3
            and c["orders"]["since_start"]["permanent"] == 2
        ),  # the stats file trails by a second
    )["orders"]
    assert (broken["in_progress"], broken["failed"]) == (1, 1)  # held, and neg- kept FAILED

    replayed = cli(up, "replay", "copy", "--consumer", "orders", "--limit", "3")
    assert "3" in replayed

    healed = wait_for(
        up,
        lambda c: (
            settled(c["orders"])
            and c["orders"]["since_start"]["processed"] == 101
            and c["orders"]["since_start"]["permanent"] == 4
        ),
    )["orders"]
    assert healed["dead_letters"]["visible"] + healed["dead_letters"]["in_flight"] == 2
    assert healed["failed"] == 1  # a permanent failure stays one, however often replayed
    ledger = up.client("dynamodb").query(
        TableName=up.outputs("LedgerTableName"),
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": f"healed-{run}"}},
    )
    assert ledger["Count"] == 1


def test_a_published_sale_reaches_its_subscriber_and_the_orders_queue_once(up: Up) -> None:
    """`publish`: moto fans each message out to the orders queue and to the subscriber's tap;
    the same sale published again runs nowhere a second time."""
    assert "(moto delivers to subscribed queues; salescounter run here (2 process(es) each))" in (
        up.output
    )
    run = uuid.uuid4().hex[:6]
    published = cli(
        up,
        "publish",
        "--topic",
        "sales",
        "--count",
        "6",
        "--duplicates",
        "0.3",
        "--key-prefix",
        f"up-sale-{run}-",
        "--seed",
        "1",
    )
    assert "published" in published
    table = up.outputs("LedgerTableName")

    def effects() -> list[str] | None:
        items = up.client("dynamodb").scan(TableName=table)["Items"]
        found = sorted(
            i["sk"]["S"].rsplit("#", 1)[0]  # "<scope>#effect#<execution id>"
            for i in items
            if i["pk"]["S"].startswith(f"up-sale-{run}-")
        )
        return found if len(found) >= 8 else None

    def delivered() -> dict[str, Any] | None:
        document = json.loads(cli(up, "status", "--json"))
        (sales,) = document["subscribers"]
        return sales if sales["since_start"]["delivered"] >= 6 else None

    # 4 sales (2 of the 6 publish one again): once under each scope
    assert (
        wait_until(effects, lambda: "no effects", bound_s=WAIT_S)
        == ["orders#effect"] * 4 + ["sales#effect"] * 4
    )
    sales = wait_until(delivered, lambda: "not delivered", bound_s=WAIT_S)
    assert sales["subscriber"] == "salescounter"
    assert sales["since_start"]["processed"] == 4
    assert sales["since_start"]["duplicate"] == 2
    assert sales["dead_letters"]["visible"] == 0
    assert "salescounter (SNS)" in cli(up, "status")


def test_workload_and_report_check_the_ledger(up: Up) -> None:
    sent = cli(
        up, "workload", "--orders", "30", "--payments", "6", "--poison", "1", "--transient", "0"
    )
    assert "recorded run" in sent
    report = cli(up, "report", "--timeout", str(WAIT_S))
    assert "EXACTLY ONCE" in report
    assert "in Orders DLQ" in report


def test_down_stops_every_process_and_removes_the_state(up: Up) -> None:
    pid = up.state.pid
    me = stat(pid)
    assert me is not None
    recorded: set[ProcessId] = {me.id, *(p.id for p in descendants(pid))}
    recorded |= {p.id for p in session_members(pid)}
    commands = {p.command for p in descendants(pid)}
    assert "java" in commands  # DynamoDB Local, beside moto and the pollers (python)
    assert len(recorded) >= 1 + 1 + 1 + 4  # serve, moto, java, 2 workers x 2 functions

    stopped = eonce(up.env, "down")
    assert stopped.returncode == 0, stopped.stderr
    assert "nothing left running" in stopped.stdout
    assert wait_gone(recorded, 30) == []
    assert still_running(recorded) == []
    assert not up.paths.state.exists()
    assert not up.paths.stats.exists()
    assert up.paths.holder() is None
    log = up.paths.serve_log.read_text()
    assert "leaked semaphore" not in log
    assert log.rstrip().endswith("stopped")

    again = eonce(up.env, "down")
    assert (again.returncode, again.stdout.strip()) == (0, "no local stack is up")
