"""Lazily created, shared boto3 clients.

Created on first use (not at import) so that cold starts stay lean and `AWS_ENDPOINT_URL*`
variables set by tests or local tools take effect. Retries are botocore's own standard mode,
bounded, so throttling and 5xx errors are retried and then surface to the caller.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from exactly_once import lifecycle

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

_lock = threading.Lock()
_clients: dict[str, Any] = {}


def _config() -> Any:
    from botocore.config import Config

    return Config(
        retries={
            "mode": "standard",
            "total_max_attempts": int(os.environ.get("AWS_MAX_ATTEMPTS", "5")),
        },
        connect_timeout=float(os.environ.get("EO_CONNECT_TIMEOUT", "2")),
        read_timeout=float(os.environ.get("EO_READ_TIMEOUT", "5")),
        # Records run on up to `concurrency` threads; never make them queue for a connection.
        max_pool_connections=64,
        tcp_keepalive=True,
    )


def _client(service: str) -> Any:
    client = _clients.get(service)
    if client is None:
        with _lock:  # boto3 session creation is not thread-safe; the clients themselves are
            client = _clients.get(service)
            if client is None:
                import boto3

                client = boto3.session.Session().client(service, config=_config())  # type: ignore[call-overload]
                _clients[service] = client
    return client


def dynamodb() -> DynamoDBClient:
    return _client("dynamodb")  # type: ignore[no-any-return]


def sqs() -> SQSClient:
    return _client("sqs")  # type: ignore[no-any-return]


def secretsmanager() -> Any:
    return _client("secretsmanager")


def rds() -> Any:
    return _client("rds")


def reset() -> None:
    """Forget cached clients (tests that change endpoints or credentials call this)."""
    with _lock:
        _clients.clear()


def _forget() -> None:
    """In a clone: drop the parent's clients (their sockets are shared) and a lock another
    thread may have held at the fork. Never closed here: the parent may still use them."""
    global _lock
    _lock = threading.Lock()
    _clients.clear()


def _close() -> None:
    """Before a snapshot: close connections, so that no restored copy inherits a socket."""
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


lifecycle.on_clone(_forget)
lifecycle.on_snapshot(_close)
