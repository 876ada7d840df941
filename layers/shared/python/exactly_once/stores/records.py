"""Typed views of idempotency records and of what store operations return."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from exactly_once import lifecycle
from exactly_once.errors import LockInherited
from exactly_once.stores import codec, schema
from exactly_once.stores.codec import sanitise
from exactly_once.stores.schema import Status

Item = dict[str, Any]  # a low-level DynamoDB item: {"name": {"S": "..."}}


@dataclass(frozen=True)
class ErrorInfo:
    type: str
    message: str
    retryable: bool

    MAX_MESSAGE = 1024  # keeps FAILED records and DLQ attributes small

    def to_attribute(self, at_ms: int) -> dict[str, Any]:
        return {
            "M": {
                # valid text for DynamoDB as for SQS: a lone surrogate from JSON input can't be
                "type": {"S": sanitise(self.type[:256])},
                "message": {"S": sanitise(self.message[: self.MAX_MESSAGE])},
                "retryable": {"BOOL": self.retryable},
                "at": {"N": str(at_ms)},
            }
        }

    @classmethod
    def from_exception(cls, exc: BaseException, *, retryable: bool) -> ErrorInfo:
        try:
            message = str(exc)
        except Exception:  # an exception whose __str__ raises still gets recorded
            message = f"<unprintable {type(exc).__name__}>"
        return cls(type(exc).__name__, message[: cls.MAX_MESSAGE], retryable)


@dataclass(frozen=True)
class StepPoint:
    """One step's recovery point: the step finished, and this is what it returned.

    `result_text` is the codec's JSON (the same encoding and cap as a stored result); `fence`
    is the holder that wrote it, which is how a retried write recognises its own lost reply.
    """

    position: int
    name: str
    result_text: str
    fence: int
    at_ms: int

    @property
    def result(self) -> Any:
        return codec.loads(self.result_text)

    def to_attribute(self) -> dict[str, Any]:
        return {
            "M": {
                "name": {"S": self.name},
                "result": {"S": self.result_text},
                "fence": {"N": str(self.fence)},
                "at": {"N": str(self.at_ms)},
            }
        }

    def to_json(self) -> dict[str, Any]:
        """As the PostgreSQL store keeps it, in the row's `steps` object under its position."""
        return {
            "name": self.name,
            "result": self.result_text,
            "fence": self.fence,
            "at": self.at_ms,
        }

    @classmethod
    def from_attribute(cls, position: int, value: dict[str, Any]) -> StepPoint:
        fields = value["M"]
        return cls(
            position,
            fields["name"]["S"],
            fields["result"]["S"],
            int(fields["fence"]["N"]),
            int(fields["at"]["N"]),
        )

    @classmethod
    def from_json(cls, position: int, value: dict[str, Any]) -> StepPoint:
        return cls(
            position,
            str(value["name"]),
            str(value["result"]),
            int(value["fence"]),
            int(value["at"]),
        )


@dataclass(frozen=True)
class StoredRecord:
    """A record as read from the table.

    The result stays encoded until asked for, and decoding it can never raise: a duplicate
    needs only the status, and a result written by another version must not fail it.
    """

    record_id: str
    status: Status
    fence: int
    attempts: int
    owner: str | None
    lock_token: str | None
    lease_expires_at_ms: int | None
    created_at_ms: int | None
    updated_at_ms: int | None
    expires_at_s: int | None
    fingerprint: str | None
    error: ErrorInfo | None
    result_text: str | None
    result_sha256: str | None
    result_size: int | None
    result_omitted: str | None = None
    replay_nonce: str | None = None
    expected_by_ms: int | None = None  # when its holder expected to be done (`once`)
    resume_id: str | None = None  # a holder that resumes across invocations (schema.RESUME_ID)
    effect_marks: dict[str, int] = field(default_factory=dict)  # mark attribute -> fence
    steps: dict[int, StepPoint] = field(default_factory=dict)  # position -> recovery point

    @property
    def result(self) -> Any:
        """The stored result, decoded; None when absent, omitted or undecodable."""
        return self.decoded_result()[0]

    def decoded_result(self) -> tuple[Any, str | None]:
        """(result, None), or (None, why it could not be decoded)."""
        if self.result_text is None:
            return None, None
        try:
            return codec.loads(self.result_text), None
        except Exception as exc:  # any failure to decode is reported, never raised
            return None, f"{type(exc).__name__}: {exc}"[:200]

    def is_expired(self, now_s: float) -> bool:
        """TTL-expired records may linger for days; they count as absent."""
        return self.expires_at_s is not None and self.expires_at_s < now_s

    def lease_expired(self, now_ms: int) -> bool:
        return self.lease_expires_at_ms is not None and self.lease_expires_at_ms < now_ms

    def lease_live(self, now_ms: int) -> bool:
        return self.status is Status.IN_PROGRESS and not self.lease_expired(now_ms)

    def overdue(self, now_ms: int) -> bool:
        """Still IN_PROGRESS after the time its holder said it expected to be done by."""
        return (
            self.status is Status.IN_PROGRESS
            and self.expected_by_ms is not None
            and self.expected_by_ms < now_ms
        )

    @classmethod
    def from_item(cls, item: Item) -> StoredRecord:
        err = item.get(schema.ERROR, {}).get("M")
        return cls(
            record_id=item[schema.PARTITION_KEY]["S"],
            status=Status(item[schema.STATUS]["S"]),
            fence=_n(item, schema.FENCE) or 0,
            attempts=_n(item, schema.ATTEMPTS) or 0,
            owner=_s(item, schema.OWNER),
            lock_token=_s(item, schema.LOCK_TOKEN),
            lease_expires_at_ms=_n(item, schema.LEASE_EXPIRES_AT),
            created_at_ms=_n(item, schema.CREATED_AT),
            updated_at_ms=_n(item, schema.UPDATED_AT),
            expires_at_s=_n(item, schema.TTL),
            fingerprint=_s(item, schema.FINGERPRINT),
            error=ErrorInfo(
                type=err["type"]["S"],
                message=err["message"]["S"],
                retryable=err["retryable"]["BOOL"],
            )
            if err
            else None,
            result_text=_s(item, schema.RESULT),
            result_sha256=_s(item, schema.RESULT_SHA256),
            result_size=_n(item, schema.RESULT_SIZE),
            result_omitted=_s(item, schema.RESULT_OMITTED),
            replay_nonce=_s(item, schema.REPLAY_NONCE),
            expected_by_ms=_n(item, schema.EXPECTED_BY),
            resume_id=_s(item, schema.RESUME_ID),
            effect_marks={
                name: int(value["N"])
                for name, value in item.items()
                if name.startswith(schema.EFFECT_FENCE) and "N" in value
            },
            steps=_steps(item),
        )


def _steps(item: Item) -> dict[int, StepPoint]:
    prefix = schema.STEP + "#"
    points = {}
    for name, value in item.items():
        if name.startswith(prefix) and name[len(prefix) :].isdigit() and "M" in value:
            position = int(name[len(prefix) :])
            points[position] = StepPoint.from_attribute(position, value)
    return points


def _s(item: Item, name: str) -> str | None:
    value = item.get(name)
    return value["S"] if value else None


def _n(item: Item, name: str) -> int | None:
    value = item.get(name)
    return int(value["N"]) if value else None


@dataclass(frozen=True)
class Lock:
    """Proof of holding a record: every later write is conditioned on this token.

    It belongs to the process that took it: a fork child or a restored snapshot inherits the
    object and its token, but not the holding (`own`, which every write checks).
    """

    record_id: str
    token: str
    fence: int
    attempt: int
    lease_expires_at_ms: int
    scope: str = ""  # the key space (the record id need not end with the key as given)
    # The instance id (lifecycle.instance_id) of the process that took it: new in every fork
    # child and restored snapshot, and distinct between siblings and spawned workers, so only
    # the taker passes `own`. `replace` keeps it, so an extended lock too.
    process: str = field(default_factory=lifecycle.instance_id)

    @property
    def inherited(self) -> bool:
        """Taken by another process: the one this was cloned from (fork, snapshot restore), or
        any other that was handed the object; never ours to write with."""
        return self.process != lifecycle.instance_id()

    def own(self) -> Lock:
        """This lock, or LockInherited when the process was cloned since it was taken. The one
        check every write and effect made with a lock goes through (stores, effects)."""
        if self.inherited:
            raise LockInherited(
                f"{self.record_id} at fence {self.fence} was locked by the process this one "
                "was cloned from (fork or snapshot restore): a clone never acts as the holder, "
                "so this write is refused and the key is left to its holder; take a lock of "
                "this process's own"
            )
        return self


class AcquireStatus(StrEnum):
    ACQUIRED = "acquired"
    ALREADY_COMPLETED = "already_completed"
    IN_PROGRESS = "in_progress"
    FAILED_PERMANENTLY = "failed_permanently"
    FINGERPRINT_MISMATCH = "fingerprint_mismatch"


@dataclass(frozen=True)
class Acquisition:
    """The outcome of `acquire`. Only ACQUIRED carries a lock."""

    status: AcquireStatus
    lock: Lock | None = None
    takeover: bool = False  # ACQUIRED over another holder's expired lease
    retry: bool = False  # ACQUIRED over a FAILED record
    resumed: bool = False  # ACQUIRED over this holder's own lock (the same resume_id)
    record: StoredRecord | None = None  # the record that blocked acquisition

    @property
    def acquired(self) -> bool:
        return self.status is AcquireStatus.ACQUIRED


@dataclass(frozen=True)
class AcquireRequest:
    """One key of a batch's `acquire_many`: the arguments `acquire` takes for it.

    `likely_taken` is a hint, never a rule: the key probably has a record already (the message
    was received before, it is a replay, or this process saw the key lately). A store that
    writes new keys and existing ones differently (DynamoDB's INSERT and UPDATE) tries the
    likely one first; a wrong hint costs a round trip, never a wrong outcome.
    """

    scope: str
    key: str
    lease_ms: int
    owner: str
    fingerprint: str | None = None
    block_takeover: bool = False
    replay_nonce: str | None = None
    expected_duration_ms: int | None = None
    likely_taken: bool = False

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments `Store.acquire` takes for this key (after scope and key)."""
        return {
            "lease_ms": self.lease_ms,
            "owner": self.owner,
            "fingerprint": self.fingerprint,
            "block_takeover": self.block_takeover,
            "replay_nonce": self.replay_nonce,
            "expected_duration_ms": self.expected_duration_ms,
        }

    def likely(self) -> AcquireRequest:
        """This request, hinted that the key probably has a record."""
        return replace(self, likely_taken=True)


@dataclass(frozen=True)
class Finish:
    """One holder's outcome in a batch's `finish_many`: COMPLETED with `result` when `error` is
    None, else FAILED with `error` (a release is a retryable failure, as `Store.release`)."""

    lock: Lock
    result: Any = None
    error: ErrorInfo | None = None


class WriteStatus(StrEnum):
    OK = "ok"
    LEASE_LOST = "lease_lost"  # the token no longer holds the record; nothing was changed


@dataclass(frozen=True)
class WriteResult:
    status: WriteStatus
    current: StoredRecord | None = None  # on LEASE_LOST: who holds the record now, if anyone
    lock: Lock | None = None  # on OK: the lock to use from now on (extend moves its lease)
    replay_nonce: str | None = None  # on OK from a permanent `fail`: what a replay must present

    @property
    def ok(self) -> bool:
        return self.status is WriteStatus.OK
