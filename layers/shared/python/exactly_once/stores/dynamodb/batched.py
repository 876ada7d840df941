"""A batch's acquisitions and outcomes in one `BatchExecuteStatement` each (25 keys a call).

Acquire: a key not hinted `likely_taken` is INSERTed whole (a new record: ACQUIRED at fence
now+1, attempt 1); a hinted one gets the conditional UPDATE that `request.take` would make, and
its old item back (RETURNING ALL OLD *) for the fence and attempt. A refused UPDATE carries the
old item (ALL_OLD), and `acquisition.refused` reads the verdict from it exactly as for a single
UpdateItem: a duplicate, a live holder, a mismatch, our own write whose reply was lost, or a
TTL-expired record to renew (its own PutItem). Only the wrong guesses take a second call, all of
them in one: an INSERT that met an existing key (DuplicateItem) becomes the UPDATE, an UPDATE
that met no item becomes the INSERT.

Finish: one conditional UPDATE per holder, fenced like `fenced_writes.fenced_update` (token and
IN_PROGRESS), refused writes read the same way (our own lost reply is OK, else LEASE_LOST).

Anything the batch cannot answer for a key (a throttled or failed statement, a whole call that
fails past botocore's retries, a second wrong guess, a success that brought no old item back)
goes to today's single call for that key with the SAME request: the same token, so a write the
batch did make is recognised there as our own, never as another holder's.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from exactly_once.stores import schema
from exactly_once.stores.dynamodb import acquisition, partiql, request
from exactly_once.stores.dynamodb.acquisition import RENEWALS
from exactly_once.stores.dynamodb.expressions import HOLDS_LOCK, MARK_FAILED, failure_values, s
from exactly_once.stores.dynamodb.fenced_writes import completion
from exactly_once.stores.dynamodb.request import Request
from exactly_once.stores.dynamodb.table import Table
from exactly_once.stores.records import (
    AcquireRequest,
    Acquisition,
    Finish,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult

if TYPE_CHECKING:
    from exactly_once.stores.records import ErrorInfo, Lock

MAX_STATEMENTS = 25  # BatchExecuteStatement's limit; more fail the whole call
Response = dict[str, Any]  # one statement's answer: {"Error": {...}} or {"Item": {...}}


class Finisher(Table, Protocol):
    """What finishing a batch needs of the store: its cap, and its single writes to fall
    back to."""

    @property
    def result_cap_bytes(self) -> int: ...

    def complete(self, lock: Lock, result: Any = None) -> WriteResult: ...

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult: ...


class Key:
    """One key of an acquire batch: its request (token, clock reading) and how to write it.
    A plain class (see partiql.Statement)."""

    __slots__ = ("likely_taken", "replay_nonce", "req")

    def __init__(self, req: Request, replay_nonce: str | None, likely_taken: bool) -> None:
        self.req = req
        self.replay_nonce = replay_nonce
        self.likely_taken = likely_taken

    def insert(self, table: str) -> partiql.Statement:
        # The item `request.take` leaves when no item exists: the renewal's new generation at
        # the fence `if_not_exists(fence, now_ms) + 1` gives a missing item.
        item, _, _ = request.renewal({}, self.req, self.req.now_ms + 1)
        return partiql.insert(table, item)

    def update(self, table: str) -> partiql.Statement:
        update, condition, values = request.take(self.req, self.replay_nonce)
        return partiql.update(table, self.req.record_id, update, condition, values, returning=True)


def request_for(
    ask: AcquireRequest, now_ms: int, ttl: Callable[[int, int], int], skewed: bool
) -> Key:
    """The key's request as `IdempotencyStore.acquire` makes it (a batch never resumes)."""
    lease_until = now_ms + ask.lease_ms
    expected = ask.expected_duration_ms
    req = Request(
        record_id=schema.record_id(ask.scope, ask.key),
        scope=ask.scope,
        token=secrets.token_hex(16),
        owner=ask.owner,
        fingerprint=ask.fingerprint,
        block_takeover=ask.block_takeover,
        now_ms=now_ms,
        lease_until_ms=lease_until,
        ttl_s=ttl(now_ms // 1000, lease_until),
        expected_by_ms=None if expected is None else now_ms + expected,
        skewed=skewed,
    )
    return Key(req, ask.replay_nonce, ask.likely_taken)


def send(table: Table, statements: dict[int, partiql.Statement]) -> dict[int, Response | None]:
    """Each statement's answer, 25 to a call; None for the keys of a call that failed whole
    (past botocore's own retries), which fall back to their single call."""
    answers: dict[int, Response | None] = {}
    indices = list(statements)
    for start in range(0, len(indices), MAX_STATEMENTS):
        chunk = indices[start : start + MAX_STATEMENTS]
        try:
            reply = table.client.batch_execute_statement(
                Statements=[statements[i].request() for i in chunk]
            )
        except Exception:  # throttled past the retries, unreachable: each key tries alone
            answers.update(dict.fromkeys(chunk))
            continue
        responses = list(reply.get("Responses", []))
        for position, i in enumerate(chunk):
            answers[i] = dict(responses[position]) if position < len(responses) else None
    return answers


def _distinct(record_ids: Iterable[str]) -> list[bool]:
    """True for the first of each record id: one id twice fails a whole batch call."""
    seen: set[str] = set()
    first = []
    for record_id in record_ids:
        first.append(record_id not in seen)
        seen.add(record_id)
    return first


# -- acquire ---------------------------------------------------------------------------------


def acquire_many(table: Table, keys: Sequence[Key]) -> list[Acquisition | Exception]:
    answers: dict[int, Acquisition | Exception] = {}
    distinct = _distinct(k.req.record_id for k in keys)
    first = {
        i: key.update(table.table_name) if key.likely_taken else key.insert(table.table_name)
        for i, key in enumerate(keys)
        if distinct[i]
    }
    second: dict[int, partiql.Statement] = {}
    for i, response in send(table, first).items():
        _settle(table, i, keys[i], first[i], response, answers, second)
    for i, response in send(table, second).items():
        _settle(table, i, keys[i], second[i], response, answers, None)
    for i, key in enumerate(keys):
        if i not in answers:  # a fallback: today's single call with the same request
            answers[i] = _alone(acquisition.take, table, key.req, key.replay_nonce)
    return [answers[i] for i in range(len(keys))]


def _settle(
    table: Table,
    i: int,
    key: Key,
    statement: partiql.Statement,
    response: Response | None,
    answers: dict[int, Acquisition | Exception],
    retry: dict[int, partiql.Statement] | None,
) -> None:
    """Record the key's answer, or queue its other statement (`retry`, in the first round), or
    leave it unanswered for the single-call fallback."""
    if response is None:
        return
    error = response.get("Error")
    if error is None:
        if statement.insert:
            answers[i] = request.taken({}, key.req)  # a new record: fence now+1, attempt 1
        elif response.get("Item"):
            answers[i] = request.taken(dict(response["Item"]), key.req)
        # Else the UPDATE committed but its old item did not come back (real DynamoDB might not
        # honour RETURNING in a batch): the fallback's single UpdateItem, with this same token,
        # is refused with our own item and reports ACQUIRED at the fence we wrote (without the
        # takeover/retry flags, which only the old item could tell).
        return
    code, item = error.get("Code"), error.get("Item")
    if code == "ConditionalCheckFailed" and item:
        answers[i] = _alone(acquisition.refused, table, dict(item), key.req, RENEWALS)
    elif retry is not None and code == "DuplicateItem" and statement.insert:
        retry[i] = key.update(table.table_name)  # a record exists: take it if it may be taken
    elif retry is not None and code == "ConditionalCheckFailed" and not statement.insert:
        retry[i] = key.insert(table.table_name)  # no item (an UPDATE never creates one)
    # Anything else (a throttled or failed statement, a second wrong guess) falls back.


def _alone(call: Callable[..., Acquisition], *args: Any) -> Acquisition | Exception:
    try:
        return call(*args)
    except Exception as exc:  # this key's answer; the others go on
        return exc


# -- finish ----------------------------------------------------------------------------------


class Write:
    """One holder's fenced UPDATE and what it leaves, to read its refusal by. A plain class
    (see partiql.Statement)."""

    __slots__ = ("leaves", "replay_nonce", "statement")

    def __init__(
        self,
        statement: partiql.Statement,
        leaves: Status,
        replay_nonce: str | None,  # a permanent failure's fresh nonce
    ) -> None:
        self.statement = statement
        self.leaves = leaves
        self.replay_nonce = replay_nonce


def write_for(table: Finisher, finish: Finish, now: float, ttl_s: int) -> Write:
    """The write `complete` or `fail` makes for this holder, as a fenced PartiQL UPDATE."""
    lock = finish.lock
    if finish.error is None:
        kept = StoredResult.of(finish.result, table.result_cap_bytes)
        update, values = completion(kept, int(now * 1000), ttl_s)
        leaves, nonce = Status.COMPLETED, None
    else:
        values = failure_values(lock.record_id, finish.error, now, table.failed_ttl_s)
        leaves, nonce = Status.FAILED, None
        if finish.error.retryable:
            update = f"{MARK_FAILED} REMOVE #nonce"
        else:  # a permanent failure: only a delivery presenting this nonce may run it again
            nonce = secrets.token_hex(16)
            values[":nonce"] = s(nonce)
            update = f"{MARK_FAILED}, #nonce = :nonce"
    values = {**values, ":tok": s(lock.token), ":ip": s(Status.IN_PROGRESS)}
    statement = partiql.update(table.table_name, lock.record_id, update, HOLDS_LOCK, values)
    return Write(statement, leaves, nonce)


def finish_many(
    table: Finisher, finishes: Sequence[Finish], now: float, ttl_s: int
) -> list[WriteResult | Exception]:
    answers: dict[int, WriteResult | Exception] = {}
    writes: dict[int, Write] = {}
    distinct = _distinct(f.lock.record_id for f in finishes)
    for i, finish in enumerate(finishes):
        try:
            finish.lock.own()  # a fork child's inherited lock never writes (LockInherited)
            if distinct[i]:
                writes[i] = write_for(table, finish, now, ttl_s)
        except Exception as exc:
            answers[i] = exc
    sent = send(table, {i: w.statement for i, w in writes.items()})
    for i, response in sent.items():
        written = _written(finishes[i].lock, writes[i], response)
        if written is not None:
            answers[i] = written
    for i, finish in enumerate(finishes):
        if i not in answers:  # today's single write, with the same lock
            try:
                answers[i] = (
                    table.complete(finish.lock, finish.result)
                    if finish.error is None
                    else table.fail(finish.lock, finish.error)
                )
            except Exception as exc:
                answers[i] = exc
    return [answers[i] for i in range(len(finishes))]


def _written(lock: Lock, write: Write, response: Response | None) -> WriteResult | None:
    """The holder's answer as `fenced_update` reads it, or None to fall back."""
    if response is None:
        return None
    error = response.get("Error")
    if error is None:
        return WriteResult(WriteStatus.OK, lock=lock, replay_nonce=write.replay_nonce)
    if error.get("Code") != "ConditionalCheckFailed":
        return None
    item = error.get("Item")
    current = StoredRecord.from_item(dict(item)) if item else None
    if current and current.lock_token == lock.token and current.status is write.leaves:
        # Our own write: the batch's reply was lost and botocore's retry met it.
        return WriteResult(WriteStatus.OK, lock=lock, replay_nonce=current.replay_nonce)
    return WriteResult(WriteStatus.LEASE_LOST, current=current)
