"""SQS fair queues: a standard queue's records may carry a MessageGroupId (the tenant), which
orders nothing. FIFO is the queue's (an ARN ending in .fifo), never the group id's.

On a fair queue a failure stops nothing, and one group's records run concurrently; on a FIFO
queue the group still stops at its first failure.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, PermanentError, RecordContext
from exactly_once.sqs.messages import SqsMessage
from tests.consumer.conftest import MakeConsumer, Queues, drain, event, lambda_context, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

FIFO_ARN = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"


def fair_record(body: dict[str, Any], group: str, arn: str) -> dict[str, Any]:
    """As Lambda delivers a fair queue's record: a MessageGroupId, no deduplication id."""
    record = sqs_record(body, arn=arn)
    record["attributes"]["MessageGroupId"] = group
    return record


class Recorder:
    """Runs every record; raises for the ids it is told to fail (retryable or permanent)."""

    def __init__(
        self, *, fail: frozenset[str] = frozenset(), poison: frozenset[str] = frozenset()
    ) -> None:
        self.fail, self.poison = fail, poison
        self.ran: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: Any, ctx: RecordContext) -> str:
        with self._lock:
            self.ran.append(body["orderId"])
        if body["orderId"] in self.fail:
            raise RuntimeError("tenant's downstream is down")
        if body["orderId"] in self.poison:
            raise PermanentError("declined")
        return "ok"


def test_a_group_id_on_a_standard_queue_is_not_fifo(queues: Queues) -> None:
    fair = SqsMessage.from_record(fair_record({"orderId": "o-1"}, "tenant-a", queues.source_arn))
    assert fair.group_id == "tenant-a"
    assert not fair.is_fifo
    assert SqsMessage.from_record(sqs_record({"orderId": "o-1"}, arn=FIFO_ARN)).is_fifo


def test_a_failure_in_a_fair_group_stops_none_of_its_other_records(
    make_consumer: MakeConsumer, queues: Queues
) -> None:
    records = [
        fair_record({"orderId": f"a-{n}"}, "tenant-a", queues.source_arn) for n in range(5)
    ] + [fair_record({"orderId": "b-0"}, "tenant-b", queues.source_arn)]
    handler = Recorder(fail=frozenset({"a-0"}))
    consumer = make_consumer(handler)
    response = consumer(event(*records), lambda_context())
    assert response == {"batchItemFailures": [{"itemIdentifier": records[0]["messageId"]}]}
    assert sorted(handler.ran) == ["a-0", "a-1", "a-2", "a-3", "a-4", "b-0"]
    outcomes = [r.outcome for r in consumer.last_results]
    assert outcomes == [Outcome.FAILED] + [Outcome.PROCESSED] * 5


def test_a_fair_groups_records_run_concurrently(
    make_consumer: MakeConsumer, queues: Queues
) -> None:
    """Four records of one tenant meet at a barrier: only a concurrent run gets them there
    (in order, the first would wait alone until the barrier broke)."""
    barrier = threading.Barrier(4, timeout=30)

    def meet(body: Any, ctx: RecordContext) -> int:
        return barrier.wait()

    records = [fair_record({"orderId": f"c-{n}"}, "tenant-a", queues.source_arn) for n in range(4)]
    consumer = make_consumer(meet, concurrency=4)
    assert consumer(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED] * 4


def test_a_fair_queues_poison_goes_to_its_standard_dlq_and_the_group_goes_on(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    records = [fair_record({"orderId": f"p-{n}"}, "tenant-a", queues.source_arn) for n in range(3)]
    handler = Recorder(poison=frozenset({"p-0"}))
    consumer = make_consumer(handler)
    assert consumer(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert sorted(handler.ran) == ["p-0", "p-1", "p-2"]
    [dead] = drain(sqs, queues.dlq_url)
    assert (
        dead["MessageAttributes"]["eo-original-message-id"]["StringValue"]
        == (records[0]["messageId"])
    )
    assert "MessageGroupId" not in dead["Attributes"]  # a standard DLQ: sent as standard


@pytest.mark.parametrize("dedup", [True, False], ids=["with-dedup-id", "group-id-only"])
def test_a_fifo_group_still_stops_at_its_first_failure(
    make_consumer: MakeConsumer, dedup: bool
) -> None:
    """The same batch as the fair one, from a .fifo ARN: the group stops, the other goes on."""
    records = [fair_record({"orderId": f"f-{n}"}, "acct-a", FIFO_ARN) for n in range(3)]
    records.append(fair_record({"orderId": "g-0"}, "acct-b", FIFO_ARN))
    for record in records:
        if dedup:
            record["attributes"]["MessageDeduplicationId"] = record["messageId"]
    handler = Recorder(fail=frozenset({"f-1"}))
    consumer = make_consumer(handler)
    response = consumer(event(*records), lambda_context())
    failed = [item["itemIdentifier"] for item in response["batchItemFailures"]]
    assert failed == [records[1]["messageId"], records[2]["messageId"]]
    assert sorted(handler.ran) == ["f-0", "f-1", "g-0"]  # f-2 never ran
    outcomes = [r.outcome for r in consumer.last_results]
    assert outcomes == [Outcome.PROCESSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.PROCESSED]
