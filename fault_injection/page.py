"""docs/chaos.md: the report of a run, written by `chaos --markdown docs/chaos.md`.

The prose around the table is fixed; every number in it comes from the run.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from fault_injection import accounting
from fault_injection.harness import ConsumerRun
from fault_injection.report import markdown
from fault_injection.runner import ChaosResult
from fault_injection.settings import DEPLOY_CONTEXT, StoreKind

INTRO = """\
# Fault injection

`make chaos` deploys the CDK app into the local stack (moto for SQS, DynamoDB Local for the
tables), runs each consumer under test in worker processes that poll the deployed Orders queue
the way Lambda's event source mapping does, and injects faults while it sends a workload. When
the queue has drained, it closes the books from durable state only (the ledger, the DLQ and the
idempotency table), never from what the workers reported: a killed worker reports nothing.

Every consumer runs the same business function (functions/orders semantics: a negative amount
is permanent, `failTimes` fails early deliveries) whose side effect is one entry in an
append-only execution log: each execution writes an item of its own (`pk` = the `orderId`,
`sk` = `orders#effect#<execution id>`, with the writer's pid, attempt and fence), so the items
per key count the executions that took effect, in every column alike. Every consumer meets the
same messages and the same planned faults (same seed).
"""

FAULTS = """\
## The faults

* **duplicate delivery**: a share of the sends repeat an earlier body verbatim (new message
  id, same `orderId`); half follow closely, so both copies are in flight together.
* **worker crash**: the first time a message reaches its planned point (on whichever delivery),
  the business function `SIGKILL`s its own worker process there: after acquire and before the
  effect, after the effect and before completion, or after completion and before the SQS
  delete. The supervisor restarts the worker.
* **zombie**: the worker `SIGSTOP`s itself mid-record (before or after the effect); the
  supervisor sends `SIGCONT` only after the queue's visibility timeout plus 3 s, so the message
  has been redelivered and taken over while it was frozen. Every record of its batch freezes
  with it.
* **DynamoDB throttling**: a botocore `before-send` hook on the worker's DynamoDB client
  answers a share of requests with `ProvisionedThroughputExceededException`. botocore's
  standard retry mode retries them (backoff, retry quota); only what is still throttled after
  the last attempt reaches the consumer. On top of the draws each worker process throttles its
  3rd and 8th request (`throttling.THROTTLED_EACH_PROCESS`), so every run meets throttles.
* **SQS delete failure**: the worker drops a share of the DeleteMessageBatch entries of
  successful records, so they are redelivered.
* **poison**: bodies that are not JSON, have no `orderId`, or have a negative amount.
* **transient consumer error**: the business function raises on the first one or two
  deliveries, then succeeds.

## The invariants

* **one execution per key**: each unique `orderId` has exactly one entry in the execution log
  (more than one is a double execution, none a lost one). Nothing in an entry refuses a second
  one, so this can fail: `eonce chaos --lock-off` (a self-test that turns the layer's lock off
  in the workers, every delivery acquiring a record of its own) fails it, and CI checks that it
  does;
* **no message lost**: every message was processed (its key took effect) or is in the DLQ with
  the reason the consumer attached;
* **nothing stuck**: no idempotency record is left IN_PROGRESS past its lease, or FAILED but
  retryable, once nothing is in flight (the layer's `list_pending`; for Powertools a scan).
"""

CONSUMERS = """\
## The consumers

* **layer, fenced effect**: `@sqs_consumer(key="orderId")` with the log entry written by the
  layer's `exactly_once.ledger.append_effect`: one `TransactWriteItems` that puts the entry and
  sets a mark (`effect_fence#<digest of the key's "orders#effect">`) on the idempotency record,
  conditioned on holding the lock (`lock_token = mine AND status = IN_PROGRESS`, no such mark
  yet). A zombie's token has moved on, so its write is refused; a takeover after a crash
  between effect and completion finds the mark and skips the effect. The entry's own key is
  new for every execution, so only the lock and its fence keep the count at one: the books
  count executions, not keys. (The layer's `record_effect`, keyed by the business key, would
  make a second item impossible by construction, and the count would prove nothing.) This is
  the consumer `make chaos` fails on.
* **layer, plain effect**: the same decorator with an unconditional PutItem of the same entry
  (`exactly_once.ledger.append_entry`). It shows what the idempotency record alone guarantees.
* **Powertools 3.37**: `BatchProcessor` + `idempotent_function` + `DynamoDBPersistenceLayer`
  (in DynamoDB Local), `register_lambda_context` so in-progress records expire with the
  invocation, sharing the layer's DynamoDB client (same retry policy, same injected throttles).
  Powertools has no fence to hand to a downstream write, so its effect is the plain PutItem.
"""

CAVEATS = """\
## Caveats

* Zombies here outlive the queue's visibility timeout, which a Lambda invocation cannot (the
  stack sets the visibility timeout to six times the function timeout, and Lambda stops the
  invocation at its timeout). The harness is deliberately harsher than Lambda so that the fence
  is exercised by real takeovers.
* The layer runs a batch's records concurrently (10 threads) and Powertools' `BatchProcessor`
  one after another, so a killed or frozen layer worker has up to ten records in flight where
  Powertools has one. With a plain effect that widens the blast radius of each fault; with the
  fenced effect it does not matter.
* Local emulation: SQS is moto 5 and DynamoDB is DynamoDB Local; throttles are injected on the
  client, before the request leaves the process.
* The stack is deployed with `maxReceiveCount` 10 instead of 5: at these fault densities about
  one delivery in six meets a fault, and SQS's redrive carries no reason.
"""


def _summary(run: ConsumerRun) -> str:
    v = run.verdict
    causes = ", ".join(
        f"{n} {cause}" for cause, n in sorted(v.double_causes.items(), key=lambda c: -c[1])
    )
    doubles = f"{len(v.doubles)} keys were executed more than once" + (
        f" ({causes})" if causes else ""
    )
    dead = sum(v.dead_lettered.values())
    return (
        f"* **{run.kind.title}**: {v.exactly_once} of {v.expected} keys were executed exactly "
        f"once; {doubles}; {len(v.missing)} keys were never executed; {len(v.lost)} messages "
        f"lost; {dead} messages in the DLQ with a reason and {v.redriven} without one "
        f"(redriven by SQS); {len(v.stuck)} records stuck IN_PROGRESS and "
        f"{len(v.retryable_failed)} FAILED but retryable. Verdict: "
        f"{'PASS' if v.ok and run.drained else 'FAIL'} ({run.elapsed_s:.0f} s)."
    )


def _environment() -> str:
    versions = ", ".join(
        f"{name} {metadata.version(name)}" for name in ("moto", "boto3", "aws-lambda-powertools")
    )
    return (
        f"Run on {datetime.now(UTC):%Y-%m-%d} on {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {versions}; deploy context "
        + ", ".join(f"`{k}={v}`" for k, v in DEPLOY_CONTEXT.items())
        + "."
    )


def render_page(result: ChaosResult, command: str) -> str:
    runs = result.runs
    parts = [
        INTRO,
        "## Results\n",
        f"Produced by `{command}`. {_environment()}\n",
        markdown(result.settings, result.plan, runs),
        "\n".join(_summary(run) for run in runs) + "\n",
        "Causes of double executions, read from the writer of each extra log entry: "
        f"*zombie* = {accounting.ZOMBIE}; *killed* = {accounting.KILLED}; "
        f"*other* = {accounting.OVERRUN}.\n",
        FAULTS,
        CONSUMERS,
        CAVEATS,
    ]
    return "\n".join(parts)


def write_page(path: Path, result: ChaosResult, command: str) -> None:
    """docs/chaos.md's page, or on a PostgreSQL run the page of its own (page_postgres)."""
    if result.settings.store is StoreKind.POSTGRES:
        from fault_injection import page_postgres

        text = page_postgres.render_page(result, command)
    else:
        text = render_page(result, command)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
