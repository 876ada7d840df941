"""A Kinesis chaos poller process: Lambda's event source mapping for the shards it leases, with
faults around its steps.

Each poller holds up to its share of the shards (shard_leases: one poller per shard at a time)
and, for each, renews the lease, reads a batch after the checkpoint, invokes the function and
moves the checkpoint to the record before the lowest reported failure (or past the batch).
Reading a shard into Lambda's event records and reading the response as Lambda does are
`local_aws.stream_shards` and `stream_failures.read_response` (the local mapping's own);
`local_aws.stream_poller` itself keeps its checkpoints in one process's memory, where these
must survive a kill and be fenced against a zombie, so the loop here is the chaos run's. The
faults: the business function kills or freezes the process at its planned points (before or
after the effect, or, here, after the batch and before its checkpoint), the layer's DynamoDB
client meets throttles and lost replies (botocore hooks), and a share of the checkpoints is
dropped (the batch is read again). A killed or frozen poller's shards are taken by another once
their leases expire, from the last checkpoint.
"""

from __future__ import annotations

import base64
import json
import math
import os
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3

from exactly_once import clients
from exactly_once_ops.lambda_context import LocalLambdaContext
from fault_injection import events, injection
from fault_injection.lost_replies import install_lost_replies
from fault_injection.shard_leases import Lease, ShardLeases
from fault_injection.stream_workload import BEFORE_CHECKPOINT
from fault_injection.throttling import THROTTLED_EACH_PROCESS, install_throttling
from fault_injection.worker import Flag, Handler, load_handler
from local_aws import lock_off
from local_aws.poller import redirect_output
from local_aws.stream_failures import Verdict, read_response
from local_aws.stream_shards import KinesisShards, Position

FUNCTION_NAME = "chaos-kinesis-orders"
# The request (counted from 1 among those no throttle answered) whose reply each poller process
# loses whatever the draw: a run's few hundred requests at a 2 % rate draw about 6 lost replies,
# and none about one run in 400; with this one a run's verdict that replies were lost holds by
# plan. (Throttles are planned the same way: THROTTLED_EACH_PROCESS.)
LOST_EACH_PROCESS = 5


@dataclass(frozen=True)
class StreamWorkerSpec:
    environment: dict[str, str]  # endpoints, the store's tables, the DLQ, the scope
    handler: str  # "module:attribute"
    stream: str
    stream_arn: str
    lease_table: str
    shards: int
    workers: int
    batch_size: int
    function_timeout_s: float
    shard_lease_s: float
    throttle_rate: float
    lost_reply_rate: float
    checkpoint_drop_rate: float
    seed: int
    log_dir: str

    @property
    def fair_share(self) -> int:
        """Shards one poller may hold: enough for the others to absorb one that went silent."""
        return math.ceil(self.shards / max(1, self.workers - 1))


def worker_main(spec: StreamWorkerSpec, index: int, generation: int, stop: Flag) -> None:
    """Entry point of a poller process (spawned: nothing is inherited but the arguments)."""
    redirect_output(os.path.join(spec.log_dir, f"worker-{index}.log"))
    os.environ.update(spec.environment)
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    lock_off.install_if_enabled()
    rng = random.Random(f"{spec.seed}/{index}/{generation}")
    handler = _load_with_faults(spec, random.Random(rng.random()))
    kinesis = boto3.client("kinesis")
    region = kinesis.meta.region_name
    source = KinesisShards(kinesis, spec.stream, region, stream_arn=spec.stream_arn)
    leases = ShardLeases(
        boto3.client("dynamodb"), spec.lease_table, str(os.getpid()), spec.shard_lease_s
    )
    events.record("worker-start", index=index, generation=generation)
    held: dict[str, Lease] = {}
    while not stop.value:
        try:
            _take_one(leases, held, spec.fair_share, rng)
            busy = False
            for shard in list(held):
                if stop.value:
                    break
                busy |= _poll(spec, source, leases, held, shard, handler, rng)
            if not busy:
                time.sleep(0.1)
        except Exception:  # keep polling, as Lambda's poller does after errors
            traceback.print_exc()
            time.sleep(0.5)
    for lease in held.values():
        leases.release(lease)


def _load_with_faults(spec: StreamWorkerSpec, rng: random.Random) -> Handler:
    """The handler, the layer's DynamoDB client throttled and losing replies. (Hooked before
    the handler is imported: its store, the ledger and the DLQ checks share that client.)"""
    client = clients.dynamodb()
    install_throttling(
        client,
        spec.throttle_rate,
        rng,
        lambda op: events.record("throttle", op=op),
        planned=THROTTLED_EACH_PROCESS,
    )
    if spec.lost_reply_rate > 0:
        lose = lost_replies(spec.lost_reply_rate, rng)
        install_lost_replies(client, lose, lambda op: events.record("lost-reply", op=op))
    return load_handler(spec.handler)


def lost_replies(rate: float, rng: random.Random) -> Callable[[str], bool]:
    """A `lose` for install_lost_replies: `rate` of the requests by draw, and the
    LOST_EACH_PROCESS-th whatever the draw (one draw per request still, shared by threads)."""
    lock = threading.Lock()
    asked = 0

    def lose(_operation: str) -> bool:
        nonlocal asked
        with lock:
            asked += 1
            return rng.random() < rate or asked == LOST_EACH_PROCESS

    return lose


def _take_one(leases: ShardLeases, held: dict[str, Lease], share: int, rng: random.Random) -> None:
    if len(held) >= share:
        return
    free = [shard for shard in leases.free_shards() if shard not in held]
    if not free:
        return
    shard = rng.choice(free)
    lease = leases.take(shard)
    if lease is not None:
        held[shard] = lease
        events.record("lease-taken", shard=shard, counter=lease.counter)


def _poll(
    spec: StreamWorkerSpec,
    source: KinesisShards,
    leases: ShardLeases,
    held: dict[str, Lease],
    shard: str,
    handler: Handler,
    rng: random.Random,
) -> bool:
    """One invocation for `shard`; True when its checkpoint moved."""
    lease = leases.renew(held[shard])
    if lease is None:
        events.record("lease-lost", shard=shard)
        del held[shard]
        return False
    held[shard] = lease
    start = Position() if lease.checkpoint is None else Position.after(lease.checkpoint)
    iterator = source.iterator(shard, start)
    batch = [] if iterator is None else source.read(shard, iterator, spec.batch_size).records
    if not batch:
        return False
    started = time.monotonic()
    context = LocalLambdaContext(FUNCTION_NAME, timeout_s=spec.function_timeout_s)
    try:
        response = handler({"Records": [dict(r.event_record) for r in batch]}, context)
        verdict = read_response(response, batch, report_failures=True)
    except Exception:  # a crash of the function: the whole batch is retried
        traceback.print_exc()
        verdict = Verdict(0, function_error=True)
    handled = time.monotonic()
    done = batch if verdict.first_failed is None else batch[: verdict.first_failed]
    for record in done:
        injection.at_point(_body(record.event_record), BEFORE_CHECKPOINT, None, 1)
    dropped = bool(done) and rng.random() < spec.checkpoint_drop_rate
    refused = False
    if done and not dropped:
        moved = leases.checkpoint(lease, done[-1].sequence)
        if moved is None:  # another poller has the shard: this one was a zombie
            refused = True
            events.record("checkpoint-refused", shard=shard, sequence=done[-1].sequence)
            del held[shard]
        else:
            held[shard] = moved
    results = getattr(handler, "last_results", None) or []
    events.record(
        "batch",
        shard=shard,
        received=len(batch),
        done=len(done),
        function_error=int(verdict.function_error),
        checkpoint_dropped=int(dropped),
        checkpoint_refused=int(refused),
        outcomes=dict(Counter(str(r.outcome) for r in results)),
        takeovers=sum(bool(getattr(r, "takeover", False)) for r in results),
        handler_s=round(handled - started, 3),
    )
    return bool(done) and not dropped and not refused


def _body(event_record: Mapping[str, Any]) -> Any:
    try:
        data = base64.b64decode(str(event_record["kinesis"]["data"]))
        return json.loads(data.decode("utf-8"))
    except (KeyError, ValueError, UnicodeDecodeError):
        return None
