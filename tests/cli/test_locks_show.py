"""`locks show` prints a record whatever its stored result holds."""

from __future__ import annotations

import json

from exactly_once import StoredRecord
from exactly_once.stores import codec, schema
from exactly_once_cli.locks import _record_json


def record_with(result_text: str) -> StoredRecord:
    return StoredRecord.from_item(
        {
            schema.PARTITION_KEY: {"S": "orders#o-1"},
            schema.STATUS: {"S": "COMPLETED"},
            schema.FENCE: {"N": "1800000000001"},
            schema.RESULT: {"S": result_text},
        }
    )


def test_a_decodable_result_is_shown_decoded() -> None:
    shown = json.loads(_record_json(record_with(codec.dumps({"ids": (1, 2)}))))
    assert shown["result"] == {"ids": [1, 2]}
    assert "result_undecodable" not in shown


def test_a_result_that_cannot_be_decoded_is_reported_not_raised() -> None:
    shown = json.loads(_record_json(record_with('{"__eo_decimal__": "not a number"}')))
    assert shown["result"] is None
    assert shown["result_undecodable"].startswith("InvalidOperation")


def test_epoch_times_are_followed_by_utc_iso_times_and_ages() -> None:
    record = StoredRecord.from_item(
        {
            schema.PARTITION_KEY: {"S": "orders#o-1"},
            schema.STATUS: {"S": "IN_PROGRESS"},
            schema.FENCE: {"N": "1800000000001"},
            schema.CREATED_AT: {"N": "1767225600000"},  # 2026-01-01T00:00:00Z
            schema.LEASE_EXPIRES_AT: {"N": "1767225725500"},
            schema.TTL: {"N": "1768521600"},
        }
    )
    now = 1_767_225_600 + 3 * 3600 + 5 * 60  # 3h 5m after creation
    shown = json.loads(_record_json(record, now_s=now))
    assert shown["created_at_ms"] == 1_767_225_600_000
    assert shown["created_at"] == "2026-01-01T00:00:00.000Z (3h 5m ago)"
    assert shown["lease_expires_at"] == "2026-01-01T00:02:05.500Z (3h 2m ago)"
    assert shown["expires_at"] == "2026-01-16T00:00:00.000Z (in 14d 20h)"
    assert "updated_at" not in shown  # never written, so no time to show
    keys = list(shown)
    assert keys.index("created_at") == keys.index("created_at_ms") + 1


def test_recovery_points_are_listed_in_order_with_their_results() -> None:
    point = {"M": {"name": {"S": "ship"}, "fence": {"N": "7"}, "at": {"N": "1800000000000"}}}
    charge = {"M": {**point["M"], "name": {"S": "charge"}, "result": {"S": codec.dumps((1, 2))}}}
    broken = {"M": {**point["M"], "result": {"S": '{"__eo_decimal__": "x"}'}}}
    record = StoredRecord.from_item(
        {
            schema.PARTITION_KEY: {"S": "orders#o-1"},
            schema.STATUS: {"S": "IN_PROGRESS"},
            schema.FENCE: {"N": "7"},
            schema.step_attribute(2): broken,
            schema.step_attribute(1): charge,
        }
    )
    shown = json.loads(_record_json(record, now_s=1800000000.0))
    assert [(s["position"], s["name"]) for s in shown["steps"]] == [(1, "charge"), (2, "ship")]
    assert shown["steps"][0]["result"] == [1, 2]
    assert shown["steps"][1]["result"].startswith("<undecodable")
