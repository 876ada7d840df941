"""What API Gateway could not send is a MalformedResponse (a retryable 500), never stored:
a `cookies` string, NaN or infinity in a JSON shortcut, an infinite or non-numeric status."""

from __future__ import annotations

import math
from typing import Any

import pytest

from exactly_once.http.response import HttpResponse, MalformedResponse


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"statusCode": 200, "cookies": "session=abc"}, id="cookies-string"),
        pytest.param({"statusCode": 200, "cookies": 5}, id="cookies-int"),
        pytest.param({"statusCode": math.inf}, id="status-inf"),
        pytest.param(math.nan, id="nan-shortcut"),
        pytest.param({"total": math.inf}, id="inf-in-shortcut"),
    ],
)
def test_what_api_gateway_could_not_send_is_a_malformed_response(value: Any) -> None:
    with pytest.raises(MalformedResponse):
        HttpResponse.from_handler(value)
