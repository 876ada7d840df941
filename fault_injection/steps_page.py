"""docs/chaos-steps.md: the report of a three-step run, written by
`make chaos WORKLOAD=steps ARGS="--markdown docs/chaos-steps.md"`.

The prose around the table is fixed; every number in it comes from the run.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from fault_injection import accounting
from fault_injection.harness import ConsumerRun
from fault_injection.page import _environment
from fault_injection.runner import ChaosResult
from fault_injection.steps_report import markdown, sv

INTRO = """\
# Fault injection: three steps per key

`make chaos WORKLOAD=steps` runs the chaos harness of [chaos.md](chaos.md) (the deployed
Orders queue, worker processes polling it as Lambda's event source mapping does, faults
injected, the books closed from durable state only) with a business function in three steps:
each order is charged, shipped and emailed, each step a `ctx.step(name, fn)`
([steps.md](steps.md)).

Each step's effect is an entry of its own in an append-only execution log (`pk` = the
`orderId`, `sk` = `<scope>#<step>#<execution id>`, a new id for every execution, with the
writer's pid and fence), so nothing in an entry refuses a second one: the entries per
(key, step) count the executions of that step that took effect.

This page is the DynamoDB run. The same workload runs on PostgreSQL with `--store postgres`
(each step's log row in `step.transaction`, committed with its recovery point in one round
trip; the step's commit meets dropped connections and lost replies): CI runs both
(tests/chaos/test_chaos_steps.py, tests/chaos/test_chaos_steps_postgres.py).
"""

FAULTS = """\
## The faults

The orders run's faults (duplicates, poison, transient errors, DynamoDB throttles, dropped SQS
deletes), with the crashes and zombies moved to where steps can go wrong:

* **crash between steps**: the worker `SIGKILL`s itself after step 1's recovery point
  (`after-step-1`) or after step 2's (`after-step-2`); the next delivery must resume after it,
  not run the finished steps again;
* **crash inside a step**: inside `ship`, after its call to the outside world and before its
  recovery point (`in-step-2`): nothing of the step committed, so the next holder runs it again,
  sending the outside world the same step idempotency key;
* **crash after the steps** (`after-effect`, before the completion) and **after the completion**
  (`before-delete`, before the SQS delete);
* **zombies**: the worker `SIGSTOP`s itself after step 1 or inside step 2 and wakes after the
  queue's visibility timeout plus 3 s, when the key has been taken over: its next recovery
  point must be refused (`LeaseLost`), and its step's entry with it;
* **lost replies** (DynamoDB): a share of the TransactWriteItems requests (a step's recovery
  point with its entry) are applied, then their reply is replaced by a 500, so botocore sends
  the step's write again: the store must recognise its own point and not fail the step.
"""

INVARIANTS = """\
## The invariants

* **one execution per (key, step)**: each unique `orderId` has exactly one log entry for each
  of charge, ship and email (two is a double step, none a lost one), and its idempotency record
  is COMPLETED. With the lock off (`--lock-off`, every delivery acquiring a record of its own)
  every duplicate runs all three steps again, and the books fail: CI checks that they do
  (tests/chaos/test_chaos_steps.py);
* **one step key per (key, step)**: every call to the outside world a (key, step) made carried
  the same `step.idempotency_key`, so a provider that deduplicates on it acted once; the calls
  may repeat (a crash inside a step, a zombie), the key may not;
* **no message lost**: every message was processed (its key has all three steps) or is in the
  DLQ with its reason; **nothing stuck**: no record IN_PROGRESS past its lease, or FAILED but
  retryable.
"""

CONSUMERS = """\
## The consumers

* **layer, three ctx.step**: `@sqs_consumer(key="orderId")`; each step calls the outside world
  with `step.idempotency_key` and hands its log entry to `step.put`, which commits it in one
  `TransactWriteItems` with the step's recovery point (`step#<position>` on the key's record,
  fenced on `lock_token = mine AND status = IN_PROGRESS`, into an empty position). The run
  exits 1 when this column fails.
* **layer, three plain effects**: the same decorator and the same three entries as plain
  PutItems (`exactly_once.ledger.append_entry`), no steps: what the idempotency record alone
  does for work in steps. A retry after a crash between steps runs every step again.
"""


def make_command(argv: Sequence[str]) -> str:
    """`eonce chaos --workload steps <args>` as the make command that runs it."""
    args = list(argv[1:] if argv[:1] == ["chaos"] else argv)
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--workload":
            skip = True
            continue
        if arg.startswith("--workload="):
            continue
        kept.append(arg)
    return "make chaos WORKLOAD=steps" + (f' ARGS="{shlex.join(kept)}"' if kept else "")


def _summary(run: ConsumerRun) -> str:
    v = sv(run)
    split = (
        f"{len(v.provider_split)} (key, step)s sent two step keys"
        if v.provider_calls
        else "no call to the outside world"
    )
    return (
        f"* **{run.kind.title}**: {v.exactly_once} of {v.expected} keys ran every step exactly "
        f"once; {len(v.step_doubles)} (key, step)s ran more than once; {len(v.missing)} keys ran "
        f"no step and {len(v.incomplete)} missed a step; {len(v.not_completed)} records not "
        f"COMPLETED; {split}; {len(v.lost)} "
        f"messages lost; {sum(v.dead_lettered.values())} in the DLQ with a reason. Verdict: "
        f"{'PASS' if v.ok and run.drained else 'FAIL'} ({run.elapsed_s:.0f} s)."
    )


def render_page(result: ChaosResult, command: str) -> str:
    runs = result.runs
    parts = [
        INTRO,
        "## Results\n",
        f"Produced by `{command}`. {_environment()}\n",
        markdown(result.settings, result.plan, runs),
        "\n".join(_summary(run) for run in runs) + "\n",
        "Causes of double steps, read from the writer of each extra log entry: "
        f"*zombie* = {accounting.ZOMBIE}; *killed* = {accounting.KILLED}; "
        f"*other* = {accounting.OVERRUN}.\n",
        FAULTS,
        INVARIANTS,
        CONSUMERS,
    ]
    return "\n".join(parts)


def write_page(path: Path, result: ChaosResult, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(result, command), encoding="utf-8")
