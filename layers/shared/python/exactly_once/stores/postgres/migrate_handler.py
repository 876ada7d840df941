"""The CDK app's migration custom resource (custom_resources.Provider's on_event): the schema
is applied on every deploy that creates or updates it, never by a consumer's cold start."""

from __future__ import annotations

import os
import time
from typing import Any

from exactly_once.errors import ConfigurationError
from exactly_once.lease import remaining_ms
from exactly_once.stores.postgres.migrations import migrate, shipped

PHYSICAL_ID = "exactly-once-schema"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Create/Update: apply what is pending. Delete: nothing (the data outlives the stack)."""
    if event.get("RequestType") == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId") or PHYSICAL_ID}
    conninfo = os.environ.get("IDEMPOTENCY_DSN")
    if not conninfo:
        raise ConfigurationError("IDEMPOTENCY_DSN is not set")
    applied = _migrate_when_reachable(conninfo, context)
    return {
        "PhysicalResourceId": PHYSICAL_ID,
        "Data": {
            "Applied": ",".join(applied),
            "Version": shipped()[-1][0],
        },
    }


def _migrate_when_reachable(conninfo: str, context: Any) -> list[str]:
    """A proxy created in the same deploy can refuse connections for minutes: keep trying
    while the invocation has time (a failed custom resource rolls the whole deploy back)."""
    import psycopg

    delay = 5.0
    while True:
        try:
            return migrate(conninfo)
        except psycopg.OperationalError:
            if remaining_ms(context) < (delay + 60) * 1000:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
