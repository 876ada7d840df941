"""The reports' ledger readers agree: the same entries in the DynamoDB ledger table and in
PostgreSQL's `exactly_once.ledger` give the same counts per key, filtered by run and scope."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING

import psycopg
import pytest

from local_aws.demo import DynamoLedger, LedgerReader, check_ledger
from local_aws.pg_ledger import PostgresLedger

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def entries(run: str) -> list[tuple[str, str]]:
    """(pk, sk): one key once, one twice, one in two scopes, another run's, a look-alike scope."""
    return [
        (f"o-{run}-1", "orders#effect"),
        (f"o-{run}-2", "orders#effect"),
        (f"o-{run}-2", "orders#again"),
        (f"o-{run}-3", "sales#effect"),
        (f"o-{run}-3", "orders#effect"),
        (f"o-other{run}-1", "orders#effect"),  # no "-<run>-" in it
        (f"o-{run}-4", "aXb#effect"),  # not scope "a_b": `_` is no wildcard here
        (f"o-{run}-5", "a_b#effect"),
    ]


@pytest.fixture
def readers(ddb: DynamoDBClient, ledger_table: str, pg_dsn: str) -> tuple[str, list[LedgerReader]]:
    run = uuid.uuid4().hex[:8]
    with psycopg.connect(pg_dsn) as conn:
        for pk, sk in entries(run):
            conn.execute(
                "INSERT INTO exactly_once.ledger (pk, sk, fence, message_id, detail, "
                "written_at_ms) VALUES (%s, %s, 1, 'm', '{}', 0)",
                (pk, sk),
            )
            ddb.put_item(TableName=ledger_table, Item={"pk": {"S": pk}, "sk": {"S": sk}})
    return run, [DynamoLedger(ddb, ledger_table), PostgresLedger(pg_dsn)]


def test_both_readers_count_the_same_entries(readers: tuple[str, list[LedgerReader]]) -> None:
    run, (dynamodb, postgres) = readers
    marker = f"-{run}-"
    for scope in (None, "orders", "sales", "a_b"):
        assert dynamodb.counts(marker, scope) == postgres.counts(marker, scope), scope
    assert postgres.counts(marker, "orders") == Counter(
        {f"o-{run}-1": 1, f"o-{run}-2": 2, f"o-{run}-3": 1}
    )
    assert postgres.counts(marker, "a_b") == Counter({f"o-{run}-5": 1})


def test_check_ledger_on_postgres(readers: tuple[str, list[LedgerReader]]) -> None:
    run, (_, postgres) = readers
    expected = {f"o-{run}-1", f"o-{run}-2", f"o-{run}-3", f"o-{run}-9"}
    check = check_ledger(postgres, expected, run, "orders")
    assert check.executed_once == 2
    assert check.double_effects == {f"o-{run}-2": 2}
    assert check.missing == {f"o-{run}-9"}
    assert check.unexpected == set()
    assert not check.ok
