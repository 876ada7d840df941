"""Run a batch's records as chains: in order within a chain, chains in parallel.

A chain is a FIFO message group, or, on standard queues, the records sharing an idempotency
key. Same-key records therefore never race each other inside one invocation: the second one
meets a COMPLETED record and succeeds as a duplicate instead of being sent back to the queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from exactly_once import lifecycle
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.sqs.messages import SqsMessage

ProcessOne = Callable[[SqsMessage], RecordResult]
ChainOf = Callable[[SqsMessage], str | None]

# Pools outlive an invocation: warm invocations skip creating threads (~1 ms a batch).
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(size: int) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(size)
        if pool is None:
            pool = _pools[size] = ThreadPoolExecutor(size, thread_name_prefix="record")
        return pool


def _forget_pools() -> None:
    """In a forked child the pools' threads are gone (fork copies only the calling thread): a
    task submitted to them would never run. Start afresh, with a lock nobody holds."""
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()


def _stop_pools() -> None:
    """Before a SnapStart snapshot: end the threads, so no restored copy resumes idle ones."""
    with _pools_lock:
        for pool in _pools.values():
            pool.shutdown(wait=True)
        _pools.clear()


lifecycle.on_clone(_forget_pools)
lifecycle.on_snapshot(_stop_pools)


def run_chains(
    messages: list[SqsMessage],
    chain_of: ChainOf,
    process: ProcessOne,
    concurrency: int,
    why: str,
    stopped: set[object] | None = None,
) -> list[RecordResult]:
    """After a chain's first reported failure its later records are reported failed unrun.

    For FIFO that keeps a group in order; for a repeated key it avoids an immediate retry.
    `stopped`: chains that failed before (an earlier wave of the batch); the chains that fail
    here are added to it.
    """
    stopped = set() if stopped is None else stopped
    chains: dict[object, list[int]] = {}
    for index, message in enumerate(messages):
        named = chain_of(message)
        chains.setdefault(named if named is not None else ("unchained", index), []).append(index)
    results: list[RecordResult | None] = [None] * len(messages)

    def run_chain(chain: object) -> None:
        failed = chain in stopped
        for i in chains[chain]:
            if failed:
                results[i] = RecordResult(messages[i].message_id, Outcome.SKIPPED, True, reason=why)
                continue
            results[i] = process(messages[i])
            failed = results[i].report_failure  # type: ignore[union-attr]
        if failed:
            stopped.add(chain)

    if concurrency <= 1 or len(chains) <= 1:
        for chain in chains:
            run_chain(chain)
    else:  # the pool's size is the bound; a batch with fewer chains uses fewer threads
        list(_pool(concurrency).map(run_chain, chains))
    return [r for r in results if r is not None]


def chaining(messages: list[SqsMessage], key_of: ChainOf) -> tuple[ChainOf, str]:
    """How a batch's records chain (FIFO: by group; a stream: by shard or partition; else by
    key), and why a skip happens."""
    if any(message.in_order for message in messages):
        return _group_of, "an earlier record of its shard or partition failed"
    if any(message.is_fifo for message in messages):
        return _group_of, "an earlier message of its group failed"
    return key_of, "an earlier message with its key failed"


def _group_of(message: SqsMessage) -> str | None:
    return message.group_id


def batch_response(results: list[RecordResult]) -> dict[str, list[dict[str, str]]]:
    """The partial-batch response; an empty itemIdentifier makes Lambda retry the whole batch."""
    return {
        "batchItemFailures": [{"itemIdentifier": r.message_id} for r in results if r.report_failure]
    }
