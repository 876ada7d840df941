"""Defects found by a review of the stream consumer (issue 28), each a test of what should
happen. Each is marked `xfail(strict=True)` with where the defect is: when it is fixed the
test passes, the strict mark then fails the run, and the mark comes off with the fix.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, PermanentError, RecordContext
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.streams.conftest import MakeStreamConsumer, dead_letters, reason_of
from tests.streams.stream_events import kafka_event, kafka_record, kinesis_record, records_event

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def context() -> LocalLambdaContext:
    return LocalLambdaContext("stream-review", timeout_s=60)


def refuse(payload: Any, ctx: RecordContext) -> None:
    raise PermanentError(f"refused {payload.get('orderId')!r}")


@pytest.mark.xfail(
    strict=True,
    reason="streams/records.py _kafka_attributes passes Kafka header names to the DLQ send "
    "as SQS attribute names (sqs/dead_letter.py _originals keeps any name); SQS refuses names "
    "outside [A-Za-z0-9_.-], so the send fails and the record is reported failed forever",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="streams/records.py _kafka_attributes: a header named 'partition-key' (or an "
    "'eo-failure' header's packed overflow, via SqsMessage.of) stands in for a missing or "
    "unreadable record key, so key='attribute:partition-key' takes the producer's header",
)
@pytest.mark.parametrize("forged", ["header", "packed"])
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


@pytest.mark.xfail(
    strict=True,
    reason="streams/records.py _kinesis_record groups by the shard id read from eventID "
    "(group_id=f'{arn}/{shard}'): a record whose eventID is missing or malformed lands in a "
    "chain of its own and runs past its shard's failure; a Kinesis batch is one shard",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="streams/records.py _kafka_event: a Kafka event (eventSource aws:kafka) whose "
    "'records' is not the map by topic-partition reads as no records, and the empty response "
    "moves every partition past them unrun",
)
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
