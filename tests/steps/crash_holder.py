"""A holder that dies for real: run as `python -m tests.steps.crash_holder '<spec as JSON>'`.

It takes the key (printing its fence), runs the three steps of entry_support, fenced
(`ctx.step`) or plain (the fence off), and at the planned point ends the process with
`os._exit(137)`, as a killed Lambda sandbox or an OOM-killed task ends: no `finally`, no
rollback, no outcome written; its sockets close with it. The spec names the store, the books,
the key, the crash point ("after_charge", "after_ship", "in_ship": inside ship after the
provider call and the step's write, before its recovery point commits), and how far ahead of
real time the holder's store clock runs (so it can take over a crashed holder's lease), and
whether the holder is `begin`'s lock or an SQS consumer's handler given the spec's record.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from exactly_once import begin
from exactly_once.stores.protocol import Store
from tests.steps.entry_support import Faults, open_books, plain_steps, three_steps

CRASHED = 137


def open_store(spec: dict[str, Any]) -> Store:
    offset = float(spec.get("clock_offset_s", 0))

    def clock() -> float:
        return time.time() + offset

    if spec["backend"] == "postgres":
        from exactly_once.stores.postgres.store import PostgresStore

        return PostgresStore(spec["dsn"], clock=clock)
    import boto3

    from exactly_once.stores.dynamodb.store import IdempotencyStore

    client = boto3.client("dynamodb", endpoint_url=spec["endpoint"], region_name="us-east-1")
    return IdempotencyStore(spec["table"], client=client, clock=clock)


def main(spec: dict[str, Any]) -> None:
    if spec.get("via") == "sqs":
        consume(spec)
    books = open_books(spec["books"])
    claim = begin(spec["scope"], spec["key"], store=open_store(spec), lease_s=spec["lease_s"])
    if not claim.acquired:
        print(f"not acquired: {claim.status}", flush=True)
        os._exit(2)
    print(claim.lock.fence, flush=True)
    faults = Faults(**{spec["crash"]: lambda: os._exit(CRASHED)})
    if spec["fenced"]:
        three_steps(books, claim.lock, spec["key"], faults)
    else:
        plain_steps(books, spec["key"], faults)
    os._exit(3)  # the crash point was never reached


def consume(spec: dict[str, Any]) -> None:
    """The same holder as an SQS consumer's handler, given the record as SQS delivers it."""
    from exactly_once import sqs_consumer
    from exactly_once_ops.lambda_context import LocalLambdaContext

    books = open_books(spec["books"])
    store = open_store(spec)
    faults = Faults(**{spec["crash"]: lambda: os._exit(CRASHED)})

    def handler(body: Any, ctx: Any) -> Any:
        print(ctx.fence, flush=True)
        return three_steps(books, ctx, body["orderId"], faults)

    where: dict[str, Any] = {"dsn": spec.get("dsn")}
    if spec["backend"] == "dynamodb":
        import boto3

        client = boto3.client("dynamodb", endpoint_url=spec["endpoint"], region_name="us-east-1")
        where = {"table_name": spec["table"], "dynamodb_client": client}
    consumer = sqs_consumer(key="orderId", scope=spec["scope"], fingerprint=False, **where)(handler)
    consumer.processor().store = store  # on the holder's clock
    consumer({"Records": [spec["record"]]}, LocalLambdaContext("crash-holder", timeout_s=30))
    print("the handler returned", flush=True)
    os._exit(3)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
