"""API Gateway events for trying an idempotent API handler with `eonce invoke`.

One payment request in each of the three shapes Lambda delivers: HTTP API payload 2.0, REST API
payload 1.0 and a function URL, each signed by the same IAM caller. Each carries its own key, so
each sample runs its own payment the first time it is invoked and replays it the next.
"""

from __future__ import annotations

import json
from typing import Any

ACCOUNT = "123456789012"
CALLER_ARN = f"arn:aws:iam::{ACCOUNT}:user/payments-client"
SAMPLE_KEY = "pay-2026-0001"
REST_SAMPLE_KEY = "pay-2026-0002"
FUNCTION_URL_SAMPLE_KEY = "pay-2026-0003"
SAMPLE_TIME = ("01/Jan/2026:00:00:00 +0000", 1_767_225_600_000)


def _iam() -> dict[str, Any]:
    return {
        "accessKey": "AKIAEXAMPLE",
        "accountId": ACCOUNT,
        "callerId": "AIDAEXAMPLE",
        "cognitoIdentity": None,
        "principalOrgId": None,
        "userArn": CALLER_ARN,
        "userId": "AIDAEXAMPLE",
    }


def http_api_event(
    body: Any, *, key: str | None, path: str = "/payments", request_id: str = "Zr1qgjVqIAMEVxg="
) -> dict[str, Any]:
    """POST `path` through an HTTP API (payload 2.0) with IAM authorization."""
    host = "abc123.execute-api.us-east-1.amazonaws.com"
    headers = {"content-type": "application/json", "host": host}
    if key is not None:
        headers["idempotency-key"] = key
    headers |= {"user-agent": "curl/8.5.0", "x-amz-date": "20260101T000000Z"}
    return {
        "version": "2.0",
        "routeKey": f"POST {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "abc123",
            "authorizer": {"iam": _iam()},
            "domainName": host,
            "domainPrefix": "abc123",
            "http": {
                "method": "POST",
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "curl/8.5.0",
            },
            "requestId": request_id,
            "routeKey": f"POST {path}",
            "stage": "$default",
            "time": SAMPLE_TIME[0],
            "timeEpoch": SAMPLE_TIME[1],
        },
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def function_url_event(body: Any, *, key: str | None, path: str = "/payments") -> dict[str, Any]:
    """The same request to a function URL with IAM auth: payload 2.0 without a route."""
    event = http_api_event(body, key=key, path=path)
    host = "urlid.lambda-url.us-east-1.on.aws"
    del event["routeKey"], event["requestContext"]["routeKey"]
    event["headers"]["host"] = host
    event["requestContext"] |= {"apiId": "urlid", "domainName": host, "domainPrefix": "urlid"}
    return event


def rest_api_event(body: Any, *, key: str | None, path: str = "/payments") -> dict[str, Any]:
    """The same request through a REST API (payload 1.0, stage `prod`) with IAM auth."""
    host = "abc123.execute-api.us-east-1.amazonaws.com"
    headers = {"Content-Type": "application/json", "Host": host}
    if key is not None:
        headers["Idempotency-Key"] = key
    iam = _iam()
    return {
        "resource": path,
        "path": path,
        "httpMethod": "POST",
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourceId": "x1y2z3",
            "resourcePath": path,
            "httpMethod": "POST",
            "path": f"/prod{path}",
            "accountId": ACCOUNT,
            "apiId": "abc123",
            "stage": "prod",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "requestTimeEpoch": SAMPLE_TIME[1],
            "protocol": "HTTP/1.1",
            "identity": {
                "accessKey": iam["accessKey"],
                "accountId": ACCOUNT,
                "caller": iam["userId"],
                "user": iam["userId"],
                "userArn": CALLER_ARN,
                "sourceIp": "203.0.113.7",
                "userAgent": "curl/8.5.0",
                "apiKey": None,
                "apiKeyId": None,
            },
        },
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def api_sample_events() -> dict[str, dict[str, Any]]:
    """The committed API samples, by file name."""
    payment = {"accountId": "acct-1", "amount": "12.50"}
    return {
        "api-payment-http-api.json": http_api_event(payment, key=SAMPLE_KEY),
        "api-payment-rest-api.json": rest_api_event(payment, key=REST_SAMPLE_KEY),
        "api-payment-function-url.json": function_url_event(payment, key=FUNCTION_URL_SAMPLE_KEY),
        "api-payment-no-key.json": http_api_event(payment, key=None, request_id="Zr1qhjVqIAMEVxh="),
    }
