"""docs/chaos-kinesis.md: the report of `eonce chaos --source kinesis --markdown ...`.

The prose around the table is fixed; every number in it comes from the run.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from fault_injection import accounting
from fault_injection.stream_harness import StreamRun
from fault_injection.stream_report import markdown
from fault_injection.stream_runner import KinesisResult

INTRO = """\
# Fault injection on a Kinesis stream

`make chaos SOURCE=kinesis` (`eonce chaos --source kinesis`) puts a workload on a Kinesis stream
(moto), runs the consumer under test in poller processes that read the shards the way Lambda's
event source mapping does, and injects faults while they work. The consumer is the library's
`@stream_consumer(key="orderId")` on DynamoDB Local. When every shard's checkpoint has reached
its last record, the books are closed from durable state only (the execution log, the DLQ, the
idempotency table and the checkpoints), never from what the pollers reported: a killed poller
reports nothing.

**The pollers.** Each shard is held by one poller at a time through a lease (one DynamoDB item
per shard: owner, a counter every take increments, expiry, checkpoint), as Lambda keeps one
poller per shard. A poller renews its lease, reads a batch after the checkpoint
(`local_aws.stream_shards`, in Lambda's event shape), invokes the function, reads the response
as Lambda does (`local_aws.stream_failures.read_response`: the lowest `itemIdentifier` named is
retried, an unknown one fails the whole batch) and moves the checkpoint to the record before
it, or past the batch. The checkpoint is written on the condition that the lease is still the
writer's. A poller that is killed or frozen stops renewing; once its lease has expired another
poller takes the shard and resumes from the last checkpoint, so everything after it is
delivered again: that is where a stream's duplicates come from.

**The effect.** Every consumer runs the same business function (a negative amount is
permanent, `failTimes` fails the first runs) whose side effect is one entry in an append-only
execution log: an item of its own per execution (`pk` = the `orderId`, `sk` =
`orders#effect#<execution id>`), with the writer's pid, the record's shard and sequence number,
and `t_ns`, the time taken just before the write. The items per key count the executions.
"""

INVARIANTS = """\
## The invariants

* **one execution per order**: each unique `orderId` has exactly one entry in the execution log
  (more is a double, none a lost order). Nothing in an entry refuses a second one (its sort key
  is new every time), so this can fail: the plain-effect column and `--lock-off` both fail it.
* **order kept per shard**: a shard's records are its sequence. Each order's position is its
  first record in the shard (a producer's retry comes later and changes nothing), and its
  effect time is the `t_ns` of its first log entry: the first execution that took effect. The
  order is kept when, in every shard, effect times increase with positions. A shard's records
  run one after another, so a later record's write starts after an earlier one's returned, on
  the same machine's clock, even across pollers (a successor starts after the lease expired).
  The count of violations is the fewest orders that would have to move for effect times to
  increase: the orders minus the longest run of them whose effect times increase in sequence
  order (one order run late counts once, not once per order it overtook). The
  `layer-reversed` self-test (each batch handed to the consumer reversed) fails it.
* **no record lost**: every record took effect (its order did) or is in the DLQ with the reason
  the consumer attached.
* **drained**: every shard's checkpoint reached its last record; no idempotency record is left
  IN_PROGRESS past its lease, or FAILED but retryable.
"""

FAULTS = """\
## The faults

* **producer retries**: a share of the puts repeat an earlier record's data with the same
  partition key (so the same shard, later, with a new sequence number).
* **poller crash**: the first time a record reaches its planned point, the business function
  `SIGKILL`s its poller: after acquire and before the effect, after the effect and before the
  completion, or after the batch returned and before its checkpoint was written. The supervisor
  starts a new poller; the dead one's shards wait for their leases to expire.
* **zombie**: the poller `SIGSTOP`s itself mid-record (before or after the effect) and gets
  `SIGCONT` only after the shard lease plus the key's lease (function timeout + lease margin)
  plus 3 s: by then another poller has taken its shard and the key. When it wakes it tries its
  effect (the fence must refuse it), its completion, and its checkpoint (the shard lease must
  refuse it).
* **DynamoDB throttling** and **lost replies**: botocore `before-send` hooks on the layer's
  DynamoDB client answer a share of requests with `ProvisionedThroughputExceededException`
  (botocore's standard retry mode retries them), or send the request, let DynamoDB apply it and
  hand botocore a 500 instead, so the retry meets the state its own first attempt left. On top
  of the draws each poller process throttles its 3rd and 8th request and loses the reply of its
  5th (`THROTTLED_EACH_PROCESS`, `stream_worker.LOST_EACH_PROCESS`), so every run meets both.
  The lease table has a client of its own (the mapping's checkpoints are not the function's I/O).
* **dropped checkpoints**: a share of the checkpoint writes are skipped, so the batch is read
  again.
* **poison**: data that is not JSON, not UTF-8, has no `orderId`, or a negative amount: each
  must reach the DLQ with its reason while its shard moves on.
* **transient consumer error**: the business function raises on its first one or two runs of a
  record (counted across processes), then succeeds; the shard stops at it and resumes there.
"""

CONSUMERS = """\
## The consumers

* **layer, fenced effect**: `@stream_consumer(key="orderId")` with the log entry written by
  `exactly_once.ledger.append_effect` (one transaction: the entry, and a mark on the idempotency
  record conditioned on holding its lock). A zombie's token has moved on, so its write is
  refused; a takeover after a crash between effect and completion finds the mark and skips the
  effect. This is the column `make chaos SOURCE=kinesis` fails on.
* **layer, plain effect**: the same decorator with an unconditional PutItem of the same entry.
  It shows what the idempotency record alone guarantees, and that the books bite.
"""

CAVEATS = """\
## Caveats

* The pollers are the chaos run's own loop over `local_aws.stream_shards` and
  `stream_failures.read_response`: `local_aws.stream_poller` keeps its checkpoints in one
  process's memory, where these must survive a kill and be fenced against a zombie. Bisect,
  retry limits and record age (which the local mapping has) play no part here: the function
  never raises, and nothing is given up.
* A Lambda invocation cannot outlive its timeout, and Lambda's own lease on a shard is not a
  DynamoDB item; the zombies here are deliberately harsher, so the fence and the checkpoint's
  condition are exercised by real takeovers.
* moto serves Kinesis (its sequence numbers are small integers per shard) and the DLQ; DynamoDB
  Local the tables. Throttles and lost replies are injected on the client.
"""


def _summary(run: StreamRun) -> str:
    v = run.verdict
    causes = ", ".join(
        f"{n} {cause}" for cause, n in sorted(v.double_causes.items(), key=lambda c: -c[1])
    )
    doubles = f"{len(v.doubles)} orders were executed more than once" + (
        f" ({causes})" if causes else ""
    )
    return (
        f"* **{run.kind.title}**: {v.exactly_once} of {v.expected} orders were executed exactly "
        f"once; {doubles}; {len(v.missing)} were never executed; {v.order_violations} of "
        f"{v.order_checked} orders took effect out of their shard's sequence; {len(v.lost)} "
        f"records lost; {sum(v.dead_lettered.values())} records in the DLQ with a reason; "
        f"{v.unread} records behind their shard's checkpoint; {len(v.stuck)} records stuck "
        f"IN_PROGRESS and {len(v.retryable_failed)} FAILED but retryable. Verdict: "
        f"{'PASS' if run.passed else 'FAIL'} ({run.elapsed_s:.0f} s)."
    )


def _environment() -> str:
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("moto", "boto3"))
    return (
        f"Run on {datetime.now(UTC):%Y-%m-%d} on {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {versions}."
    )


def render_page(result: KinesisResult, command: str) -> str:
    runs = result.runs
    return "\n".join(
        [
            INTRO,
            "## Results\n",
            f"Produced by `{command}`. {_environment()}\n",
            markdown(result.settings, result.plan, runs),
            "\n".join(_summary(run) for run in runs) + "\n",
            "Causes of double executions, read from the writer of each extra log entry: "
            f"*zombie* = {accounting.ZOMBIE}; *killed* = {accounting.KILLED}; "
            f"*other* = {accounting.OVERRUN}.\n",
            INVARIANTS,
            FAULTS,
            CONSUMERS,
            CAVEATS,
        ]
    )


def write_page(path: Path, result: KinesisResult, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(result, command), encoding="utf-8")
