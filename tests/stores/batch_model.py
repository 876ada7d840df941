"""The batched store operations in the state-machine models (both stores): one statement of
what `acquire_many` and `finish_many` must answer, shared by tests/store/test_model.py
(DynamoDB) and tests/stores/test_state_machine.py (both stores).

- `predict_acquire` and `predict_finish` say, from the record as it was just before the call,
  what `acquire`, `complete` and `fail` answer for one key. The models hold the single calls
  AND each key of a batch to the same prediction, so a batch can never come to mean
  something a single call does not.
- `LiveHolders` watches every call a store answers (deliveries, hand-driven holders, batches)
  and notes a violation when a key is granted while another grant's lease is still live, or
  at a fence that is not above every earlier one.
- `BatchRules` is the rules themselves, mixed into each model: a batch of distinct keys (new,
  completed, held with a live or an expired lease, failed retryably or for good, another
  fingerprint, a real or forged replay nonce, `likely_taken` and `block_takeover` at random),
  a batch of outcomes (completions, retryable and permanent failures, releases, a zombie's
  stale lock, a lock that already finished), either with the reply of the whole call lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from exactly_once.errors import LockInherited
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import (
    AcquireRequest,
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Finish,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock

BATCH_KEYS = ("k0", "k1", "k2", "k3")  # k0, k1 are the single rules' keys too
FINGERPRINTS = (None, "fa", "fb")
NONCES = ("none", "real", "forged")  # a replay presenting the failure's own nonce, or another
OUTCOMES = ("complete", "retryable", "permanent", "release")
FORGED_NONCE = "f" * 32


# -- the prediction every acquire and every fenced write is held to ----------------------------


@dataclass(frozen=True)
class Expected:
    """What `acquire` answers for a key: the status, and how it was taken when ACQUIRED."""

    status: AcquireStatus
    takeover: bool = False
    retry: bool = False
    resumed: bool = False


def predict_acquire(
    before: StoredRecord | None,
    now_ms: int,
    *,
    fingerprint: str | None,
    block_takeover: bool,
    replay_nonce: str | None,
    resume_id: str | None = None,
) -> Expected:
    """The store's rules for one key (stores/dynamodb/request.py, postgres/statements.ACQUIRE),
    read from the record as it was before the call."""
    if before is None:
        return Expected(AcquireStatus.ACQUIRED)
    in_progress = before.status is Status.IN_PROGRESS
    own = resume_id is not None and in_progress and before.resume_id == resume_id
    if before.is_expired(now_ms // 1000) and not before.lease_live(now_ms):
        if block_takeover and in_progress and not own:
            return Expected(AcquireStatus.FAILED_PERMANENTLY)  # blocked for a person
        return Expected(AcquireStatus.ACQUIRED, resumed=own)  # a new generation
    if fingerprint is not None and before.fingerprint not in (None, fingerprint):
        return Expected(AcquireStatus.FINGERPRINT_MISMATCH)
    if before.status is Status.COMPLETED:
        return Expected(AcquireStatus.ALREADY_COMPLETED)
    if before.status is Status.FAILED:
        retryable = before.error is not None and before.error.retryable
        replayed = replay_nonce is not None and before.replay_nonce == replay_nonce
        if retryable or replayed:
            return Expected(AcquireStatus.ACQUIRED, retry=True)
        return Expected(AcquireStatus.FAILED_PERMANENTLY)
    if own:
        return Expected(AcquireStatus.ACQUIRED, takeover=True, resumed=True)
    if before.lease_expired(now_ms):
        if block_takeover:
            return Expected(AcquireStatus.FAILED_PERMANENTLY)
        return Expected(AcquireStatus.ACQUIRED, takeover=True)
    return Expected(AcquireStatus.IN_PROGRESS)


def check_acquisition(
    got: Acquisition,
    expected: Expected,
    before: StoredRecord | None,
    after: StoredRecord | None,
    *,
    faulted: bool,
) -> None:
    """`got` is the prediction, and the record after the call is what it says. After a fault
    (a lost reply recognised by the retry) only the status is promised, not how it was taken."""
    assert got.status is expected.status, (got.status, expected, before)
    if not faulted:
        flags = (got.takeover, got.retry, got.resumed)
        assert flags == (expected.takeover, expected.retry, expected.resumed), (got, before)
    if got.acquired:
        assert got.lock is not None
        assert after is not None, "acquired, but no record"
        held = (after.status, after.lock_token, after.fence)
        assert held == (Status.IN_PROGRESS, got.lock.token, got.lock.fence), (after, got.lock)
    elif (
        got.status is AcquireStatus.FAILED_PERMANENTLY
        and before is not None
        and (before.status is Status.IN_PROGRESS)
    ):
        # An expired lease blocked: FAILED for a person, with the nonce its replay presents.
        assert after is not None
        assert after.status is Status.FAILED, after
        assert after.error is not None
        assert not after.error.retryable
        assert got.record is not None
        assert got.record.replay_nonce == after.replay_nonce
    else:
        assert after == before, f"a refused acquisition ({got.status}) changed the record"


def leaves(finish: Finish) -> Status:
    return Status.COMPLETED if finish.error is None else Status.FAILED


def predict_finish(before: StoredRecord | None, finish: Finish) -> WriteStatus:
    """`complete` or `fail` with a lock: written while the record is the lock's and IN_PROGRESS;
    also OK when the record is the lock's and already in the state the write leaves (its own
    earlier write, as a retried lost reply meets it); else the lease was lost."""
    if before is None or before.lock_token != finish.lock.token:
        return WriteStatus.LEASE_LOST
    if before.status in (Status.IN_PROGRESS, leaves(finish)):
        return WriteStatus.OK
    return WriteStatus.LEASE_LOST


def check_finish(
    written: WriteResult, finish: Finish, before: StoredRecord | None, after: StoredRecord | None
) -> None:
    """`written` is the prediction; a refused write changed nothing (a zombie never writes)."""
    assert written.status is predict_finish(before, finish), (written, finish, before)
    if not written.ok:
        assert after == before, "a refused write (a zombie's) changed the record"
        return
    assert before is not None  # (OK is predicted only while the record is the lock's)
    assert after is not None
    assert (after.status, after.lock_token) == (leaves(finish), finish.lock.token), after
    if before.status is not Status.IN_PROGRESS:
        # Its own earlier write (a lost reply's retry, a repeated finish): nothing moves, and
        # the answer is that write's (a retryable one's no nonce, even to a permanent `fail`).
        assert after == before, "a repeated finish changed the record"
        if finish.error is not None:
            assert written.replay_nonce == before.replay_nonce
        return
    if finish.error is None:
        assert after.result == finish.result
        return
    assert after.error is not None
    assert (after.error.type, after.error.retryable) == (finish.error.type, finish.error.retryable)
    if not finish.error.retryable:
        assert written.replay_nonce is not None
        assert written.replay_nonce == after.replay_nonce


# -- every grant a store makes, whoever asked ---------------------------------------------------


@dataclass
class LiveHolders:
    """The grants a store made and whose holders have not finished: per record, the lease end
    of each token. A store that grants a key while another grant's lease is live (and not a
    resume of it), or at a fence not above the last, is noted in `violations`: noted, not
    raised, as the store's callers (the processor, one_by_one) catch what a call raises."""

    clock: Callable[[], float]
    leases: dict[str, dict[str, int]] = field(default_factory=dict)
    fences: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def granted(self, got: Acquisition) -> None:
        lock = got.lock
        assert lock is not None
        now_ms = int(self.clock() * 1000)
        held = self.leases.setdefault(lock.record_id, {})
        if lock.token in held:
            return  # seen already (one_by_one's acquire_many calls the watched acquire)
        for token, until in list(held.items()):
            if until < now_ms or got.resumed:
                del held[token]  # expired, or fenced out by the resume of its own execution
            else:
                self.violations.append(
                    f"{lock.record_id} granted at fence {lock.fence} while {token[:8]}'s "
                    f"lease lives until {until} (now {now_ms})"
                )
        if lock.fence <= self.fences.get(lock.record_id, 0):
            self.violations.append(
                f"{lock.record_id}: fence {lock.fence} after {self.fences[lock.record_id]}"
            )
        self.fences[lock.record_id] = max(lock.fence, self.fences.get(lock.record_id, 0))
        held[lock.token] = lock.lease_expires_at_ms

    def ended(self, lock: Lock) -> None:
        """Finished, refused (superseded) or unknown (the call raised): no longer counted."""
        self.leases.get(lock.record_id, {}).pop(lock.token, None)

    def extended(self, lock: Lock) -> None:
        held = self.leases.get(lock.record_id, {})
        if lock.token in held:
            held[lock.token] = lock.lease_expires_at_ms


WATCHED = ("acquire", "acquire_many", "complete", "fail", "release", "extend", "finish_many")


def watch(store: Store, holders: LiveHolders) -> None:
    """Route the store's answers through `holders`, for every caller of this instance."""
    for name in WATCHED:
        setattr(store, name, _watched(name, getattr(store, name), holders))


def _watched(name: str, call: Callable[..., Any], holders: LiveHolders) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            answer = call(*args, **kwargs)
        except LockInherited:
            raise  # a clone's write: the parent still holds
        except Exception:
            if name in {"complete", "fail", "release"}:
                holders.ended(args[0] if args else kwargs["lock"])
            raise
        _note(name, args, kwargs, answer, holders)
        return answer

    return run


def _note(name: str, args: Any, kwargs: Any, answer: Any, holders: LiveHolders) -> None:
    if name == "acquire" and answer.acquired:
        holders.granted(answer)
    elif name == "acquire_many":
        for got in answer:
            if isinstance(got, Acquisition) and got.acquired:
                holders.granted(got)
    elif name in {"complete", "fail", "release"}:
        holders.ended(args[0] if args else kwargs["lock"])
    elif name == "extend" and answer.ok:
        holders.extended(answer.lock)
    elif name == "finish_many":
        finishes = args[0] if args else kwargs["finishes"]
        for finish in finishes:
            holders.ended(finish.lock)


# -- the rules ----------------------------------------------------------------------------------


@dataclass
class BatchLocks:
    """The locks batches were granted, per key: the newest, and older ones (superseded,
    finished) kept for zombie writes and repeated finishes."""

    current: dict[str, Lock] = field(default_factory=dict)
    old: dict[str, list[Lock]] = field(default_factory=dict)

    def add(self, key: str, lock: Lock) -> None:
        if key in self.current:
            self.retire(key)
        self.current[key] = lock

    def retire(self, key: str) -> None:
        lock = self.current.pop(key, None)
        if lock is not None:
            self.old[key] = [*self.old.get(key, [])[-1:], lock]  # the last two are enough

    def candidates(self) -> dict[str, list[Lock]]:
        keys = set(self.current) | set(self.old)
        return {
            key: [*([self.current[key]] if key in self.current else []), *self.old.get(key, [])]
            for key in sorted(keys)
        }


REQUEST = st.tuples(
    st.sampled_from(FINGERPRINTS),
    st.booleans(),  # block_takeover
    st.sampled_from(NONCES),
    st.booleans(),  # likely_taken
    st.sampled_from((None, 1_000)),  # expected_duration_ms
)


class BatchRules:
    """Mixed into a model (a RuleBasedStateMachine). The model provides: `scope`, `clock`,
    `store`, `faults` (with `fired` and `lose_batch`), `holders` (worker -> (key, lock)),
    `live_holders` (LiveHolders watching its store), `batch` (BatchLocks), `lease_ms`,
    `_raw_record(key)`, `_saw_fence(key, fence)`, and the hooks below."""

    scope: str
    clock: FakeClock
    store: Store
    faults: Any
    holders: dict[int, tuple[str, Lock] | None]
    live_holders: LiveHolders
    batch: BatchLocks
    completed: dict[str, StoredRecord]
    lease_ms: int
    # Each store's model reads its records its own way and watches fences with its own
    # bookkeeping: the two machines that mix these rules in define both.
    _raw_record: Callable[[str], StoredRecord | None]
    _saw_fence: Callable[[str, int], None]

    def _raw_records(self, keys: Sequence[str]) -> dict[str, StoredRecord | None]:
        """The records of several keys (a model may read them in one request)."""
        return {key: self._raw_record(key) for key in keys}

    def _batch_granted(self, key: str, lock: Lock) -> None:
        """A batch took the key (the model's own bookkeeping)."""

    def _batch_unknown(self, key: str) -> None:
        """A batch's answer for the key was an exception: whether it took it is unknown."""

    def _holder_finished(self, worker: int, finish: Finish, answer: Any) -> None:
        """A hand-driven holder's lock was finished in a batch (answer or exception)."""
        self.holders[worker] = None

    def _calls_batch(self, lose: bool, call: Callable[[], Any]) -> Any:
        """Run a batch call, with the reply of the whole call lost when `lose`."""
        self.faults.fired = False
        self.faults.lose_batch = 1 if lose else 0
        try:
            answers = call()
        finally:
            if lose and self.faults.lose_batch == 0:
                event("a whole batch's reply was lost")
            self.faults.lose_batch = 0
        return answers

    @rule(
        keys=st.lists(
            st.sampled_from(BATCH_KEYS), min_size=1, max_size=len(BATCH_KEYS), unique=True
        ),
        data=st.data(),
        lose=st.booleans(),
    )
    def acquire_batch(self, keys: list[str], data: st.DataObject, lose: bool) -> None:
        befores = self._raw_records(keys)
        requests = [self._request(key, befores[key], data.draw(REQUEST)) for key in keys]
        self._acquire_batch(requests, befores, lose)

    def _acquire_batch(
        self,
        requests: list[AcquireRequest],
        befores: dict[str, StoredRecord | None],
        lose: bool,
    ) -> dict[str, Lock]:
        """acquire_many, each answer checked; the locks it granted."""
        granted: dict[str, Lock] = {}
        now_ms = int(self.clock() * 1000)
        expected = [
            predict_acquire(
                befores[req.key],
                now_ms,
                fingerprint=req.fingerprint,
                block_takeover=req.block_takeover,
                replay_nonce=req.replay_nonce,
            )
            for req in requests
        ]
        answers = self._calls_batch(lose, lambda: self.store.acquire_many(requests))
        assert len(answers) == len(requests), answers
        for req, got, want in zip(requests, answers, expected, strict=True):
            if isinstance(got, Exception):
                assert self.faults.fired, repr(got)
                self._batch_unknown(req.key)
                continue
            check_acquisition(
                got, want, befores[req.key], self._raw_record(req.key), faulted=self.faults.fired
            )
            event(f"batch acquire: {got.status}")
            if got.acquired:
                assert got.lock is not None
                self._saw_fence(req.key, got.lock.fence)
                self.batch.add(req.key, got.lock)
                self._batch_granted(req.key, got.lock)
                granted[req.key] = got.lock
        return granted

    def _request(
        self, key: str, before: StoredRecord | None, drawn: tuple[Any, ...]
    ) -> AcquireRequest:
        fingerprint, block, nonce, likely, expected_ms = drawn
        replay_nonce = {
            "none": None,
            "real": before.replay_nonce if before is not None else None,
            "forged": FORGED_NONCE,
        }[nonce]
        return AcquireRequest(
            scope=self.scope,
            key=key,
            lease_ms=self.lease_ms,
            owner="batch",
            fingerprint=fingerprint,
            block_takeover=block,
            replay_nonce=replay_nonce,
            expected_duration_ms=expected_ms,
            likely_taken=likely,
        )

    def _finishable(self) -> dict[str, list[tuple[Lock, int | None]]]:
        """Per key, the locks a batch may finish: the batches' (current and old), and the
        hand-driven holders' (with their worker)."""
        found: dict[str, list[tuple[Lock, int | None]]] = {
            key: [(lock, None) for lock in locks] for key, locks in self.batch.candidates().items()
        }
        for worker, held in self.holders.items():
            if held is not None:
                found.setdefault(held[0], []).append((held[1], worker))
        return found

    @precondition(lambda self: bool(self._finishable()))
    @rule(data=st.data(), lose=st.booleans())
    def finish_batch(self, data: st.DataObject, lose: bool) -> None:
        choices = self._finishable()
        keys = data.draw(st.lists(st.sampled_from(sorted(choices)), min_size=1, unique=True))
        picked = [data.draw(st.sampled_from(choices[key])) for key in keys]
        self._finish_batch(keys, picked, data, lose)

    @rule(
        keys=st.lists(st.sampled_from(BATCH_KEYS), min_size=1, unique=True),
        likely=st.booleans(),
        data=st.data(),
        lose=st.booleans(),
    )
    def batch_zombies(self, keys: list[str], likely: bool, data: st.DataObject, lose: bool) -> None:
        """A batch takes its keys, stalls past its lease, and a second batch takes them over;
        then one finish_many carries, key by key, the zombie's lock or its successor's."""
        first = self._acquire_batch(
            [self._request(key, None, (None, False, "none", likely, None)) for key in keys],
            self._raw_records(keys),
            lose=False,
        )
        if not first:
            return
        self.clock.advance(self.lease_ms / 1000 + 1)
        second = self._acquire_batch(
            [self._request(key, None, (None, False, "none", True, None)) for key in first],
            self._raw_records(list(first)),
            lose,
        )
        if not second:
            return
        zombie_or_not = data.draw(
            st.lists(st.booleans(), min_size=len(second), max_size=len(second))
        )
        picked: list[tuple[Lock, int | None]] = [
            (first[key] if zombie else lock, None)
            for (key, lock), zombie in zip(second.items(), zombie_or_not, strict=True)
        ]
        self._finish_batch(list(second), picked, data, lose)

    def _finish_batch(
        self,
        keys: list[str],
        picked: list[tuple[Lock, int | None]],
        data: st.DataObject,
        lose: bool,
    ) -> None:
        """finish_many of these locks (one per key), with outcomes drawn, each answer checked."""
        finishes = [
            self._finish(lock, data.draw(st.sampled_from(OUTCOMES)), n)
            for n, (lock, _worker) in enumerate(picked)
        ]
        befores = [self._raw_record(key) for key in keys]
        answers = self._calls_batch(lose, lambda: self.store.finish_many(finishes))
        assert len(answers) == len(finishes), answers
        for key, (lock, worker), finish, before, written in zip(
            keys, picked, finishes, befores, answers, strict=True
        ):
            if isinstance(written, Exception):
                assert self.faults.fired, repr(written)
            else:
                check_finish(written, finish, before, self._raw_record(key))
                event(f"batch finish: {written.status}")
            if worker is not None:
                self._holder_finished(worker, finish, written)
            elif self.batch.current.get(key) == lock:
                self.batch.retire(key)

    def _finish(self, lock: Lock, outcome: str, n: int) -> Finish:
        if outcome == "complete":
            return Finish(lock, result={"batch": n, "fence": lock.fence})
        if outcome == "release":
            return Finish(lock, error=ErrorInfo("Released", "released by its holder", True))
        return Finish(lock, error=ErrorInfo("Batch", f"by a batch ({n})", outcome == "retryable"))

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def at_most_one_live_holder_per_key(self) -> None:
        """No key granted while another grant's lease lives; fences rise per key (every path:
        deliveries, holders, batches)."""
        assert not self.live_holders.violations, self.live_holders.violations

    @invariant()
    def a_completed_record_never_goes_back(self) -> None:
        """A COMPLETED record stays exactly as completed while it lives (the TTL)."""
        now_s = self.clock()
        for key, record in self._raw_records(BATCH_KEYS).items():
            kept = self.completed.get(key)
            if kept is not None and not kept.is_expired(now_s):
                assert record == kept, f"{key}'s COMPLETED record went back: {record}"
            if record is not None and record.status is Status.COMPLETED:
                self.completed[key] = record
            elif kept is not None and kept.is_expired(now_s):
                del self.completed[key]


def holders_for(clock: Callable[[], float], store: Store) -> LiveHolders:
    """A LiveHolders watching `store`."""
    holders = LiveHolders(clock)
    watch(store, holders)
    return holders


def install_lost_batch_replies(client: Any, faults: Any) -> None:
    """DynamoDB: while `faults.lose_batch` is armed, the next BatchExecuteStatement reaches
    DynamoDB (which applies every statement in it), then its connection closes before the reply:
    botocore retries the whole batch, and the retry meets the batch's own writes."""
    from botocore.exceptions import ConnectionClosedError
    from botocore.httpsession import URLLib3Session

    session = URLLib3Session()

    def before_send(request: Any, event_name: str = "", **_: Any) -> None:
        if event_name.rsplit(".", 1)[-1] != "BatchExecuteStatement" or faults.lose_batch <= 0:
            return
        faults.lose_batch -= 1
        faults.fired = True
        session.send(request)  # applied; the reply never arrives
        raise ConnectionClosedError(endpoint_url=str(request.url))

    client.meta.events.register("before-send.dynamodb", before_send)


def ddb_raw_many(ddb: Any, table: str, scope: str, keys: Sequence[str]) -> dict[str, Any]:
    """DynamoDB: the records of `keys`, as stored (expired or not), in one BatchGetItem."""
    from exactly_once.stores import schema

    ids = {schema.record_id(scope, key): key for key in keys}
    got = ddb.batch_get_item(
        RequestItems={
            table: {
                "Keys": [{schema.PARTITION_KEY: {"S": rid}} for rid in ids],
                "ConsistentRead": True,
            }
        }
    )
    assert not got.get("UnprocessedKeys"), got["UnprocessedKeys"]  # 4 small items: never
    found = {
        ids[item[schema.PARTITION_KEY]["S"]]: StoredRecord.from_item(dict(item))
        for item in got["Responses"][table]
    }
    return {key: found.get(key) for key in keys}
