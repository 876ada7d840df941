"""Edges of the SNS entry points that an adversarial review raised: an upgrade over queues that
already receive envelopes, lock metrics from a concurrent batch (one EMF document per line),
SNS attribute types reaching the DLQ, forged replays, a failed DLQ send, a misconfiguration.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import DeliveryFailed, NotificationContext, Outcome, PermanentError
from tests.consumer.conftest import MakeConsumer, Queues, drain, event, lambda_context, sqs_record
from tests.sns.conftest import TOPIC_ARN, MakeSubscriber, sns_event, sns_record

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


# -- finding 1: SNS_ENVELOPE=auto by default re-keys an existing consumer ----------------------


def test_a_default_consumer_upgraded_over_sns_envelopes_does_not_run_a_processed_message_again(
    make_consumer: MakeConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before this change a queue consumer read an SNS envelope as a plain body: with key=None
    its records are keyed by the SQS messageId (what `sns_envelope="off"` still does). The new
    `auto` would key the same delivery by the SNS MessageId, so a message the previous
    version processed but whose delete was lost (or that was in flight at the deploy) finds no
    record under its new key and runs again: a double effect across the upgrade. With a body
    key on the envelope (key="MessageId", the only way to use the SNS id before), every
    message would go to the DLQ as MissingKey instead. Hence the default is off."""
    monkeypatch.delenv("SNS_ENVELOPE", raising=False)  # the default, whatever ran before
    envelope = {
        "Type": "Notification",
        "MessageId": "11111111-2222-3333-4444-555555555555",
        "TopicArn": TOPIC_ARN,
        "Message": json.dumps({"amount": 7}),
        "Timestamp": "2026-11-23T12:00:00.000Z",
    }
    record = sqs_record(envelope)
    ran: list[Any] = []
    before = make_consumer(lambda body, ctx: ran.append(ctx.key), key=None, sns_envelope="off")
    assert before(event(record), lambda_context()) == {"batchItemFailures": []}
    after = make_consumer(lambda body, ctx: ran.append(ctx.key), key=None)  # the default
    assert after(event(record), lambda_context()) == {"batchItemFailures": []}  # redelivered
    assert [r.outcome for r in after.last_results] == [Outcome.DUPLICATE], ran


# -- finding 2: lock metrics printed from the batch's threads interleave -----------------------


class _WriteRecorder:
    """Stands for sys.stdout and keeps every write call. The Lambda runtime flushes after each
    write (awslambdaric's `Unbuffered`), and other threads run during that flush: only a line
    written whole by one call is safe from another thread's line landing inside it."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self._guard = threading.Lock()

    def write(self, msg: str) -> int:
        with self._guard:
            self.writes.append(msg)
        return len(msg)

    def flush(self) -> None:
        pass


def test_lock_metrics_from_a_concurrent_batch_are_each_one_whole_line_in_one_write(
    make_consumer: MakeConsumer, monkeypatch: pytest.MonkeyPatch, scope: str
) -> None:
    """`count_lock_event` runs on the batch's worker threads (claim and succeed are called from
    `processor.process`). Powertools prints a document and its newline as two writes, so two
    threads could put two documents on one line, and CloudWatch would drop both (a lost
    `Finished` trips the unfinished-work alarm, a lost `Started` hides lost work): each
    document must be one write of one whole line. Checked per write call, so no timing is
    involved."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    stdout = _WriteRecorder()
    monkeypatch.setattr(sys, "stdout", stdout)
    consumer = make_consumer(lambda body, ctx: None, concurrency=10)
    for batch in range(3):
        records = [sqs_record({"orderId": f"emf-{batch}-{i}"}) for i in range(10)]
        assert consumer(event(*records), lambda_context()) == {"batchItemFailures": []}
    monkeypatch.undo()

    metric_writes = [w for w in stdout.writes if '"_aws"' in w]
    names: list[str] = []
    for write in metric_writes:
        assert write.endswith("\n")
        assert write.count("\n") == 1  # one whole line per write
        doc = json.loads(write)
        if doc.get("scope") == scope:
            names += [m["Name"] for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert sorted(names) == ["Finished"] * 30 + ["Started"] * 30


# -- pinned edges (they pass) --------------------------------------------------------------------


def test_binary_string_array_and_number_sns_attributes_reach_the_dlq_as_sqs_accepts_them(
    make_subscriber: MakeSubscriber, sqs: SQSClient, queues: Queues
) -> None:
    """SNS gives Binary values base64-encoded and has a String.Array type SQS only knows as a
    custom String label: the DLQ send must decode the one and keep the other, or SQS refuses
    the letter and the permanent failure is retried in vain."""
    blob = b"\x00\xff binary \x80"
    record = sns_record({"orderId": "attrs-1"})
    record["Sns"]["MessageAttributes"] = {
        "blob": {"Type": "Binary", "Value": base64.b64encode(blob).decode()},
        "tags": {"Type": "String.Array", "Value": '["a", "b", 3]'},
        "amount": {"Type": "Number", "Value": "12.5"},
    }

    def refuse(message: Any, ctx: NotificationContext) -> None:
        raise PermanentError("refused")

    handler = make_subscriber(refuse)
    assert handler(sns_event(record), lambda_context()) == {"permanent": 1}
    (letter,) = drain(sqs, queues.dlq_url)
    attributes = letter["MessageAttributes"]
    assert attributes["blob"]["DataType"] == "Binary"
    assert attributes["blob"]["BinaryValue"] == blob
    assert (attributes["tags"]["DataType"], attributes["tags"]["StringValue"]) == (
        "String.Array",
        '["a", "b", 3]',
    )
    assert (attributes["amount"]["DataType"], attributes["amount"]["StringValue"]) == (
        "Number",
        "12.5",
    )


def test_a_publishers_eo_attributes_cannot_replay_a_permanent_failure_but_the_letters_can(
    make_subscriber: MakeSubscriber, sqs: SQSClient, queues: Queues
) -> None:
    """Any publisher can set SNS message attributes named like ours. Only the nonce the FAILED
    record holds (carried by its DLQ letter) may run the key again."""
    runs: list[int] = []

    def declines_once(message: Any, ctx: NotificationContext) -> str:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise PermanentError("card declined")
        return "ok"

    handler = make_subscriber(declines_once)
    assert handler(sns_event(sns_record({"orderId": "forge-1"})), lambda_context()) == {
        "permanent": 1
    }
    (letter,) = drain(sqs, queues.dlq_url)
    nonce = letter["MessageAttributes"]["eo-replay-nonce"]["StringValue"]

    forgeries = [
        {"eo-replay-nonce": "guess"},
        {"eo-replay-nonce": ""},
        {"eo-failure": json.dumps({"eo-replay-nonce": "guess", "eo-error-type": "x"})},
        {"eo-replay-nonce": nonce.upper() if nonce.upper() != nonce else nonce + "0"},
    ]
    for attributes in forgeries:
        forged = sns_record({"orderId": "forge-1"}, attributes=attributes)  # a new MessageId
        assert handler(sns_event(forged), lambda_context()) == {"permanent": 1}, attributes
    assert runs == [1]
    drain(sqs, queues.dlq_url)

    # The operator republishes the letter with its attributes: the nonce is the real one.
    replay = sns_record(json.loads(letter["Body"]), attributes={"eo-replay-nonce": nonce})
    assert handler(sns_event(replay), lambda_context()) == {"processed": 1}
    again = sns_record(json.loads(letter["Body"]), attributes={"eo-replay-nonce": nonce})
    assert handler(sns_event(again), lambda_context()) == {"duplicate": 1}
    assert runs == [1, 2]


class _SendFailsOnce:
    """An SQS client whose first SendMessage fails (a throttle past botocore's retries)."""

    def __init__(self, sqs: SQSClient) -> None:
        self._sqs = sqs
        self.failed = 0

    def send_message(self, **params: Any) -> Any:
        if not self.failed:
            self.failed += 1
            raise ConnectionError("SQS did not answer (injected)")
        return self._sqs.send_message(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)


def test_a_failed_dlq_send_raises_and_lambdas_retry_dead_letters_it_without_running_it(
    make_subscriber: MakeSubscriber, sqs: SQSClient, queues: Queues
) -> None:
    """The permanent failure is recorded before the send; the send fails, so the event must be
    retried (DeliveryFailed). The async retry meets the FAILED record and only sends the letter,
    with the record's nonce, so that its replay may still run it."""
    runs: list[int] = []

    def refuse(message: Any, ctx: NotificationContext) -> str:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise PermanentError("bad sale")
        return "ok"

    flaky = _SendFailsOnce(sqs)
    handler = make_subscriber(refuse, sqs_client=flaky)
    record = sns_record({"orderId": "dlq-down-1"})
    with pytest.raises(DeliveryFailed, match="DLQ send"):
        handler(sns_event(record), lambda_context())
    assert drain(sqs, queues.dlq_url) == []
    assert handler(sns_event(record), lambda_context()) == {"permanent": 1}  # Lambda's retry
    (letter,) = drain(sqs, queues.dlq_url)
    assert letter["MessageAttributes"]["eo-error-type"]["StringValue"] == "PermanentError"
    assert runs == [1]
    nonce = letter["MessageAttributes"]["eo-replay-nonce"]["StringValue"]
    replay = sns_record(json.loads(letter["Body"]), attributes={"eo-replay-nonce": nonce})
    assert handler(sns_event(replay), lambda_context()) == {"processed": 1}
    assert runs == [1, 2]


def test_a_misconfigured_subscriber_raises_so_the_event_is_retried_and_kept(
    ddb: Any, queues: Queues, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Returning would make Lambda drop the event for good: a missing table (or any setting the
    processor cannot be built from) must raise, so the async retries and then the on-failure
    destination keep it; nothing may run without the store."""
    from exactly_once import sns_subscriber

    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    ran: list[Any] = []
    handler = sns_subscriber(
        key="orderId", scope="sales", dead_letter_queue_url=queues.dlq_url, dynamodb_client=ddb
    )(lambda m, c: ran.append(m))
    with pytest.raises(DeliveryFailed, match="IDEMPOTENCY_TABLE"):
        handler(sns_event(sns_record({"orderId": "conf-1"})), lambda_context())
    assert [r.outcome for r in handler.last_results] == [Outcome.ERROR]
    assert ran == []
