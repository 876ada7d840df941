"""`eonce up` reads the app's Kinesis streams: the serving process (`local_aws.serve.start`,
what `python -m local_aws.serve` runs) starts `make run`'s stream worker for each stream
consumer, so a record put to the stream runs the consumer's code, once per key however often
a producer puts it, and its counts reach `up-stats.json` as the queue consumers' do.

One deploy of this checkout's app (its OrderStream consumer), in-process; the records are put
with boto3 against the stack's moto, as `aws kinesis put-record` would.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from exactly_once_ops.local_state import StatePaths
from local_aws.local_stack import LocalStack
from local_aws.poller import Poller
from local_aws.serve import _stats, start
from local_aws.stream_worker import StreamWorkers

WAIT_S = 120  # a bound on waiting for a condition, never a timing assertion


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalStack, Poller, StreamWorkers]]:
    paths = StatePaths(tmp_path_factory.mktemp("up-streams"))
    with ExitStack() as running:
        stack, poller, _, streams, _ = start(paths, "UpStreams", 1, running)
        yield stack, poller, streams


def test_a_put_record_runs_the_stream_consumer_once(
    served: tuple[LocalStack, Poller, StreamWorkers],
) -> None:
    stack, poller, streams = served
    (binding,) = streams.bindings
    assert binding.consumer == "OrderStream"
    assert binding == stack.stream_bindings()[0]  # the deployed mapping's, as `make run` reads
    kinesis = stack.client("kinesis")
    run = uuid.uuid4().hex[:8]
    first, second = f"up-stream-{run}-1", f"up-stream-{run}-2"
    records = [first, first, second]  # the first put again, as a producer's retry does
    for order in records:
        data = json.dumps({"orderId": order, "amount": 5}).encode()
        kinesis.put_record(StreamName=binding.stream_name, Data=data, PartitionKey=order)
    put_at = time.time()

    assert streams.wait_until_read(put_at, WAIT_S), "the stream worker never read the records"

    counts = stack.ledger().counts(f"up-stream-{run}", binding.scope)
    assert dict(counts) == {first: 1, second: 1}
    stats = _stats(poller, None, streams)  # what `up` writes to up-stats.json each second
    ran = stats.consumers["OrderStream"]
    assert ran["invocations"] >= 1
    assert (ran["processed"], ran["duplicate"]) == (2, 1)  # the put-again record ran nothing
    assert stats.workers["OrderStream"].running == 1
