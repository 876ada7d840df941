"""Who is calling: idempotency keys are scoped per caller, so one client never receives
another's stored response.

The default reads what API Gateway's authorizer proved, strongest first. It never reads a
header the client chose (an API key value, a user id in the body): those can be forged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactly_once.http.request import HttpRequest

CallerOf = Callable[[HttpRequest], str | None]


def authorized_caller(request: HttpRequest) -> str | None:
    """The authenticated principal, or None when the route has no authorizer.

    - a Cognito identity pool identity (signing with IAM: `authorizer.iam.cognitoIdentity`;
      REST API: `identity.cognitoIdentityId`): the pool and identity. Every identity of a pool
      signs as the same role session, so the ARN alone would put them all in one key space;
    - IAM (HTTP API, function URL: `authorizer.iam`; REST API: `identity.userArn`): the ARN.
      For an assumed role the session name is whatever the assumer chose: callers sharing a
      role are told apart only if each uses its own session name (else pass `caller=`);
    - JWT (HTTP API: `authorizer.jwt.claims`): issuer and subject (escaped: see `_named`);
    - Cognito user pool (REST API: `authorizer.claims`): issuer and subject;
    - Lambda authorizer: its `principalId` (REST API), or a `principalId`/`sub` it put in its
      context (HTTP API: `authorizer.lambda`);
    - API key (REST API): the key's id.
    """
    authorizer, identity = request.authorizer, request.identity
    iam = _dict(authorizer.get("iam"))
    cognito = _dict(iam.get("cognitoIdentity"))
    if identity_id := _text(cognito.get("identityId")) or _text(identity.get("cognitoIdentityId")):
        pool = _text(cognito.get("identityPoolId")) or _text(identity.get("cognitoIdentityPoolId"))
        return _named("cognito", pool, identity_id)
    if arn := _text(iam.get("userArn")) or _text(identity.get("userArn")):
        return f"iam:{arn}"
    claims = _dict(_dict(authorizer.get("jwt")).get("claims")) or _dict(authorizer.get("claims"))
    if subject := _text(claims.get("sub")):
        return _named("jwt", _text(claims.get("iss")), subject)
    function = _dict(authorizer.get("lambda"))
    if principal := (
        _text(authorizer.get("principalId"))
        or _text(function.get("principalId"))
        or _text(function.get("sub"))
    ):
        return f"authorizer:{principal}"
    if api_key := _text(identity.get("apiKeyId")):
        return f"api-key:{api_key}"
    return None


def _named(kind: str, *parts: str) -> str:
    """`kind:part|part`, each part with `%` and `|` percent-escaped, so the string names one
    tuple only: without it iss "a|b" with sub "c" and iss "a" with sub "b|c" were one caller,
    sharing keys and stored responses. Parts without `%` or `|` (the usual issuer URLs, UUID
    subjects and identity ids) read as before."""
    return kind + ":" + "|".join(p.replace("%", "%25").replace("|", "%7C") for p in parts)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
