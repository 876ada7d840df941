"""The registry of idempotent HTTP APIs: one entry per API Gateway HTTP API + Lambda function.

Plain data, no CDK imports: the stack builds one `IdempotentHttpApi` per entry, and
`eonce invoke` finds a function's code folder here. The local stack never reads it: it learns
the APIs and their routes from the deployed template (exactly_once_ops/app_template.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ApiSpec:
    """What an API is. Tuning left as None takes the construct's defaults for APIs.

    `routes` are (method, path) pairs, every one to the same function. `block_expired_leases`:
    an IN_PROGRESS record whose lease expired is marked FAILED for a person instead of being
    taken over (for side effects that must never run twice). `timeout_seconds` must stay under
    API Gateway's 30 s integration limit (None: 29 s).
    """

    id: str  # construct id and output prefix, e.g. "PaymentsApi"
    scope: str  # idempotency scope (API_SCOPE): the first half of every record id
    source_dir: str  # relative to the repository root
    routes: tuple[tuple[str, str], ...]  # (method, path): ("POST", "/payments")
    handler: str = "handler.handle"
    block_expired_leases: bool = False
    description: str = ""
    timeout_seconds: int | None = None
    memory_mb: int | None = None

    @property
    def source_path(self) -> Path:
        return ROOT / self.source_dir


APIS: tuple[ApiSpec, ...] = (
    ApiSpec(
        id="PaymentsApi",
        scope="payments-api",
        source_dir="functions/payments_api",
        routes=(("POST", "/payments"),),
        description="POST /payments with an Idempotency-Key",
    ),
)


def by_id(api_id: str) -> ApiSpec:
    for spec in APIS:
        if spec.id == api_id:
            return spec
    raise KeyError(f"no API {api_id!r}; known: {[s.id for s in APIS]}")
