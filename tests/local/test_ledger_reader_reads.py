"""`make run`'s and `eonce report`'s DynamoDB reader of the execution log reads strongly.

`eonce report` also checks a stack in AWS, where a Scan is eventually consistent unless asked:
an entry written just before the read (a second execution, say) may be missing from it, and
the verdict would count that key once. The chaos books already read with ConsistentRead; the
report's reader must too. DynamoDB Local is always consistent, so the request itself is checked.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from local_aws.demo import DynamoLedger

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def test_the_reader_asks_for_consistent_reads(ddb: DynamoDBClient, ledger_table: str) -> None:
    run = uuid.uuid4().hex[:8]
    for sk in ("orders#effect#a", "orders#effect#b"):
        ddb.put_item(TableName=ledger_table, Item={"pk": {"S": f"o-{run}-1"}, "sk": {"S": sk}})
    scans: list[dict[str, Any]] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        scans.append(dict(params))

    ddb.meta.events.register("provide-client-params.dynamodb.Scan", seen)
    try:
        counts = DynamoLedger(ddb, ledger_table).counts(f"-{run}-", "orders")
    finally:
        ddb.meta.events.unregister("provide-client-params.dynamodb.Scan", seen)
    assert counts == {f"o-{run}-1": 2}
    assert scans, "the reader did not scan"
    assert all(scan.get("ConsistentRead") is True for scan in scans), scans
