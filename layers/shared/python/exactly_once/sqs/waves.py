"""A batch in waves: each wave's keys are claimed in one round trip, its records run as chains,
and its completions (with the release of claims its records never used) go in one more.

Why waves and not the whole batch at once: a store batches a bounded number of keys per request
(DynamoDB: 25 statements), and a lock claimed long before its record runs only waits. A wave
holds a key once: a record whose key (or, FIFO, a record after it in its group) is already in
the wave waits for the next wave, so it meets the earlier record's COMPLETED outcome rather
than its own batch's lock. A chain that failed stops in every later wave too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exactly_once.claims import Claim, claim_many
from exactly_once.lease import remaining_ms
from exactly_once.outcomes import RecordResult
from exactly_once.sqs import recent_keys
from exactly_once.sqs.batch import chaining, run_chains
from exactly_once.sqs.gathering import Gathering
from exactly_once.sqs.messages import SqsMessage
from exactly_once.stores.records import AcquireRequest

if TYPE_CHECKING:
    from exactly_once.sqs.processor import RecordProcessor

WAVE = 25  # DynamoDB's most statements in one BatchExecuteStatement
UNUSED = "its record did not run in this invocation"


def run_waves(
    processor: RecordProcessor, messages: list[SqsMessage], context: Any, margin_ms: float
) -> list[RecordResult]:
    """Every record's result, in the batch's order."""
    chain_of, why = chaining(messages, processor.key_of)
    stopped: set[object] = set()
    results: dict[int, RecordResult] = {}
    waiting = list(range(len(messages)))
    while waiting:
        wave, waiting = _next_wave(messages, waiting, processor, chain_of)
        batch = [messages[i] for i in wave]
        for i, result in zip(
            wave,
            _run_wave(processor, batch, context, margin_ms, chain_of, why, stopped),
            strict=True,
        ):
            results[i] = result
    return [results[i] for i in range(len(messages))]


def _next_wave(
    messages: list[SqsMessage], waiting: list[int], processor: RecordProcessor, chain_of: Any
) -> tuple[list[int], list[int]]:
    """Up to WAVE records in order, each key at most once; a record that must wait holds back
    the rest of its chain (its FIFO group, or its key) with it."""
    wave: list[int] = []
    later: list[int] = []
    keys: set[str] = set()
    held: set[object] = set()
    for i in _interleaved(waiting, messages, chain_of):
        message = messages[i]
        chain = chain_of(message)
        key = processor.key_of(message)
        if (
            len(wave) >= WAVE
            or (chain is not None and chain in held)
            or (key is not None and key in keys)
        ):
            later.append(i)
            if chain is not None:
                held.add(chain)
            continue
        wave.append(i)
        if key is not None:
            keys.add(key)
    return sorted(wave), sorted(later)


def _interleaved(waiting: list[int], messages: list[SqsMessage], chain_of: Any) -> list[int]:
    """The waiting records taken a chain at a time, round robin (each chain in its order): a
    Kafka event lists each partition's records together, so in event order one busy partition
    would fill the wave and the others would wait for the next, instead of running at once."""
    chains: dict[object, list[int]] = {}
    for i in waiting:
        chain = chain_of(messages[i])
        chains.setdefault(("unchained", i) if chain is None else chain, []).append(i)
    rounds = max((len(indices) for indices in chains.values()), default=0)
    return [indices[r] for r in range(rounds) for indices in chains.values() if r < len(indices)]


def _run_wave(
    processor: RecordProcessor,
    batch: list[SqsMessage],
    context: Any,
    margin_ms: float,
    chain_of: Any,
    why: str,
    stopped: set[object],
) -> list[RecordResult]:
    claims = _claim_wave(processor, batch, context, margin_ms, chain_of, stopped)
    gather = Gathering()

    def process(message: SqsMessage) -> RecordResult:
        return processor.process(message, context, margin_ms, claims.pop(id(message), None), gather)

    try:
        results = run_chains(batch, chain_of, process, processor.config.concurrency, why, stopped)
    except BaseException:  # KeyboardInterrupt goes on, after what ran is written
        _write(processor, claims, gather)
        raise
    settled = _write(processor, claims, gather)
    final = [
        settled.get(id(message), result) for message, result in zip(batch, results, strict=True)
    ]
    for message, result in zip(batch, final, strict=True):
        chain = chain_of(message)
        if result.report_failure and chain is not None:
            stopped.add(chain)  # a completion that failed stops its chain as a run's failure
    return final


def _write(
    processor: RecordProcessor, claims: dict[int, Claim | Exception], gather: Gathering
) -> dict[int, RecordResult]:
    """The wave's gathered outcomes, with the release of the claims no record used (skipped
    after its chain failed, or never reached): one `finish_many`."""
    for left in claims.values():
        if isinstance(left, Claim) and left.acquired:
            gather.release(left.lock, UNUSED)
    return gather.write(processor.store)


def _claim_wave(
    processor: RecordProcessor,
    batch: list[SqsMessage],
    context: Any,
    margin_ms: float,
    chain_of: Any,
    stopped: set[object],
) -> dict[int, Claim | Exception]:
    """The wave's claims by message (`id`), in one `claim_many`; none for a record that will
    not run (its chain stopped, too little time left) or that takes no key."""
    if remaining_ms(context) < margin_ms:
        return {}
    asked: list[tuple[SqsMessage, AcquireRequest]] = []
    for message in batch:
        chain = chain_of(message)
        if chain is not None and chain in stopped:
            continue
        request = processor.acquire_request(message, context)
        if request is not None:
            if recent_keys.seen(request.scope, request.key):
                request = request.likely()
            asked.append((message, request))
    if not asked:
        return {}
    try:
        answers: list[Claim | Exception] = claim_many(
            processor.store,
            [request for _, request in asked],
            lambda_context=context,
            reserve_ms=margin_ms / 2,  # completion may eat into the margin, not past half
            heartbeat_ms=processor.config.lease.heartbeat_ms,
        )
    except Exception as exc:  # the whole call failed: each record reports it, none raises
        answers = [exc] * len(asked)
    for _, request in asked:
        recent_keys.remember(request.scope, request.key)
    return {id(message): answer for (message, _), answer in zip(asked, answers, strict=True)}
