"""The functions' DynamoDB grants are derived, not guessed: the store runs through every call an
entry point makes, against DynamoDB Local, while a botocore `before-call` hook records each
operation (per table, and per item of a transaction, which IAM authorises item by item; per
statement of a PartiQL batch, which IAM authorises statement by statement). The grants must
equal what was recorded: an unused action fails, and so does a missing one."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import AcquireStatus, ErrorInfo, IdempotencyStore, Status, begin, sqs_consumer
from exactly_once.ledger import record_effect
from exactly_once.stores import schema
from exactly_once_cdk.tables import BATCH_ACTIONS, RECORD_ACTIONS
from tests.conftest import FakeClock, make_ddb_client
from tests.consumer.conftest import event, lambda_context, make_queues, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from local_aws.dynamodb_local import DynamoDBLocal

# IAM authorises each item of a TransactWriteItems as its single-item action.
TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
# A PartiQL statement names its table (and index) in its text, not in a TableName field, and IAM
# authorises it by its verb (dynamodb:PartiQLInsert, ...Update, ...Delete, ...Select).
_NAME = r'"((?:[^"]|"")+)"'  # a quoted name, as the store writes them ("" is a quote)
PARTIQL_TARGETS = {
    verb: re.compile(rf"\s*{verb}\s+{lead}{_NAME}(?:\.{_NAME})?", re.IGNORECASE | re.DOTALL)
    for verb, lead in (
        ("INSERT", r"INTO\s+"),
        ("UPDATE", ""),
        ("DELETE", r"FROM\s+"),
        ("SELECT", r".*?\bFROM\s+"),
    )
}


def partiql_statements(operation: str, body: dict[str, Any]) -> list[str] | None:
    """The statements of a PartiQL request (IAM checks each), None for any other request."""
    if operation == "ExecuteStatement":
        return [body["Statement"]]
    if operation == "BatchExecuteStatement":
        return [entry["Statement"] for entry in body["Statements"]]
    if operation == "ExecuteTransaction":
        return [entry["Statement"] for entry in body["TransactStatements"]]
    return None


def partiql_action(statement: str) -> tuple[str, str]:
    """(resource, action) of one PartiQL statement; one the recorder cannot read fails."""
    verb = statement.split(None, 1)[0].upper()
    found = verb in PARTIQL_TARGETS and PARTIQL_TARGETS[verb].match(statement)
    assert found, f"a PartiQL statement the recorder cannot read: {statement!r}"
    table, index = (name and name.replace('""', '"') for name in found.groups())
    resource = f"{table}/index/{index}" if index else table
    return resource, f"dynamodb:PartiQL{verb.capitalize()}"


class Recorder:
    """IAM actions by resource ("<table>" or "<table>/index/<index>"), from the requests."""

    def __init__(self) -> None:
        self.actions: dict[str, set[str]] = defaultdict(set)

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params["body"] or b"{}")
        if model.name == "TransactWriteItems":
            for entry in body["TransactItems"]:
                ((kind, item),) = entry.items()
                self.actions[item["TableName"]].add(f"dynamodb:{TRANSACT_ACTIONS[kind]}")
            return
        statements = partiql_statements(model.name, body)
        if statements is not None:
            for statement in statements:
                resource, action = partiql_action(statement)
                self.actions[resource].add(action)
            return
        resource = body["TableName"]
        if "IndexName" in body:
            resource += f"/index/{body['IndexName']}"
        self.actions[resource].add(f"dynamodb:{model.name}")


@pytest.fixture
def recorded(dynamodb_local: DynamoDBLocal) -> Iterator[tuple[DynamoDBClient, Recorder]]:
    """A client of this test's own, so the hook never sees another test's calls."""
    client = make_ddb_client(dynamodb_local.endpoint)
    recorder = Recorder()
    client.meta.events.register("before-call.dynamodb", recorder)
    yield client, recorder
    client.meta.events.unregister("before-call.dynamodb", recorder)


def test_the_grants_are_exactly_what_the_store_calls(
    recorded: tuple[DynamoDBClient, Recorder],
    fresh_idempotency_table: str,
    ledger_table: str,
    clock: FakeClock,
) -> None:
    client, recorder = recorded
    store = IdempotencyStore(fresh_idempotency_table, client=client, clock=clock)
    scope, lease = "actions", 30_000

    # acquire: new, duplicate (completed), in progress elsewhere, takeover of an expired lease
    done = store.acquire(scope, "done", lease_ms=lease, owner="a")
    assert done.lock is not None
    store.complete(done.lock, {"ok": True})
    assert (
        store.acquire(scope, "done", lease_ms=lease, owner="b").status
        is AcquireStatus.ALREADY_COMPLETED
    )
    held = store.acquire(scope, "held", lease_ms=lease, owner="a")
    assert held.lock is not None
    assert store.acquire(scope, "held", lease_ms=lease, owner="b").status is (
        AcquireStatus.IN_PROGRESS
    )
    assert store.extend(held.lock, lease * 2).lock is not None  # extend
    clock.advance(lease * 3 / 1000)
    taken = store.acquire(scope, "held", lease_ms=lease, owner="b")
    assert (taken.status, taken.takeover) == (AcquireStatus.ACQUIRED, True)
    # fail, release
    failing = store.acquire(scope, "failing", lease_ms=lease, owner="a")
    assert failing.lock is not None
    store.fail(failing.lock, ErrorInfo("Boom", "retry me", True))
    released = store.acquire(scope, "released", lease_ms=lease, owner="a")
    assert released.lock is not None
    store.release(released.lock)
    # get, and the pending index as the monitor and `eonce locks` read it
    assert store.get(scope, "done") is not None
    assert list(store.list_pending(Status.FAILED))
    list(store.list_pending(Status.IN_PROGRESS, stuck_only=True))
    list(store.list_overdue())
    # the fenced effect: the record's mark and the ledger entry in one transaction
    claim = begin(scope, "effect", lease_s=30, store=store)
    assert record_effect(claim.lock, {"n": 1}, table=ledger_table) is not None
    claim.lock.succeed("done")
    # a TTL-expired record: replaced whole by a new generation
    clock.advance(store.record_ttl_s + 3600)
    renewed = store.acquire(scope, "done", lease_ms=lease, owner="c")
    assert (renewed.status, renewed.takeover) == (AcquireStatus.ACQUIRED, False)

    index = f"{fresh_idempotency_table}/index/{schema.PENDING_INDEX}"
    assert dict(recorder.actions) == {
        fresh_idempotency_table: set(RECORD_ACTIONS),
        index: {"dynamodb:Query"},  # IdempotencyTable.grant_pending_query
        ledger_table: {"dynamodb:PutItem"},  # LedgerTable.grant_append
    }


def test_the_consumer_batches_within_its_grants(
    recorded: tuple[DynamoDBClient, Recorder], fresh_idempotency_table: str, sqs: SQSClient
) -> None:
    """The SQS consumer alone batches (`acquire_many`, `finish_many`): its real batches send
    BatchExecuteStatements whose statements IAM checks one by one. A first delivery INSERTs the
    new keys and completes or fails them with UPDATEs; a redelivery (receive count 2) tries the
    seen keys with UPDATEs. All of it must be in the consumer's grants (IdempotencyRecords and
    IdempotencyBatches, tests/infra/test_template.py), and both batch actions must be used."""
    client, recorder = recorded
    queues = make_queues(sqs)

    def handle(body: Any, ctx: Any) -> dict[str, str]:
        if body["id"].startswith("bad"):
            raise RuntimeError("retry me")
        return {"done": body["id"]}

    consumer = sqs_consumer(
        key="id",
        table_name=fresh_idempotency_table,
        scope="batched",
        dead_letter_queue_url=queues.dlq_url,
        dynamodb_client=client,
        sqs_client=sqs,
    )(handle)
    records = [sqs_record({"id": f"ok-{n}"}, arn=queues.source_arn) for n in range(4)]
    records.append(sqs_record({"id": "bad-0"}, arn=queues.source_arn))
    failed = {"batchItemFailures": [{"itemIdentifier": records[-1]["messageId"]}]}
    assert consumer(event(*records), lambda_context()) == failed
    for record in records:
        record["attributes"]["ApproximateReceiveCount"] = "2"
    assert consumer(event(*records), lambda_context()) == failed  # duplicates, and a retry

    assert set(recorder.actions) == {fresh_idempotency_table}
    used = recorder.actions[fresh_idempotency_table]
    granted = set(RECORD_ACTIONS) | set(BATCH_ACTIONS)
    assert used <= granted, used - granted
    assert used >= set(BATCH_ACTIONS), used
