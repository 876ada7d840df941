"""The registry of idempotent SQS consumers: one entry per queue + Lambda function.

Plain data, no CDK imports: the stack builds one `IdempotentConsumer` per entry, and
`eonce invoke` finds a function's code folder here. The local stack never reads it: it learns
the consumers from the deployed template (exactly_once_ops/app_template.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ConsumerSpec:
    """What a consumer is. Tuning left as None comes from the context settings.

    `block_expired_leases`: an IN_PROGRESS record whose lease expired is marked FAILED for a
    person instead of being taken over (for side effects that must never run twice).
    """

    id: str  # construct id and output prefix, e.g. "Orders"
    scope: str  # idempotency scope: the first half of every record id
    source_dir: str  # relative to the repository root
    handler: str = "handler.handle"
    fifo: bool = False
    block_expired_leases: bool = False
    description: str = ""
    timeout_seconds: int | None = None
    memory_mb: int | None = None
    batch_size: int | None = None
    batching_window_seconds: int | None = None
    max_concurrency: int | None = None
    max_receive_count: int | None = None

    @property
    def source_path(self) -> Path:
        return ROOT / self.source_dir


CONSUMERS: tuple[ConsumerSpec, ...] = (
    ConsumerSpec(
        id="Orders",
        scope="orders",
        source_dir="functions/orders",
        description="Orders from a standard queue, keyed by orderId",
    ),
    ConsumerSpec(
        id="Payments",
        scope="payments",
        source_dir="functions/payments",
        fifo=True,
        block_expired_leases=True,
        description="Payments from a FIFO queue (group = account), keyed by paymentId",
    ),
)


def by_id(consumer_id: str) -> ConsumerSpec:
    for spec in CONSUMERS:
        if spec.id == consumer_id:
            return spec
    raise KeyError(f"no consumer {consumer_id!r}; known: {[s.id for s in CONSUMERS]}")
