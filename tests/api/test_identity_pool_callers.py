"""Every Cognito identity pool user signs with the same role session
(`assumed-role/<role>/CognitoIdentityCredentials`): the caller is the pool identity, never that
shared ARN, so one user is never replayed another user's stored response."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from exactly_once import HttpRequest, RequestContext, idempotent_api
from exactly_once.http.caller import authorized_caller
from exactly_once_ops.sample_api_events import http_api_event, rest_api_event

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ACCOUNT = "123456789012"
POOL = "us-east-1:0d6f5b6e-1111-2222-3333-444455556666"
# What STS hands every identity of an identity pool (enhanced and basic flow alike).
SHARED_ARN = f"arn:aws:sts::{ACCOUNT}:assumed-role/Cognito_AppAuth_Role/CognitoIdentityCredentials"
SHARED_USER_ID = "AROAEXAMPLEROLEID:CognitoIdentityCredentials"
ALICE = "us-east-1:aaaaaaaa-0000-0000-0000-000000000001"
BOB = "us-east-1:bbbbbbbb-0000-0000-0000-000000000002"


def http_api_cognito_event(identity_id: str, body: Any, key: str) -> dict[str, Any]:
    """HTTP API (or function URL) with IAM auth, signed with identity-pool credentials."""
    event = http_api_event(body, key=key)
    event["requestContext"]["authorizer"]["iam"] |= {
        "accessKey": "ASIA" + uuid.uuid4().hex[:12].upper(),  # temporary, per session
        "callerId": SHARED_USER_ID,
        "userArn": SHARED_ARN,
        "userId": SHARED_USER_ID,
        "cognitoIdentity": {
            "amr": ["authenticated", "cognito-idp.us-east-1.amazonaws.com/us-east-1_Pool"],
            "identityId": identity_id,
            "identityPoolId": POOL,
        },
    }
    return event


def rest_api_cognito_event(identity_id: str, body: Any, key: str) -> dict[str, Any]:
    """REST API with IAM auth, signed with identity-pool credentials."""
    event = rest_api_event(body, key=key)
    event["requestContext"]["identity"] |= {
        "accessKey": "ASIA" + uuid.uuid4().hex[:12].upper(),
        "caller": SHARED_USER_ID,
        "user": SHARED_USER_ID,
        "userArn": SHARED_ARN,
        "cognitoIdentityId": identity_id,
        "cognitoIdentityPoolId": POOL,
        "cognitoAuthenticationType": "authenticated",
    }
    return event


def test_two_identity_pool_users_are_two_callers() -> None:
    alice, bob = ALICE, BOB
    for make in (http_api_cognito_event, rest_api_cognito_event):
        a = authorized_caller(HttpRequest.from_event(make(alice, {}, "k")))
        b = authorized_caller(HttpRequest.from_event(make(bob, {}, "k")))
        assert a is not None
        assert b is not None
        assert a != b, f"{make.__name__}: both users are {a!r}"


def test_an_identity_pool_user_never_receives_another_users_response(
    ddb: DynamoDBClient, idempotency_table: str
) -> None:
    runs: list[str] = []

    @idempotent_api(
        table_name=idempotency_table, scope=f"rv-{uuid.uuid4().hex[:8]}", dynamodb_client=ddb
    )
    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        who = request.event["requestContext"]["authorizer"]["iam"]["cognitoIdentity"]["identityId"]
        runs.append(who)
        return {"statusCode": 201, "body": json.dumps({"owner": who, "card": "4242-alice-only"})}

    alice, bob = ALICE, BOB
    body = {"amount": "10.00"}  # a client-side counter or a retried "order-1" key: both common
    first = handle(http_api_cognito_event(alice, body, "order-1"), None)
    second = handle(http_api_cognito_event(bob, body, "order-1"), None)
    assert first["statusCode"] == 201
    assert "Idempotent-Replayed" not in second["headers"], (
        "Bob was replayed Alice's stored response: " + second["body"]
    )
    assert json.loads(second["body"])["owner"] == bob
    assert runs == [alice, bob]
