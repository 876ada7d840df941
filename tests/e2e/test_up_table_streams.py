"""`eonce up --app` reads the app's DynamoDB table streams: the local stack mirrors a table
with a stream into DynamoDB Local with its stream, and the serving process's stream worker
reads that stream for the table's consumer (`DynamoDbStreamConsumer`), with the mapping's
settings, so an item written to the table runs the consumer once per key, however often its
record comes (its REMOVE carries it again, as the old image).

One deploy of tests/apps/table_stream_app, in-process (`local_aws.serve.start`, what
`python -m local_aws.serve --app-dir ...` runs).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from exactly_once_ops.local_state import StatePaths
from local_aws.app_source import AppSource
from local_aws.demo import DynamoLedger
from local_aws.local_stack import LocalStack
from local_aws.serve import start
from local_aws.stream_bindings import DYNAMODB
from local_aws.stream_worker import StreamWorkers

APP = Path(__file__).resolve().parents[1] / "apps" / "table_stream_app"
WAIT_S = 120  # a bound on waiting for a condition, never a timing assertion


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, StreamWorkers]]:
    paths = StatePaths(tmp_path_factory.mktemp("up-table-streams"))
    with ExitStack() as running:
        stack, _, _, streams, _ = start(paths, None, 1, running, app=AppSource(APP))
        yield stack, streams


def test_an_item_written_runs_the_table_stream_consumer_once(
    served: tuple[LocalStack, StreamWorkers],
) -> None:
    stack, streams = served
    (binding,) = streams.bindings
    assert (binding.consumer, binding.source) == ("OrderChanges", DYNAMODB)
    assert binding.stream_name == stack.outputs["OrdersTableName"]
    ddb = stack.ddb()  # DynamoDB Local, where the functions and the user's writes go
    assert ddb.describe_table(TableName=binding.stream_name)["Table"].get("LatestStreamArn")
    run = uuid.uuid4().hex[:8]
    first, second = f"table-stream-{run}-1", f"table-stream-{run}-2"
    for order in (first, second):
        item = {"orderId": {"S": order}, "amount": {"N": "5"}}
        ddb.put_item(TableName=binding.stream_name, Item=item)
    # The REMOVE's record carries the first order's old image: the same key and payload again
    ddb.delete_item(TableName=binding.stream_name, Key={"orderId": {"S": first}})
    put_at = time.time()

    assert streams.wait_until_read(put_at, WAIT_S), "the stream worker never read the items"

    ledger = DynamoLedger(ddb, stack.outputs["EffectsTableName"])
    assert dict(ledger.counts(f"table-stream-{run}", binding.scope)) == {first: 1, second: 1}
    ran = streams.totals_by_label()["OrderChanges"]
    assert (ran["processed"], ran["duplicate"]) == (2, 1)  # the REMOVE ran nothing
