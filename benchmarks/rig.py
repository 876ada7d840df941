"""The shared test bench: one DynamoDB Local, identically instrumented clients, both consumers.

Every client, whichever library it is for, is made by `Rig.client` with the same botocore
configuration and the same injected latency, so the only difference is the library's own work.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from benchmarks.api_handlers import Api, layer_api, powertools_api
from benchmarks.business import Work
from benchmarks.consumers import Consumer, layer_consumer, powertools_consumer
from benchmarks.instrument import CallCounter, add_latency
from local_aws.tables import create_idempotency_table, create_ledger_table, create_powertools_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

REGION = "us-east-1"


class Variant(StrEnum):
    LAYER = "layer"
    POWERTOOLS = "powertools"

    @property
    def label(self) -> str:
        return LABELS[self]


LABELS = {
    Variant.LAYER: "exactly_once (this layer)",
    Variant.POWERTOOLS: "Powertools BatchProcessor + idempotent_function",
}
VARIANTS = (Variant.LAYER, Variant.POWERTOOLS)


@dataclass
class Rig:
    dynamodb_endpoint: str
    sqs_endpoint: str
    latency_s: float
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    # One session for every client: its loader caches service models, so the many consumers
    # the benchmark builds start quickly. Clients are created on the main thread only.
    session: boto3.session.Session = field(default_factory=boto3.session.Session)

    @property
    def layer_table(self) -> str:
        return f"bench-layer-{self.run_id}"

    @property
    def powertools_table(self) -> str:
        return f"bench-powertools-{self.run_id}"

    @property
    def ledger_table(self) -> str:
        """The effects ledger of the store comparison's fenced effect (benchmarks/stores.py)."""
        return f"bench-ledger-{self.run_id}"

    @property
    def scope(self) -> str:
        return f"bench-{self.run_id}"

    @property
    def api_scope(self) -> str:
        """The API's records share the layer's table, under a scope of their own."""
        return f"bench-api-{self.run_id}"

    def client(
        self, service: str, counter: CallCounter | None = None, *, latency: bool = True
    ) -> Any:
        endpoint = self.dynamodb_endpoint if service == "dynamodb" else self.sqs_endpoint
        client = self.session.client(  # type: ignore[call-overload]
            service,
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",  # noqa: S106 - DynamoDB Local accepts any
            config=Config(
                retries={"mode": "standard", "total_max_attempts": 3}, max_pool_connections=64
            ),
        )
        if latency:
            add_latency(client, self.latency_s)
        if counter is not None:
            counter.attach(client)
        return client

    def create_tables(self) -> None:
        admin: DynamoDBClient = self.client("dynamodb")
        create_idempotency_table(admin, self.layer_table)
        create_powertools_table(admin, self.powertools_table)
        create_ledger_table(admin, self.ledger_table)

    def drop_tables(self) -> None:
        admin: DynamoDBClient = self.client("dynamodb")
        for name in (self.layer_table, self.powertools_table, self.ledger_table):
            admin.delete_table(TableName=name)

    def consumer(
        self,
        variant: Variant,
        work: Work,
        counter: CallCounter | None = None,
        *,
        latency: bool = True,
        layer_concurrency: int | None = None,
    ) -> Consumer:
        """A fresh consumer (a new "execution environment") with its own clients."""
        dynamodb: DynamoDBClient = self.client("dynamodb", counter, latency=latency)
        if variant is Variant.LAYER:
            sqs: SQSClient = self.client("sqs", counter, latency=latency)
            return layer_consumer(
                work,
                table=self.layer_table,
                scope=self.scope,
                dynamodb=dynamodb,
                sqs=sqs,
                concurrency=layer_concurrency,
            )
        return powertools_consumer(work, table=self.powertools_table, dynamodb=dynamodb)

    def api(
        self,
        variant: Variant,
        work: Work,
        counter: CallCounter | None = None,
        *,
        latency: bool = True,
    ) -> Api:
        """A fresh idempotent API handler (a new "execution environment") with its own client.

        It uses the same tables as the consumers: Powertools' record ids start with the
        handler's qualified name and the layer's API records have a scope of their own.
        """
        dynamodb: DynamoDBClient = self.client("dynamodb", counter, latency=latency)
        if variant is Variant.LAYER:
            return layer_api(work, table=self.layer_table, scope=self.api_scope, dynamodb=dynamodb)
        return powertools_api(work, table=self.powertools_table, dynamodb=dynamodb)
