"""An idempotent API served by the local gateway on a free loopback port, per test; the
store is the session's DynamoDB Local, and each test gets its own scope."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import HttpRequest, IdempotentApi, RequestContext, idempotent_api
from exactly_once_ops.api_client import ApiClient
from local_aws.http_gateway import LocalHttpApi, Route

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ApiHandler = Callable[[HttpRequest, RequestContext], Any]
PATH = "/payments"


class Served:
    """One API under test: its client, the decorated handler, and its gateway."""

    def __init__(self, api: IdempotentApi, gateway: LocalHttpApi) -> None:
        self.api = api
        self.gateway = gateway
        self.client = ApiClient(gateway.endpoint)

    def post(self, body: Any = None, key: str | None = None, **kwargs: Any) -> Any:
        return self.client.request("POST", PATH, body=body, key=key, **kwargs)


MakeApi = Callable[..., Served]


@pytest.fixture
def make_api(ddb: DynamoDBClient, idempotency_table: str) -> Iterator[MakeApi]:
    with ExitStack() as running:

        def make(
            handler: ApiHandler, *, iam_auth: bool = True, timeout_s: float = 29, **options: Any
        ) -> Served:
            options.setdefault("table_name", idempotency_table)
            options.setdefault("scope", f"api-{uuid.uuid4().hex[:10]}")
            options.setdefault("dynamodb_client", ddb)
            api = idempotent_api(**options)(handler)
            routes = [
                Route(method, PATH, api, timeout_s=timeout_s) for method in ("POST", "GET", "PATCH")
            ]
            gateway = running.enter_context(LocalHttpApi(routes, iam_auth=iam_auth))
            return Served(api, gateway)

        yield make
