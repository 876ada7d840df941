"""Defects found by a review of the stream consumer (issue 28), each a test of what should
happen. Each failed on the code it was written against; the fixes landed with the tests (Kafka
header names SQS refuses, a header named 'partition-key' or 'eo-failure', a damaged eventID, a
Kafka event whose records cannot be read, partitions in waves, an unreadable DynamoDB image's
data, STREAM_MAX_ATTEMPTS read by a queue consumer).
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, Outcome, PermanentError, RecordContext, sqs_consumer
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.stores.pg_support import sqs_record_of
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
    return LocalLambdaContext("stream-review", timeout_s=60)


def refuse(payload: Any, ctx: RecordContext) -> None:
    raise PermanentError(f"refused {payload.get('orderId')!r}")


@pytest.mark.parametrize("name", ["content type", "x/y", "été", "\ud83d", ""])
def test_a_kafka_record_whose_header_name_sqs_refuses_still_reaches_the_dlq(
    name: str, build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    """Kafka header names are any text; SQS attribute names are not. A poison record with
    such a header must still be dead-lettered (the header kept, packed or left out), or its
    partition is stuck at it: every redelivery fails the DLQ send again, and even
    `max_attempts` gives up through the same send."""
    consumer = build(refuse)
    record = kafka_record({"orderId": "h"}, 5, headers={name: b"json", "ok": b"1"})
    response = consumer(kafka_event(record), context())
    assert response == {"batchItemFailures": []}
    assert consumer.last_results[0].dead_lettered
    (letter,) = dead_letters(sqs, dlq_url)
    assert "refused 'h'" in reason_of(letter)


@pytest.mark.parametrize(
    "forged",
    [
        "header",
        "packed",
    ],
)
def test_a_kafka_header_never_stands_in_for_the_record_key(
    forged: str, build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    """`attribute:partition-key` is the record's key. A record without a key (or whose key is
    not base64) has none: it is dead-lettered as MissingKey. A header of that name must not
    give it another record's key, which answers it as that record's duplicate: its work is
    never done, and nothing says so (with fingerprints on, the forged key's mismatch at least
    dead-letters it, under a wrong reason)."""
    ran: list[str] = []
    consumer = build(
        lambda payload, ctx: ran.append(payload["n"]),
        key="attribute:partition-key",
        fingerprint=False,
    )
    victim = kafka_record({"n": "victim"}, 1, key=b"order-7")
    if forged == "header":
        headers = {"partition-key": b"order-7"}
    else:
        overflow = {"partition-key": {"dataType": "String", "stringValue": "order-7"}}
        headers = {"eo-failure": json.dumps({"eo-overflow-attributes": overflow}).encode()}
    keyless = kafka_record({"n": "keyless"}, 2, key=None, headers=headers)
    assert consumer(kafka_event(victim, keyless), context()) == {"batchItemFailures": []}
    assert ran == ["victim"]
    assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED, Outcome.PERMANENT]
    (letter,) = dead_letters(sqs, dlq_url)
    assert "MissingKey" in reason_of(letter)


def test_a_kinesis_record_with_a_damaged_event_id_still_waits_behind_its_shards_failure(
    build: MakeStreamConsumer,
) -> None:
    ran: list[str] = []

    def handler(payload: Any, ctx: RecordContext) -> None:
        if payload["orderId"] == "o0":
            raise TimeoutError("transient")
        ran.append(payload["orderId"])

    consumer = build(handler)
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(3)]
    del records[1]["eventID"]
    records[2]["eventID"] = "no-colon"
    response = consumer(records_event(*records), context())
    first = records[0]["kinesis"]["sequenceNumber"]
    assert response == {"batchItemFailures": [{"itemIdentifier": first}]}
    assert ran == []  # o1 and o2 wait for o0: the mapping resumes at o0 and sends them again
    assert [r.outcome for r in consumer.last_results] == [
        Outcome.FAILED,
        Outcome.SKIPPED,
        Outcome.SKIPPED,
    ]


@pytest.mark.parametrize("shape", ["list", "text", "null"])
def test_a_kafka_event_whose_records_cannot_be_read_fails_whole(
    shape: str, build: MakeStreamConsumer
) -> None:
    ran: list[Any] = []
    consumer = build(lambda payload, ctx: ran.append(payload))
    event = kafka_event(kafka_record({"orderId": "o1"}, 5))
    event["records"] = {
        "list": [kafka_record({"orderId": "o1"}, 5)],
        "text": "orders-0",
        "null": None,
    }[shape]
    response = consumer(event, context())
    assert response == {"batchItemFailures": [{"itemIdentifier": ""}]}
    assert ran == []


def test_kafka_partitions_with_many_records_each_still_run_at_the_same_time(
    build: MakeStreamConsumer,
) -> None:
    """Each partition's first record waits at a barrier for the other's: both must be running
    at once. (The barrier's timeout only ends a run that never meets; nothing is timed.)"""
    meet = threading.Barrier(2, timeout=5)
    ran: list[str] = []

    def handler(payload: Any, ctx: RecordContext) -> None:
        if payload["orderId"].endswith("-0"):
            meet.wait()
        ran.append(payload["orderId"])

    consumer = build(handler, concurrency=4)
    records = [
        kafka_record({"orderId": f"p{p}-{n}"}, n, partition=p) for p in (0, 1) for n in range(30)
    ]
    assert consumer(kafka_event(*records), context()) == {"batchItemFailures": []}
    assert len(ran) == 60


@pytest.mark.parametrize(
    ("attribute", "kept"),
    [({"N": "1e999"}, "1e999"), ({"S": "a", "N": "2"}, '"N": "2"'), ({"X": "forged"}, "forged")],
)
def test_a_dynamodb_record_with_an_unreadable_image_is_dead_lettered_with_its_data(
    attribute: dict[str, str], kept: str, build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    """Poison goes to the DLQ with its reason AND its data (as Kinesis and Kafka data that is
    not base64 or not UTF-8 is kept as it arrived): the image, as the record carried it."""
    consumer = build(refuse)
    record = dynamodb_record({"orderId": {"S": "o1"}, "v": attribute}, 0)
    assert consumer(records_event(record), context()) == {"batchItemFailures": []}
    (letter,) = dead_letters(sqs, dlq_url)
    assert "not DynamoDB JSON" in reason_of(letter)
    assert kept in letter["body"]


def test_a_queue_consumer_does_not_take_the_streams_max_attempts(
    ddb: DynamoDBClient,
    sqs: SQSClient,
    idempotency_table: str,
    scope: str,
    dlq_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAM_MAX_ATTEMPTS", "1")

    def failing(body: Any, ctx: RecordContext) -> None:
        raise TimeoutError("transient")

    consumer = sqs_consumer(
        key="orderId",
        table_name=idempotency_table,
        scope=scope,
        dead_letter_queue_url=dlq_url,
        dynamodb_client=ddb,
        sqs_client=sqs,
    )(failing)
    record = sqs_record_of({"orderId": "q1"})
    response = consumer({"Records": [record]}, context())
    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert consumer.last_results[0].outcome is Outcome.FAILED
    assert dead_letters(sqs, dlq_url) == []


def test_a_record_whose_holder_completes_during_the_wait_is_answered_in_this_invocation(
    build: MakeStreamConsumer,
    store: IdempotencyStore,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another invocation holds o1 (a 20 s lease, within this one's time) and completes it
    while this one waits: after the wait the key is COMPLETED, so o1 is a duplicate here and
    the shard goes on. The wait is stood in for (no time passes): the holder completes in
    it."""
    holder = store.acquire(scope, "o1", lease_ms=20_000, owner="live").lock
    assert holder is not None
    waits: list[float] = []

    def holder_finishes(seconds: float) -> None:
        waits.append(seconds)
        store.complete(holder, "done elsewhere")

    monkeypatch.setattr(time, "sleep", holder_finishes)  # what sqs/holder_wait.py waits with
    ran: list[str] = []
    consumer = build(lambda payload, ctx: ran.append(payload["orderId"]))
    records = [kinesis_record({"orderId": f"o{n}"}, n) for n in range(3)]
    response = consumer(records_event(*records), context())
    assert len(waits) == 1  # it waited once, read the record COMPLETED, and asked again
    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PROCESSED,
    ]
    assert response == {"batchItemFailures": []}
    assert ran == ["o0", "o2"]
