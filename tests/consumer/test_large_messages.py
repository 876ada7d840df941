"""The 1 MiB message path through the real consumer: DynamoDB Local (and PostgreSQL) for the
store, moto for the queues.

Bodies are multi-byte UTF-8, so their size in bytes (what SQS counts) is not their length in
characters. moto checks only the body's length, so every dead-lettered message is also held to
SQS's rules by `sqs_violations` (body plus attribute names, types and values, within 1 MiB).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, RecordContext, SqsConsumer, sqs_consumer
from exactly_once.sqs.dead_letter import MAX_MESSAGE_BYTES, TRUNCATED
from exactly_once.stores import codec
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.stored_result import MAX_RESULT_CAP_BYTES
from local_aws.poller import to_lambda_record
from tests.consumer.conftest import MakeConsumer, Queues, drain, event, lambda_context, sqs_record
from tests.consumer.test_dead_letter import sqs_violations
from tests.consumer.test_dead_letter_faults import Declines

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

ONE_MIB = 1_048_576  # SQS's and the Lambda event source's limit since 2025
NONCE_CHARS = 32  # the store's nonce: 16 random bytes in hex
DYNAMODB_ITEM_LIMIT = 400 * 1024


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def big_body(order_id: str, size: int, *, json_body: bool = True) -> str:
    """A body of exactly `size` UTF-8 bytes, mostly 2-, 3- and 4-byte characters."""
    head, tail = (f'{{"orderId": "{order_id}", "note": "', '"}') if json_body else ("not json ", "")
    room = size - utf8_size(head + tail)
    filler = "é€\U0001f600" * (room // 9)  # 2 + 3 + 4 bytes
    text = head + filler + "x" * (room - utf8_size(filler)) + tail
    assert utf8_size(text) == size
    assert len(text) < size * 0.4
    return text


def attribute_size(name: str, value: str) -> int:
    return utf8_size(name) + utf8_size("String") + utf8_size(value)


def machine_size(message_id: str, error_type: str, nonce: bool = True) -> int:
    """What the attributes tools need take: the error type, the original id and the nonce."""
    size = attribute_size("eo-error-type", error_type)
    size += attribute_size("eo-original-message-id", message_id)
    return size + (attribute_size("eo-replay-nonce", "n" * NONCE_CHARS) if nonce else 0)


def declines() -> Declines:
    """Fails permanently with a long reason (multi-byte) on its first run; then succeeds."""
    return Declines("card declined: " + "é" * 1000)


def run(consumer: SqsConsumer, record: dict[str, Any]) -> tuple[dict[str, Any], Outcome]:
    response = consumer(event(record), lambda_context())
    [result] = consumer.last_results
    return response, result.outcome


def received_dead_letter(sqs: SQSClient, queues: Queues, body: str) -> dict[str, Any]:
    [dead] = drain(sqs, queues.dlq_url)
    assert dead["Body"] == body  # byte-identical: same text, and SQS's MD5 of its UTF-8
    assert dead["MD5OfBody"] == hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()
    attributes = {
        name: {k: v for k, v in value.items() if k in ("DataType", "StringValue")}
        for name, value in dead["MessageAttributes"].items()
    }
    assert sqs_violations(dead["Body"], attributes) == []  # within 1 MiB, as SQS counts
    return dead


def values(dead: dict[str, Any]) -> dict[str, str]:
    return {name: v["StringValue"] for name, v in dead["MessageAttributes"].items()}


# -- poison near 1 MiB: the body arrives whole, the reason gives way ----------------------


def test_the_limit_is_1_mib() -> None:
    assert MAX_MESSAGE_BYTES == ONE_MIB


def test_a_poison_record_near_1_mib_reaches_the_dlq_with_its_reason_cut(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues, store: IdempotencyStore, scope: str
) -> None:
    body = big_body("big-1", ONE_MIB - 1_000)
    record = sqs_record(body, arn=queues.source_arn)
    response, outcome = run(make_consumer(declines()), record)
    assert (response, outcome) == ({"batchItemFailures": []}, Outcome.PERMANENT)

    sent = values(received_dead_letter(sqs, queues, body))
    failed = store.get(scope, "big-1")
    assert failed is not None
    assert failed.replay_nonce is not None
    assert sent["eo-replay-nonce"] == failed.replay_nonce
    assert sent["eo-original-message-id"] == record["messageId"]
    assert sent["eo-consumer"] == scope
    assert sent["eo-attempt"] == "1"
    assert sent["eo-error-message"].endswith(TRUNCATED)  # 2 KB of reason in the ~800 left
    assert sent["eo-error-message"].startswith("card declined: éé")


def test_with_room_only_for_what_tools_read_the_human_attributes_give_way(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues, scope: str
) -> None:
    """The error type, the original id and the nonce fit; the reason, consumer and attempt
    don't. The nonce alone is what lets the replay run the key again."""
    record = sqs_record("{}", arn=queues.source_arn)
    room = machine_size(record["messageId"], "PermanentError") + 5  # under eo-consumer's ~30
    body = big_body("big-2", ONE_MIB - room)
    record["body"] = body
    handler = declines()
    consumer = make_consumer(handler)
    assert run(consumer, record)[1] is Outcome.PERMANENT

    dead = received_dead_letter(sqs, queues, body)
    assert set(values(dead)) == {"eo-error-type", "eo-original-message-id", "eo-replay-nonce"}
    replayed = to_lambda_record(dead, queues.source_arn, "us-east-1")
    assert run(consumer, replayed) == ({"batchItemFailures": []}, Outcome.PROCESSED)
    assert handler.runs == 2


# -- when not even those fit: reported failed, for SQS's own redrive ----------------------


@pytest.mark.parametrize("poison", ["handler", "not-json"])
def test_when_even_the_machine_attributes_cannot_fit_the_record_is_reported_failed(
    make_consumer: MakeConsumer,
    sqs: SQSClient,
    queues: Queues,
    caplog: pytest.LogCaptureFixture,
    poison: str,
) -> None:
    record = sqs_record("{}", arn=queues.source_arn)
    if poison == "handler":
        room = machine_size(record["messageId"], "PermanentError") - 1
        record["body"] = big_body("big-3", ONE_MIB - room)
    else:  # no key, so no FAILED record and no nonce
        room = machine_size(record["messageId"], "NonJsonBody", nonce=False) - 1
        record["body"] = big_body("", ONE_MIB - room, json_body=False)
    handler = declines()
    consumer = make_consumer(handler)

    for _ in range(2):  # each delivery until maxReceiveCount: failed, never dropped
        response, outcome = run(consumer, record)
        assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        assert outcome is Outcome.ERROR
    assert drain(sqs, queues.dlq_url) == []  # not sent: SQS would have refused it
    assert handler.runs == (1 if poison == "handler" else 0)  # the failure is kept, not re-run
    logged = [r for r in caplog.records if "DLQ send failed" in r.getMessage()]
    assert len(logged) == 2
    assert "DeadLetterTooLarge" in str(logged[0].__dict__.get("error"))
    reason = str(logged[0].__dict__.get("reason"))
    assert reason.startswith("PermanentError: card declined" if poison == "handler" else "NonJ")


def test_a_non_json_body_of_1_mib_goes_to_the_dlq_whole(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    body = big_body("", ONE_MIB - 400, json_body=False)
    handler = declines()
    record = sqs_record(body, arn=queues.source_arn)
    assert run(make_consumer(handler), record) == ({"batchItemFailures": []}, Outcome.PERMANENT)
    sent = values(received_dead_letter(sqs, queues, body))
    assert sent["eo-error-type"] == "NonJsonBody"
    assert "eo-replay-nonce" not in sent  # no key, so no FAILED record to replay
    assert handler.runs == 0


# -- results: a 1 MiB result is kept as its digest, never as an item over 400 KB ----------


def item_bytes(value: Any) -> int:
    """An upper bound of DynamoDB's item size: names plus values, as UTF-8."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("S", "N"):
        return utf8_size(next(iter(value.values())))
    if isinstance(value, dict):
        return sum(utf8_size(k) + item_bytes(v) for k, v in value.items())
    return 8  # BOOL, NULL and the like


def one_mib_result() -> str:
    return "€" * (ONE_MIB // 3)


def test_a_1_mib_message_with_a_1_mib_result_is_stored_as_a_digest_in_dynamodb(
    make_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    store: IdempotencyStore,
    scope: str,
    queues: Queues,
) -> None:
    calls: list[str] = []

    def echo(body: Any, ctx: RecordContext) -> str:
        calls.append(ctx.key)
        return one_mib_result()

    consumer = make_consumer(echo, result_cap_bytes=MAX_RESULT_CAP_BYTES)
    record = sqs_record(big_body("big-5", ONE_MIB - 100), arn=queues.source_arn)
    assert run(consumer, record) == ({"batchItemFailures": []}, Outcome.PROCESSED)

    encoded = codec.dumps(one_mib_result())
    stored = store.get(scope, "big-5")
    assert stored is not None
    assert stored.result_text is None
    assert stored.result is None
    assert stored.result_sha256 == codec.sha256_hex(encoded)
    assert stored.result_size == utf8_size(encoded) > ONE_MIB  # 3 bytes a character
    assert stored.result_omitted == f"{stored.result_size} bytes, over the 358400-byte cap"
    item = ddb.get_item(TableName=idempotency_table, Key={"id": {"S": f"{scope}#big-5"}})["Item"]
    assert "result" not in item
    assert item_bytes(item) < 2_000

    again = sqs_record(record["body"], arn=queues.source_arn)  # a resend: a new messageId
    assert run(consumer, again) == ({"batchItemFailures": []}, Outcome.DUPLICATE)
    assert calls == ["big-5"]


def test_a_result_at_the_largest_cap_is_kept_whole_in_one_dynamodb_item(
    make_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    store: IdempotencyStore,
    scope: str,
) -> None:
    """The cap is 350 KiB so that the result and the rest of the record fit DynamoDB's
    400 KB, even for a multi-byte result at the cap and a key at its longest."""
    key = "k" * 1024  # keys.MAX_KEY_BYTES: the longest kept as it is
    per_char = utf8_size(codec.dumps("€€")) - utf8_size(codec.dumps("€"))
    result = "€" * ((MAX_RESULT_CAP_BYTES - utf8_size(codec.dumps(""))) // per_char)
    assert MAX_RESULT_CAP_BYTES - per_char < utf8_size(codec.dumps(result)) <= MAX_RESULT_CAP_BYTES

    consumer = make_consumer(lambda body, ctx: result, result_cap_bytes=MAX_RESULT_CAP_BYTES)
    body = json.dumps({"orderId": key, "note": "é" * 100_000}, ensure_ascii=False)
    assert run(consumer, sqs_record(body)) == ({"batchItemFailures": []}, Outcome.PROCESSED)
    stored = store.get(scope, key)
    assert stored is not None
    assert stored.result == result
    assert stored.result_omitted is None
    item = ddb.get_item(TableName=idempotency_table, Key={"id": {"S": f"{scope}#{key}"}})["Item"]
    assert MAX_RESULT_CAP_BYTES < item_bytes(item) < DYNAMODB_ITEM_LIMIT


def test_the_postgresql_store_keeps_a_1_mib_result_as_the_same_digest(
    pg_dsn: str, scope: str, sqs: SQSClient, queues: Queues
) -> None:
    consumer = sqs_consumer(
        key="orderId",
        dsn=pg_dsn,
        scope=scope,
        dead_letter_queue_url=queues.dlq_url,
        result_cap_bytes=MAX_RESULT_CAP_BYTES,
        sqs_client=sqs,
    )(lambda body, ctx: one_mib_result())
    record = sqs_record(big_body("big-6", ONE_MIB - 100))
    assert run(consumer, record) == ({"batchItemFailures": []}, Outcome.PROCESSED)
    stored = PostgresStore(pg_dsn).get(scope, "big-6")
    assert stored is not None
    assert stored.result_text is None
    encoded = codec.dumps(one_mib_result())
    assert (stored.result_sha256, stored.result_size) == (
        codec.sha256_hex(encoded),
        utf8_size(encoded),
    )
    assert stored.result_omitted == f"{utf8_size(encoded)} bytes, over the 358400-byte cap"
    assert run(consumer, sqs_record(record["body"]))[1] is Outcome.DUPLICATE
