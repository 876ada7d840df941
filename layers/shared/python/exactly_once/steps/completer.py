"""The completer: finishes resumable keys that nobody will deliver again.

Stripe's completer, on the fenced store. A key whose holder died after some of its steps stays
IN_PROGRESS until its lease ends; a queue would redeliver its message and the next holder
would resume it, but an API request whose client gave up has no next delivery. The completer
lists such keys (IN_PROGRESS with an expired lease, and retryable FAILED ones) in the scopes of
the resumables it is given, takes each over through the ordinary acquire, and runs the
resumable's function on the input the key kept: finished steps come back from their recovery
points, the remaining ones run, and the result is recorded as the key's outcome.

Nothing here bypasses the state machine. A live holder is never disturbed (its lease is live,
so the acquire refuses), a redelivery racing the completer is arbitrated by the same
conditional write (one of them holds the key, the other is told it is in progress), and a
completer that outlives its own lease is a zombie like any other (its writes are refused).
A key that kept no input (not started by `Resumable.run`) is left alone and reported.

Opt-in: nothing runs unless you call `complete_abandoned` (or `eonce complete`, or schedule it).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from exactly_once import lifecycle, observability
from exactly_once.claims import Claim, ClaimStatus, claim
from exactly_once.config import store_settings
from exactly_once.errors import LeaseLost, PermanentError
from exactly_once.held_lock import positive_ms
from exactly_once.keys import hashed_key
from exactly_once.lease import owner as lambda_owner
from exactly_once.steps.resumable import NoStoredInput, Resumable, registered
from exactly_once.steps.runner import INPUT, input_of
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status

if TYPE_CHECKING:
    from exactly_once.lease import LeasePolicy
    from exactly_once.stores.records import StoredRecord

COMPLETED = "completed"
FAILING = "failing"
SKIPPED = "skipped"


@dataclass(frozen=True)
class KeyOutcome:
    """What the completer did with one key: `outcome` is completed, failing or skipped;
    `detail` says why (a skip's reason, a failure's error); `fence` is the completer's when it
    held the key; `resumed_after` how many steps had finished before it took the key."""

    scope: str
    key: str
    outcome: str
    detail: str = ""
    fence: int | None = None
    resumed_after: int = 0


@dataclass
class CompletionReport:
    """Every key the completer looked at, by what became of it."""

    outcomes: list[KeyOutcome] = field(default_factory=list)

    def _of(self, outcome: str) -> list[KeyOutcome]:
        return [o for o in self.outcomes if o.outcome == outcome]

    @property
    def completed(self) -> list[KeyOutcome]:
        return self._of(COMPLETED)

    @property
    def failing(self) -> list[KeyOutcome]:
        """Taken and run, and failed again (recorded FAILED; retryable unless permanent)."""
        return self._of(FAILING)

    @property
    def skipped(self) -> list[KeyOutcome]:
        """Left alone: a live holder, no stored input, done meanwhile, failed permanently."""
        return self._of(SKIPPED)

    def summary(self) -> str:
        return (
            f"{len(self.completed)} completed, {len(self.failing)} still failing, "
            f"{len(self.skipped)} skipped"
        )


@dataclass(frozen=True)
class Abandoned:
    """A key the listing found: its resumable, its key as stored, the record as listed."""

    resumable: Resumable[Any, Any]
    key: str
    record: StoredRecord
    store: Store


class Completer:
    """Finds abandoned keys of `resumables` (default: every registered one) and finishes them.

    - `store`: the store of every resumable (default: each one's own, as its `run` resolves
      it: its `store`, `table_name` or `dsn`, else IDEMPOTENCY_TABLE / IDEMPOTENCY_DSN).
    - `retry_failed`: also run retryable FAILED keys (default True); `max_attempts`: leave a
      key alone once it has been tried this many times (default: no bound).
    - `owner`: who holds the keys it takes (default: host, pid and instance, or the Lambda's).
    - `lambda_context`: in Lambda, its writes stop retrying before the invocation ends.
    """

    def __init__(
        self,
        resumables: Iterable[Resumable[Any, Any]] | None = None,
        *,
        store: Store | None = None,
        retry_failed: bool = True,
        max_attempts: int | None = None,
        owner: str | None = None,
        lambda_context: Any = None,
    ) -> None:
        # The same resumable named twice (a module and one that re-exports it, both in
        # RESUMABLE_MODULES) is one; two functions of one scope are not.
        chosen = list(dict.fromkeys(registered() if resumables is None else resumables))
        self._by_scope: dict[str, Resumable[Any, Any]] = {r.scope: r for r in chosen}
        if len(self._by_scope) != len(chosen):
            raise ValueError("two resumables of one scope: the completer could not tell them")
        self._store = store
        self._stores: dict[tuple[str | None, str | None], Store] = {}
        self.retry_failed = retry_failed
        self.max_attempts = max_attempts
        self.lambda_context = lambda_context
        self.owner = owner or (
            lambda_owner(lambda_context)
            if lambda_context is not None
            else f"completer:{socket.gethostname()}:{os.getpid()}:{lifecycle.instance_id()}"
        )

    def run(self, limit: int | None = 100, *, log: bool = True) -> CompletionReport:
        """Finish up to `limit` abandoned keys, one after the other; a report of each, also
        logged one line per key unless `log` is False (a CLI prints the report itself)."""
        report = CompletionReport()
        for candidate in self.abandoned(limit):
            outcome = self.complete(candidate)
            report.outcomes.append(outcome)
            if not log:
                continue
            observability.logger().info(
                "completer",
                extra={
                    "scope": outcome.scope,
                    "key": outcome.key,
                    "outcome": outcome.outcome,
                    "detail": outcome.detail,
                    "fence": outcome.fence,
                },
            )
        return report

    def abandoned(self, limit: int | None = None) -> Iterator[Abandoned]:
        """Keys of the resumables' scopes whose holder's lease expired (IN_PROGRESS), then
        retryable FAILED ones, as the stores' pending indexes list them (without a Scan)."""
        found = 0
        statuses = [Status.IN_PROGRESS] + ([Status.FAILED] if self.retry_failed else [])
        for store, scopes in self._grouped():
            for status in statuses:
                stuck = status is Status.IN_PROGRESS
                for record in store.list_pending(status, stuck_only=stuck):
                    scope, _, key = record.record_id.partition("#")
                    if scope not in scopes or (not stuck and not _retryable(record)):
                        continue
                    yield Abandoned(self._by_scope[scope], key, record, store)
                    found += 1
                    if limit is not None and found >= limit:
                        return

    def complete(self, candidate: Abandoned) -> KeyOutcome:
        """Take one listed key over and finish it, or say why it was left alone."""
        resumable, key, store = candidate.resumable, candidate.key, candidate.store
        scope = resumable.scope
        current = store.get_by_id(candidate.record.record_id)  # consistent, unlike the index
        why = self._left_alone(current)
        if why is not None or current is None:
            return KeyOutcome(scope, key, SKIPPED, why or "gone")
        settings = store_settings({"scope": scope}, "ONCE_SCOPE", store_given=True)
        policy: LeasePolicy = resumable.lease or settings["lease"]
        lease_ms, expected_ms = _lease(resumable, policy, self.lambda_context)
        takeover_blocked = resumable.defaults.get("block_takeover")
        claimed = claim(
            store,
            scope,
            _first_holders_key(key, current),
            lease_ms=lease_ms,
            owner=self.owner,
            block_takeover=settings["block_takeover"]
            if takeover_blocked is None
            else takeover_blocked,
            expected_duration_ms=expected_ms,
            lambda_context=self.lambda_context,
            heartbeat_ms=policy.heartbeat_ms,
        )
        if not claimed.acquired:
            return KeyOutcome(scope, key, SKIPPED, _not_acquired(claimed))
        fence = claimed.lock.fence
        before = len(current.steps) - 1  # the steps finished before it, the input aside
        try:
            resumable.finish(lambda: claimed, None, stored=True)
        except NoStoredInput:
            return KeyOutcome(scope, key, SKIPPED, "no stored input: given back", fence)
        except LeaseLost as lost:
            return KeyOutcome(scope, key, SKIPPED, f"taken over while completing: {lost}", fence)
        except Exception as exc:
            kind = "permanent" if isinstance(exc, PermanentError) else "retryable"
            detail = f"{kind}: {type(exc).__name__}: {exc}"
            return KeyOutcome(scope, key, FAILING, detail, fence, before)
        return KeyOutcome(scope, key, COMPLETED, "", fence, before)

    def _left_alone(self, record: StoredRecord | None) -> str | None:
        """Why the key, as read now, is not the completer's to take (None: take it)."""
        if record is None:
            return "gone"
        if record.status is Status.COMPLETED:
            return "completed meanwhile"
        if record.status is Status.FAILED and not _retryable(record):
            return "failed permanently: reset it first (eonce locks reset)"
        if INPUT not in record.steps:
            return "no stored input: not started by a resumable's run, so left to its deliveries"
        if self.max_attempts is not None and record.attempts >= self.max_attempts:
            return f"tried {record.attempts} times (max_attempts {self.max_attempts})"
        return None  # a live holder is refused by the acquire itself, fenced

    def _grouped(self) -> list[tuple[Store, set[str]]]:
        """Each store (by identity) with the scopes of the resumables on it."""
        grouped: dict[int, tuple[Store, set[str]]] = {}
        for scope, resumable in self._by_scope.items():
            store = self._store_of(resumable)
            grouped.setdefault(id(store), (store, set()))[1].add(scope)
        return list(grouped.values())

    def _store_of(self, resumable: Resumable[Any, Any]) -> Store:
        if self._store is not None:
            return self._store
        own: Store | None = resumable.defaults.get("store")
        if own is not None:
            return own
        from exactly_once.once_lock import settings_store

        given = {
            "scope": resumable.scope,
            "table_name": resumable.defaults.get("table_name"),
            "dsn": resumable.defaults.get("dsn"),
        }
        settings = store_settings(given, "ONCE_SCOPE")
        where = (settings["table_name"], settings["dsn"])
        if where not in self._stores:
            self._stores[where] = settings_store(settings)
        return self._stores[where]


def complete_abandoned(
    resumables: Sequence[Resumable[Any, Any]] | None = None,
    *,
    store: Store | None = None,
    limit: int | None = 100,
    retry_failed: bool = True,
    max_attempts: int | None = None,
    owner: str | None = None,
    lambda_context: Any = None,
) -> CompletionReport:
    """Finish up to `limit` abandoned keys of `resumables` (default: every registered one):
    see `Completer` for the arguments. Call it from a schedule (a Lambda on an EventBridge
    rule), a cron job, or by hand (`eonce complete`)."""
    completer = Completer(
        resumables,
        store=store,
        retry_failed=retry_failed,
        max_attempts=max_attempts,
        owner=owner,
        lambda_context=lambda_context,
    )
    return completer.run(limit)


def _first_holders_key(stored: str, record: StoredRecord) -> str:
    """The key to take the record with, which the function gets as `lock.key`: the one its
    first holder had, kept beside the input when the record's id holds another form of it
    (PostgreSQL keeps a key with a NUL as its hash, and the listing has only the id); else
    the key as stored. Only a key whose hash is the stored form: the acquire goes to this
    record and no other."""
    point = record.steps.get(INPUT)
    kept = None if point is None else input_of(point)[0]
    return kept if kept is not None and hashed_key(kept) == stored else stored


def _retryable(record: StoredRecord) -> bool:
    return record.error is not None and record.error.retryable


def _lease(resumable: Resumable[Any, Any], policy: LeasePolicy, context: Any) -> tuple[int, int]:
    """The lease the completer holds a key with, and when it expects to be done: the
    resumable's `lease_s` or `expected_duration_s` (plus the margin), as its `run` would."""
    lease_s = resumable.defaults.get("lease_s")
    expected_s = resumable.defaults.get("expected_duration_s")
    if lease_s is not None:
        lease_ms = positive_ms(lease_s, "lease_s")
    elif expected_s is not None:
        lease_ms = positive_ms(expected_s, "expected_duration_s") + policy.margin_ms
    else:
        lease_ms = policy.lease_ms(context)
    expected_ms = lease_ms if expected_s is None else positive_ms(expected_s, "expected")
    return lease_ms, expected_ms


def _not_acquired(claimed: Claim) -> str:
    if claimed.status is ClaimStatus.IN_PROGRESS:
        return "held by a live holder (a redelivery, another completer): left to it"
    if claimed.status is ClaimStatus.COMPLETED:
        return "completed meanwhile"
    if claimed.status is ClaimStatus.FAILED:
        error = claimed.error
        return f"failed permanently ({error.type if error else 'takeover blocked'})"
    return f"not acquired: {claimed.status}"
