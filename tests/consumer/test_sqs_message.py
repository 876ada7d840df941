"""A record is read once, at the entry, into one typed SqsMessage that travels on from there.

The processor, the key, the business function's context and the DLQ send all take that one
object; reading it never raises, so a malformed record still reaches an outcome.
"""

from __future__ import annotations

from typing import Any

import pytest

from exactly_once import Outcome, PermanentError, RecordContext
from exactly_once.sqs import dead_letter as dead_letter_module
from exactly_once.sqs.dead_letter import send_to_dead_letter_queue
from exactly_once.sqs.messages import SqsMessage
from tests.consumer.conftest import MakeConsumer, event, lambda_context, sqs_record

FIFO_ARN = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"


def test_a_record_is_read_into_typed_fields() -> None:
    record = sqs_record(
        {"orderId": "o-1"},
        arn=FIFO_ARN,
        group_id="g-1",
        attributes={"tenant": "acme", "eo-replay-nonce": "n-1"},
    )
    message = SqsMessage.from_record(record)
    assert message == SqsMessage(
        record=record,
        message_id=record["messageId"],
        body='{"orderId": "o-1"}',
        receipt_handle="rh",
        event_source_arn=FIFO_ARN,
        group_id="g-1",
        deduplication_id=record["attributes"]["MessageDeduplicationId"],
        receive_count=1,
        message_attributes=record["messageAttributes"],
        replay_nonce="n-1",
    )
    assert message.is_fifo


@pytest.mark.parametrize(
    "record",
    [
        None,
        "x",
        [],
        {},
        {"messageId": 7, "body": 5, "receiptHandle": [], "eventSourceARN": {"a": "b.fifo"}},
        {"attributes": "x", "messageAttributes": []},
        {"attributes": {"ApproximateReceiveCount": "many"}, "messageAttributes": {"a": None}},
    ],
)
def test_a_malformed_record_is_still_a_message_with_empty_fields(record: Any) -> None:
    message = SqsMessage.from_record(record)
    assert message.record is record
    assert message.message_id == ""
    assert (message.body, message.receipt_handle, message.event_source_arn) == (None, None, None)
    assert (message.group_id, message.deduplication_id, message.receive_count) == (None, None, None)
    assert message.message_attributes == {}
    assert message.replay_nonce is None
    assert not message.is_fifo


def test_each_record_is_read_once_and_that_message_reaches_the_handler_and_the_dlq(
    make_consumer: MakeConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[SqsMessage] = []
    construct = SqsMessage.__init__

    def counted(self: SqsMessage, *args: Any, **kwargs: Any) -> None:
        construct(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(SqsMessage, "__init__", counted)
    dead_lettered: list[SqsMessage] = []

    def spied(sqs: Any, url: str, message: SqsMessage, *args: Any, **kwargs: Any) -> str:
        dead_lettered.append(message)
        return send_to_dead_letter_queue(sqs, url, message, *args, **kwargs)

    monkeypatch.setattr(dead_letter_module, "send_to_dead_letter_queue", spied)
    handled: list[SqsMessage] = []

    def handle(body: Any, ctx: RecordContext) -> None:
        handled.append(ctx.message)
        if body.get("declined"):
            raise PermanentError("declined")

    records: list[Any] = [
        sqs_record({"orderId": "o-1"}),
        sqs_record({"orderId": "o-1"}),  # the same key: chained behind the first, a duplicate
        sqs_record({"orderId": "o-2", "declined": True}),  # runs, then to the DLQ
        sqs_record("not json"),  # to the DLQ without running
        {"body": "{}"},  # no messageId
        "not a record",
    ]
    consumer = make_consumer(handle)
    consumer(event(*records), lambda_context())

    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PERMANENT,
        Outcome.PERMANENT,
        Outcome.ERROR,
        Outcome.ERROR,
    ]
    assert len(made) == len(records)  # one reading per record, whatever became of it
    assert all(m.record is r for m, r in zip(made, records, strict=True))
    assert {id(m) for m in handled} == {id(made[0]), id(made[2])}  # ctx.message, not a re-read
    assert {id(m) for m in dead_lettered} == {id(made[2]), id(made[3])}


def test_each_body_is_parsed_and_keyed_once_although_the_batch_orders_by_key(
    make_consumer: MakeConsumer,
) -> None:
    """A standard queue's batch asks every record's key to chain records of one key, then each
    record's run needs body and key again: the message keeps what the first asking found."""
    keyed: list[str] = []

    def key(record: Any) -> str:
        keyed.append(record["messageId"])
        return str(record["body"])

    records = [sqs_record({"n": n}) for n in (1, 2, 2)] + [sqs_record("not json")]
    consumer = make_consumer(lambda body, ctx: None, key=key)
    consumer(event(*records), lambda_context())

    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PROCESSED,
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PERMANENT,  # the body is not JSON: no key is asked for
    ]
    assert sorted(keyed) == sorted(r["messageId"] for r in records[:3])
