"""The local stack's moto: a delete holds the lock that sends append under."""

from __future__ import annotations

import threading

import boto3
from moto import mock_aws
from moto.sqs.models import Queue, sqs_backends

from tools import moto_entry
from tools.moto_server import ACCOUNT_ID


def test_delete_waits_for_the_lock_that_send_appends_under() -> None:
    moto_entry.patch()
    assert Queue.delete_message is moto_entry._delete_message
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="a")
        handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
        queue = sqs_backends[ACCOUNT_ID]["us-east-1"].queues["q"]

        deleted = threading.Event()

        def delete() -> None:
            queue.delete_message(handle)
            deleted.set()

        with queue._messages_lock:  # a send is appending right now
            worker = threading.Thread(target=delete)
            worker.start()
            assert not deleted.wait(0.2)  # the delete cannot rebuild the list meanwhile
        worker.join(10)
        assert deleted.is_set()
        assert queue._messages == []
