"""API Gateway HTTP API (payload 2.0) events for the API benchmark: a POST with an
Idempotency-Key header, from a caller an IAM authorizer has authenticated."""

from __future__ import annotations

import json
import uuid
from typing import Any

CALLER_ARN = "arn:aws:iam::123456789012:user/bench-client"
PATH = "/orders"


def api_event(key: str | None = None) -> dict[str, Any]:
    """A request shaped as an HTTP API with IAM authorization delivers it; a fresh key and
    business id unless `key` is given (the same key is then a retry of the same request)."""
    key = key or str(uuid.uuid4())
    body = json.dumps({"orderId": f"order-{key}", "amount": 10, "currency": "EUR"})
    return {
        "version": "2.0",
        "routeKey": f"POST {PATH}",
        "rawPath": PATH,
        "rawQueryString": "",
        "headers": {
            "accept": "application/json",
            "content-length": str(len(body)),
            "content-type": "application/json",
            "host": "bench.execute-api.us-east-1.amazonaws.com",
            "idempotency-key": key,
            "user-agent": "bench-client/1.0",
            "x-amzn-trace-id": f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]}",
            "x-forwarded-for": "203.0.113.10",
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https",
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "bench",
            "authorizer": {
                "iam": {
                    "accessKey": "AKIAEXAMPLE",
                    "accountId": "123456789012",
                    "callerId": "AIDAEXAMPLE",
                    "cognitoIdentity": None,
                    "principalOrgId": None,
                    "userArn": CALLER_ARN,
                    "userId": "AIDAEXAMPLE",
                }
            },
            "domainName": "bench.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "bench",
            "http": {
                "method": "POST",
                "path": PATH,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.10",
                "userAgent": "bench-client/1.0",
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": f"POST {PATH}",
            "stage": "$default",
            "time": "14/Nov/2023:22:13:20 +0000",
            "timeEpoch": 1700000000000,
        },
        "body": body,
        "isBase64Encoded": False,
    }
