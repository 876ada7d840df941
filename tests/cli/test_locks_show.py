"""`locks show` prints a record whatever its stored result holds."""

from __future__ import annotations

import json

from exactly_once import StoredRecord, codec, schema
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
