"""A local stand-in for Lambda's stream event source mapping (Kinesis, DynamoDB Streams).

Per shard, in order, it reads a batch of up to BatchSize records (waiting up to
MaximumBatchingWindowInSeconds once a record arrived for the batch to fill), invokes the handler
synchronously with the event Lambda would send, and checkpoints as Lambda does:

- success, or an empty `batchItemFailures`: checkpoint after the batch;
- `batchItemFailures`: checkpoint just before the lowest sequence number reported and retry from
  there (the records before it are done; the ones after it come back);
- a raised error, or a response Lambda rejects (an empty, null or unknown itemIdentifier): the
  whole batch comes back, split in two first when BisectBatchOnFunctionError is on (a split does
  not count as a retry);
- MaximumRetryAttempts: once a batch has failed more than that many retries it is given up;
  MaximumRecordAgeInSeconds: records older than that are given up before an invocation. Either
  way the on-failure destination receives Lambda's invocation record and the shard moves on.

Checkpoints live in memory (one `StreamPoller` per mapping). A child shard is read once its
parent is read to its end, as Lambda does after a reshard. Shards take turns, one invocation
each per round; Lambda runs them concurrently, but nothing here depends on the interleaving.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from exactly_once_ops.lambda_context import LocalLambdaContext
from local_aws.stream_failures import (
    RECORD_AGE_EXCEEDED,
    RETRY_ATTEMPTS_EXHAUSTED,
    invocation_record,
    read_response,
)
from local_aws.stream_shards import (
    AFTER_SEQUENCE_NUMBER,
    Position,
    Shard,
    ShardSource,
    StreamRecord,
)

Handler = Callable[[Any, Any], Any]
WINDOW_POLL_S = 0.2  # how often a batching window polls its shard again


class Destination(Protocol):
    def send(self, message: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class MappingSettings:
    """The event source mapping's settings that shape the batches (Lambda's defaults)."""

    function_name: str = "stream-consumer"
    batch_size: int = 100
    batching_window_s: float = 0.0
    bisect_on_error: bool = False
    max_retry_attempts: int = -1  # -1: until the record expires
    max_record_age_s: float = -1  # -1: never expires
    report_batch_item_failures: bool = True
    timeout_s: float = 30.0
    region: str = "us-east-1"
    account: str = "123456789012"

    @property
    def function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"


@dataclass(frozen=True)
class Invocation:
    """One call of the handler: which records, and what the mapping made of the answer."""

    shard_id: str
    sequences: list[str]
    outcome: str  # "ok", "partial" (retry from first_failed) or "error" (whole batch)
    first_failed: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class GivenUp:
    """Records the mapping stopped retrying, and the message it sent about them."""

    shard_id: str
    sequences: list[str]
    condition: str
    message: dict[str, Any]


@dataclass
class ShardState:
    shard: Shard
    position: Position = field(default_factory=Position)  # the checkpoint: where reads resume
    pending: list[list[StreamRecord]] = field(default_factory=list)  # bisected halves, in order
    attempts: int = 0  # failed invocations of the records at the head since it last moved
    ended: bool = False  # a closed shard read to its end

    def checkpoint_after(self, record: StreamRecord) -> None:
        self.position = Position.after(record.sequence)


@dataclass
class StreamPoller:
    """One event source mapping: `source`'s shards into `handler`, failures to `destination`."""

    source: ShardSource
    handler: Handler
    settings: MappingSettings = field(default_factory=MappingSettings)
    destination: Destination | None = None  # None: given-up records are only dropped
    clock: Callable[[], float] = time.time  # for record age and the messages' timestamps
    monotonic: Callable[[], float] = time.monotonic  # for the batching window
    sleep: Callable[[float], None] = time.sleep
    invocations: list[Invocation] = field(default_factory=list)
    given_up: list[GivenUp] = field(default_factory=list)
    shard_states: dict[str, ShardState] = field(default_factory=dict)

    # --- the public loop ----------------------------------------------------------------------

    def poll_once(self) -> int:
        """One round: an invocation (or a give-up) per shard that has records. Returns how many
        shards moved."""
        moved = 0
        shards = self.source.shards()
        listed = {shard.shard_id for shard in shards}
        for shard in shards:
            state = self.shard_states.setdefault(shard.shard_id, ShardState(shard))
            state.shard = shard  # a shard closes after a reshard
            if self._ready(state, listed) and self.poll_shard(state):
                moved += 1
        return moved

    def run_until_drained(self, max_rounds: int = 10_000) -> int:
        """Poll until a round finds nothing left to do on any shard; returns the rounds run."""
        for rounds in range(1, max_rounds + 1):
            if not self.poll_once():
                return rounds
        raise RuntimeError(f"the stream was not drained after {max_rounds} rounds")

    def checkpoints(self) -> dict[str, Position]:
        return {shard_id: state.position for shard_id, state in self.shard_states.items()}

    # --- one shard ----------------------------------------------------------------------------

    def _ready(self, state: ShardState, listed: set[str]) -> bool:
        """Not ended, and its parent (if still listed) read to its end."""
        if state.ended:
            return False
        parent = state.shard.parent_id
        if parent is None or parent not in listed:
            return True
        parent_state = self.shard_states.get(parent)
        return parent_state is not None and parent_state.ended

    def poll_shard(self, state: ShardState) -> bool:
        """Invoke the handler on the shard's next batch; False when it had no records."""
        from_pending = bool(state.pending)
        batch = state.pending[0] if from_pending else self._read_batch(state)
        if not batch:
            return False
        batch = self._drop_expired(state, batch, from_pending)
        if not batch:
            return True
        invocation = self._invoke(state.shard.shard_id, batch)
        self.invocations.append(invocation)
        if invocation.outcome == "ok":
            state.checkpoint_after(batch[-1])
            state.attempts = 0
            if from_pending:
                state.pending.pop(0)
            return True
        first = next(i for i, r in enumerate(batch) if r.sequence == invocation.first_failed)
        if first > 0:  # the records before the lowest failure are done: checkpoint past them
            # The batch's retries go on counting: Lambda counts them until the batch is done or
            # given up, not afresh each time a partial response moves the checkpoint (as
            # LocalStack's AWS-validated poller does; AWS's pages do not say). A handler that
            # stops at its first failure can so exhaust them on records failing one by one.
            state.checkpoint_after(batch[first - 1])
        state.attempts += 1
        remainder = batch[first:]
        function_error = invocation.outcome == "error"
        if function_error and self.settings.bisect_on_error and len(remainder) > 1:
            half = len(remainder) // 2
            halves = [remainder[:half], remainder[half:]]
            state.pending[: 1 if from_pending else 0] = halves
            state.attempts = 0  # splitting does not count towards the retry quota
        elif 0 <= self.settings.max_retry_attempts < state.attempts:
            self._give_up(state, remainder, RETRY_ATTEMPTS_EXHAUSTED, function_error)
            if from_pending:
                state.pending.pop(0)
        elif from_pending:
            state.pending[0] = remainder
        else:  # retry from the checkpoint: the next read starts at the first failed record
            state.position = Position.at(remainder[0].sequence)
        return True

    def _read_batch(self, state: ShardState) -> list[StreamRecord]:
        """Up to batch_size records from the checkpoint; once one arrived, keep reading until
        the batch is full or the batching window has passed."""
        shard_id = state.shard.shard_id
        iterator = self.source.iterator(shard_id, state.position)
        records: list[StreamRecord] = []
        window_end: float | None = None
        while iterator is not None and len(records) < self.settings.batch_size:
            read = self.source.read(shard_id, iterator, self.settings.batch_size - len(records))
            records += read.records
            iterator = read.next_iterator
            if not records or self.settings.batching_window_s <= 0:
                break
            if window_end is None:
                window_end = self.monotonic() + self.settings.batching_window_s
            remaining = window_end - self.monotonic()
            if remaining <= 0 or len(records) >= self.settings.batch_size:
                break
            self.sleep(min(WINDOW_POLL_S, remaining))
        if not records and (iterator is None or self._read_to_its_end(state)):
            state.ended = True
        return records

    @staticmethod
    def _read_to_its_end(state: ShardState) -> bool:
        """A closed shard whose checkpoint is past its last record (Kinesis returns no next
        iterator there; moto keeps returning one)."""
        ending = state.shard.ending_sequence
        position = state.position
        if ending is None or position.sequence is None:
            return False
        if position.kind == AFTER_SEQUENCE_NUMBER:
            return int(position.sequence) >= int(ending)
        return int(position.sequence) > int(ending)  # AT: that record is still to do

    def _drop_expired(
        self, state: ShardState, batch: list[StreamRecord], from_pending: bool
    ) -> list[StreamRecord]:
        """Give up the records older than MaximumRecordAgeInSeconds (the batch's oldest first)."""
        max_age = self.settings.max_record_age_s
        if max_age < 0:
            return batch
        now = self.clock()
        expired = 0
        while expired < len(batch) and now - batch[expired].arrival > max_age:
            expired += 1
        if not expired:
            return batch
        self._give_up(state, batch[:expired], RECORD_AGE_EXCEEDED, function_error=False)
        rest = batch[expired:]
        if from_pending:
            if rest:
                state.pending[0] = rest
            else:
                state.pending.pop(0)
        return rest

    def _give_up(
        self, state: ShardState, records: list[StreamRecord], condition: str, function_error: bool
    ) -> None:
        message = invocation_record(
            self.source,
            self.settings.function_arn,
            records,
            condition=condition,
            invoke_count=state.attempts,
            function_error=function_error,
            now=self.clock(),
        )
        if self.destination is not None:
            self.destination.send(message)
        self.given_up.append(
            GivenUp(state.shard.shard_id, [r.sequence for r in records], condition, message)
        )
        state.checkpoint_after(records[-1])
        state.attempts = 0

    def _invoke(self, shard_id: str, batch: list[StreamRecord]) -> Invocation:
        event = {"Records": [dict(record.event_record) for record in batch]}
        context = LocalLambdaContext(
            self.settings.function_name,
            timeout_s=self.settings.timeout_s,
            region=self.settings.region,
            account_id=self.settings.account,
        )
        sequences = [record.sequence for record in batch]
        try:
            response = self.handler(event, context)
        except Exception as crash:  # a function error: Lambda retries the whole batch
            traceback.print_exc()
            return Invocation(shard_id, sequences, "error", sequences[0], repr(crash))
        verdict = read_response(response, batch, self.settings.report_batch_item_failures)
        if verdict.first_failed is None:
            return Invocation(shard_id, sequences, "ok")
        outcome = "error" if verdict.function_error else "partial"
        failed = batch[verdict.first_failed].sequence
        rejected = f"rejected response: {response!r}" if verdict.function_error else None
        return Invocation(shard_id, sequences, outcome, failed, rejected)
