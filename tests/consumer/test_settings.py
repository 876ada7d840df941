"""Every yes/no or one-of setting refuses a value it does not know, naming the variable and what
it accepts. `IDEMPOTENCY_KEY_REQUIRED=ture` once read as false: requests without a key then ran
unguarded, and nothing said so."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import ConfigurationError, HttpRequest, RequestContext, begin, idempotent_api
from exactly_once.http.config import ApiConfig
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.stores.postgres import connections
from exactly_once_ops.sample_api_events import http_api_event
from tests.consumer.conftest import MakeConsumer, event, lambda_context, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

STORE = {"table_name": "t", "scope": "s"}


def api_settings() -> Any:
    return ApiConfig.resolve(dict(STORE))


def consumer_settings() -> Any:
    return ConsumerConfig.resolve(dict(STORE))


def once_settings() -> Any:
    return begin("s", "k", table_name="t")  # refused reading its settings, before any store


def connection_settings() -> Any:
    return connections._connect_kwargs("host=db port=5432 user=app dbname=app")


# (variable, what reads it, the words it accepts)
YES_NO = "true, 1, yes, on"
SETTINGS = [
    ("IDEMPOTENCY_KEY_REQUIRED", api_settings, YES_NO),
    ("BLOCK_EXPIRED_LEASES", api_settings, YES_NO),
    ("BLOCK_EXPIRED_LEASES", consumer_settings, YES_NO),
    ("BLOCK_EXPIRED_LEASES", once_settings, YES_NO),
    ("SNS_ENVELOPE", consumer_settings, "auto, on, off"),
    ("LEASE_HEARTBEAT", consumer_settings, "auto, off"),
    ("LEASE_HEARTBEAT", once_settings, "auto, off"),
    ("IDEMPOTENCY_DB_IAM_AUTH", connection_settings, YES_NO),
    ("IDEMPOTENCY_PG_SESSION_SETTINGS", connection_settings, "startup, server"),
]


@pytest.fixture(autouse=True)
def _no_settings_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, _, _ in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    monkeypatch.delenv("IDEMPOTENCY_DSN", raising=False)


@pytest.mark.parametrize(("name", "reader", "accepted"), SETTINGS)
@pytest.mark.parametrize("bad", ["ture", "enabled", "2", "of"])
def test_an_unknown_value_is_refused_naming_the_variable_and_the_accepted_values(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    reader: Callable[[], Any],
    accepted: str,
    bad: str,
) -> None:
    monkeypatch.setenv(name, bad)
    with pytest.raises(ConfigurationError) as refused:
        reader()
    message = str(refused.value)
    assert name in message
    assert accepted in message
    assert repr(bad) in message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        *[("true", True), ("TRUE", True), (" yes ", True), ("1", True), ("On", True)],
        *[("false", False), ("FALSE", False), ("no", False), ("0", False), (" off", False)],
        *[("", True), ("  ", True)],  # empty: the default
    ],
)
def test_the_words_a_yes_no_setting_accepts(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_KEY_REQUIRED", raw)
    assert ApiConfig.resolve(dict(STORE)).key_required is expected


@pytest.mark.parametrize(
    ("raw", "sends_settings"), [("server", False), ("STARTUP", True), ("", True)]
)
def test_the_words_the_session_settings_mode_accepts(
    monkeypatch: pytest.MonkeyPatch, raw: str, sends_settings: bool
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_PG_SESSION_SETTINGS", raw)
    kwargs = connections._connect_kwargs("host=db port=5432 user=app dbname=app")
    assert ("options" in kwargs) is sends_settings


def test_an_api_with_a_misspelt_setting_runs_nothing_and_answers_500(
    monkeypatch: pytest.MonkeyPatch, ddb: DynamoDBClient, idempotency_table: str
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_KEY_REQUIRED", "ture")
    runs: list[str] = []

    @idempotent_api(table_name=idempotency_table, scope="settings", dynamodb_client=ddb)
    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.key)
        return {"statusCode": 201, "body": "{}"}

    answer = handle(http_api_event({"amount": "5"}, key=None), None)
    assert answer["statusCode"] == 500
    assert json.loads(answer["body"])["type"] == "urn:exactly-once:problem:server-misconfigured"
    assert runs == []


def test_a_consumer_with_a_misspelt_setting_fails_every_record_without_running_one(
    monkeypatch: pytest.MonkeyPatch, make_consumer: MakeConsumer
) -> None:
    monkeypatch.setenv("BLOCK_EXPIRED_LEASES", "ture")
    runs: list[Any] = []
    consumer = make_consumer(lambda body, ctx: runs.append(body))
    response = consumer(event(sqs_record({"orderId": "x"})), lambda_context())
    assert len(response["batchItemFailures"]) == 1
    assert "BLOCK_EXPIRED_LEASES" in (consumer.last_results[0].reason or "")
    assert runs == []
