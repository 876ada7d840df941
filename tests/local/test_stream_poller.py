"""The local stream event source mapping (local_aws.stream_poller) against real streams: Kinesis
on moto and DynamoDB Streams on DynamoDB Local, with a plain handler that records what it gets.

Each behaviour Lambda documents for stream mappings: the event shapes, batch size and window,
the checkpoint at the lowest reported failure, the whole-batch retry on an error or a malformed
response, bisection isolating a poison record, the retry limit and the record age sending
Lambda's invocation record to the on-failure queue, and the order kept per shard.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamModel,
    KinesisDataStreamModel,
)

from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.stream_failures import SqsDestination
from local_aws.stream_poller import MappingSettings, StreamPoller
from local_aws.stream_shards import AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, Position
from tests.local.stream_support import (
    DynamoDBStream,
    KinesisStream,
    RecordingHandler,
    StreamUnderTest,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

ORDERS = [f"o{i}" for i in range(1, 9)]


@pytest.fixture(params=["kinesis", "dynamodb"])
def stream(
    request: pytest.FixtureRequest, moto_endpoint: str, dynamodb_local: DynamoDBLocal
) -> StreamUnderTest:
    if request.param == "kinesis":
        return KinesisStream(moto_endpoint)
    return DynamoDBStream(dynamodb_local.endpoint)


@pytest.fixture
def on_failure(sqs: SQSClient) -> Iterator[SqsDestination]:
    url = sqs.create_queue(QueueName=f"on-failure-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    yield SqsDestination(sqs, url)
    sqs.delete_queue(QueueUrl=url)


def messages(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in got:
            out.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return out


def poller(stream: StreamUnderTest, handler: RecordingHandler, **settings: Any) -> StreamPoller:
    destination = settings.pop("destination", None)
    return StreamPoller(
        stream.source, handler, MappingSettings(**settings), destination=destination
    )


# --- event shapes ---------------------------------------------------------------------------


def test_kinesis_event_is_lambdas_shape(moto_endpoint: str) -> None:
    stream = KinesisStream(moto_endpoint)
    stream.put("o1", partition_key="customer-7", amount=5)
    events: list[dict[str, Any]] = []
    StreamPoller(stream.source, lambda event, _: events.append(event)).run_until_drained()
    (event,) = events
    KinesisDataStreamModel.model_validate(event)  # the documented fields, with their types
    (record,) = event["Records"]
    kinesis = record["kinesis"]
    assert json.loads(base64.b64decode(kinesis["data"])) == {"orderId": "o1", "amount": 5}
    assert kinesis["partitionKey"] == "customer-7"
    assert kinesis["kinesisSchemaVersion"] == "1.0"
    assert isinstance(kinesis["approximateArrivalTimestamp"], float)
    assert record["eventID"] == f"shardId-000000000000:{kinesis['sequenceNumber']}"
    assert record["eventSource"] == "aws:kinesis"
    assert record["eventName"] == "aws:kinesis:record"
    assert record["eventSourceARN"].startswith("arn:aws:kinesis:us-east-1:")
    assert record["eventSourceARN"].endswith(f":stream/{stream.stream_name}")
    json.dumps(event)  # what Lambda sends is JSON: nothing boto3-typed may leak through


def test_dynamodb_event_is_lambdas_shape(dynamodb_local: DynamoDBLocal) -> None:
    stream = DynamoDBStream(dynamodb_local.endpoint)
    stream.client.put_item(
        TableName=stream.table,
        Item={"orderId": {"S": "o1"}, "n": {"N": "1"}, "b": {"B": b"\x00\xff"}},
    )
    stream.put("o1", n=2)
    stream.client.delete_item(TableName=stream.table, Key={"orderId": {"S": "o1"}})
    events: list[dict[str, Any]] = []
    StreamPoller(stream.source, lambda event, _: events.append(event)).run_until_drained()
    (event,) = events
    json.dumps(event)
    DynamoDBStreamModel.model_validate(event)
    insert, modify, remove = event["Records"]
    assert [r["eventName"] for r in event["Records"]] == ["INSERT", "MODIFY", "REMOVE"]
    assert insert["dynamodb"]["NewImage"]["b"] == {"B": base64.b64encode(b"\x00\xff").decode()}
    assert modify["dynamodb"]["OldImage"]["n"] == {"N": "1"}
    assert modify["dynamodb"]["NewImage"]["n"] == {"N": "2"}
    assert "NewImage" not in remove["dynamodb"]
    assert remove["dynamodb"]["OldImage"]["n"] == {"N": "2"}
    for record in event["Records"]:
        assert record["eventSource"] == "aws:dynamodb"
        assert record["eventSourceARN"] == stream.source.stream_arn
        assert record["awsRegion"] == "us-east-1"
        assert record["dynamodb"]["Keys"] == {"orderId": {"S": "o1"}}
        assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert record["dynamodb"]["SizeBytes"] > 0


# --- batch size and window ------------------------------------------------------------------


def test_batches_hold_at_most_batch_size_in_order(stream: StreamUnderTest) -> None:
    stream.put_all(ORDERS[:7])
    handler = RecordingHandler()
    poller(stream, handler, batch_size=3).run_until_drained()
    assert handler.batches == [ORDERS[0:3], ORDERS[3:6], ORDERS[6:7]]


@pytest.mark.parametrize(("window", "batches"), [(0, [["o1"], ["o2"]]), (5, [["o1", "o2"]])])
def test_window_gathers_records_that_arrive_within_it(
    stream: StreamUnderTest, window: int, batches: list[list[str]]
) -> None:
    """The window opens at the first record read: a record written while it is open joins
    the batch; without a window it waits for the next one. Time is the test's."""
    now = [0.0]
    arrivals = ["o2"]

    def sleep(seconds: float) -> None:
        if arrivals:
            stream.put(arrivals.pop())
        now[0] += seconds

    stream.put("o1")
    handler = RecordingHandler()
    polling = StreamPoller(
        stream.source,
        handler,
        MappingSettings(batch_size=10, batching_window_s=window),
        monotonic=lambda: now[0],
        sleep=sleep,
    )
    polling.poll_once()
    if window == 0:  # nothing slept: the second record arrives between polls
        sleep(1)
    polling.run_until_drained()
    assert handler.batches == batches


# --- checkpoints ----------------------------------------------------------------------------


def test_partial_failure_checkpoints_before_the_lowest_reported_record(
    stream: StreamUnderTest,
) -> None:
    stream.put_all(ORDERS[:6])
    failing = {"o3": 1, "o5": 2}  # the first response lists o5 before o3

    def fail(order: str) -> str | None:
        if failing.get(order, 0) > 0:
            failing[order] -= 1
            return "report"
        return None

    handler = RecordingHandler(fail=fail)
    polling = poller(stream, handler, batch_size=10)
    polling.poll_once()
    (shard,) = polling.checkpoints()
    position = polling.checkpoints()[shard]
    assert position.kind == AT_SEQUENCE_NUMBER  # the retry reads at the first failed record
    polling.run_until_drained()
    # o1, o2 never come back; the retry starts at o3 (the lowest), not at o5
    assert handler.batches == [ORDERS[:6], ORDERS[2:6], ORDERS[4:6]]
    assert polling.checkpoints()[shard].kind == AFTER_SEQUENCE_NUMBER
    assert [i.outcome for i in polling.invocations] == ["partial", "partial", "ok"]


def test_empty_failure_list_checkpoints_after_the_batch(stream: StreamUnderTest) -> None:
    stream.put_all(ORDERS[:3])
    handler = RecordingHandler()
    polling = poller(stream, handler, batch_size=10)
    polling.run_until_drained()
    stream.put("o4")
    polling.run_until_drained()
    assert handler.batches == [ORDERS[:3], ["o4"]]
    last = polling.invocations[-1].sequences[-1]
    assert list(polling.checkpoints().values()) == [Position.after(last)]


def test_raised_error_retries_the_whole_batch(stream: StreamUnderTest) -> None:
    stream.put_all(ORDERS[:4])
    calls = iter(["raise"])

    def fail(order: str) -> str | None:
        return next(calls, None) if order == "o3" else None

    handler = RecordingHandler(fail=fail)
    poller(stream, handler, batch_size=10).run_until_drained()
    assert handler.batches == [ORDERS[:4], ORDERS[:4]]


@pytest.mark.parametrize(
    "bad", [[{"itemIdentifier": ""}], [{"itemIdentifier": None}], [{"id": "x"}], "nope"]
)
def test_malformed_response_retries_the_whole_batch(stream: StreamUnderTest, bad: Any) -> None:
    stream.put_all(ORDERS[:3])
    answers = iter([{"batchItemFailures": bad}])
    handler = RecordingHandler(respond=lambda records: next(answers, {"batchItemFailures": []}))
    polling = poller(stream, handler, batch_size=10)
    polling.run_until_drained()
    assert handler.batches == [ORDERS[:3], ORDERS[:3]]
    assert [i.outcome for i in polling.invocations] == ["error", "ok"]


def test_without_report_batch_item_failures_the_response_is_ignored(
    stream: StreamUnderTest,
) -> None:
    stream.put_all(ORDERS[:3])
    handler = RecordingHandler(fail=lambda order: "report" if order == "o2" else None)
    poller(stream, handler, report_batch_item_failures=False).run_until_drained()
    assert handler.batches == [ORDERS[:3]]


# --- bisect, retry limit, record age ----------------------------------------------------------


def test_bisect_isolates_a_poison_record(
    stream: StreamUnderTest, on_failure: SqsDestination
) -> None:
    stream.put_all(ORDERS)
    handler = RecordingHandler(fail=lambda order: "raise" if order == "o6" else None)
    polling = poller(
        stream,
        handler,
        batch_size=8,
        bisect_on_error=True,
        max_retry_attempts=1,
        destination=on_failure,
    )
    polling.run_until_drained()
    assert (
        handler.batches
        == [
            ORDERS,  # raises: split in two
            ORDERS[:4],  # done
            ORDERS[4:],  # raises: split
            ["o5", "o6"],  # raises: split
            ["o5"],  # done
            ["o6"],  # raises: retried once (max_retry_attempts=1)
            ["o6"],  # raises again: given up
            ["o7", "o8"],
        ]
    )
    assert sorted(handler.done) == sorted(set(ORDERS) - {"o6"})
    (given_up,) = polling.given_up
    (message,) = messages(on_failure.client, on_failure.queue_url)
    info = message["KinesisBatchInfo" if stream.name == "kinesis" else "DDBStreamBatchInfo"]
    assert info["batchSize"] == 1
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == given_up.sequences[0]
    assert message["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert message["requestContext"]["approximateInvokeCount"] == 2
    assert message["responseContext"]["functionError"] == "Unhandled"


def test_retry_limit_gives_the_batch_up_to_the_on_failure_queue(
    stream: StreamUnderTest, on_failure: SqsDestination
) -> None:
    stream.put_all(ORDERS[:5])
    handler = RecordingHandler(fail=lambda order: "raise" if order == "o2" else None)
    polling = poller(stream, handler, batch_size=3, max_retry_attempts=2, destination=on_failure)
    polling.run_until_drained()
    assert handler.batches == [ORDERS[:3]] * 3 + [ORDERS[3:5]]  # 1 call + 2 retries, then on
    (message,) = messages(on_failure.client, on_failure.queue_url)
    key = "KinesisBatchInfo" if stream.name == "kinesis" else "DDBStreamBatchInfo"
    first, _, last = polling.invocations[0].sequences
    (shard,) = polling.checkpoints()
    assert message == {
        "requestContext": {
            "requestId": message["requestContext"]["requestId"],
            "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:stream-consumer",
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": 3,
        },
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        },
        "version": "1.0",
        "timestamp": message["timestamp"],
        key: {
            "shardId": shard,
            "startSequenceNumber": first,
            "endSequenceNumber": last,
            "approximateArrivalOfFirstRecord": message[key]["approximateArrivalOfFirstRecord"],
            "approximateArrivalOfLastRecord": message[key]["approximateArrivalOfLastRecord"],
            "batchSize": 3,
            "streamArn": stream.source.stream_arn,
        },
    }
    assert message["timestamp"].endswith("Z")


def test_retry_limit_after_partial_failures_gives_up_from_the_failed_record(
    stream: StreamUnderTest, on_failure: SqsDestination
) -> None:
    stream.put_all(ORDERS[:4])
    handler = RecordingHandler(fail=lambda order: "report" if order == "o2" else None)
    polling = poller(stream, handler, batch_size=4, max_retry_attempts=1, destination=on_failure)
    polling.run_until_drained()
    assert handler.batches == [ORDERS[:4], ORDERS[1:4]]  # o1 done, then o2.. given up
    (message,) = messages(on_failure.client, on_failure.queue_url)
    key = "KinesisBatchInfo" if stream.name == "kinesis" else "DDBStreamBatchInfo"
    assert message[key]["batchSize"] == 3
    assert "functionError" not in message["responseContext"]  # a valid partial response


def test_records_past_their_maximum_age_are_given_up_unread(
    stream: StreamUnderTest, on_failure: SqsDestination
) -> None:
    stream.put_all(ORDERS[:2])
    handler = RecordingHandler()
    polling = StreamPoller(
        stream.source,
        handler,
        MappingSettings(max_record_age_s=60),
        destination=on_failure,
        clock=lambda: 4_000_000_000.0,  # long after the records arrived
    )
    polling.run_until_drained()
    assert handler.batches == []
    (message,) = messages(on_failure.client, on_failure.queue_url)
    assert message["requestContext"]["condition"] == "RecordAgeExceeded"
    key = "KinesisBatchInfo" if stream.name == "kinesis" else "DDBStreamBatchInfo"
    assert message[key]["batchSize"] == 2


# --- order per shard ----------------------------------------------------------------------


def test_order_is_kept_per_shard_through_failures(moto_endpoint: str) -> None:
    """Two shards, orders of several customers (partition keys): each shard's records reach
    the function in sequence order, and each customer's orders in the order written, though
    some fail and come back."""
    stream = KinesisStream(moto_endpoint, shards=2)
    written: dict[str, list[str]] = {}
    for i in range(40):
        customer = f"c{i % 5}"
        order = f"o{i}"
        written.setdefault(customer, []).append(order)
        stream.put(order, partition_key=customer)
    failing = {"o7": 2, "o13": 1, "o22": 1}

    def fail(order: str) -> str | None:
        if failing.get(order, 0) > 0:
            failing[order] -= 1
            return "report" if order != "o13" else "raise"
        return None

    handler = RecordingHandler(fail=fail)
    polling = StreamPoller(stream.source, handler, MappingSettings(batch_size=4))
    polling.run_until_drained()
    assert len(polling.checkpoints()) == 2
    sequences_done: dict[str, list[int]] = {}
    orders_done: list[str] = []
    for invocation, orders in zip(polling.invocations, handler.batches, strict=True):
        if invocation.outcome == "partial":
            stop = invocation.sequences.index(str(invocation.first_failed))
        else:
            stop = len(orders) if invocation.outcome == "ok" else 0
        sequences_done.setdefault(invocation.shard_id, []).extend(
            int(s) for s in invocation.sequences[:stop]
        )
        orders_done += orders[:stop]
    assert {i.outcome for i in polling.invocations} == {"ok", "partial", "error"}
    assert len(sequences_done) == 2
    assert all(sequences_done.values())
    for sequences in sequences_done.values():
        assert sequences == sorted(set(sequences))  # each once, in sequence order
    assert sorted(orders_done) == sorted(f"o{i}" for i in range(40))
    for orders in written.values():
        assert [o for o in orders_done if o in orders] == orders


def test_a_closed_shard_ends_at_its_last_record_and_its_children_follow(
    moto_endpoint: str,
) -> None:
    """After a reshard the parent is closed; a child is read only once the parent is read to
    its end, its last sequence number (moto keeps handing out a next iterator there, where
    Kinesis hands out none). moto writes every record to the parent, even after the reshard,
    so the children are seen polled, not read."""
    stream = KinesisStream(moto_endpoint)
    stream.put_all(["o1", "o2", "o3"])
    stream.client.update_shard_count(
        StreamName=stream.stream_name, TargetShardCount=2, ScalingType="UNIFORM_SCALING"
    )
    stream.put_all(["o4", "o5"])
    shards = stream.source.shards()
    (parent,) = [s for s in shards if s.closed]
    children = {s.shard_id for s in shards if s.parent_id == parent.shard_id}
    assert len(children) == 2
    opened: list[str] = []
    iterator = stream.source.iterator

    def recording(shard_id: str, position: Position) -> str | None:
        opened.append(shard_id)
        return iterator(shard_id, position)

    stream.source.iterator = recording  # type: ignore[method-assign]
    handler = RecordingHandler()
    polling = StreamPoller(stream.source, handler, MappingSettings(batch_size=2))
    polling.run_until_drained()
    assert handler.batches == [["o1", "o2"], ["o3", "o4"], ["o5"]]
    assert polling.shard_states[parent.shard_id].ended
    first_child = min(opened.index(child) for child in children)  # both children polled
    assert set(opened[:first_child]) == {parent.shard_id}
