"""Batch-level behaviour: response shape, concurrency, FIFO groups, the deadline, bad events."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, RecordContext, SqsConsumer, sqs_consumer
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.consumer.conftest import Queues, event, lambda_context, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

FIFO_ARN = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"


@pytest.fixture
def build(
    ddb: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str, queues: Queues
) -> Callable[..., SqsConsumer]:
    def make(fn: Callable[[Any, RecordContext], Any], **kwargs: Any) -> SqsConsumer:
        kwargs.setdefault("key", "id")
        return sqs_consumer(
            table_name=idempotency_table,
            scope=scope,
            dead_letter_queue_url=queues.dlq_url,
            dynamodb_client=ddb,
            sqs_client=sqs,
            **kwargs,
        )(fn)

    return make


def assert_shape(response: Any) -> None:
    assert isinstance(response, dict)
    assert list(response) == ["batchItemFailures"]
    for item in response["batchItemFailures"]:
        assert list(item) == ["itemIdentifier"]
        assert isinstance(item["itemIdentifier"], str)


def test_response_lists_exactly_the_failed_message_ids_in_order(
    build: Callable[..., SqsConsumer],
) -> None:
    def odd_fails(body: Any, ctx: RecordContext) -> None:
        if body["n"] % 2:
            raise ValueError("odd")

    handler = build(odd_fails)
    records = [sqs_record({"id": f"r-{n}", "n": n}) for n in range(10)]
    response = handler(event(*records), lambda_context())
    assert_shape(response)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": records[n]["messageId"]} for n in (1, 3, 5, 7, 9)]
    }


def test_empty_batch_has_no_failures(build: Callable[..., SqsConsumer]) -> None:
    assert build(lambda b, c: None)({"Records": []}, lambda_context()) == {"batchItemFailures": []}


def test_all_failed_batch_is_reported_not_raised(build: Callable[..., SqsConsumer]) -> None:
    def always(body: Any, ctx: RecordContext) -> None:
        raise RuntimeError("down")

    records = [sqs_record({"id": f"a-{n}"}) for n in range(4)]
    response = build(always)(event(*records), lambda_context())
    assert len(response["batchItemFailures"]) == 4


@pytest.mark.parametrize(
    "bad_event",
    [None, "text", 42, [], {}, {"Records": "nope"}, {"Records": None}],
)
def test_malformed_events_never_raise(build: Callable[..., SqsConsumer], bad_event: Any) -> None:
    assert build(lambda b, c: None)(bad_event, lambda_context()) == {"batchItemFailures": []}


def test_malformed_records_are_reported_so_lambda_retries_the_batch(
    build: Callable[..., SqsConsumer],
) -> None:
    good = sqs_record({"id": "fine"})
    response = build(lambda b, c: None)(
        {"Records": [good, "junk", {"body": "{}"}]}, lambda_context()
    )
    # an empty identifier is not in the batch, which makes Lambda retry all of it: nothing lost
    assert response == {"batchItemFailures": [{"itemIdentifier": ""}, {"itemIdentifier": ""}]}


def test_misconfiguration_reports_every_record(
    monkeypatch: pytest.MonkeyPatch, sqs: SQSClient
) -> None:
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    handler = sqs_consumer(key="id", scope="x", sqs_client=sqs)(lambda b, c: None)
    records = [sqs_record({"id": "1"}), sqs_record({"id": "2"})]
    response = handler(event(*records), lambda_context())
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}


def test_standard_records_run_concurrently(build: Callable[..., SqsConsumer]) -> None:
    """Ten records meet at a barrier: that only works if all ten run at once."""
    barrier = threading.Barrier(10, timeout=10)

    def meet(body: Any, ctx: RecordContext) -> str:
        barrier.wait()
        return "met"

    handler = build(meet, concurrency=10)
    response = handler(event(*[sqs_record({"id": f"c-{n}"}) for n in range(10)]))
    assert response == {"batchItemFailures": []}
    assert [r.outcome for r in handler.last_results] == [Outcome.PROCESSED] * 10


def test_concurrency_is_bounded(build: Callable[..., SqsConsumer]) -> None:
    """Each record waits until three are running: the pool reaches its bound, never more."""
    live, peak = [0], [0]
    turn = threading.Condition()

    def count(body: Any, ctx: RecordContext) -> None:
        with turn:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
            turn.notify_all()
            turn.wait_for(lambda: live[0] >= 3, timeout=5)
        time.sleep(0.01)
        with turn:
            live[0] -= 1

    build(count, concurrency=3)(event(*[sqs_record({"id": f"b-{n}"}) for n in range(12)]))
    assert peak[0] == 3


def test_16_threads_with_the_same_key_run_the_business_function_once(
    build: Callable[..., SqsConsumer],
) -> None:
    runs: list[str] = []

    def slow(body: Any, ctx: RecordContext) -> str:
        runs.append(ctx.message_id)
        time.sleep(0.2)
        return "done"

    handler = build(slow)
    batches = [
        event(*[sqs_record({"id": "same-key", "v": 1}) for _ in range(3)]) for _ in range(16)
    ]
    with ThreadPoolExecutor(max_workers=16) as pool:
        responses = list(pool.map(lambda e: handler(e, lambda_context()), batches))

    assert len(runs) == 1
    by_id = {r["messageId"]: r for batch in batches for r in batch["Records"]}
    failed = [f["itemIdentifier"] for resp in responses for f in resp["batchItemFailures"]]
    assert failed  # the losers that met the live lease were told to retry
    assert set(failed) <= set(by_id)
    # SQS redelivers them after the lease: now they are duplicates and nothing runs again
    retry = handler(event(*[by_id[m] for m in failed]), lambda_context())
    assert retry == {"batchItemFailures": []}
    assert {r.outcome for r in handler.last_results} == {Outcome.DUPLICATE}
    assert len(runs) == 1


def test_same_key_records_in_one_batch_run_in_turn_so_repeats_are_duplicates(
    build: Callable[..., SqsConsumer],
) -> None:
    runs: list[int] = []
    handler = build(lambda b, c: runs.append(1))
    records = [sqs_record({"id": "k"}) for _ in range(5)] + [sqs_record({"id": "other"})]
    assert handler(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert len(runs) == 2
    assert [r.outcome for r in handler.last_results] == [Outcome.PROCESSED] + [
        Outcome.DUPLICATE
    ] * 4 + [Outcome.PROCESSED]


def test_after_a_failure_the_same_keys_later_records_wait_for_redelivery(
    build: Callable[..., SqsConsumer],
) -> None:
    attempts: list[int] = []

    def flaky(body: Any, ctx: RecordContext) -> None:
        attempts.append(ctx.attempt)
        raise RuntimeError("downstream down")

    handler = build(flaky)
    records = [sqs_record({"id": "same"}) for _ in range(3)]
    response = handler(event(*records), lambda_context())
    assert attempts == [1]  # no immediate retry inside the batch
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
    assert [r.outcome for r in handler.last_results] == [
        Outcome.FAILED,
        Outcome.SKIPPED,
        Outcome.SKIPPED,
    ]


def fifo(body: dict[str, Any], group: str) -> dict[str, Any]:
    return sqs_record(body, arn=FIFO_ARN, group_id=group)


def test_fifo_group_stops_at_its_first_failure_and_other_groups_go_on(
    build: Callable[..., SqsConsumer],
) -> None:
    order: list[str] = []
    lock = threading.Lock()

    def pay(body: Any, ctx: RecordContext) -> None:
        with lock:
            order.append(body["id"])
        if body.get("fail"):
            raise RuntimeError("declined for now")

    records = [
        fifo({"id": "a1"}, "acct-a"),
        fifo({"id": "b1"}, "acct-b"),
        fifo({"id": "a2", "fail": True}, "acct-a"),
        fifo({"id": "b2"}, "acct-b"),
        fifo({"id": "a3"}, "acct-a"),
        fifo({"id": "b3"}, "acct-b"),
    ]
    handler = build(pay)
    response = handler(event(*records), lambda_context())

    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": records[2]["messageId"]},
            {"itemIdentifier": records[4]["messageId"]},
        ]
    }
    assert "a3" not in order  # never ran
    assert [x for x in order if x.startswith("a")] == ["a1", "a2"]
    assert [x for x in order if x.startswith("b")] == ["b1", "b2", "b3"]
    assert handler.last_results[4].outcome is Outcome.SKIPPED


def test_fifo_permanent_failure_goes_to_the_dlq_and_the_group_continues(
    ddb: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str, fifo_queues: Queues
) -> None:
    from exactly_once import PermanentError

    def pay(body: Any, ctx: RecordContext) -> None:
        if body.get("poison"):
            raise PermanentError("unknown account")

    handler = sqs_consumer(
        key="id",
        table_name=idempotency_table,
        scope=scope,
        dead_letter_queue_url=fifo_queues.dlq_url,
        dynamodb_client=ddb,
        sqs_client=sqs,
    )(pay)
    records = [
        fifo({"id": "p1"}, "g"),
        fifo({"id": "p2", "poison": True}, "g"),
        fifo({"id": "p3"}, "g"),
    ]
    assert handler(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert [r.outcome for r in handler.last_results] == [
        Outcome.PROCESSED,
        Outcome.PERMANENT,
        Outcome.PROCESSED,
    ]
    dead = sqs.receive_message(
        QueueUrl=fifo_queues.dlq_url, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    assert len(dead) == 1
    assert dead[0]["Attributes"]["MessageGroupId"] == "g"


def test_records_are_deferred_near_the_deadline(build: Callable[..., SqsConsumer]) -> None:
    ran: list[str] = []
    handler = build(lambda b, c: ran.append(b["id"]), deadline_margin_ms=5_000)
    records = [sqs_record({"id": f"d-{n}"}) for n in range(3)]
    response = handler(event(*records), lambda_context(timeout_ms=4_000))
    assert ran == []
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
    assert [r.outcome for r in handler.last_results] == [Outcome.DEFERRED] * 3


@dataclass
class SpentContext(LocalLambdaContext):
    """A Lambda context whose time left moves only when a record spends it, not with the
    wall clock: on a loaded machine the time to reach the first record is not the test's."""

    left_ms: int = 0

    def get_remaining_time_in_millis(self) -> int:
        return self.left_ms


def test_deadline_stops_starting_records_part_way_through(
    build: Callable[..., SqsConsumer],
) -> None:
    """One at a time: the first record eats the budget, so the rest are not started."""
    ran: list[str] = []
    context = SpentContext("test-consumer", left_ms=1_250)

    def slow(body: Any, ctx: RecordContext) -> None:
        ran.append(body["id"])
        context.left_ms -= 300  # 950 ms left: under the 1 s margin

    handler = build(slow, concurrency=1, deadline_margin_ms=1_000)
    records = [sqs_record({"id": f"e-{n}"}) for n in range(3)]
    response = handler(event(*records), context)
    assert ran == ["e-0"]
    assert response == {
        "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records[1:]]
    }


def test_fifo_deferral_skips_the_rest_of_the_group(build: Callable[..., SqsConsumer]) -> None:
    handler = build(lambda b, c: None, deadline_margin_ms=5_000)
    records = [fifo({"id": "f1"}, "g"), fifo({"id": "f2"}, "g")]
    handler(event(*records), lambda_context(timeout_ms=1_000))
    assert [r.outcome for r in handler.last_results] == [Outcome.DEFERRED, Outcome.SKIPPED]


def test_metrics_are_emitted_per_outcome(
    build: Callable[..., SqsConsumer], capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    handler = build(lambda b, c: None)
    capsys.readouterr()
    handler(event(sqs_record({"id": "m1"}), sqs_record({"id": "m1"}), sqs_record("x")))
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    batch = [doc for doc in emf if "consumer" in doc]
    assert len(batch) == 1  # one document per batch for the outcomes
    names = {m["Name"] for m in batch[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert "Processed" in names
    assert "Permanent" in names
    assert batch[0]["Processed"] == [1.0]
    # and one per lock event, at once: one lock taken (m1), one outcome written
    lock_events = [
        (doc["scope"], doc.get("Started"), doc.get("Finished")) for doc in emf if "scope" in doc
    ]
    scope = batch[0]["consumer"]
    assert sorted(lock_events, key=str) == sorted(
        [(scope, [1.0], None), (scope, None, [1.0])], key=str
    )


def test_default_margin_scales_with_short_timeouts(build: Callable[..., SqsConsumer]) -> None:
    """Lambda's default timeout is 3 s: a fixed 5 s margin would defer every record."""
    ran: list[str] = []
    handler = build(lambda b, c: ran.append(b["id"]))
    handler(event(sqs_record({"id": "short-1"})), lambda_context(timeout_ms=3_000))
    assert ran == ["short-1"]


@pytest.mark.parametrize(
    ("budget_ms", "margin_ms"), [(3_000, 600.0), (1_000, 500.0), (900_000, 5_000.0)]
)
def test_default_margin_is_a_fifth_of_the_budget_within_bounds(
    budget_ms: float, margin_ms: float
) -> None:
    from exactly_once.sqs.config import ConsumerConfig

    config = ConsumerConfig(table_name="t", scope="s")
    assert config.margin_for(budget_ms) == margin_ms
    assert ConsumerConfig(table_name="t", scope="s", deadline_margin_ms=42).margin_for(1) == 42


def test_fifo_record_with_malformed_attributes_is_dead_lettered_not_raised(
    build: Callable[..., SqsConsumer],
) -> None:
    """Found by the fuzz test: `attributes` that is not a map once raised out of the handler."""
    record = {"messageId": "m1", "body": "{}", "attributes": "x", "eventSourceARN": FIFO_ARN}
    handler = build(lambda b, c: None)
    assert handler({"Records": [record]}, lambda_context()) == {"batchItemFailures": []}
    assert [r.outcome for r in handler.last_results] == [Outcome.PERMANENT]  # no key: to the DLQ
