"""Injected throttles go through botocore's own retries before a caller sees them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from botocore.exceptions import ClientError

from fault_injection.throttling import THROTTLE_CODE, THROTTLED_EACH_PROCESS, install_throttling
from local_aws.dynamodb_local import DynamoDBLocal
from tests.chaos.scripted_random import Scripted
from tests.conftest import make_ddb_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def put(client: DynamoDBClient, table: str, key: str) -> int:
    """PutItem; returns how many retries botocore needed."""
    response = client.put_item(TableName=table, Item={"pk": {"S": key}, "sk": {"S": "s"}})
    return response["ResponseMetadata"]["RetryAttempts"]


def test_a_throttle_is_retried_by_botocore_and_the_call_succeeds(
    dynamodb_local: DynamoDBLocal, ledger_table: str
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=3)
    seen: list[str] = []
    install_throttling(client, 0.5, Scripted([0.0, 0.99, 0.99]), seen.append)

    assert put(client, ledger_table, "a") == 1
    assert put(client, ledger_table, "b") == 0
    assert seen == ["PutItem"]


def test_throttles_past_the_last_attempt_reach_the_caller(
    dynamodb_local: DynamoDBLocal, ledger_table: str
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    seen: list[str] = []
    install_throttling(client, 0.5, Scripted([0.0, 0.0]), seen.append)

    with pytest.raises(ClientError) as raised:
        put(client, ledger_table, "c")

    assert raised.value.response["Error"]["Code"] == THROTTLE_CODE
    assert raised.value.response["ResponseMetadata"]["RetryAttempts"] == 1
    assert seen == ["PutItem", "PutItem"]


def test_a_zero_rate_installs_nothing(dynamodb_local: DynamoDBLocal, ledger_table: str) -> None:
    client = make_ddb_client(dynamodb_local.endpoint)
    install_throttling(client, 0.0, Scripted([]))

    assert put(client, ledger_table, "d") == 0


def test_planned_throttles_come_at_their_request_whatever_the_draw(
    dynamodb_local: DynamoDBLocal, ledger_table: str
) -> None:
    """A chaos worker's 3rd and 8th requests are throttled even when no draw throttles, so a
    run's verdict that throttles happened holds by plan (CI's run drew 16 at its 5 % rate,
    against the 10 it asked for); each request still takes its draw."""
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=3)
    seen: list[str] = []
    draws = Scripted([0.99] * 20)
    install_throttling(client, 1e-9, draws, seen.append, planned=THROTTLED_EACH_PROCESS)

    retries = [put(client, ledger_table, f"p{n}") for n in range(7)]

    # Requests 1-2 pass; the 3rd is throttled and its retry (the 4th) passes; 5-7 pass; the
    # 8th (the 7th call's first attempt) is throttled and its retry (the 9th) passes.
    assert THROTTLED_EACH_PROCESS == (3, 8)
    assert retries == [0, 0, 1, 0, 0, 0, 1]
    assert seen == ["PutItem", "PutItem"]
    assert len(draws.draws) == 20 - 9  # one draw per request, the planned ones included


def test_planned_throttles_need_their_rate(
    dynamodb_local: DynamoDBLocal, ledger_table: str
) -> None:
    """No rate, no throttles: the plan does not force a fault the run turned off."""
    client = make_ddb_client(dynamodb_local.endpoint)
    install_throttling(client, 0.0, Scripted([]), planned=THROTTLED_EACH_PROCESS)

    assert [put(client, ledger_table, f"z{n}") for n in range(8)] == [0] * 8
