"""`@resumable(scope)`: work in steps whose input is kept with its key, so that it can be
finished by someone other than its caller.

A key whose holder died after some steps is resumed by the next delivery of the same work: a
queue redelivers its message, a client retries its request. Some work has no next delivery (an
API request whose client gave up, a script that was killed): for it the key must carry its own
input, and the function that runs it must be known by its scope. A resumable is that pair.

    @resumable("checkout")
    def checkout(lock, order):
        charge = lock.step("charge", lambda step: pay(order, step.idempotency_key))
        shipment = lock.step("ship", lambda step: ship(order))
        lock.step("email", lambda step: send_receipt(order, shipment))
        return {"charge": charge, "shipment": shipment}

    checkout.run(order["id"], order)  # -> the result, once per key

`run` takes the key with `begin` (any of its keyword arguments), keeps the input as the key's
recovery point 0 before any step, calls the function with the lock and the input, and records
its result (COMPLETED) or its error (FAILED, retryable unless a PermanentError), as a
`with once(...)` block does. The completer (completer.py) finds keys whose holder died, takes
them over through the same acquire and calls the same function with the kept input: the
finished steps come back from their recovery points and only the remaining ones run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from exactly_once.claims import Claim, ClaimStatus, NotAcquired
from exactly_once.once_block import OnceBlock
from exactly_once.steps.runner import steps_of
from exactly_once.stores.records import ErrorInfo

if TYPE_CHECKING:
    from exactly_once.held_lock import OnceLock
    from exactly_once.lease import LeasePolicy
    from exactly_once.stores.protocol import Store

I = TypeVar("I")  # noqa: E741 - the input
R = TypeVar("R")  # the result

_REGISTRY: dict[str, Resumable[Any, Any]] = {}


class NotFinished(NotAcquired):
    """`run` found the key held by a live holder (IN_PROGRESS), failed permanently (FAILED),
    or used for other input (MISMATCH): nothing ran. `claim` says which, with the holder's
    lease end or the error."""

    def __init__(self, claim: Claim) -> None:
        detail = ""
        if claim.status is ClaimStatus.IN_PROGRESS and claim.lease_ends_at is not None:
            detail = f" (its holder's lease ends at {claim.lease_ends_at:.3f})"
        elif claim.error is not None:
            detail = f" ({claim.error.type}: {claim.error.message})"
        super().__init__(f"{claim.scope}/{claim.key!r} was not run: it is {claim.status}{detail}")
        self.claim = claim


class Resumable(Generic[I, R]):
    """A function of (lock, input) run once per key of its scope (see the module's docstring).

    `defaults` are `begin`'s keyword arguments for every `run` (a `run` may override them);
    the completer takes abandoned keys over with the same lease (`lease_s` or
    `expected_duration_s`) and store settings.
    """

    def __init__(
        self,
        scope: str,
        fn: Callable[[OnceLock, I], R],
        defaults: dict[str, Any],
        lease: LeasePolicy | None = None,
    ) -> None:
        self.scope = scope
        self.fn = fn
        self.defaults = defaults
        self.lease = lease  # the completer's lease policy (None: the environment's)
        self.__name__ = getattr(fn, "__name__", scope)
        self.__qualname__ = getattr(fn, "__qualname__", scope)
        self.__doc__ = fn.__doc__
        self.__module__ = getattr(fn, "__module__", __name__)

    def __repr__(self) -> str:
        return f"Resumable({self.scope!r}, {self.__module__}.{self.__qualname__})"

    def run(self, key: str, value: I, **once_kwargs: Any) -> R:
        """Run the function once for `key` with input `value`, and return its result.

        - The key is new, or its last holder failed retryably or died (lease expired): it is
          taken, `value` is kept as its input (unless an earlier holder kept one: that input is
          used, so a resumed key goes on with what its finished steps saw), the function runs,
          and its result is recorded. A raise records FAILED and propagates.
        - The key is COMPLETED: its stored result is returned; nothing runs. (None if the
          result was not storable: keep results within the store's cap.)
        - Otherwise (a live holder, a permanent failure, a mismatch): raises `NotFinished`, a
          `NotAcquired` whose `claim` says what became of the key.

        `once_kwargs` are `begin`'s (`store`, `lease_s`, `expected_duration_s`, `fingerprint`,
        ...), over the decorator's defaults.
        """
        from exactly_once.once_lock import begin

        arguments = {**self.defaults, **once_kwargs}
        return self.finish(lambda: begin(self.scope, key, **arguments), value)

    def finish(self, start: Callable[[], Claim], value: I | None, *, stored: bool = False) -> R:
        """Take the key with `start` and run the function under it: `run`'s flow, shared with
        the completer. `stored`: use the input the key kept (the completer has no other);
        a key without one then raises `NoStoredInput` after giving the key back."""
        with OnceBlock(start) as claim:
            if claim.status is ClaimStatus.COMPLETED:
                return claim.result  # type: ignore[no-any-return]
            if not claim.acquired:
                raise NotFinished(claim)
            lock = claim.lock
            steps = steps_of(lock)
            if stored:
                found, value = steps.stored_input()
                if not found:
                    lock.fail(ErrorInfo("Released", "no stored input to complete it from", True))
                    raise NoStoredInput(f"{claim.scope}/{claim.key!r} kept no input")
            else:
                value = steps.keep_input(value)
            result = self.fn(lock, value)
            lock.succeed(result)
            return result
        raise AssertionError("unreachable")  # pragma: no cover - the block re-raises


class NoStoredInput(RuntimeError):
    """The completer took a key that kept no input (it was never run as a resumable, or a new
    generation began): it was given back (retryable FAILED) and not run."""


def resumable(
    scope: str,
    *,
    lease_s: float | None = None,
    expected_duration_s: float | None = None,
    store: Store | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    block_takeover: bool | None = None,
    lease: LeasePolicy | None = None,
) -> Callable[[Callable[[OnceLock, I], R]], Resumable[I, R]]:
    """Make `fn(lock, input) -> result` a `Resumable` of `scope`, and register it for the
    completer (`registered()`). The keyword arguments are `run`'s defaults; `lease` (a
    LeasePolicy) is only the completer's: its heartbeat and default lease."""
    if not scope or "#" in scope:
        raise ValueError(f"a resumable's scope is non-empty text without '#', got {scope!r}")
    given = {
        "lease_s": lease_s,
        "expected_duration_s": expected_duration_s,
        "store": store,
        "table_name": table_name,
        "dsn": dsn,
        "block_takeover": block_takeover,
    }
    defaults = {name: value for name, value in given.items() if value is not None}

    def wrap(fn: Callable[[OnceLock, I], R]) -> Resumable[I, R]:
        made = Resumable(scope, fn, defaults, lease)
        earlier = _REGISTRY.get(scope)
        if earlier is not None and earlier.__qualname__ != made.__qualname__:
            raise ValueError(
                f"scope {scope!r} is already resumable by {earlier!r}: one function per scope, "
                "or the completer could not tell which runs a key"
            )
        _REGISTRY[scope] = made  # the same function again (a module reloaded): the new one
        return made

    return wrap


def registered() -> list[Resumable[Any, Any]]:
    """Every resumable defined so far in this process (the completer's default)."""
    return list(_REGISTRY.values())
