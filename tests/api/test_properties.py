"""Properties of the request's identity, over generated inputs: re-serialising a JSON body never
changes its fingerprint, a key survives the draft's quoting, and (caller, key) pairs never meet."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exactly_once import HttpRequest
from exactly_once.http.fingerprint import request_fingerprint
from exactly_once.http.keys import parse_key, scoped_key
from exactly_once_ops.sample_api_events import http_api_event

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)
KEYS = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=255
)


def reserialised(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        items = [(k, reserialised(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [reserialised(v, rng) for v in value]
    return value


def fingerprint_of(body: str) -> str:
    event = http_api_event({}, key="k")
    event["body"] = body
    return request_fingerprint(HttpRequest.from_event(event))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(JSON, st.integers(min_value=0, max_value=2**32))
def test_a_reserialised_json_body_is_the_same_request(value: Any, seed: int) -> None:
    again = json.dumps(
        reserialised(value, random.Random(seed)), indent=2, ensure_ascii=seed % 2 == 0
    )
    assert fingerprint_of(json.dumps(value)) == fingerprint_of(again)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(KEYS.filter(lambda k: "," not in k))
def test_a_key_bare_or_quoted_is_the_same_key(key: str) -> None:
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert parse_key(key) == key
    assert parse_key(quoted) == key


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(max_size=30), KEYS, st.text(max_size=30), KEYS)
def test_two_caller_key_pairs_never_share_a_record(c1: str, k1: str, c2: str, k2: str) -> None:
    if (c1, k1) != (c2, k2):
        assert scoped_key(c1, k1) != scoped_key(c2, k2)
