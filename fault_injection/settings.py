"""What a chaos run injects and how big it is; the CLI and the CI test build these."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Short timeouts keep every redelivery wait to seconds: the queue's visibility timeout is six
# times the function timeout (12 s) and a lease is the remaining time plus a 1 s margin (~3 s).
# At the default rates about one delivery in six meets a fault that costs it a receive, so the
# stack's maxReceiveCount of 5 would let SQS redrive (without a reason) valid messages that
# were merely unlucky; 10 leaves redrive to what no consumer could process.
DEPLOY_CONTEXT: dict[str, Any] = {
    "stackName": "Chaos",
    "functionTimeoutSeconds": 2,
    "leaseMarginSeconds": 1,
    "maxReceiveCount": 10,
}


class StoreKind(StrEnum):
    """Where the layer's idempotency records (and, on PostgreSQL, the effects) are kept."""

    DYNAMODB = "dynamodb"
    POSTGRES = "postgres"

    @property
    def label(self) -> str:
        return "DynamoDB" if self is StoreKind.DYNAMODB else "PostgreSQL"


# The share of a steps consumer's TransactWriteItems replies lost (steps_consumers.py), set by
# the harness in a DynamoDB steps run from `FaultRates.lost_reply`.
STEPS_LOST_REPLY_ENV = "CHAOS_STEPS_LOST_REPLY"


class Workload(StrEnum):
    """What each message's business function does: one effect (`orders`), or three steps of
    one key (`steps`: charge, ship, email, each a `ctx.step`, with crashes between them)."""

    ORDERS = "orders"
    STEPS = "steps"


@dataclass(frozen=True)
class FaultRates:
    """Shares, each in [0, 1]. Message-level ones are planned into bodies with the seed."""

    duplicates: float = 0.10  # of all messages: a second send of an earlier body
    poison: float = 0.01  # of all messages: can never succeed (bad JSON, bad amount, no key)
    transient: float = 0.05  # of unique bodies: the consumer raises on the first delivery
    crash: float = 0.01  # of unique bodies: the first execution SIGKILLs its worker
    zombie: float = 0.003  # of unique bodies: the first execution SIGSTOPs its worker
    # of DynamoDB requests: answered with a throttling error. On PostgreSQL: of the acquire,
    # fenced-write and commit statements: the connection drops before it is sent.
    throttle: float = 0.05
    delete_failure: float = 0.03  # of DeleteMessageBatch entries: dropped, so redelivered
    # PostgreSQL only: of the acquire, fenced-write, completion and commit statements: applied,
    # then the connection drops before the reply (the caller cannot know it was applied).
    lost_reply: float = 0.01

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"rate {name} must be within [0, 1], got {value}")
        if self.duplicates + self.poison >= 1.0:
            raise ValueError("duplicates + poison must leave room for unique messages")
        if self.crash + self.zombie > 1.0:
            raise ValueError("crash + zombie cannot exceed 1: each body gets at most one")


@dataclass(frozen=True)
class ChaosSettings:
    messages: int = 10_000
    rates: FaultRates = field(default_factory=FaultRates)
    seed: int = 7
    workers: int = 6  # worker processes (each runs batches of 10 on the consumer's threads)
    work_ms: int = 5  # simulated I/O in the business function
    pause_s: float | None = None  # zombie pause; None: the queue's visibility timeout + 3 s
    backlog: int = 50  # at most this many messages waiting in the queue while sending
    drain_timeout_s: float = 3_600.0
    store: StoreKind = StoreKind.DYNAMODB
    # A self-test of the books (local_aws.lock_off): the workers run with the layer's lock off,
    # every delivery acquiring a record of its own, so the verdict must find double executions.
    lock_off: bool = False
    workload: Workload = Workload.ORDERS

    def __post_init__(self) -> None:
        if self.messages < 1:
            raise ValueError("messages must be at least 1")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        rates = self.rates
        if self.store is StoreKind.POSTGRES and rates.throttle + rates.lost_reply > 1.0:
            raise ValueError("throttle + lost_reply cannot exceed 1: a statement meets one fault")
