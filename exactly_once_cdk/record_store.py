"""`RecordStore`: what a function of these constructs needs from the idempotency store.

Two stores have this shape: `IdempotencyTable` (DynamoDB, reached over its public endpoint) and
`IdempotencyDatabase` (Aurora PostgreSQL behind RDS Proxy, reached from inside a VPC). The
consumer, the HTTP API, the SNS subscriber and the monitor take either as `table=` and never ask
which: the store alone knows the variables that select it, the network a function needs to reach
it and the grants, so choosing PostgreSQL changes no construct that uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from aws_cdk import aws_iam as iam
from constructs import Construct


class RecordStore(Protocol):
    """The idempotency store as its functions see it."""

    @property
    def function_environment(self) -> Mapping[str, str]:
        """The variables that select and reach the store: `IDEMPOTENCY_TABLE`, or
        `IDEMPOTENCY_DSN` with `IDEMPOTENCY_DB_IAM_AUTH` (never both: the library refuses)."""
        ...

    @property
    def function_network(self) -> Mapping[str, Any]:
        """`lambda_.Function` keywords that put a function where it reaches the store: none for
        DynamoDB; the VPC, its isolated subnets and the clients' security group for PostgreSQL."""
        ...

    def grant_records(self, grantee: iam.IGrantable) -> None:
        """What an entry point's function needs: read and write single records."""
        ...

    def grant_batches(self, grantee: iam.IGrantable) -> None:
        """What a function that batches (the SQS consumer) needs on top of `grant_records`."""
        ...

    def grant_pending_query(self, grantee: iam.IGrantable) -> None:
        """What the monitor needs: list stuck and failed records."""
        ...

    def wait_for_schema(self, function: Construct) -> None:
        """Deploy `function` only once the store's schema is in place (a no-op for DynamoDB)."""
        ...
