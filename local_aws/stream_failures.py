"""The on-failure destination of a stream event source mapping: what Lambda sends when it gives a
batch up (retries exhausted, or records past their maximum age), and reading the function's
partial batch response the way Lambda reads it.

The message is the JSON invocation record AWS documents for Kinesis and DynamoDB Streams: it
carries the batch's metadata (shard, first and last sequence numbers, size), never the records,
which a consumer re-reads from the stream while they are retained.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from local_aws.stream_shards import ShardSource, StreamRecord

RETRY_ATTEMPTS_EXHAUSTED = "RetryAttemptsExhausted"
RECORD_AGE_EXCEEDED = "RecordAgeExceeded"


def iso(epoch_s: float) -> str:
    """UTC with milliseconds and a Z, as Lambda writes the record's timestamps."""
    moment = dt.datetime.fromtimestamp(epoch_s, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def invocation_record(
    source: ShardSource,
    function_arn: str,
    records: Sequence[StreamRecord],
    *,
    condition: str,
    invoke_count: int,
    function_error: bool,
    now: float,
) -> dict[str, Any]:
    """The on-failure message for `records` (one shard's, in order), given up for `condition`."""
    response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
    if function_error:
        response["functionError"] = "Unhandled"
    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "responseContext": response,
        "version": "1.0",
        "timestamp": iso(now),
        source.batch_info_key: {
            "shardId": records[0].shard_id,
            "startSequenceNumber": records[0].sequence,
            "endSequenceNumber": records[-1].sequence,
            "approximateArrivalOfFirstRecord": iso(records[0].arrival),
            "approximateArrivalOfLastRecord": iso(records[-1].arrival),
            "batchSize": len(records),
            "streamArn": source.stream_arn,
        },
    }


@dataclass
class SqsDestination:
    """An SQS queue as the mapping's OnFailure destination."""

    client: Any  # boto3 "sqs" client
    queue_url: str

    def send(self, message: dict[str, Any]) -> None:
        self.client.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(message))


@dataclass(frozen=True)
class Verdict:
    """What the mapping makes of one invocation: `first_failed` is the index in the batch to
    retry from (None: all done); `function_error` marks a crash or a response Lambda rejects."""

    first_failed: int | None
    function_error: bool = False


def read_response(response: Any, batch: Sequence[StreamRecord], report_failures: bool) -> Verdict:
    """A stream response read as Lambda reads it: no response, no list or an empty list is
    success; a failure names a record by its sequence number and the mapping retries from the
    lowest one named; an empty, null or unknown itemIdentifier (or a response of another shape)
    fails the whole batch. Without ReportBatchItemFailures the response is ignored."""
    if not report_failures or response is None:
        return Verdict(None)
    if not isinstance(response, dict):
        return Verdict(0, function_error=True)
    failures = response.get("batchItemFailures")
    if failures is None:
        return Verdict(None)
    if not isinstance(failures, list):
        return Verdict(0, function_error=True)
    index = {record.sequence: i for i, record in enumerate(batch)}
    lowest: int | None = None
    for item in failures:
        ident = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(ident, str) or ident not in index:
            return Verdict(0, function_error=True)
        lowest = index[ident] if lowest is None else min(lowest, index[ident])
    return Verdict(lowest)
