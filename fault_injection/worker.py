"""A chaos worker process: the local poller's steps, with faults around them.

It composes `local_aws.poller` (receive_batch, to_lambda_record, failed_ids, delete_successes)
rather than calling `invoke_once`, because two faults sit between its steps: a crash after the
handler returned but before the delete, and DeleteMessageBatch entries that are dropped. The
stop signal is a lock-free shared byte: a worker may be SIGKILLed at any instant, and a lock it
held (an Event's, a Queue's) would then stay taken forever.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from exactly_once import clients
from exactly_once_ops.lambda_context import LocalLambdaContext
from fault_injection import events, injection
from fault_injection.pg_policy import EACH_PROCESS, random_faults
from fault_injection.settings import StoreKind
from fault_injection.throttling import THROTTLED_EACH_PROCESS, install_throttling
from local_aws import lock_off
from local_aws.poller import (
    FunctionBinding,
    delete_successes,
    failed_ids,
    receive_batch,
    redirect_output,
    to_lambda_record,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

Handler = Callable[[Any, Any], Any]


class Flag(Protocol):
    value: int


@dataclass(frozen=True)
class WorkerSpec:
    binding: FunctionBinding
    environment: dict[str, str]  # AWS endpoints, the function's variables and the run's store
    handler: str  # "module:attribute"
    throttle_rate: float  # on PostgreSQL: connections dropped before a store statement
    delete_failure_rate: float
    seed: int
    log_dir: str
    store: StoreKind = StoreKind.DYNAMODB
    lost_reply_rate: float = 0.0  # PostgreSQL: store statements applied, their reply lost


def load_handler(path: str) -> Handler:
    module, attribute = path.split(":", 1)
    return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


def worker_main(spec: WorkerSpec, index: int, generation: int, stop: Flag) -> None:
    """Entry point of a worker process (spawned, so nothing is inherited but the arguments)."""
    redirect_output(os.path.join(spec.log_dir, f"worker-{index}.log"))
    os.environ.update(spec.environment)
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", spec.binding.function_name)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    lock_off.install_if_enabled()  # the harness's self-test (EONCE_LOCK_OFF=1), never the layer's
    rng = random.Random(f"{spec.seed}/{index}/{generation}")
    handler = _load_with_faults(spec, random.Random(rng.random()))
    sqs = clients.sqs()
    events.record("worker-start", index=index, generation=generation)
    while not stop.value:
        try:
            polled = time.monotonic()
            messages = receive_batch(sqs, spec.binding)
            if messages:
                invoke(sqs, spec, handler, messages, rng, time.monotonic() - polled)
        except Exception:  # keep polling, as Lambda's poller does after errors
            traceback.print_exc()
            time.sleep(0.5)


def _load_with_faults(spec: WorkerSpec, rng: random.Random) -> Handler:
    """The handler, its store's calls meeting the run's faults."""
    if spec.store is StoreKind.POSTGRES:
        # Imported here: psycopg loads only in a PostgreSQL run's workers.
        from fault_injection.consumer_postgres import FaultyPostgresConsumer

        handler = load_handler(spec.handler)
        if not isinstance(handler, FaultyPostgresConsumer):
            raise TypeError(f"{spec.handler} is no FaultyPostgresConsumer: faults cannot reach it")
        # Its pool asks `decide` before each statement; a few faults are planned per process.
        handler.decide = random_faults(
            spec.throttle_rate, spec.lost_reply_rate, rng, planned=EACH_PROCESS
        )
        return handler
    # The layer's cached client is the one its store, the ledger and the Powertools consumer
    # use: hooking it before the handler is imported covers every DynamoDB call.
    install_throttling(
        clients.dynamodb(),
        spec.throttle_rate,
        rng,
        lambda operation: events.record("throttle", op=operation),
        planned=THROTTLED_EACH_PROCESS,  # so every run meets throttles, whatever the draws
    )
    return load_handler(spec.handler)


def invoke(
    sqs: SQSClient,
    spec: WorkerSpec,
    handler: Handler,
    messages: list[dict[str, Any]],
    rng: random.Random,
    receive_s: float = 0.0,
) -> None:
    """One invocation: event in, partial-batch response out, then deletes (some dropped)."""
    binding = spec.binding
    started = time.monotonic()
    region = sqs.meta.region_name
    event = {"Records": [to_lambda_record(m, binding.queue_arn, region) for m in messages]}
    context = LocalLambdaContext(binding.function_name, timeout_s=binding.timeout_s)
    ids = {m["MessageId"] for m in messages}
    try:
        failed = failed_ids(handler(event, context), ids)
    except Exception:
        traceback.print_exc()
        failed = ids  # a raised error retries the whole batch
    results = getattr(handler, "last_results", None) or []
    outcomes = Counter(str(r.outcome) for r in results)
    successes = [m for m in messages if m["MessageId"] not in failed]
    for message in successes:
        injection.at_point(
            _body(message), injection.BEFORE_DELETE, None, injection.receive_count(_lambda(message))
        )
    dropped = [m for m in successes if rng.random() < spec.delete_failure_rate]
    kept = [m for m in successes if m not in dropped]
    handled = time.monotonic()
    delete_failures = delete_successes(sqs, binding.queue_url, kept)
    events.record(
        "batch",
        received=len(messages),
        reported_failed=len(failed),
        deleted=len(kept) - delete_failures,
        delete_dropped=len(dropped),
        delete_failed=delete_failures,
        outcomes=dict(outcomes),
        takeovers=sum(bool(getattr(r, "takeover", False)) for r in results),
        receive_counts=dict(Counter(str(injection.receive_count(_lambda(m))) for m in messages)),
        receive_s=round(receive_s, 3),
        handler_s=round(handled - started, 3),
        delete_s=round(time.monotonic() - handled, 3),
    )


def _body(message: dict[str, Any]) -> Any:
    try:
        return json.loads(str(message.get("Body", "")))
    except ValueError:
        return None


def _lambda(message: dict[str, Any]) -> dict[str, Any]:
    """Just enough of the Lambda record shape for `injection.receive_count`."""
    return {"attributes": message.get("Attributes") or {}}
