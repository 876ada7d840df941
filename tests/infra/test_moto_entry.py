"""The local stack's moto: a delete rebuilds the message list only under the send lock."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import boto3
from moto import mock_aws
from moto.sqs.models import Queue, sqs_backends

from local_aws import moto_entry
from local_aws.moto_server import ACCOUNT_ID


class _WatchedLock:
    """Stands in for the queue's lock and notes whether the list was replaced while held."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.held = False
        self.replaced_while_held = False

    def __enter__(self) -> None:
        self.held = True
        self.before = self.queue._messages

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.replaced_while_held = self.queue._messages is not self.before
        self.held = False


def test_delete_replaces_the_message_list_only_while_holding_the_send_lock() -> None:
    moto_entry.patch()
    assert Queue.delete_message is moto_entry._delete_message
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="a")
        handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
        queue = sqs_backends[ACCOUNT_ID]["us-east-1"].queues["q"]
        watched = _WatchedLock(queue)
        queue._messages_lock = watched  # type: ignore[assignment]

        queue.delete_message(handle)

        assert watched.replaced_while_held  # a concurrent send (which takes it) cannot interleave
        assert queue._messages == []
