"""The holder's sequence of steps: which ones finished before (the record's recovery points),
which one runs next, and the write that records it.

A holder reads the key's record once, at its first step (a consistent read): the recovery
points finished by earlier holders of this generation, and the generation itself (for the
steps' idempotency keys). Positions count from 1 in call order; a step whose position holds a
point returns the point's result without running. A position holding another step's name, or
a name finished at another position, is a StepOrderError: the code's steps changed while the
key was in flight, and resuming could skip or repeat work. A durable execution's replay may
skip calls (a `lock.step` inside a checkpointed `context.step`), so there a call passes over
finished points to its own (`_replayed`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from exactly_once.completion import write_durably
from exactly_once.errors import (
    CommitFailed,
    ConfigurationError,
    LeaseLost,
    StepOrderError,
    StepResultUnstorable,
)
from exactly_once.steps.keys import step_key, stored_key
from exactly_once.steps.step import Step
from exactly_once.stores.records import StepPoint, StoredRecord
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult

if TYPE_CHECKING:
    from exactly_once.stores.protocol import Store
    from exactly_once.stores.records import Lock

T = TypeVar("T")
MAX_NAME = 256
INPUT = 0  # the position of a resumable's stored input (resumable.py), before every step
KEYED_INPUT = "input+key"  # point 0 holding {"key", "input"}: see `keep_input`


class Holder(Protocol):
    """What the steps read of a holder's context (exactly_once.context.LockedContext), named
    here so that the context, which calls into the steps, is not imported back."""

    key: str
    _store: Store | None
    _lock: Lock | None
    _step_run: StepRun | None

    @property
    def scope(self) -> str: ...


class StepRun:
    """One holder's steps, in the order it calls them."""

    def __init__(self, ctx: Holder) -> None:
        self._ctx = ctx
        self._record: StoredRecord | None = None  # read at the first step
        self._done: dict[int, StepPoint] = {}  # its recovery points, and this holder's since
        self._position = 0
        self._names: set[str] = set()
        self._token: str | None = None  # the lock it was read under: a new holder reads again
        self.running: Step | None = None  # the step whose fn runs now (`ctx.transaction` is its)

    def run(self, name: str, fn: Callable[[Step], T]) -> T:
        """Run step `name` once for the key (see the module's docstring)."""
        checked(name)
        if self.running is not None:
            raise StepOrderError(
                f"{self._ctx.key!r}: step {name!r} is called inside step {self.running.name!r}; "
                "steps do not nest"
            )
        store, lock = self._held()
        points = self._points(store, lock)
        position = self._replayed(points, name, self._position + 1)
        done = points.get(position)
        if done is not None:
            if done.name != name:
                raise StepOrderError(
                    f"{self._ctx.key!r}: step {name!r} is at position {position}, where the "
                    f"key's recovery point is step {done.name!r}: the steps changed while the "
                    "key was in flight"
                )
            self._advance(position, name)
            return done.result  # type: ignore[no-any-return]
        # Position 0 is a resumable's input (keep_input), whose name is not a step's.
        earlier = [p for at, p in points.items() if at != INPUT and p.name == name]
        if name in self._names or earlier:
            raise StepOrderError(
                f"{self._ctx.key!r}: step {name!r} is called again at position {position}; "
                "each step of a key needs a name of its own"
            )
        step = Step(
            store,
            lock,
            key=self._ctx.key,
            name=name,
            position=position,
            idempotency_key=step_key(
                self._ctx.scope,
                stored_key(lock.record_id, self._ctx.scope, self._ctx.key),
                self.generation,
                position,
                name,
            ),
        )
        self.running = step
        try:
            result = fn(step)
        except BaseException:
            store.discard_step(lock)  # its transaction's writes roll back with it
            raise
        finally:
            self.running = None
            step.finish()
        self._record_point(store, lock, position, name, result, step.writes)
        return result

    def _replayed(self, points: dict[int, StepPoint], name: str, position: int) -> int:
        """Where a durable execution's call lands: past finished steps its replay skipped.

        A durable replay answers a checkpointed SDK step (`context.step`) from its log without
        calling the function inside it, so a `lock.step` wrapped in one is skipped, and the
        replay's next call comes early. The SDK replays the same code in the same order, so a
        call there may pass over finished points to its own (or, new, to the first empty
        position after them). Elsewhere a name that does not match its position is a change
        of the steps (a renamed step would run again) and stays a StepOrderError."""
        if getattr(self._ctx, "durable_execution", None) is None:
            return position
        at = position
        while at in points and points[at].name != name:
            at += 1
        return at

    def keep_input(self, value: Any) -> Any:
        """Record `value` as the key's input (position 0), once per generation; returns the
        input kept (an earlier holder's, when it already kept one)."""
        store, lock = self._held()
        points = self._points(store, lock)
        if INPUT in points:
            return input_of(points[INPUT])[1]
        key = self._ctx.key
        if stored_key(lock.record_id, self._ctx.scope, key) == key:
            self._record_point(store, lock, INPUT, "input", value, ())
        else:
            # The record's id holds another form of the key (PostgreSQL keeps a key with a NUL
            # as its hash): the key is kept beside the input, so that the completer, which
            # finds keys by id, hands the function the key its first holder had.
            kept = {"key": key, "input": value}
            self._record_point(store, lock, INPUT, KEYED_INPUT, kept, ())
        return value

    @property
    def generation(self) -> int:
        """When the record's generation was created (epoch ms): the same for every holder of
        it, new when the record expired and was taken again."""
        record = self._record
        return 0 if record is None or record.created_at_ms is None else record.created_at_ms

    def stored_input(self) -> tuple[bool, Any]:
        """(True, the kept input), or (False, None) when no holder kept one."""
        store, lock = self._held()
        point = self._points(store, lock).get(INPUT)
        return (False, None) if point is None else (True, input_of(point)[1])

    def _held(self) -> tuple[Store, Lock]:
        store, lock = self._ctx._store, self._ctx._lock
        if store is None or lock is None:
            raise LeaseLost("this context holds no lock: steps need the key's holder")
        if not hasattr(store, "record_step"):
            raise ConfigurationError(f"the {store.backend} store keeps no steps")
        outcome = getattr(self._ctx, "outcome", None)  # a OnceLock's, once written
        if outcome is not None:
            raise RuntimeError(
                f"{self._ctx.key!r}: the outcome is already recorded ({outcome}): a step now "
                "would run and then be refused"
            )
        return store, lock.own()

    def _points(self, store: Store, lock: Lock) -> dict[int, StepPoint]:
        if self._record is None or self._token != lock.token:
            record = store.get_by_id(lock.record_id)
            if (
                record is None
                or record.lock_token != lock.token
                or record.status is not Status.IN_PROGRESS
            ):
                raise LeaseLost(
                    f"{lock.record_id} is no longer held at fence {lock.fence}: its steps are "
                    "not run"
                )
            self._record, self._token, self._done = record, lock.token, dict(record.steps)
        return self._done

    def _record_point(
        self,
        store: Store,
        lock: Lock,
        position: int,
        name: str,
        result: Any,
        writes: Sequence[dict[str, Any]],
    ) -> None:
        kept = StoredResult.of(result, store.result_cap_bytes)
        if kept.text is None:
            store.discard_step(lock)
            raise StepResultUnstorable(
                f"{self._ctx.key!r}: step {name!r}'s result cannot be kept as its recovery "
                f"point ({kept.omitted})"
            )
        point = StepPoint(position, name, kept.text, lock.fence, int(time.time() * 1000))
        ctx = self._ctx
        try:
            written = write_durably(
                lambda: store.record_step(lock, point, writes),
                getattr(ctx, "lambda_context", None),
                float(getattr(ctx, "reserve_ms", 0.0)),
            )
        except CommitFailed:
            raise  # nothing of the step committed: the key's next holder runs it again
        except BaseException:
            # It may have committed (every reply lost, the record unreadable: CommitUnknown):
            # this holder reads the record again at its next step, so a point that did commit
            # is its result, and its fn, whose writes went with that point, never runs again.
            self._record = None
            raise
        if not written.ok:
            now = written.current
            holder = f"now {now.status} at fence {now.fence}" if now else "the record is gone"
            raise LeaseLost(f"step {name!r} of {ctx.key!r} refused at fence {lock.fence}: {holder}")
        self._done[position] = point
        if position != INPUT:
            self._advance(position, name)

    def _advance(self, position: int, name: str) -> None:
        self._position = position
        self._names.add(name)


def input_of(point: StepPoint) -> tuple[str | None, Any]:
    """(the key kept beside the input, or None when the record's id holds the key as it is;
    the input) of a recovery point 0 (`StepRun.keep_input`)."""
    if point.name == KEYED_INPUT:
        kept = point.result
        return str(kept["key"]), kept["input"]
    return None, point.result


def checked(name: str) -> str:
    """A step name: non-empty text that can be stored (no lone surrogates, no NUL, which
    PostgreSQL's jsonb refuses: every write of its point would fail), at most 256 chars."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ValueError(f"a step name is 1 to {MAX_NAME} characters, got {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"a step name must be valid text, got {name!r}") from None
    if "\x00" in name:
        raise ValueError(f"a step name must not contain NUL, got {name!r}")
    return name


def run_step(ctx: Holder, name: str, fn: Callable[[Step], T]) -> T:
    """`ctx.step(name, fn)`: the context's StepRun, made at its first step."""
    return steps_of(ctx).run(name, fn)


def steps_of(ctx: Holder) -> StepRun:
    run = ctx._step_run
    if run is None:
        run = ctx._step_run = StepRun(ctx)
    return run
