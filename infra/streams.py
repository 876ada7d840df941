"""The registry of idempotent stream consumers: one entry per Kinesis stream + Lambda function.

Plain data, no CDK imports, like `infra.consumers`: the stack builds one
`KinesisStreamConsumer` per entry. The local stack learns them from the synthesized template
(the `AWS::Lambda::EventSourceMapping` whose EventSourceArn is the `AWS::Kinesis::Stream`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class StreamSpec:
    """What a stream consumer is. Timeout and memory come from the context settings (the
    consumers' `functionTimeoutSeconds` and `memorySize`); the mapping keeps the construct's
    defaults (batches of 100, 10 retries, 6-hour record age, one batch per shard)."""

    id: str  # construct id and output prefix, e.g. "OrderStream"
    scope: str  # idempotency scope (CONSUMER_SCOPE): the first half of every record id
    source_dir: str  # relative to the repository root
    handler: str = "handler.handle"
    block_expired_leases: bool = False
    description: str = ""

    @property
    def source_path(self) -> Path:
        return ROOT / self.source_dir


STREAMS: tuple[StreamSpec, ...] = (
    StreamSpec(
        id="OrderStream",
        scope="order-stream",
        source_dir="functions/order_stream",
        description="Orders from a Kinesis stream, in shard order, keyed by orderId",
    ),
)
