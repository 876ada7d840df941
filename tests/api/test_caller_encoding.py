"""A caller string names one principal only. JWT callers are issuer and subject, pool callers
are pool and identity: a separator inside a part must not let two pairs meet (iss "a|b" with
sub "c", iss "a" with sub "b|c"), or the two share keys and one is replayed the other's
stored response."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from hypothesis import given
from hypothesis import strategies as st

from exactly_once import HttpRequest, RequestContext, idempotent_api
from exactly_once.http.caller import authorized_caller
from exactly_once_ops.sample_api_events import http_api_event

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def jwt_event(iss: str, sub: str, key: str = "k") -> dict[str, Any]:
    event = http_api_event({"amount": "5"}, key=key)
    event["requestContext"]["authorizer"] = {"jwt": {"claims": {"iss": iss, "sub": sub}}}
    return event


def jwt_caller(iss: str, sub: str) -> str | None:
    return authorized_caller(HttpRequest.from_event(jwt_event(iss, sub)))


def pool_caller(pool: str, identity: str) -> str | None:
    event = http_api_event({}, key="k")
    event["requestContext"]["authorizer"]["iam"]["cognitoIdentity"] = {
        "identityPoolId": pool,
        "identityId": identity,
    }
    return authorized_caller(HttpRequest.from_event(event))


# Separators and escapes are what would make two pairs meet: draw plenty of them.
PART = st.text(st.sampled_from("ab|%7C2"), max_size=8) | st.text(max_size=8)


@given(PART, PART.filter(bool), PART, PART.filter(bool))
def test_two_issuer_subject_pairs_never_name_one_caller(
    iss1: str, sub1: str, iss2: str, sub2: str
) -> None:
    if (iss1, sub1) != (iss2, sub2):
        assert jwt_caller(iss1, sub1) != jwt_caller(iss2, sub2)


@given(PART, PART.filter(bool), PART, PART.filter(bool))
def test_two_pool_identity_pairs_never_name_one_caller(
    pool1: str, id1: str, pool2: str, id2: str
) -> None:
    if (pool1, id1) != (pool2, id2):
        assert pool_caller(pool1, id1) != pool_caller(pool2, id2)


@given(PART, PART, PART.filter(bool), st.sampled_from(["|", "%7C", "%", "%257C"]))
def test_a_separator_or_escape_moved_across_the_boundary_is_another_caller(
    left: str, middle: str, right: str, glue: str
) -> None:
    """The pairs a random draw rarely meets: the same text, cut at another place."""
    assert jwt_caller(left + glue + middle, right) != jwt_caller(left, middle + glue + right)
    assert pool_caller(left + glue + middle, right) != pool_caller(left, middle + glue + right)
    assert jwt_caller(left + "|" + middle, right) != jwt_caller(left + "%7C" + middle, right)


def test_the_separator_moved_between_issuer_and_subject_is_another_caller() -> None:
    assert jwt_caller("a|b", "c") != jwt_caller("a", "b|c")
    assert jwt_caller("a%7Cb", "c") != jwt_caller("a|b", "c")


def test_usual_issuers_and_subjects_read_as_before() -> None:
    """No `|` or `%` in them: existing records keep their keys."""
    iss = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Pool"
    sub = "0d6f5b6e-1111-2222-3333-444455556666"
    assert jwt_caller(iss, sub) == f"jwt:{iss}|{sub}"


def test_a_subject_with_a_bar_is_not_replayed_another_callers_response(
    ddb: DynamoDBClient, idempotency_table: str
) -> None:
    runs: list[str] = []

    @idempotent_api(
        table_name=idempotency_table, scope=f"cl-{uuid.uuid4().hex[:8]}", dynamodb_client=ddb
    )
    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.caller)
        return {"statusCode": 201, "body": json.dumps({"for": ctx.caller})}

    first = handle(jwt_event("https://idp|tenant-a", "user-1", key="pay-1"), None)
    second = handle(jwt_event("https://idp", "tenant-a|user-1", key="pay-1"), None)
    assert (first["statusCode"], second["statusCode"]) == (201, 201)
    assert "Idempotent-Replayed" not in second.get("headers", {}), second["body"]
    assert len(runs) == 2
    assert runs[0] != runs[1]
