"""Hostile records for each source (Kinesis, DynamoDB Streams, Kafka), each followed by a good
record of the same shard or partition: lone surrogates, deep nesting, huge numbers, look-alike
tags, data that is not base64, missing or mistyped fields, hostile key values.

The promise held here, whatever arrives: the handler never raises, and every record ends
succeeded, dead-lettered with its reason (the DLQ holds it), or reported failed with the
response resuming at or before it, and a record with no position fails the batch whole
(itemIdentifier ""). A record is never answered done when it was not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, PermanentError, RecordContext
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.streams.records import read_event
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.streams.conftest import MakeStreamConsumer, dead_letters, reason_of
from tests.streams.stream_events import (
    b64,
    dynamodb_record,
    kafka_event,
    kafka_record,
    kinesis_record,
    records_event,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

SURROGATE = "\ud83d"
DEEP = 5_000
HUGE = "7" * 5_000


def handler(payload: Any, ctx: RecordContext) -> Any:
    """Returns the payload (so its result goes through the store's codec); a payload asking
    for it is refused for good."""
    if isinstance(payload, dict) and payload.get("poison"):
        raise PermanentError(f"refused {payload['poison']!r}")
    return payload


@dataclass(frozen=True)
class Case:
    name: str
    event: dict[str, Any]
    expect: str  # "processed" | "dead" | "whole": how the hostile (first) record ends
    reason: str = ""  # a dead letter's reason contains it
    key: Any = "orderId"


def kinesis(record: Any) -> dict[str, Any]:
    return records_event(record, kinesis_record({"orderId": "after"}, 99))


def kinesis_raw(data: bytes) -> dict[str, Any]:
    return kinesis(kinesis_record(None, 0, raw=data))


def kinesis_edit(edit: Any) -> dict[str, Any]:
    record = kinesis_record({"orderId": "first"}, 0)
    edit(record)
    return kinesis(record)


def dynamodb(record: Any) -> dict[str, Any]:
    return records_event(record, dynamodb_record({"orderId": {"S": "after"}}, 99))


def image(**attributes: Any) -> dict[str, Any]:
    return dynamodb(dynamodb_record(attributes, 0))


def dynamodb_edit(edit: Any) -> dict[str, Any]:
    record = dynamodb_record({"orderId": {"S": "first"}}, 0)
    edit(record)
    return dynamodb(record)


def nested_map(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"S": "bottom"}
    for _ in range(depth):
        value = {"M": {"x": value}}
    return value


def nested_list(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"N": "1"}
    for _ in range(depth):
        value = {"L": [value]}
    return value


def kafka(record: Any, partition: int = 0) -> dict[str, Any]:
    event = kafka_event(kafka_record({"orderId": "after"}, 99, partition=partition))
    event["records"][f"orders-{partition}"].insert(0, record)
    return event


def kafka_edit(edit: Any, **kwargs: Any) -> dict[str, Any]:
    record = kafka_record({"orderId": "first"}, 5, **kwargs)
    edit(record)
    return kafka(record)


def _set(path: list[Any], value: Any) -> Any:
    def edit(record: dict[str, Any]) -> None:
        node = record
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return edit


def _delete(path: list[Any]) -> Any:
    def edit(record: dict[str, Any]) -> None:
        node = record
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return edit


CASES = [
    # -- Kinesis --------------------------------------------------------------------------
    Case("kinesis: lone surrogate key", kinesis_raw(b'{"orderId": "\\ud83d"}'), "processed"),
    Case(
        "kinesis: lone surrogate in refused data",
        kinesis_raw(b'{"orderId": "s", "poison": "\\udc00x"}'),
        "dead",
        "refused",
    ),
    Case("kinesis: deep JSON", kinesis_raw(b'{"a":' * DEEP + b"1" + b"}" * DEEP), "dead", "deep"),
    Case(
        "kinesis: 5000-digit integer",
        kinesis_raw(b'{"orderId": "big", "n": ' + HUGE.encode() + b"}"),
        "dead",
        "not JSON",
    ),
    Case(
        "kinesis: 5000-digit integer key",
        kinesis_raw(b'{"orderId": ' + HUGE.encode() + b"}"),
        "dead",
        "not JSON",
    ),
    Case(
        "kinesis: codec look-alike payload",
        kinesis_raw(b'{"orderId": "tags", "v": {"__eo_bytes__": "AAAA"}, "__eo_dict__": 1}'),
        "processed",
    ),
    Case(
        "kinesis: one-key codec look-alike",
        kinesis_raw(b'{"__eo_int__": "ff"}'),
        "processed",
        key=None,
    ),
    Case(
        "kinesis: data not base64",
        kinesis_edit(_set(["kinesis", "data"], "%%% not base64 %%%")),
        "dead",
        "not base64",
    ),
    Case("kinesis: data a number", kinesis_edit(_set(["kinesis", "data"], 12)), "dead", "int"),
    Case("kinesis: no data", kinesis_edit(_delete(["kinesis", "data"])), "dead", "no data"),
    Case("kinesis: no kinesis map", kinesis_edit(_delete(["kinesis"])), "whole"),
    Case("kinesis: kinesis map a list", kinesis_edit(_set(["kinesis"], [1])), "whole"),
    Case("kinesis: record not a map", kinesis("a string"), "whole"),
    Case("kinesis: record null", kinesis(None), "whole"),
    Case(
        "kinesis: sequence number a number",
        kinesis_edit(_set(["kinesis", "sequenceNumber"], 12345)),
        "whole",
    ),
    Case("kinesis: empty key", kinesis_raw(b'{"orderId": ""}'), "dead", "MissingKey"),
    Case("kinesis: key true", kinesis_raw(b'{"orderId": true}'), "dead", "MissingKey"),
    Case("kinesis: key a map", kinesis_raw(b'{"orderId": {"S": "x"}}'), "dead", "MissingKey"),
    Case("kinesis: key a float", kinesis_raw(b'{"orderId": 1.5}'), "dead", "MissingKey"),
    Case("kinesis: key 1e400", kinesis_raw(b'{"orderId": 1e400}'), "dead", "MissingKey"),
    Case("kinesis: key NaN", kinesis_raw(b'{"orderId": NaN}'), "dead", "MissingKey"),
    Case("kinesis: key with NUL", kinesis_raw(b'{"orderId": "a\\u0000b"}'), "processed"),
    Case("kinesis: key sha256:", kinesis_raw(b'{"orderId": "sha256:00"}'), "processed"),
    Case(
        "kinesis: 100 kB key",
        kinesis_raw(json.dumps({"orderId": "k" * 100_000}).encode()),
        "processed",
    ),
    Case(
        "kinesis: lone surrogate partition key",
        kinesis(kinesis_record({"orderId": "p"}, 0, partition_key=SURROGATE)),
        "processed",
        key="attribute:partition-key",
    ),
    Case(
        "kinesis: lone surrogate partition key, refused",
        kinesis(kinesis_record({"orderId": "p", "poison": "p"}, 0, partition_key="a" + SURROGATE)),
        "dead",
        "refused",
        key="attribute:partition-key",
    ),
    # -- DynamoDB Streams -------------------------------------------------------------------
    Case("dynamodb: lone surrogate S key", image(orderId={"S": SURROGATE}), "processed"),
    Case(
        "dynamodb: lone surrogate S, refused",
        image(orderId={"S": "r"}, poison={"S": SURROGATE + "x"}),
        "dead",
        "refused",
    ),
    Case(
        "dynamodb: lone surrogate attribute name",
        image(orderId={"S": "n"}, **{SURROGATE: {"S": "v"}}),
        "processed",
    ),
    Case("dynamodb: deep M", image(orderId={"S": "m"}, v=nested_map(DEEP)), "dead", "nested"),
    Case("dynamodb: deep L", image(orderId={"S": "l"}, v=nested_list(DEEP)), "dead", "nested"),
    Case("dynamodb: N 1e999", image(orderId={"N": "1e999"}), "dead", "range"),
    Case("dynamodb: N 5000 digits", image(orderId={"N": HUGE}), "dead", "range"),
    Case("dynamodb: N NaN", image(orderId={"S": "nan"}, v={"N": "NaN"}), "dead", "range"),
    Case("dynamodb: N Infinity", image(orderId={"S": "i"}, v={"N": "-Infinity"}), "dead", "range"),
    Case("dynamodb: N text", image(orderId={"N": "12abc"}), "dead", "not a number"),
    Case("dynamodb: N a number", image(orderId={"N": 12}), "dead", "not DynamoDB JSON"),
    Case("dynamodb: 40-digit N key", image(orderId={"N": "9" * 40}), "processed"),
    Case(
        "dynamodb: two type keys",
        image(orderId={"S": "a", "N": "1"}),
        "dead",
        "one {type: value}",
    ),
    Case("dynamodb: no type key", image(orderId={}), "dead", "one {type: value}"),
    Case("dynamodb: unknown type", image(orderId={"SX": "a"}), "dead", "unknown"),
    Case("dynamodb: NULL false", image(orderId={"S": "n"}, v={"NULL": False}), "dead", "unknown"),
    Case("dynamodb: SS of numbers", image(orderId={"S": "s"}, v={"SS": [1]}), "dead", "unknown"),
    Case(
        "dynamodb: codec look-alike",
        image(orderId={"S": "tag"}, v={"M": {"__eo_set__": {"L": [{"S": "x"}]}}}),
        "processed",
    ),
    Case(
        "dynamodb: look-alike of DynamoDB JSON in an S",
        image(orderId={"S": "lookalike"}, v={"S": '{"S": "x"}'}),
        "processed",
    ),
    Case("dynamodb: no dynamodb map", dynamodb_edit(_delete(["dynamodb"])), "whole"),
    Case(
        "dynamodb: no sequence number",
        dynamodb_edit(_delete(["dynamodb", "SequenceNumber"])),
        "whole",
    ),
    Case("dynamodb: image a string", dynamodb_edit(_set(["dynamodb", "NewImage"], "x")), "dead"),
    Case("dynamodb: image a list", dynamodb_edit(_set(["dynamodb", "NewImage"], [1])), "dead"),
    Case(
        "dynamodb: no image at all",
        dynamodb_edit(
            lambda r: [r["dynamodb"].pop(k, None) for k in ("NewImage", "OldImage", "Keys")]
        ),
        "dead",
        "not DynamoDB JSON",
    ),
    # -- Kafka -------------------------------------------------------------------------------
    Case(
        "kafka: lone surrogate key in value",
        kafka(kafka_record(None, 5, raw=b'{"orderId": "\\ud83d"}')),
        "processed",
    ),
    Case(
        "kafka: deep JSON value",
        kafka(kafka_record(None, 5, raw=b"[" * DEEP + b"]" * DEEP)),
        "dead",
        "deep",
    ),
    Case(
        "kafka: 5000-digit value",
        kafka(kafka_record(None, 5, raw=HUGE.encode())),
        "dead",
        "not JSON",
    ),
    Case(
        "kafka: value not base64",
        kafka_edit(_set(["value"], "@@@")),
        "dead",
        "not base64",
    ),
    Case("kafka: no value (a tombstone)", kafka_edit(_delete(["value"])), "dead", "no value"),
    Case(
        "kafka: value not UTF-8",
        kafka(kafka_record(None, 5, raw=b"\xed\xa0\xbd")),
        "dead",
        "not UTF-8",
    ),
    Case(
        "kafka: key not UTF-8, keyed by it",
        kafka(kafka_record({"orderId": "x"}, 5, key=b"\xed\xa0\xbd")),
        "dead",
        "MissingKey",
        key="attribute:partition-key",
    ),
    Case(
        "kafka: key not base64, keyed by it",
        kafka_edit(_set(["key"], "***")),
        "dead",
        "MissingKey",
        key="attribute:partition-key",
    ),
    Case(
        "kafka: header not UTF-8, keyed by it",
        kafka(kafka_record({"orderId": "x"}, 5, headers={"id": b"\xed\xa0\xbd"})),
        "dead",
        "MissingKey",
        key="attribute:id",
    ),
    Case(
        "kafka: header value not bytes",
        kafka_edit(_set(["headers"], [{"id": "text"}, {"id": [1, 300]}, "x", None])),
        "dead",
        "MissingKey",
        key="attribute:id",
    ),
    Case(
        "kafka: partition a string",
        kafka_edit(_set(["partition"], "0")),
        "whole",
    ),
    Case("kafka: offset a bool", kafka_edit(_set(["offset"], True)), "whole"),
    Case("kafka: offset a float", kafka_edit(_set(["offset"], 5.0)), "whole"),
    Case("kafka: no topic", kafka_edit(_delete(["topic"])), "whole"),
    Case("kafka: record not a map", kafka(7), "whole"),
]


def accounted(event: dict[str, Any], response: dict[str, Any], results: list[Any]) -> None:
    """The promise: every record done, dead-lettered or covered by the response."""
    records = read_event(event)
    assert records is not None
    assert len(results) == len(records)
    named = [item["itemIdentifier"] for item in response["batchItemFailures"]]
    seen: dict[Any, list[Any]] = {}
    for record, result in zip(records, results, strict=True):
        group = seen.setdefault(record.message.group_id, [])
        group.append(record.position)
        if not record.position:
            assert result.report_failure, f"{result}: no position, yet answered done"
            assert "" in named, "a record with no position must fail the batch whole"
        if result.report_failure:
            assert "" in named or any(p in named for p in group), f"{result} not covered"
        elif not result.dead_lettered:
            assert result.outcome in (Outcome.PROCESSED, Outcome.DUPLICATE), result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_record_ends_done_dead_lettered_or_reported_and_never_raises(
    case: Case, build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    consumer = build(handler, key=case.key)
    context = LocalLambdaContext("stream-hostile", timeout_s=60)
    response = consumer(case.event, context)  # raising here fails the test
    results = consumer.last_results
    accounted(case.event, response, results)
    first = results[0]
    if case.expect == "processed":
        assert first.outcome is Outcome.PROCESSED, first
    elif case.expect == "dead":
        assert first.dead_lettered, first
        assert not first.report_failure
    else:
        assert case.expect == "whole"
        assert first.report_failure
        assert {"itemIdentifier": ""} in response["batchItemFailures"]
    letters = dead_letters(sqs, dlq_url)
    assert len(letters) == sum(r.dead_lettered for r in results)
    if case.expect == "dead":
        assert case.reason in reason_of(letters[0]), reason_of(letters[0])
    if case.expect == "whole":
        return  # the whole batch comes again
    # The good record behind it (keyed by orderId) is done, and a redelivery runs nothing.
    if case.key == "orderId":
        assert results[-1].outcome is Outcome.PROCESSED, results[-1]
    assert response == {"batchItemFailures": []}
    again = consumer(case.event, context)
    assert again == {"batchItemFailures": []}
    assert Outcome.PROCESSED not in {r.outcome for r in consumer.last_results}
    dead_letters(sqs, dlq_url)  # a dead letter sent again is harmless; drained


def test_a_look_alike_of_the_codecs_tags_comes_back_as_it_was_sent(
    build: MakeStreamConsumer, ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    """The result a handler returns is the payload; a payload that looks like the codec's own
    tags (stores/codec.py) must come back from the store as the same dict, not as bytes, a
    set or an int."""
    payloads: list[dict[str, Any]] = [
        {"orderId": "t1", "v": {"__eo_bytes__": "AAAA"}},
        {"orderId": "t2", "v": {"__eo_dict__": {"__eo_int__": "ff"}}},
        {"orderId": "t3", "v": [{"__eo_set__": []}, {"__eo_map__": [[1, 2]]}]},
        {"orderId": "t4", "v": {"__eo_tuple__": [1], "x": SURROGATE}},
    ]
    consumer = build(handler)
    records = [kinesis_record(p, n) for n, p in enumerate(payloads)]
    context = LocalLambdaContext("stream-hostile", timeout_s=60)
    assert consumer(records_event(*records), context) == {"batchItemFailures": []}
    store = IdempotencyStore(idempotency_table, client=ddb)
    for payload in payloads:
        stored = store.get(scope, payload["orderId"])
        assert stored is not None
        assert stored.result == payload


def test_an_event_that_is_no_stream_event_is_not_mistaken_for_one(
    build: MakeStreamConsumer,
) -> None:
    consumer = build(handler)
    context = LocalLambdaContext("stream-hostile", timeout_s=60)
    for event in ({}, {"Records": "x"}, {"records": [1]}, "text", None, 12):
        assert consumer(event, context) == {"batchItemFailures": []}
        assert consumer.last_results == []


def test_a_base64_kinesis_data_with_whitespace_or_padding_tricks_is_poison_not_a_crash(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    consumer = build(handler)
    records = []
    for n, data in enumerate(["", "=", "YQ", "YQ==\n", b64("{}") + "=="]):
        record = kinesis_record({"orderId": "x"}, n)
        record["kinesis"]["data"] = data
        records.append(record)
    response = consumer(records_event(*records), LocalLambdaContext("s", timeout_s=60))
    accounted(records_event(*records), response, consumer.last_results)
    assert response == {"batchItemFailures": []}
    assert all(r.dead_lettered for r in consumer.last_results)
    assert len(dead_letters(sqs, dlq_url)) == len(records)
