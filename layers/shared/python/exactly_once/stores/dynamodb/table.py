"""The DynamoDB store as its requests see it: a table, the store's client and how long a
failure is kept.

The modules that send the requests (acquisition, fenced_writes, reads) take this instead of
the store class, which imports them: importing the class back would be a cycle. The client is
the store's own property, so every request reads it just where the store would: lazily fetched,
fetched again in a fork child or a SnapStart clone, measuring the clock skew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class Table(Protocol):
    @property
    def table_name(self) -> str: ...

    @property
    def client(self) -> DynamoDBClient: ...

    @property
    def failed_ttl_s(self) -> int: ...
