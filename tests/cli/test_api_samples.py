"""The committed API Gateway samples are three requests, not one (issue 26, defect 10): they
shared one Idempotency-Key, so whichever a newcomer invoked second answered with the first's
stored response ("replayed") and never ran its own shape's request."""

from __future__ import annotations

import json
from pathlib import Path

from exactly_once import HttpRequest

EVENTS = Path(__file__).resolve().parents[2] / "events"
SHAPES = ("http-api", "rest-api", "function-url")


def test_each_api_sample_carries_its_own_idempotency_key() -> None:
    keys = {}
    for shape in SHAPES:
        event = json.loads((EVENTS / f"api-payment-{shape}.json").read_text(encoding="utf-8"))
        keys[shape] = HttpRequest.from_event(event).header("Idempotency-Key")
    assert all(keys.values()), keys
    assert len(set(keys.values())) == len(SHAPES), keys
