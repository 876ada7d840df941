"""`Step`: what a step's function is handed, to make its effects part of the step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exactly_once.errors import ConfigurationError, StepWriteRefused
from exactly_once.stores import schema

if TYPE_CHECKING:
    from exactly_once.stores.protocol import Store
    from exactly_once.stores.records import Lock


MAX_WRITES = schema.MAX_STEP_WRITES


class Step:
    """One running step of one holder: its name and position, the key's identity for the
    outside world, and the writes that commit with its recovery point.

    - `idempotency_key`: pass it to a provider that deduplicates (a payment API): see keys.py.
    - `transaction` (PostgreSQL): the step's own transaction; its writes commit with the step's
      recovery point, and roll back if the step raises or the key was taken over.
    - `write(entry)` / `put(table, item)` (DynamoDB): TransactWriteItems entries committed in one
      transaction with the recovery point, fenced on the holder's lock.
    """

    __slots__ = (
        "_finished",
        "_lock",
        "_store",
        "fence",
        "idempotency_key",
        "key",
        "name",
        "position",
        "writes",
    )

    def __init__(
        self,
        store: Store,
        lock: Lock,
        *,
        key: str,
        name: str,
        position: int,
        idempotency_key: str,
    ) -> None:
        self._store = store
        self._lock = lock
        self.key = key
        self.name = name
        self.position = position
        self.fence = lock.fence  # the holder's fence: pass it downstream to fence a write
        self.idempotency_key = idempotency_key
        self.writes: list[dict[str, Any]] = []
        self._finished = False  # its fn returned or raised: nothing more commits with it

    def finish(self) -> None:
        """The step's fn is over (the runner's call): a `transaction` asked for now would be
        a new one that no step commits, and a write added now would never be sent."""
        self._finished = True

    def _running(self, what: str) -> None:
        if self._finished:
            raise RuntimeError(
                f"step {self.name!r} has finished: its {what} is only for use inside its fn "
                "(a Step kept for later commits nothing)"
            )

    def __repr__(self) -> str:
        return f"Step({self.name!r}, position={self.position}, key={self.key!r})"

    @property
    def transaction(self) -> Any:
        """The open `psycopg.Connection` whose transaction commits with this step's recovery
        point (PostgreSQL store only); commit, rollback and close are refused on it."""
        self._running("transaction")
        return self._store.step_transaction(self._lock)

    def write(self, entry: dict[str, Any]) -> None:
        """Add one TransactWriteItems entry ({"Put": …}, {"Update": …}, {"Delete": …} or
        {"ConditionCheck": …}) to commit with this step's recovery point (DynamoDB store only).
        Its own condition, if refused, fails the step with StepWriteRefused: nothing is written.
        """
        self._dynamodb_only("write")
        self._running("write")
        if len(self.writes) >= MAX_WRITES:
            raise StepWriteRefused(
                f"step {self.name!r}: a step carries at most {MAX_WRITES} writes (DynamoDB's "
                "transaction takes 100 items, and the recovery point is one of them)",
                len(self.writes),
            )
        self.writes.append(entry)

    def put(self, table: str, item: dict[str, Any], *, new_only: tuple[str, ...] = ()) -> None:
        """`write` a Put of `item` (low-level attribute values) into `table`; `new_only` names
        key attributes that must not exist yet (a second item with that key is refused)."""
        self._dynamodb_only("put")
        self.write(_put(table, item, new_only))

    def _dynamodb_only(self, what: str) -> None:
        """`write`/`put` on another store: a ConfigurationError, as `ctx.transaction` is on
        DynamoDB, raised inside fn before anything of the step is written (so nothing of it
        commits, and the key stays retryable), and saying what to use instead."""
        backend = self._store.backend
        if backend == "dynamodb":
            return
        instead = (
            "make the step's writes in its transaction (step.transaction), which commits with "
            "its recovery point"
            if backend == "postgres"
            else "this store takes no writes with a step"
        )
        raise ConfigurationError(
            f"step.{what} adds a DynamoDB TransactWriteItems entry, and this is the {backend} "
            f"store: {instead}"
        )


def _put(table: str, item: dict[str, Any], new_only: tuple[str, ...]) -> dict[str, Any]:
    """A Put entry; with `new_only`, conditioned on those key attributes not existing."""
    put: dict[str, Any] = {"TableName": table, "Item": item}
    if new_only:
        placeholders = {f"#n{i}": name for i, name in enumerate(new_only)}
        put["ConditionExpression"] = " AND ".join(
            f"attribute_not_exists({p})" for p in placeholders
        )
        put["ExpressionAttributeNames"] = placeholders
    return {"Put": put}
