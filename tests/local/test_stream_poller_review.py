"""Review of the local stream event source mapping (local_aws.stream_poller) against what Lambda
does, on moto's Kinesis: how a batch's retries are counted. AWS's pages do not say; LocalStack's
poller, checked against AWS's own answers, counts them per batch until it is done or given up,
and so does ours: the pessimistic reading, under which local runs show the hazard."""

from __future__ import annotations

from typing import Any

from local_aws.stream_poller import MappingSettings, StreamPoller
from tests.local.stream_support import KinesisStream, RecordingHandler, order_of, sequence_of

ORDERS = ["o1", "o2", "o3", "o4"]


def test_retries_are_counted_per_batch_across_partial_failures(moto_endpoint: str) -> None:
    stream = KinesisStream(moto_endpoint)
    stream.put_all(ORDERS)
    failing = {"o2", "o3", "o4"}  # each fails on its first invocation only

    def respond(records: list[dict[str, Any]]) -> dict[str, Any]:
        """Stops at the first failure and names it, as the library's handler does."""
        for record in records:
            if order_of(record) in failing:
                failing.discard(order_of(record))
                return {"batchItemFailures": [{"itemIdentifier": sequence_of(record)}]}
        return {"batchItemFailures": []}

    handler = RecordingHandler(respond=respond)
    polling = StreamPoller(
        stream.source, handler, MappingSettings(batch_size=4, max_retry_attempts=1)
    )
    polling.run_until_drained()
    # The batch's first invocation and its one retry; the retry fails too, so the rest of the
    # batch (o3, o4) is given up, though each of its failures was a different record.
    assert handler.batches == [ORDERS, ORDERS[1:]]
    (given_up,) = polling.given_up
    assert len(given_up.sequences) == 2
    assert given_up.condition == "RetryAttemptsExhausted"
