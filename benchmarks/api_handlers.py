"""The API handlers under test, built the way each library documents, around the same work.

(a) this layer: `@idempotent_api(...)` on `handle(request, ctx)`, its defaults otherwise (the
    key from the Idempotency-Key header, scoped to the IAM caller the authorizer proved);
(b) Powertools: `@idempotent` on `handler(event, context)` with `DynamoDBPersistenceLayer`,
    keyed on the same (caller, Idempotency-Key) pair: `POWERTOOLS_API_KEY`;
(c) the same handler undecorated: the baseline each library's overhead is measured over.
All three parse the JSON body, run the business function and answer 201 with a JSON body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)

from benchmarks.business import Work
from exactly_once import HttpRequest, RequestContext, idempotent_api

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Api = Callable[[dict[str, Any], Any], dict[str, Any]]

# The same scoping as the layer's: one record per (authenticated caller, key).
POWERTOOLS_API_KEY = '[requestContext.authorizer.iam.userArn, headers."idempotency-key"]'


def created(result: dict[str, Any]) -> dict[str, Any]:
    """The proxy response all three handlers return."""
    return {
        "statusCode": 201,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(result),
    }


def layer_api(work: Work, *, table: str, scope: str, dynamodb: DynamoDBClient) -> Api:
    """Each call to this factory is a separate "execution environment" (its own store)."""

    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        return created(work(request.json()))

    return idempotent_api(table_name=table, scope=scope, dynamodb_client=dynamodb)(handle)


def powertools_api(work: Work, *, table: str, dynamodb: DynamoDBClient) -> Api:
    """`@idempotent` registers the Lambda context itself, so in-progress locks expire with it."""
    persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=dynamodb)
    config = IdempotencyConfig(event_key_jmespath=POWERTOOLS_API_KEY)

    @idempotent(persistence_store=persistence, config=config)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return created(work(json.loads(event["body"])))

    return handler


def bare_api(work: Work) -> Api:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return created(work(json.loads(event["body"])))

    return handler
