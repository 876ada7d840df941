"""The completer as a scheduled Lambda function: `exactly_once.steps.scheduled.handle`.

The `AbandonedWorkCompleter` construct (exactly_once_cdk/completer.py) runs it on an EventBridge
rule, beside the user's code, which defines the resumables. Configured by the environment:
`RESUMABLE_MODULES` (comma-separated `MODULE` or `MODULE:NAME`, as `eonce complete --module`
takes them), `COMPLETER_LIMIT` (keys per run, default 100), `COMPLETER_MAX_ATTEMPTS` (leave a key
alone once tried this many times; default none), and the store's variables
(IDEMPOTENCY_TABLE or IDEMPOTENCY_DSN). Each run emits one EMF document under the dimension
`completer` (Completed, StillFailing, Skipped) and returns the same counts.
"""

from __future__ import annotations

import os
import pkgutil
from typing import Any

from exactly_once import observability
from exactly_once.config import env_int
from exactly_once.errors import ConfigurationError
from exactly_once.steps.completer import complete_abandoned
from exactly_once.steps.resumable import Resumable

MODULES = "RESUMABLE_MODULES"


def resumables_in(spec: str) -> list[Resumable[Any, Any]]:
    """The resumables `spec` names: `MODULE:NAME`, or every one `MODULE` defines."""
    module_name, _, attribute = spec.strip().partition(":")
    if not module_name:
        raise ConfigurationError(f"{MODULES}: {spec!r} is not MODULE or MODULE:NAME")
    # The user's module, by the name the environment gives (pkgutil resolves MODULE as Python
    # resolves entry points); it is the user's code, outside the library's import graph.
    module = pkgutil.resolve_name(module_name)
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, Resumable):
            raise ConfigurationError(f"{MODULES}: {spec!r} is not a @resumable function")
        return [found]
    found_all = [value for value in vars(module).values() if isinstance(value, Resumable)]
    if not found_all:
        raise ConfigurationError(f"{MODULES}: {module_name} defines no @resumable function")
    return found_all


def handle(event: Any, context: Any) -> dict[str, int]:
    """One completer run: finish up to COMPLETER_LIMIT abandoned keys. A key still failing is
    counted, not raised: the function's errors mean the completer itself could not run."""
    specs = [spec for spec in os.environ.get(MODULES, "").split(",") if spec.strip()]
    if not specs:
        raise ConfigurationError(f"set {MODULES} to the modules that define the resumables")
    resumables = [found for spec in specs for found in resumables_in(spec)]
    report = complete_abandoned(
        resumables,
        limit=env_int("COMPLETER_LIMIT", 100),
        max_attempts=env_int("COMPLETER_MAX_ATTEMPTS", 0) or None,
        lambda_context=context,
    )
    counts = {
        "Completed": len(report.completed),
        "StillFailing": len(report.failing),
        "Skipped": len(report.skipped),
    }
    observability.emit_counts("completer", ",".join(sorted(r.scope for r in resumables)), counts)
    return counts
