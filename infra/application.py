"""Build the CDK app with cdk-nag's AwsSolutions checks; shared by app.py and the tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.settings import Settings
from infra.stack import ExactlyOnceStack

CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    """The context block of cdk.json, which the CLI passes to app.py but `App()` alone does not."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


def create_app(
    context: Mapping[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True
) -> tuple[App, ExactlyOnceStack]:
    """`context=None` reads what the CLI provides; tests pass cdk.json's context plus overrides.

    With `nag`, synthesis fails on any AwsSolutions finding that is not acknowledged.
    """
    app = App(context=dict(context) if context is not None else None, outdir=outdir)
    settings = Settings.from_context(app.node.try_get_context)
    stack = ExactlyOnceStack(app, settings=settings)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
