"""A batch's outcomes written in one statement (batch_statements.FINISH_MANY): the store's
`finish_many`, each key completed or failed as `complete` or `fail` would.

Each write is fenced on its lock's token and IN_PROGRESS; the refusing rows come back from the
same statement, so a refusal under our token in the state our write leaves is our own write
whose reply was lost (`_run` sent the statement again), and any other is LEASE_LOST with the
row as it is now, without another round trip. A key goes to its single write (`complete` or
`fail`, fenced and recognising its own write in the same way) where the batch cannot answer:

- its holder has a lent transaction open (`ctx.transaction`): its completion must commit that
  transaction, on its own connection (transactions.py). OnceLock.gathered never hands these
  over; a failure's transaction is rolled back first, as `fail` does, and it joins the batch;
- no row came back for it (the row is not in the statement's snapshot): `complete` or `fail`
  reads what is there now;
- the batch statement raised (a connection lost past `_run`'s retries, a row lock not
  granted in time, a value one key's write refuses): each key then gets what its own write
  gives, and one key's error never fails another's;
- a second finish for the same record (defensive: a batch's keys are distinct).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from exactly_once.stores.postgres import batch_statements
from exactly_once.stores.postgres.rows import record_from_row
from exactly_once.stores.postgres.writes import FencedWrites
from exactly_once.stores.records import Finish, WriteResult, WriteStatus
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult

BATCH_ROWS = 500  # keys per statement: a bound on one statement's size and its row locks

_Asked = tuple[int, Finish, dict[str, Any]]  # (position in the call, finish, its row's values)


class BatchFinishing(FencedWrites):
    """The store's `finish_many`."""

    def _finish_batch(self, finishes: Sequence[Finish]) -> list[WriteResult | Exception]:
        answers: dict[int, WriteResult | Exception] = {}
        batch: list[_Asked] = []
        alone: list[tuple[int, Finish]] = []
        ids: set[str] = set()
        for index, finish in enumerate(finishes):
            try:
                lock = finish.lock.own()  # LockInherited, as `complete` and `fail` raise it
                if finish.error is None and self._lent_open(finish):
                    answers[index] = self.complete(lock, finish.result)  # commits its own
                elif lock.record_id in ids:
                    alone.append((index, finish))
                else:
                    if finish.error is not None:
                        self.discard(lock)  # as `fail`: its transaction rolled back first
                    batch.append((index, finish, self._values(finish)))
                    ids.add(lock.record_id)
            except Exception as exc:
                answers[index] = exc
        for start in range(0, len(batch), BATCH_ROWS):
            answers.update(self._finish_chunk(batch[start : start + BATCH_ROWS]))
        for index, finish in alone:
            answers[index] = self._finish_alone(finish)
        return [answers[index] for index in range(len(finishes))]

    def _lent_open(self, finish: Finish) -> bool:
        with self._open_lock:
            return finish.lock.token in self._open

    def _values(self, finish: Finish) -> dict[str, Any]:
        """The row's values: COMPLETE's (statements.COMPLETE) or FAIL's (statements.FAIL,
        with a fresh nonce for a permanent failure, as `fail`)."""
        if finish.error is None:
            kept = StoredResult.of(finish.result, self.result_cap_bytes)
            return {
                "done": True,
                "res": kept.text,
                "rsha": kept.sha256,
                "rsize": kept.size,
                "romit": kept.omitted,
                "etype": None,
                "emsg": None,
                "eretry": None,
                "nonce": None,
            }
        failure = self._failure_params(finish.error)
        return {
            "done": False,
            "res": None,
            "rsha": None,
            "rsize": None,
            "romit": None,
            "etype": failure["etype"],
            "emsg": failure["emsg"],
            "eretry": failure["eretry"],
            "nonce": None if finish.error.retryable else secrets.token_hex(16),
        }

    def _finish_chunk(self, chunk: list[_Asked]) -> dict[int, WriteResult | Exception]:
        """One statement for the chunk's writes, each key's row judged as its write would."""
        params: dict[str, Any] = {
            "ids": [finish.lock.record_id for _, finish, _ in chunk],
            "toks": [finish.lock.token for _, finish, _ in chunk],
            **{name: [values[name] for _, _, values in chunk] for name in chunk[0][2]},
            "at_ms": self._at(),
            "record_ttl_s": self.record_ttl_s,
            "failed_ttl_s": self.failed_ttl_s,
        }
        sql = batch_statements.FINISH_MANY
        try:
            rows = self._run(lambda conn: self._rows(conn, sql, params))
        except Exception:
            # See the module's docstring: each key on its own.
            return {index: self._finish_alone(finish) for index, finish, _ in chunk}
        by_id = {row["id"]: row for row in rows}
        return {
            index: self._judged_finish(finish, by_id.get(finish.lock.record_id))
            for index, finish, _ in chunk
        }

    def _judged_finish(self, finish: Finish, row: dict[str, Any] | None) -> WriteResult | Exception:
        """The batch's row for one write, judged as `_fenced_write` judges its statement's."""
        if row is None:
            return self._finish_alone(finish)  # not in the snapshot: the single write reads it
        lock = finish.lock
        leaves = Status.COMPLETED if finish.error is None else Status.FAILED
        # Won, or refused by our own earlier attempt that committed and whose reply was lost.
        if row["won"] or (row["lock_token"] == lock.token and row["status"] == leaves):
            held = replace(lock, lease_expires_at_ms=int(row["lease_expires_at_ms"]))
            return WriteResult(WriteStatus.OK, lock=held, replay_nonce=row["replay_nonce"])
        current = record_from_row(row)
        live = not current.is_expired(int(row["now_ms"]) / 1000)  # as `get_by_id` reads it
        return WriteResult(WriteStatus.LEASE_LOST, current=current if live else None)

    def _finish_alone(self, finish: Finish) -> WriteResult | Exception:
        try:
            if finish.error is None:
                return self.complete(finish.lock, finish.result)
            return self.fail(finish.lock, finish.error)
        except Exception as exc:
            return exc
