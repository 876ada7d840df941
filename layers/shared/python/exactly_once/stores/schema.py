"""The idempotency record's attribute names, statuses and index layout.

One module owns these names so that the store, the CDK stack and the operator tools agree.
"""

from __future__ import annotations

import zlib
from enum import StrEnum

PARTITION_KEY = "id"
STATUS = "status"
TTL = "expires_at"  # epoch seconds; DynamoDB TTL deletes lag by up to two days, so reads check it
LEASE_EXPIRES_AT = "lease_expires_at"  # epoch milliseconds
LOCK_TOKEN = "lock_token"  # noqa: S105 (an attribute name, not a secret)
FENCE = "fence"
ATTEMPTS = "attempts"
OWNER = "owner"
CREATED_AT = "created_at"  # epoch milliseconds
UPDATED_AT = "updated_at"  # epoch milliseconds
RESULT = "result"  # JSON text with tagged types
RESULT_SHA256 = "result_sha256"  # set instead of RESULT when the result is over the size cap
RESULT_SIZE = "result_size"
RESULT_OMITTED = "result_omitted"  # why the result is not stored (over the cap, not storable)
ERROR = "error"  # map: type, message, retryable, at
FINGERPRINT = "fingerprint"
# One mark per fenced effect: "effect_fence#<digest of the effect item's table and key>", whose
# value is the fence of the holder that applied it (see effects.py). A TTL-expired record is
# replaced by a new item, so a mark never outlives its generation.
EFFECT_FENCE = "effect_fence"
# One recovery point per finished step of the holder's work (steps/): "step#<position>", a map of
# the step's name, its result (the codec's JSON), the fence and time of the holder that wrote it.
# Kept across takeovers and retries of one generation, so the next holder resumes after it; a
# TTL-expired record is replaced by a new item, so a step never outlives its generation.
STEP = "step"
MAX_STEP_WRITES = 99  # DynamoDB: TransactWriteItems takes 100 items, the recovery point is one
REPLAY_NONCE = "replay_nonce"  # on permanently FAILED records; a real DLQ replay presents it
# Epoch milliseconds by which the holder expected to finish (`once`'s expected duration). It may
# lie well before the lease's end, so a monitor can report slow work before it is stuck. Only
# meaningful while IN_PROGRESS; writers that don't set it leave an earlier holder's in place.
EXPECTED_BY = "expected_by"
# Set while IN_PROGRESS by a holder that outlives its invocations (a durable execution's ARN):
# its next invocation, a replay, resumes the lock instead of finding it "in progress". Every
# other acquire removes it, so a resume never reaches a lock that another holder took over.
RESUME_ID = "resume_id"

# Sparse GSI: only IN_PROGRESS and FAILED records carry these two attributes. The partition key
# is sharded so that a burst of in-flight work does not land on one index partition.
PENDING_INDEX = "pending-index"
PENDING_SHARD = "pending_shard"  # "{status}#{n}"
PENDING_AT = "pending_at"  # IN_PROGRESS: lease expiry (ms); FAILED: failure time (ms)
PENDING_SHARDS = 8


class Status(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


def step_attribute(position: int) -> str:
    """The record attribute that holds the recovery point of the step at `position` (1-based)."""
    return f"{STEP}#{position:04d}"


def record_id(scope: str, key: str) -> str:
    """The partition key: an explicit scope, so a refactor never changes existing keys."""
    return f"{scope}#{key}"


def pending_shard(record_id_: str, status: Status) -> str:
    """Which sparse-index partition a pending record goes to (stable per record)."""
    return f"{status.value}#{zlib.crc32(record_id_.encode()) % PENDING_SHARDS}"


def all_pending_shards(status: Status) -> list[str]:
    return [f"{status.value}#{n}" for n in range(PENDING_SHARDS)]
