"""`ExactlyOnceDashboard` (optional): one CloudWatch dashboard for consumers, HTTP APIs, topics,
SNS subscribers, stream consumers, tables (or the PostgreSQL database) and the monitor."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from exactly_once_cdk.consumer import IdempotentConsumer
from exactly_once_cdk.http_api import IdempotentHttpApi
from exactly_once_cdk.lock_monitor import StuckLockMonitor
from exactly_once_cdk.postgres_store import IdempotencyDatabase
from exactly_once_cdk.stream_consumer import StreamConsumerBase
from exactly_once_cdk.subscriber import IdempotentSubscriber
from exactly_once_cdk.tables import IdempotencyTable, LedgerTable
from exactly_once_cdk.topic import IdempotentTopic


class ExactlyOnceDashboard(cloudwatch.Dashboard):
    """A row per consumer (queue, DLQ, function, started minus finished, the event source
    mapping's event counts and the handler's outcomes), per HTTP API
    (requests, latency, function, started minus finished), per topic (published, delivered,
    failed), per SNS subscriber (DLQ, function, asynchronous invocations, started minus
    finished) and per stream consumer (function, lag, DLQ, on-failure queue, started minus
    finished, the mapping's event counts, outcomes), then table throttles (or the database's
    capacity and connections) and the monitor."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumers: Sequence[IdempotentConsumer],
        tables: Sequence[tuple[str, IdempotencyTable | LedgerTable]] = (),
        monitor: StuckLockMonitor | None = None,
        apis: Sequence[IdempotentHttpApi] = (),
        topics: Sequence[IdempotentTopic] = (),
        subscribers: Sequence[IdempotentSubscriber] = (),
        database: IdempotencyDatabase | None = None,
        streams: Sequence[StreamConsumerBase] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        rows: list[
            IdempotentConsumer
            | IdempotentHttpApi
            | IdempotentTopic
            | IdempotentSubscriber
            | StreamConsumerBase
        ]
        rows = [*consumers, *apis, *topics, *subscribers, *streams]
        for row in rows:
            self.add_widgets(*row.dashboard_widgets())
        bottom: list[cloudwatch.IWidget] = []
        if tables:
            bottom.append(
                cloudwatch.GraphWidget(
                    title="DynamoDB throttle events",
                    left=[m for label, table in tables for m in table.throttle_metrics(label)],
                    width=12,
                )
            )
            bottom.extend(
                cloudwatch.GraphWidget(
                    title=f"{label} pending index throttles and transaction conflicts",
                    left=table.index_and_transaction_metrics(),
                    width=12,
                )
                for label, table in tables
                if isinstance(table, IdempotencyTable)
            )
        if database is not None:
            bottom.extend(database.dashboard_widgets())
        if monitor is not None:
            bottom.extend(monitor.dashboard_widgets())
        if bottom:
            self.add_widgets(*bottom)
