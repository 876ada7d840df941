"""The local poller reads responses and messages the way Lambda's SQS poller does."""

from __future__ import annotations

import base64

import pytest

from local_aws.poller import failed_ids, to_lambda_record

IDS = {"a", "b", "c"}


@pytest.mark.parametrize(
    ("response", "failed"),
    [
        ({"batchItemFailures": []}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "b"}]}, {"b"}),
        (None, set()),  # a handler returning nothing succeeded for every record
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, IDS),  # empty id: whole batch
        ({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, IDS),  # not in the batch
        ({"batchItemFailures": [{"wrong": "a"}]}, IDS),
        ({"batchItemFailures": "nope"}, IDS),
        ("not a dict", IDS),
    ],
)
def test_failed_ids_follow_lambdas_rules(response: object, failed: set[str]) -> None:
    assert failed_ids(response, IDS) == failed


def test_received_messages_become_lambda_records() -> None:
    message = {
        "MessageId": "m-1",
        "ReceiptHandle": "rh-1",
        "Body": '{"orderId": "o-1"}',
        "MD5OfBody": "abc",
        "Attributes": {"ApproximateReceiveCount": "2", "MessageGroupId": "g"},
        "MessageAttributes": {
            "tenant": {"DataType": "String", "StringValue": "acme"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        },
    }
    record = to_lambda_record(message, "arn:aws:sqs:us-east-1:123456789012:q.fifo", "us-east-1")
    assert record["messageId"] == "m-1"
    assert record["receiptHandle"] == "rh-1"
    assert record["body"] == '{"orderId": "o-1"}'
    assert record["attributes"] == {"ApproximateReceiveCount": "2", "MessageGroupId": "g"}
    assert record["messageAttributes"]["tenant"] == {
        "stringListValues": [],
        "binaryListValues": [],
        "stringValue": "acme",
        "dataType": "String",
    }
    assert base64.b64decode(record["messageAttributes"]["blob"]["binaryValue"]) == b"\x00\x01"
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith("q.fifo")
    assert record["md5OfBody"] == "abc"
