"""`eonce up` without starting anything: the state it reports, and the CLI call, for the tests
of where `up` keeps a stack's state and what it tells the user (the `starts` fixture in
conftest.py replaces start_background with one that records the state folder)."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from exactly_once_cli.app import app
from exactly_once_ops.local_state import StatePaths, UpState

ENDPOINT = "http://localhost:4566"


def served(paths: StatePaths) -> UpState:
    """What a stack `up` started in `paths` reports (one consumer, Orders)."""
    return UpState(
        pid=4242,
        stack="SvcStack",
        region="us-east-1",
        endpoint_url=ENDPOINT,
        dynamodb_endpoint_url="http://127.0.0.1:8000",
        environment={"AWS_ENDPOINT_URL": ENDPOINT},
        outputs={"OrdersQueueUrl": f"{ENDPOINT}/123456789012/SvcStack-Orders"},
        logs={"serve": str(paths.serve_log)},
        workers=2,
        started_at="2026-11-27T00:00:00+00:00",
    )


def up(*args: str) -> Any:
    return CliRunner().invoke(app, ["up", *args], env={"COLUMNS": "200"})
