"""The stream consumer on DynamoDB Local: order per shard and partition, where the response
resumes, poison routing, giving up, and redelivery from the checkpoint as Lambda does it."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, Outcome, PermanentError, RecordContext
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.streams.conftest import MakeStreamConsumer, dead_letters, reason_of
from tests.streams.stream_events import (
    dynamodb_record,
    kafka_event,
    kafka_record,
    kinesis_record,
    records_event,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


def context() -> LocalLambdaContext:
    return LocalLambdaContext("stream-consumer", timeout_s=60)


def resume(records: list[dict[str, Any]], response: dict[str, Any]) -> list[dict[str, Any]]:
    """What Lambda delivers next from one shard: everything from the lowest failure named."""
    named = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    for index, record in enumerate(records):
        if record["kinesis"]["sequenceNumber"] in named:
            return records[index:]
    return []


class Flaky:
    """A handler that records each run in order and fails the given orders' first N runs."""

    def __init__(self, fail: dict[str, int] | None = None) -> None:
        self.fail = dict(fail or {})
        self.runs: list[str] = []

    def __call__(self, payload: Any, ctx: RecordContext) -> dict[str, Any]:
        order = str(payload["orderId"])
        if self.fail.get(order, 0) > 0:
            self.fail[order] -= 1
            raise RuntimeError(f"transient failure of {order}")
        self.runs.append(order)
        return {"order": order}


def test_a_shard_runs_in_order_and_a_clean_batch_checkpoints_at_its_end(
    build: MakeStreamConsumer,
) -> None:
    handler = Flaky()
    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(12)]
    response = consumer(records_event(*records), context())
    assert response == {"batchItemFailures": []}
    assert handler.runs == [f"o{n}" for n in range(12)]
    assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED] * 12


def test_a_failure_stops_its_shard_and_the_response_names_it_so_nothing_is_skipped(
    build: MakeStreamConsumer,
) -> None:
    handler = Flaky({"o3": 2})
    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(6)]
    third_seq = records[3]["kinesis"]["sequenceNumber"]
    first = consumer(records_event(*records), context())
    assert first == {"batchItemFailures": [{"itemIdentifier": third_seq}]}
    assert handler.runs == ["o0", "o1", "o2"]  # o4 and o5 did not overtake o3
    outcomes = [r.outcome for r in consumer.last_results]
    assert outcomes == [Outcome.PROCESSED] * 3 + [Outcome.FAILED] + [Outcome.SKIPPED] * 2

    pending = resume(records, first)
    second = consumer(records_event(*pending), context())
    assert second["batchItemFailures"] == [{"itemIdentifier": third_seq}]
    third = consumer(records_event(*resume(records, second)), context())
    assert third == {"batchItemFailures": []}
    assert handler.runs == [f"o{n}" for n in range(6)]  # each once, in order


def test_a_redelivered_batch_and_a_producers_second_put_run_nothing_twice(
    build: MakeStreamConsumer,
) -> None:
    handler = Flaky()
    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n % 4}"}, n) for n in range(8)]  # puts twice
    assert consumer(records_event(*records), context()) == {"batchItemFailures": []}
    assert consumer(records_event(*records), context()) == {"batchItemFailures": []}
    assert handler.runs == ["o0", "o1", "o2", "o3"]
    assert {r.outcome for r in consumer.last_results} == {Outcome.DUPLICATE}


def test_a_bisected_batch_after_a_crash_runs_each_record_once(build: MakeStreamConsumer) -> None:
    """Lambda splits a batch whose invocation crashed and sends each half: the half that had
    already run meets COMPLETED records."""
    handler = Flaky()
    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(10)]
    consumer(records_event(*records[:7]), context())  # ran these, then "crashed"
    assert consumer(records_event(*records[:5]), context()) == {"batchItemFailures": []}
    assert consumer(records_event(*records[5:]), context()) == {"batchItemFailures": []}
    assert handler.runs == [f"o{n}" for n in range(10)]


def test_poison_goes_to_the_dlq_with_its_reason_and_data_and_the_shard_moves_on(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    def handler(payload: Any, ctx: RecordContext) -> None:
        if payload.get("amount", 0) < 0:
            raise PermanentError("amount must not be negative")

    consumer = build(handler)
    not_utf8 = b"\xff\xfe order"
    records = [
        kinesis_record(None, 0, raw=b"not json {"),
        kinesis_record(None, 1, raw=not_utf8),
        kinesis_record({"other": 1}, 2),
        kinesis_record({"orderId": "neg", "amount": -1}, 3),
        kinesis_record(None, 4, raw=b"[" * 100_000 + b"]" * 100_000),
        kinesis_record({"orderId": "fine", "amount": 1}, 5),
    ]
    assert consumer(records_event(*records), context()) == {"batchItemFailures": []}
    outcomes = [r.outcome for r in consumer.last_results]
    assert outcomes == [Outcome.PERMANENT] * 5 + [Outcome.PROCESSED]
    letters = dead_letters(sqs, dlq_url)
    reasons = sorted(reason_of(letter) for letter in letters)
    assert len(letters) == 5
    assert any("not JSON" in r for r in reasons)
    assert any("not UTF-8" in r for r in reasons)
    assert any("MissingKey" in r for r in reasons)
    assert any("amount must not be negative" in r for r in reasons)
    assert any("nested too deeply" in r for r in reasons)
    bodies = {letter["body"] for letter in letters}
    assert base64.b64encode(not_utf8).decode() in bodies  # the data is kept, not dropped


def test_a_record_failing_max_attempts_times_is_given_up_to_the_dlq(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    handler = Flaky({"o1": 99})
    consumer = build(handler, max_attempts=3)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(3)]
    pending = records
    responses = []
    while pending:
        response = consumer(records_event(*pending), context())
        responses.append(response)
        pending = resume(records, response)
    assert len(responses) == 3  # attempts 1 and 2 fail and stop the shard; 3 gives up
    assert handler.runs == ["o0", "o2"]
    (letter,) = dead_letters(sqs, dlq_url)
    assert "gave up after 3 attempts" in reason_of(letter)
    assert "transient failure of o1" in reason_of(letter)


def test_a_record_without_a_sequence_number_fails_the_whole_batch(
    build: MakeStreamConsumer,
) -> None:
    handler = Flaky()
    consumer = build(handler)
    broken = kinesis_record({"orderId": "x"}, 1)
    del broken["kinesis"]["sequenceNumber"]
    records = [kinesis_record({"orderId": "a"}, 0), broken, kinesis_record({"orderId": "b"}, 2)]
    response = consumer(records_event(*records), context())
    assert response == {"batchItemFailures": [{"itemIdentifier": ""}]}  # whole batch again
    assert handler.runs == ["a"]


def test_not_a_stream_event_is_logged_and_answered_empty(build: MakeStreamConsumer) -> None:
    consumer = build(Flaky())
    assert consumer({"hello": "world"}, context()) == {"batchItemFailures": []}
    assert consumer([1, 2], context()) == {"batchItemFailures": []}


def test_dynamodb_streams_keys_come_from_the_new_image_or_the_old_one_on_remove(
    build: MakeStreamConsumer,
) -> None:
    seen: list[Any] = []

    def handler(payload: Any, ctx: RecordContext) -> None:
        seen.append((ctx.key, payload))

    consumer = build(handler, key="order.id")
    image = {
        "order": {"M": {"id": {"S": "o-1"}, "total": {"N": "12.5"}, "qty": {"N": "3"}}},
        "tags": {"SS": ["a", "b"]},
        "gift": {"BOOL": True},
        "note": {"NULL": True},
        "blob": {"B": "AAEC"},
    }
    removed = {"order": {"M": {"id": {"S": "o-2"}}}}
    records = [
        dynamodb_record(image, 0),
        dynamodb_record(None, 1, event_name="REMOVE", old_image=removed),
    ]
    assert consumer(records_event(*records), context()) == {"batchItemFailures": []}
    assert seen[0] == (
        "o-1",
        {
            "order": {"id": "o-1", "total": 12.5, "qty": 3},
            "tags": ["a", "b"],
            "gift": True,
            "note": None,
            "blob": "AAEC",
        },
    )
    assert seen[1][0] == "o-2"


def test_dynamodb_streams_failure_names_its_sequence_number_and_bad_images_are_poison(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    handler = Flaky({"o2": 1})
    consumer = build(handler)
    records = [
        dynamodb_record({"orderId": {"S": "o0"}}, 0),
        dynamodb_record({"orderId": {"X": "forged"}}, 1),
        dynamodb_record({"orderId": {"N": "1e999"}}, 2),
        dynamodb_record({"orderId": {"S": "o2"}}, 3),
        dynamodb_record({"orderId": {"S": "o3"}}, 4),
    ]
    response = consumer(records_event(*records), context())
    sequence = records[3]["dynamodb"]["SequenceNumber"]
    assert response == {"batchItemFailures": [{"itemIdentifier": sequence}]}
    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PROCESSED,
        Outcome.PERMANENT,
        Outcome.PERMANENT,
        Outcome.FAILED,
        Outcome.SKIPPED,
    ]
    assert all("not DynamoDB JSON" in reason_of(x) for x in dead_letters(sqs, dlq_url))


def test_kafka_partitions_stop_on_their_own_and_the_response_names_topic_partition_offset(
    build: MakeStreamConsumer,
) -> None:
    handler = Flaky({"p0-1": 1})
    consumer = build(handler)
    records = [
        kafka_record({"orderId": f"p{p}-{n}"}, 100 + n, partition=p)
        for p in (0, 1)
        for n in range(4)
    ]
    response = consumer(kafka_event(*records), context())
    assert response == {
        "batchItemFailures": [{"itemIdentifier": {"partition": "orders-0", "offset": 101}}]
    }
    assert [o for o in handler.runs if o.startswith("p0")] == ["p0-0"]
    assert [o for o in handler.runs if o.startswith("p1")] == [f"p1-{n}" for n in range(4)]


def test_kafka_keys_from_the_record_key_or_a_header_and_self_managed_events(
    build: MakeStreamConsumer,
) -> None:
    seen: list[str] = []

    def handler(payload: Any, ctx: RecordContext) -> None:
        seen.append(ctx.key)

    by_key = build(handler, key="attribute:partition-key")
    records = [kafka_record({"n": 1}, 7, key=b"customer-9")]
    assert by_key(kafka_event(*records, self_managed=True), context()) == {"batchItemFailures": []}
    by_header = build(handler, key="attribute:order-id")
    records = [kafka_record({"n": 1}, 8, headers={"order-id": b"o-77"})]
    assert by_header(kafka_event(*records), context()) == {"batchItemFailures": []}
    by_position = build(handler, key=None)
    assert by_position(kafka_event(kafka_record({"n": 1}, 9)), context()) == {
        "batchItemFailures": []
    }
    assert seen == ["customer-9", "o-77", "orders-0:9"]


def test_a_record_held_by_a_dead_invocation_waits_for_its_lease_and_is_taken_over(
    build: MakeStreamConsumer, store: IdempotencyStore, scope: str
) -> None:
    """A stream record cannot be hidden like a queue message, and the mapping retries at once:
    the consumer waits out a lease that ends unrenewed within its time and takes the key over
    in the same invocation, rather than spending one of the mapping's attempts on the same
    IN_PROGRESS answer."""
    assert store.acquire(scope, "o1", lease_ms=1_500, owner="timed-out").acquired
    handler = Flaky()
    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(3)]
    assert consumer(records_event(*records), context()) == {"batchItemFailures": []}
    assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED] * 3
    assert [r.takeover for r in consumer.last_results] == [False, True, False]
    assert handler.runs == ["o0", "o1", "o2"]


def test_a_record_whose_holder_renews_its_lease_is_answered_in_progress_without_a_long_wait(
    build: MakeStreamConsumer, store: IdempotencyStore, scope: str, ddb: DynamoDBClient
) -> None:
    """A holder that renews is alive: waiting on it could stall two invocations that hold each
    other's keys, so the wait ends at the renewal and the record is answered in progress.

    The holder renews while the record waits, just before its first read (not on a timer
    racing that read: a loaded machine could delay the timer past it). Its 30 s lease is a
    long wait for a record that missed the renewal."""
    holder = store.acquire(scope, "o1", lease_ms=30_000, owner="alive").lock
    assert holder is not None
    handler = Flaky()
    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(3)]
    reads: list[str] = []

    def renew_then_count(**kwargs: Any) -> None:
        if not reads:
            assert store.extend(holder, 600_000).ok
        reads.append("GetItem")

    ddb.meta.events.register("before-call.dynamodb.GetItem", renew_then_count)
    try:
        response = consumer(records_event(*records), context())
    finally:
        ddb.meta.events.unregister("before-call.dynamodb.GetItem", renew_then_count)
    assert reads == ["GetItem"]  # it read the record once, saw the renewal, and stopped waiting
    assert response == {
        "batchItemFailures": [{"itemIdentifier": records[1]["kinesis"]["sequenceNumber"]}]
    }
    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PROCESSED,
        Outcome.IN_PROGRESS,
        Outcome.SKIPPED,
    ]
    assert handler.runs == ["o0"]


def test_a_poison_kafka_record_with_headers_sqs_cannot_carry_still_reaches_the_dlq(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    consumer = build(Flaky())
    headers = {"bad name!": b"x", "aws.trace": b"y", "": b"z", "fine": b"kept", "empty": b""}
    record = kafka_record(None, 5, headers=headers, raw=b"not json")
    assert consumer(kafka_event(record), context()) == {"batchItemFailures": []}
    assert [r.outcome for r in consumer.last_results] == [Outcome.PERMANENT]
    (letter,) = dead_letters(sqs, dlq_url)
    assert letter["body"] == "not json"
    assert letter["attributes"].get("fine") == "kept"


@pytest.mark.parametrize("source", ["kinesis", "dynamodb", "kafka"])
def test_each_source_bisected_after_a_crash_runs_each_record_once_in_order(
    source: str, build: MakeStreamConsumer
) -> None:
    """An invocation that crashed after running part of its batch: with
    BisectBatchOnFunctionError, Lambda sends each half on its own. The half that had run meets
    COMPLETED records; nothing runs twice, and the rest runs in order."""
    handler = Flaky()
    consumer = build(handler)

    def batch(numbers: range) -> dict[str, Any]:
        if source == "kinesis":
            return records_event(*(kinesis_record({"orderId": f"o{n}"}, n) for n in numbers))
        if source == "dynamodb":
            return records_event(
                *(dynamodb_record({"orderId": {"S": f"o{n}"}}, n) for n in numbers)
            )
        return kafka_event(*(kafka_record({"orderId": f"o{n}"}, n) for n in numbers))

    consumer(batch(range(6)), context())  # ran these, then "crashed" before answering
    assert consumer(batch(range(4)), context()) == {"batchItemFailures": []}
    assert {r.outcome for r in consumer.last_results} == {Outcome.DUPLICATE}
    assert consumer(batch(range(4, 8)), context()) == {"batchItemFailures": []}
    assert [r.outcome for r in consumer.last_results] == [Outcome.DUPLICATE] * 2 + [
        Outcome.PROCESSED
    ] * 2
    assert handler.runs == [f"o{n}" for n in range(8)]
