"""`moto_server`, with one race in its SQS closed: a message sent during a delete can vanish.

moto 5.2.5's `Queue.delete_message` rebuilds the queue's message list from a snapshot without
the lock that `add_message` appends under, so a message appended between the snapshot and the
reassignment is dropped, although SendMessage(Batch) reported it sent. A chaos run saw exactly
that: two messages of one SendMessageBatch never received by anyone (no record, no effect, not
in any queue). Real SQS has no such race, so the local stack must not have it either; patching
the one method here is smaller than forking moto, and harmless once moto fixes it.

Its Kinesis has the opposite gap: every PutRecord invokes each function mapped to the stream,
even through a disabled event source mapping (moto's SQS checks `enabled`), and that invocation
needs Docker. The local stack's stream mappings are disabled (its own poller,
local_aws.stream_poller, reads the shards), so a put skips the disabled ones, as SQS does.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from moto.kinesis.models import Stream
from moto.server import main
from moto.sqs.models import Queue

_unlocked = Queue.delete_message


@functools.wraps(_unlocked)
def _delete_message(self: Queue, receipt_handle: str) -> None:
    with self._messages_lock:  # the Condition add_message appends under
        _unlocked(self, receipt_handle)


def _put_record(
    self: Stream, partition_key: str, explicit_hash_key: str, data: str
) -> tuple[str, str]:
    """moto's Stream.put_record, invoking only the enabled mappings' functions."""
    from moto.awslambda.utils import get_backend

    shard = self.get_shard_for_key(partition_key, explicit_hash_key)
    if shard is None:
        raise ValueError(f"no shard of {self.stream_name} holds the key {partition_key!r}")
    sequence_number = shard.put_record(partition_key, data, explicit_hash_key)
    for arn, esm in list(self.lambda_event_source_mappings.items()):
        if not esm.enabled:
            continue
        get_backend(self.account_id, arn.split(":")[3]).send_kinesis_message(
            function_name=esm.function_arn,
            kinesis_stream=self.arn,
            kinesis_data=data,
            kinesis_shard_id=shard.shard_id,
            kinesis_partition_key=partition_key,
            kinesis_sequence_number=sequence_number,
        )
    return sequence_number, shard.shard_id


def patch() -> None:
    Queue.delete_message = _delete_message  # type: ignore[method-assign]
    Stream.put_record = _put_record  # type: ignore[method-assign]


def run(argv: list[str] | None = None) -> Any:
    patch()
    return main(argv)


if __name__ == "__main__":
    sys.exit(run())
