"""End to end on the local stack: deploy the CDK app, poll, send, publish, drain, check the ledger.

One stack per module (the deploy costs ~15 s); the CLI commands run against it too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from exactly_once import ErrorInfo, IdempotencyStore
from exactly_once_cli.app import app
from local_aws.api_server import ApiServer
from local_aws.api_workload import ApiWorkload, run_api_workload, summary
from local_aws.demo import Workload
from local_aws.demo_report import DemoReport, build_report
from local_aws.demo_workload import SentWorkload, send_workload
from local_aws.local_stack import LocalStack
from local_aws.lock_off import LOCK_OFF_ENV
from local_aws.poller import Poller, wait_until_drained
from local_aws.sns_report import build_topic_report, verdict
from local_aws.sns_worker import SnsDelivery
from local_aws.sns_workload import TopicWorkload, publish_topic_workload, topic_receivers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(context={"stackName": "E2e"}) as running:
        yield running


def test_what_runs_is_read_from_the_deployment(stack: LocalStack) -> None:
    """The functions, their code and wiring come from the deployed stack and its assembly
    (local_aws.cloud_assembly), not from this repository's registries."""
    assert stack.stack_name == "E2e"
    assert stack.deployment is not None
    assembly = stack.deployment.assembly_dir.resolve()
    consumers, apis = stack.bindings(), stack.api_bindings()
    assert [(b.consumer, b.queue_url) for b in consumers] == [
        ("Orders", stack.outputs["OrdersQueueUrl"]),
        ("Payments", stack.outputs["PaymentsQueueUrl"]),
    ]
    assert [(b.api, b.routes) for b in apis] == [("PaymentsApi", (("POST", "/payments"),))]
    # the staged copies of the code the stack was deployed from
    for source_dir in [b.source_dir for b in consumers] + [b.source_dir for b in apis]:
        assert Path(source_dir).is_relative_to(assembly)
        assert (Path(source_dir) / "handler.py").is_file()
    sales = stack.app.topic("Sales")
    assert (sales.queues, sales.subscribers) == (("Orders",), ("SalesCounter",))


def run_queue_workload(
    stack: LocalStack, env: dict[str, str], workload: Workload, log_dir: Path
) -> tuple[SentWorkload, DemoReport]:
    """`make run`'s queue part: send the workload, let the pollers (run with `env`) drain the
    queues, stop them so every batch's counts are in, then read the DLQs and the ledger."""
    sqs = stack.sqs()
    with Poller(stack.bindings(), env, workers=2, log_dir=log_dir) as poller:
        sent = send_workload(sqs, stack.outputs, workload)
        urls = [stack.outputs[f"{name}QueueUrl"] for name in sent.sent]
        drained = wait_until_drained(sqs, urls, timeout_s=180)
        poller.stop()
        report = build_report(
            sqs,
            stack.ledger(),
            stack.outputs,
            sent,
            totals=poller.totals(),
            drained=drained,
            elapsed_s=0,
        )
    return sent, report


def test_200_messages_with_duplicates_and_poison_take_effect_exactly_once(
    stack: LocalStack, tmp_path: Path
) -> None:
    workload = Workload(
        orders=200, payments=20, duplicate_ratio=0.3, poison=1, transient_ratio=0.0, work_ms=5
    )
    _, report = run_queue_workload(stack, stack.aws_environment, workload, tmp_path)

    assert report.drained
    assert report.sent == {"Orders": 200, "Payments": 20}
    assert report.ledger.expected == 200 - 60 - 1 + 20 - 6 - 1
    assert report.ledger.double_effects == {}
    assert report.ledger.missing == set()
    assert report.ledger.executed_once == report.ledger.expected
    assert report.dead_letters == {"Orders": {"NonJsonBody": 1}, "Payments": {"PermanentError": 1}}
    assert report.totals is not None
    assert report.totals["processed"] == report.ledger.expected
    assert report.totals.get("handler_crashes", 0) == 0
    assert stack.outputs["LocalDynamoDbEndpoint"] == stack.dynamodb.endpoint


def cli(stack: LocalStack, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    for key, value in stack.aws_environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("COLUMNS", "200")  # rich would fold long ids in an 80-column terminal
    before = dict(os.environ)
    try:
        result = CliRunner().invoke(app, list(args))
    finally:
        # `invoke` gives the handler the deployed function's environment in this process
        # (SNS_ENVELOPE, IDEMPOTENCY_TABLE, ...): later tests must not inherit it.
        os.environ.clear()
        os.environ.update(before)
    assert result.exit_code == 0, result.output
    return result.output


def synthesized_here(stack: LocalStack, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work in `folder` as after `cdk synth` there: ./cdk.out is the assembly the stack was
    deployed from, where `invoke` finds each function's code (as for any app)."""
    assert stack.deployment is not None
    (folder / "cdk.out").symlink_to(stack.deployment.assembly_dir, target_is_directory=True)
    monkeypatch.chdir(folder)


def test_invoke_runs_the_deployed_function_locally_with_a_sample_event(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    synthesized_here(stack, tmp_path, monkeypatch)
    event = str(ROOT / "events" / "orders-batch-duplicates.json")
    output = cli(stack, monkeypatch, "invoke", "orders", "--event", event, "--stack", "E2e")
    response = json.loads(output[output.rindex('{\n  "batchItemFailures"') :])
    assert response == {"batchItemFailures": []}
    assert "processed" in output
    assert "duplicate" in output or "in_progress" in output


def test_locks_lists_and_resets_failed_records(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = IdempotencyStore(stack.outputs["IdempotencyTableName"], client=stack.ddb())
    got = store.acquire("orders", "stuck-1", lease_ms=-1, owner="crashed:req")
    assert got.acquired
    output = cli(stack, monkeypatch, "locks", "list", "--stuck-only", "--stack", "E2e")
    assert "orders#stuck-1" in output
    assert "crashed:req" in output
    shown = cli(stack, monkeypatch, "locks", "show", "orders", "stuck-1", "--stack", "E2e")
    assert '"status": "IN_PROGRESS"' in shown

    lock = store.acquire("orders", "failed-1", lease_ms=60_000, owner="x:y").lock
    assert lock is not None
    store.fail(lock, ErrorInfo("PermanentError", "bad data", retryable=False))
    assert "failed-1" in cli(
        stack, monkeypatch, "locks", "list", "--status", "failed", "--stack", "E2e"
    )
    cli(stack, monkeypatch, "locks", "reset", "orders", "failed-1", "--stack", "E2e")
    assert store.acquire("orders", "failed-1", lease_ms=1_000, owner="x:z").acquired


def test_the_deployed_api_serves_idempotent_requests_through_the_local_gateway(
    stack: LocalStack, tmp_path: Path
) -> None:
    """`make run`'s API part: concurrent clients per key, reused keys, a missing key; each
    key's payment is in the ledger once and every client of a key got the same body."""
    (binding,) = stack.api_bindings()
    assert binding.routes == (("POST", "/payments"),)
    assert binding.environment["API_SCOPE"] == "payments-api"
    with ApiServer(binding, stack.aws_environment, tmp_path / "api.log") as server:
        report = run_api_workload(
            server.endpoint,
            stack.ledger(),
            ApiWorkload(payments=12, clients_per_key=4, reused=2, transient_ratio=0.25, seed=3),
        )
    assert summary(report) | {"elapsed_s": 0} == summary(report) | {
        "elapsed_s": 0,
        "inconsistent_keys": [],
        "reused_refused": 2,
        "missing_key_refused": True,
        "ok": True,
    }
    assert report.ledger is not None
    assert report.ledger.executed_once == report.ledger.expected == 12
    assert report.statuses[201] == 12 * 4  # every client ends with the payment's response
    assert report.replays == 12 * 4 - 12  # ... of which one per key ran it


def test_the_topic_reaches_its_subscriber_and_the_orders_queue_exactly_once(
    stack: LocalStack, tmp_path: Path
) -> None:
    """`make run`'s topic part: the same sale published twice and the same SNS message delivered
    twice, to the Lambda subscriber (in-process, with Lambda's retries) and, through moto's
    SQS subscription, to the orders consumer; each sale is in the ledger once per scope."""
    subscribers = stack.subscriber_bindings()
    (sales,) = subscribers
    assert sales.subscriber == "SalesCounter"
    assert sales.environment["SUBSCRIBER_SCOPE"] == "sales"
    assert sales.dead_letter_queue_url == stack.outputs["SalesCounterDeadLetterQueueUrl"]
    assert sales.retry.retries == 2
    # moto cannot run the function: the tap took the Lambda subscription's place
    sns = stack.client("sns")
    protocols = [
        s["Protocol"]
        for s in sns.list_subscriptions_by_topic(TopicArn=stack.outputs["SalesTopicArn"])[
            "Subscriptions"
        ]
    ]
    assert sorted(protocols) == ["sqs", "sqs"]  # the orders queue and the tap
    spec = stack.app.topic("Sales")
    workload = TopicWorkload(sales=30, redeliveries=4, transient_ratio=0.1, work_ms=5, seed=5)
    env = stack.aws_environment
    with (
        Poller(stack.bindings(), env, workers=2, log_dir=tmp_path) as poller,
        SnsDelivery(subscribers, env, workers=2, log_dir=tmp_path) as delivery,
    ):
        receivers = topic_receivers(spec, subscribers, poller.bindings, stack.outputs)
        assert [(r.name, r.kind, r.scope) for r in receivers] == [
            ("SalesCounter", "subscriber", "sales"),
            ("Orders", "queue", "orders"),
        ]
        sent = publish_topic_workload(
            sns, stack.sqs(), "Sales", stack.outputs["SalesTopicArn"], receivers, workload
        )
        urls = [r.delivery_url for r in receivers]
        drained = wait_until_drained(stack.sqs(), urls, timeout_s=180)
        delivery.stop()
        poller.stop()
        counts = {**poller.totals_by_consumer(), **delivery.totals_by_subscriber()}
        report = build_topic_report(
            stack.sqs(),
            stack.ledger(),
            sent,
            counts={k: dict(v) for k, v in counts.items()},
            drained=drained,
            elapsed_s=0,
        )

    assert (sent.published, sent.duplicates, sent.poison, sent.redelivered) == (30, 8, 1, 4)
    assert report.ok, verdict(report)
    assert verdict(report).startswith("TOPIC EXACTLY ONCE: 21/21 keys executed once")
    by_name = {r.receiver.name: r for r in report.receivers}
    subscriber = by_name["SalesCounter"]
    assert subscriber.counts is not None
    assert subscriber.counts["delivered"] == 30 + 4
    assert subscriber.counts["processed"] == 21
    assert subscriber.counts["dead_lettered"] == 0  # nothing failed after its retries
    assert subscriber.counts["malformed"] == 0
    assert list(subscriber.dead_letters.values()) == [1]  # the poison, by the handler
    assert by_name["Orders"].ledger.executed_once == 21
    assert list(by_name["Orders"].dead_letters) == ["NonJsonBody"]


def test_publish_and_invoke_a_topic_subscriber_through_the_cli(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    synthesized_here(stack, tmp_path, monkeypatch)
    published = cli(
        stack,
        monkeypatch,
        "publish",
        "--topic",
        "sales",
        "--body",
        '{"orderId": "cli-1"}',
        "--stack",
        "E2e",
    )
    assert "published" in published
    event = str(ROOT / "events" / "sns-sale.json")
    first = cli(stack, monkeypatch, "invoke", "salescounter", "-e", event, "--stack", "E2e")
    again = cli(stack, monkeypatch, "invoke", "salescounter", "-e", event, "--stack", "E2e")
    assert " processed " in first
    assert " duplicate " in again  # the same SNS message delivered twice
    ledger = stack.ddb().query(
        TableName=stack.outputs["LedgerTableName"],
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": "o-5001"}},
    )["Items"]
    [entry] = ledger  # one execution, logged with an id of its own
    assert entry["sk"]["S"].startswith("sales#effect#")


# -- the verdicts can fail ------------------------------------------------------------------
# Each verdict above counts executions per key from the functions' execution log. Run with the
# idempotency lock off (local_aws.lock_off, the harness's self-test: every delivery acquires a
# record of its own), the same harness must see the duplicates executed again and fail.


def lock_off_environment(stack: LocalStack) -> dict[str, str]:
    return {**stack.aws_environment, LOCK_OFF_ENV: "1"}


def test_with_the_lock_off_the_queue_verdict_fails(stack: LocalStack, tmp_path: Path) -> None:
    workload = Workload(
        orders=30, payments=10, duplicate_ratio=0.3, poison=0, transient_ratio=0.0, work_ms=5
    )
    sent, report = run_queue_workload(stack, lock_off_environment(stack), workload, tmp_path)

    assert report.drained
    assert not report.ok
    doubles = report.ledger.double_effects
    assert doubles
    assert set(doubles) <= set(sent.expected_keys)
    # every repeated message ran again: its key's executions are its sends
    assert sum(n - 1 for n in doubles.values()) >= sent.duplicates
    assert report.ledger.missing == set()


def test_with_the_lock_off_the_api_verdict_fails(stack: LocalStack, tmp_path: Path) -> None:
    (binding,) = stack.api_bindings()
    env = lock_off_environment(stack)
    with ApiServer(binding, env, tmp_path / "api.log") as server:
        report = run_api_workload(
            server.endpoint,
            stack.ledger(),
            ApiWorkload(payments=6, clients_per_key=3, reused=0, transient_ratio=0.0, seed=3),
        )
    assert not report.ok
    assert report.ledger is not None
    assert report.ledger.double_effects  # concurrent clients of a key each ran the payment
    assert report.ledger.missing == set()


def test_with_the_lock_off_the_topic_verdict_fails(stack: LocalStack, tmp_path: Path) -> None:
    subscribers = stack.subscriber_bindings()
    spec = stack.app.topic("Sales")
    workload = TopicWorkload(
        sales=12, redeliveries=3, poison=0, transient_ratio=0.0, work_ms=5, seed=9
    )
    env = lock_off_environment(stack)
    with (
        Poller(stack.bindings(), env, workers=2, log_dir=tmp_path) as poller,
        SnsDelivery(subscribers, env, workers=2, log_dir=tmp_path) as delivery,
    ):
        receivers = topic_receivers(spec, subscribers, poller.bindings, stack.outputs)
        sns = stack.client("sns")
        sent = publish_topic_workload(
            sns, stack.sqs(), "Sales", stack.outputs["SalesTopicArn"], receivers, workload
        )
        drained = wait_until_drained(
            stack.sqs(), [r.delivery_url for r in receivers], timeout_s=180
        )
        delivery.stop()
        poller.stop()
        report = build_topic_report(
            stack.sqs(), stack.ledger(), sent, counts=None, drained=drained, elapsed_s=0
        )

    assert not report.ok
    assert verdict(report).startswith("TOPIC CHECK FAILED")
    for receiver in report.receivers:  # the subscriber and the queue: each ran repeats again
        assert receiver.ledger.double_effects, receiver.receiver.name
        assert receiver.ledger.missing == set()
