"""Malformed events and bodies: the handler never raises and loses no record.

Every record of a fuzzed batch must end up in one of three places, each checked against
durable state rather than the handler's own report: in `batchItemFailures` (SQS redelivers
it; an empty identifier fails the whole batch), in the DLQ with a reason, or completed in the
idempotency table under its key.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactly_once import IdempotencyStore, PermanentError, RecordContext, Status, sqs_consumer
from exactly_once.keys import MAX_KEY_BYTES
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.consumer.conftest import Queues, make_queues, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

ARN = "arn:aws:sqs:us-east-1:123456789012:fuzz"

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
order_id = (
    st.text(min_size=1, max_size=30)
    | st.integers()
    | st.sampled_from(["", " ", "0", "x" * 1100])
    | json_value
)
amount = st.integers(-5, 100) | st.floats() | st.sampled_from(["boom", None, True, "7"])
order = st.fixed_dictionaries(
    {"orderId": order_id, "amount": amount},
    optional={"junk": json_value},
)
body = (
    order.map(json.dumps)
    | json_value.map(lambda v: json.dumps(v, allow_nan=True))
    | st.text(max_size=40)
    | st.sampled_from(["", "{", "null", '{"orderId": ', "\x00", "[]"])
)
attributes = st.dictionaries(
    st.sampled_from(["Trace", "eo-error-type", "eo-attempt", "x" * 300]),
    st.text(max_size=10),
    max_size=3,
)


@st.composite
def records(draw: st.DrawFn) -> Any:
    """Mostly SQS-shaped records with a fuzzed body; some bent out of shape."""
    record = sqs_record(
        draw(body),
        arn=draw(st.sampled_from([ARN, ARN + ".fifo", "not-an-arn", ""])),
        message_id=str(uuid.uuid4()),
        group_id=draw(st.none() | st.sampled_from(["g1", "g2"])),
        attributes=draw(attributes),
    )
    bend = draw(st.integers(0, 9))
    if bend == 0:
        del record["messageId"]
    elif bend == 1:
        record["messageId"] = draw(st.none() | st.integers() | st.just(""))
    elif bend == 2:
        record["body"] = draw(st.none() | st.integers() | st.lists(st.integers(), max_size=2))
    elif bend == 3:
        record["messageAttributes"] = draw(st.none() | st.text(max_size=5) | st.just([]))
    elif bend == 4:
        record["attributes"] = draw(st.none() | st.text(max_size=5))
    elif bend == 5:
        return draw(st.none() | st.integers() | st.text(max_size=5) | st.just([]))
    return record


events = st.one_of(
    st.fixed_dictionaries({"Records": st.lists(records(), max_size=10)}),
    st.none() | st.text(max_size=5) | st.just([]) | st.integers(),
    st.fixed_dictionaries({"Records": json_value}),
    st.dictionaries(st.text(max_size=5), json_value, max_size=2),
)


def business(body: Any, ctx: RecordContext) -> dict[str, Any]:
    """Fails the way real consumers do: permanently, transiently, or by a bug (TypeError)."""
    amount = body.get("amount") if isinstance(body, dict) else None
    if isinstance(amount, int) and not isinstance(amount, bool) and amount < 0:
        raise PermanentError("negative amount")
    if amount == "boom":
        raise RuntimeError("transient")
    if amount == "7":
        return {"total": amount + 1}  # a consumer bug: str + int raises TypeError
    return {"key": ctx.key}


@pytest.fixture(scope="module")
def fuzz_queues(sqs: SQSClient) -> Queues:
    return make_queues(sqs)


def take_all(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    """Receive and delete everything, so nothing reappears in a later example."""
    taken: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not got:
            return taken
        for message in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            taken.append(dict(message))


def dead_lettered(sqs: SQSClient, dlq_url: str) -> dict[str, str]:
    """original message id -> the reason the layer attached (empties the DLQ)."""
    found: dict[str, str] = {}
    for message in take_all(sqs, dlq_url):
        attrs = message.get("MessageAttributes", {})
        if "eo-failure" in attrs:
            packed = json.loads(attrs["eo-failure"]["StringValue"])
            found[packed["eo-original-message-id"]] = packed["eo-error-type"]
        else:
            found[attrs["eo-original-message-id"]["StringValue"]] = attrs["eo-error-type"][
                "StringValue"
            ]
    return found


def completed_key(record: dict[str, Any], store: IdempotencyStore, scope: str) -> bool:
    """Whether the record's orderId, keyed as the layer documents it, is COMPLETED."""
    try:
        value = json.loads(record["body"]).get("orderId")
    except (TypeError, ValueError, AttributeError):
        return False
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return False
    key = str(value)
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:  # long keys are stored hashed
        key = "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()
    found = store.get(scope, key)
    return found is not None and found.status is Status.COMPLETED


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(event=events)
def test_any_event_is_answered_and_every_record_accounted_for(
    event: Any, ddb: DynamoDBClient, sqs: SQSClient, fuzz_queues: Queues, idempotency_table: str
) -> None:
    scope = f"fuzz-{uuid.uuid4().hex[:10]}"
    take_all(sqs, fuzz_queues.dlq_url)  # an earlier failing example may have left some
    handler = sqs_consumer(
        key="orderId",
        table_name=idempotency_table,
        scope=scope,
        dead_letter_queue_url=fuzz_queues.dlq_url,
        dynamodb_client=ddb,
        sqs_client=sqs,
    )(business)

    response = handler(event, LocalLambdaContext("fuzz", timeout_s=30))

    assert isinstance(response, dict)
    failures = response["batchItemFailures"]
    assert isinstance(failures, list)
    assert all(isinstance(f, dict) and isinstance(f["itemIdentifier"], str) for f in failures)
    failed = {f["itemIdentifier"] for f in failures}
    dlq = dead_lettered(sqs, fuzz_queues.dlq_url)
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        assert failures == []
        assert dlq == {}
        return
    ids = {r["messageId"] for r in records if isinstance(r, dict) and "messageId" in r}
    assert set(dlq) <= {i for i in ids if isinstance(i, str)}, "a DLQ entry for no record"
    assert all(reason for reason in dlq.values()), "a DLQ entry without a reason"
    if "" in failed:  # Lambda retries the whole batch: every record comes back
        return
    store = IdempotencyStore(idempotency_table, client=ddb)
    for record in records:
        assert isinstance(record, dict), f"a malformed record must fail the batch: {record!r}"
        assert isinstance(record.get("messageId"), str), f"no usable messageId: {record!r}"
        mid = record["messageId"]
        assert mid in failed or mid in dlq or completed_key(record, store, scope), (
            f"record {mid} is neither failed, dead-lettered nor completed: {record!r}"
        )
