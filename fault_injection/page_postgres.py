"""docs/chaos-postgres.md: the report of a PostgreSQL run, written by
`chaos --store postgres --markdown docs/chaos-postgres.md`.

A page of its own, so that the DynamoDB page (docs/chaos.md) keeps its comparison. The prose is
fixed; every number comes from the run.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from importlib import metadata

from fault_injection import accounting
from fault_injection.page import _summary
from fault_injection.pg_policy import FAIL_KINDS, LOSE_KINDS
from fault_injection.report import markdown
from fault_injection.runner import ChaosResult
from fault_injection.settings import DEPLOY_CONTEXT

INTRO = """\
# Fault injection on PostgreSQL

`eonce chaos --store postgres` runs the harness of [docs/chaos.md](chaos.md) with the layer's
idempotency store on **PostgreSQL** and the consumer's side effect written **in the same
transaction** as its completion. SQS (the deployed Orders queue and its DLQ) is moto, as in the
DynamoDB run; the idempotency records and the effects ledger are in a database of the run's
own on a local PostgreSQL server, migrated with `exactly_once.stores.postgres.migrations.migrate`.
Worker processes poll the queue the way Lambda's event source mapping does while faults are
injected; when the queue has drained, the books are closed from durable state only (the ledger
rows and the records in PostgreSQL, and the DLQ), never from what the workers reported.

The plain-effect and Powertools comparisons of docs/chaos.md are not run here: they are about
what a DynamoDB idempotency record cannot do for an effect outside it, and Powertools has no
PostgreSQL store. This page has one consumer, the layer's.
"""

CONSUMER = """\
## The consumer

`@sqs_consumer(key="orderId")` on `IDEMPOTENCY_DSN`, running the same business function as the
DynamoDB run (functions/orders semantics: a negative amount is permanent, `failTimes` fails
early deliveries). Its effect is the layer's execution log, `exactly_once.ledger.append_effect(ctx,
detail)`: on PostgreSQL a plain `INSERT` into `exactly_once.ledger` in `ctx.transaction`, with a
sort key that is new for every execution (`orders#effect#<execution id>`). Nothing in the row
refuses a second one, so the rows per key count executions. What keeps the
effects at one per key is the transaction alone: it commits with the fenced completion
(`UPDATE exactly_once.records SET status = 'COMPLETED' ... WHERE id = ... AND lock_token = <mine>
AND status = 'IN_PROGRESS'`) or not at all. A zombie's completion finds no row to update, so
its insert rolls back with it; a killed holder's open transaction is aborted by the server when
its connection closes. The store's pool is wrapped (`fault_injection/pg_faults.py`,
`FaultyPool`) so that its statements meet the faults below; the library itself is unchanged.
"""


def _faults() -> str:
    return f"""\
## The faults

* **duplicate delivery**: a share of the sends repeat an earlier body verbatim (new message
  id, same `orderId`); half follow closely, so both copies are in flight together.
* **worker crash**: the first time a message reaches its planned point (on whichever delivery),
  the business function `SIGKILL`s its own worker process there: after acquire and before the
  effect, after the effect (its transaction open) and before completion, or after the commit
  and before the SQS delete. The supervisor restarts the worker.
* **zombie**: the worker `SIGSTOP`s itself mid-record (before the effect, or after it with its
  transaction open); the supervisor sends `SIGCONT` only after the queue's visibility timeout
  plus 3 s, so the message has been redelivered and taken over while it was frozen. Every
  record of its batch freezes with it, wherever it is.
* **PostgreSQL connection drops** (in place of DynamoDB's throttling, which PostgreSQL does not
  have): before a statement of the store is sent, its connection is closed, so nothing is
  applied and the caller gets `OperationalError`. Drawn at the throttle rate for each
  {", ".join(FAIL_KINDS)} statement. The store runs acquire and its fenced writes again (three
  attempts); a completion (sent with its transaction's COMMIT in one round trip) that fails
  raises `CommitFailed`, the record is released (FAILED, retryable; if that write fails too,
  its lease runs out) and SQS delivers the message again.
* **PostgreSQL lost replies** (as the DynamoDB tests lose a reply after the write was applied):
  the statement is applied, then the connection is closed before its reply is read. Drawn at
  the lost-reply rate for each {", ".join(LOSE_KINDS)} statement. A retried acquire or fenced
  write recognises its own earlier attempt (its token); a completion whose reply was lost had
  committed with its transaction, and is settled by reading the record (COMPLETED under our
  token: done).
* **planned store faults**: on top of the draws, each worker process drops its 2nd acquire
  and 3rd completion and loses the reply of its 5th acquire and 6th completion
  (`pg_policy.EACH_PROCESS`), so every run meets each of them even when the draws miss.
* **SQS delete failure**: the worker drops a share of the DeleteMessageBatch entries of
  successful records, so they are redelivered.
* **poison**: bodies that are not JSON, have no `orderId`, or have a negative amount.
* **transient consumer error**: the business function raises on the first one or two
  deliveries, then succeeds.

## The invariants

* **one execution per key**: each unique `orderId` has exactly one row in `exactly_once.ledger`
  (keys with more than one row were executed twice; expected keys with none are missing).
  `eonce chaos --store postgres --lock-off` (a self-test that turns the lock off in the
  workers) fails it, and CI checks that it does;
* **no message lost**: every message was processed (its key took effect) or is in the DLQ with
  the reason the consumer attached;
* **nothing stuck**: no record is left IN_PROGRESS past its lease, or FAILED but retryable,
  once nothing is in flight (the `PostgresStore`'s own `list_pending`).
"""


CAVEATS = """\
## Caveats

* The faults are injected at the driver's edge, on the psycopg connection the store uses (the
  statement runs, or not, and then the connection is closed), not on a network. A connection
  that breaks in production (a network fault, a failover, a proxy dropping it) ends the same
  way for the caller: an error, with or without the statement applied.
* The local server runs with `fsync=off`: the run kills and freezes workers, never the server,
  so durability across a server crash is not what it measures (DynamoDB Local keeps nothing
  either). Every client is on the loopback interface.
* Zombies here outlive the queue's visibility timeout, which a Lambda invocation cannot. Their
  transactions stay open while they are frozen (well under the pool's
  `idle_in_transaction_session_timeout` of 60 s). The frozen record holds no lock on its
  record's row (its completion has not run), so its takeover is not blocked: its completion,
  when it wakes, matches no row and its transaction rolls back.
* The stack is deployed with `maxReceiveCount` 10 instead of 5, as for the DynamoDB run.
"""


def _environment(result: ChaosResult) -> str:
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("moto", "psycopg"))
    server = f"PostgreSQL {result.store_version}" if result.store_version else "PostgreSQL"
    return (
        f"Run on {datetime.now(UTC):%Y-%m-%d} on {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {server}, {versions}; deploy context "
        + ", ".join(f"`{k}={v}`" for k, v in DEPLOY_CONTEXT.items())
        + "."
    )


def render_page(result: ChaosResult, command: str) -> str:
    runs = result.runs
    parts = [
        INTRO,
        "## Results\n",
        f"Produced by `{command}`. {_environment(result)}\n",
        markdown(result.settings, result.plan, runs),
        "\n".join(_summary(run) for run in runs) + "\n",
        "Causes of double executions, read from the writer of each extra log row: "
        f"*zombie* = {accounting.ZOMBIE}; *killed* = {accounting.KILLED}; "
        f"*other* = {accounting.OVERRUN}.\n",
        CONSUMER,
        _faults(),
        CAVEATS,
    ]
    return "\n".join(parts)
