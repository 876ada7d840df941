"""A batch's keys taken in one statement (batch_statements.ACQUIRE_MANY): the store's
`acquire_many`, one round trip for new keys and duplicates alike.

Each key's request and token are built as `acquire` builds them (Acquiring._request), and the
batch's row for it is judged as `acquire` judges its own: a won row is the lock, a refusal
under our token is our own write whose reply was lost, any other refusal is `_refused`'s
(which blocks an expired lease with `_block`, as `acquire` does). A key goes to the single
statement (Acquiring._acquire) with the SAME token where the batch cannot answer for it, so a
row the batch did write is still recognised as ours:

- its refusing row still looks acquirable (STALE_READS: never trusted), or no row came back
  for it (one committed after the statement's snapshot): `acquire` runs it again for those;
- the batch statement raised: a row lock not granted in time (LockNotAvailable, which
  `acquire` answers IN_PROGRESS for its one key, but which fails the whole statement), a value
  one key's statement refuses, or a connection lost past `_run`'s retries; each key then gets
  what its own call gives, and one key's error never fails another's;
- a second key with the same record id (distinct keys never have one; defensive): ON CONFLICT
  cannot update one row twice in one statement.

`likely_taken` is not needed here: one statement inserts new keys and updates taken ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exactly_once.stores.postgres import batch_statements
from exactly_once.stores.postgres.acquisition import Acquiring, _Request
from exactly_once.stores.postgres.rows import record_from_row
from exactly_once.stores.records import AcquireRequest, AcquireStatus, Acquisition
from exactly_once.stores.schema import Status

BATCH_ROWS = 500  # keys per statement: a bound on one statement's size and its row locks

_Asked = tuple[int, _Request, dict[str, Any]]  # (position in the call, request, its params)


class BatchAcquiring(Acquiring):
    """The store's `acquire_many`."""

    def _acquire_batch(self, requests: Sequence[AcquireRequest]) -> list[Acquisition | Exception]:
        answers: dict[int, Acquisition | Exception] = {}
        batch: list[_Asked] = []
        alone: list[_Asked] = []
        ids: set[str] = set()
        for index, request in enumerate(requests):
            try:
                req, params = self._request(
                    request.scope, request.key, **request.arguments(), resume_id=None
                )
            except Exception as exc:
                answers[index] = exc
                continue
            (alone if req.record_id in ids else batch).append((index, req, params))
            ids.add(req.record_id)
        for start in range(0, len(batch), BATCH_ROWS):
            answers.update(self._acquire_chunk(batch[start : start + BATCH_ROWS]))
        for index, req, params in alone:
            answers[index] = self._acquire_alone(req, params)
        return [answers[index] for index in range(len(requests))]

    def _acquire_chunk(self, chunk: list[_Asked]) -> dict[int, Acquisition | Exception]:
        """One statement for the chunk's keys, each key's row judged as `acquire` would."""
        first = chunk[0][2]
        params = {
            "ids": [p["id"] for _, _, p in chunk],
            "scopes": [p["scope"] for _, _, p in chunk],
            "toks": [p["tok"] for _, _, p in chunk],
            "owners": [p["owner"] for _, _, p in chunk],
            "leases": [p["lease_ms"] for _, _, p in chunk],
            "fps": [p["fp"] for _, _, p in chunk],
            "xdurs": [p["xdur"] for _, _, p in chunk],
            "blocks": [p["block"] for _, _, p in chunk],
            "nonces": [p["nonce"] for _, _, p in chunk],
            "rid": None,
            "at_ms": first["at_ms"],
            "record_ttl_s": first["record_ttl_s"],
        }
        sql = batch_statements.ACQUIRE_MANY
        try:
            rows = self._run(lambda conn: self._rows(conn, sql, params))
        except Exception:
            # See the module's docstring: each key on its own, with its token.
            return {index: self._acquire_alone(req, p) for index, req, p in chunk}
        by_id = {row["id"]: row for row in rows}
        return {
            index: self._judged_acquire(req, p, by_id.get(req.record_id)) for index, req, p in chunk
        }

    def _judged_acquire(
        self, req: _Request, params: dict[str, Any], row: dict[str, Any] | None
    ) -> Acquisition | Exception:
        """The batch's row for one key, judged as `acquire` judges its statement's."""
        try:
            if row is None:
                return self._acquire(req, params)  # committed after our snapshot: again
            if row["won"]:
                return Acquisition(
                    AcquireStatus.ACQUIRED,
                    lock=req.lock(row),
                    takeover=row["acquired_over"] == Status.IN_PROGRESS,
                    retry=row["acquired_over"] == Status.FAILED,
                    resumed=bool(row["resumed"]),
                )
            record = record_from_row(row)
            if record.lock_token == req.token:
                # Our own write committed and its reply was lost; `_run`'s retry met it.
                return Acquisition(AcquireStatus.ACQUIRED, lock=req.lock(row))
            verdict = self._refused(record, req, int(row["now_ms"]))
            # A refusal that looks acquirable is never trusted: the single statement again.
            return verdict if verdict is not None else self._acquire(req, params)
        except Exception as exc:
            return exc

    def _acquire_alone(self, req: _Request, params: dict[str, Any]) -> Acquisition | Exception:
        try:
            return self._acquire(req, params)
        except Exception as exc:
            return exc
