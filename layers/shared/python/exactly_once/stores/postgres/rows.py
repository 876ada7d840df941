"""Rows of `exactly_once.records` as the typed records every store returns."""

from __future__ import annotations

from typing import Any

from exactly_once.stores.records import ErrorInfo, StepPoint, StoredRecord
from exactly_once.stores.schema import Status

COLUMNS = (
    "id, scope, status, lock_token, fence, attempts, owner, lease_expires_at_ms, created_at_ms, "
    "updated_at_ms, expires_at_s, pending_at_ms, acquired_over, fingerprint, expected_by_ms, "
    "result, result_sha256, result_size, result_omitted, error_type, error_message, "
    "error_retryable, error_at_ms, replay_nonce, resume_id, resumed, steps"
)


def record_from_row(row: dict[str, Any]) -> StoredRecord:
    error = None
    if row["error_type"] is not None:
        error = ErrorInfo(
            row["error_type"], row["error_message"] or "", bool(row["error_retryable"])
        )
    return StoredRecord(
        record_id=row["id"],
        status=Status(row["status"]),
        fence=int(row["fence"]),
        attempts=int(row["attempts"]),
        owner=row["owner"],
        lock_token=row["lock_token"],
        lease_expires_at_ms=row["lease_expires_at_ms"],
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        expires_at_s=row["expires_at_s"],
        fingerprint=row["fingerprint"],
        error=error,
        result_text=row["result"],
        result_sha256=row["result_sha256"],
        result_size=row["result_size"],
        result_omitted=row["result_omitted"],
        replay_nonce=row["replay_nonce"],
        expected_by_ms=row["expected_by_ms"],
        resume_id=row["resume_id"],
        steps={
            int(position): StepPoint.from_json(int(position), point)
            for position, point in (row.get("steps") or {}).items()
        },
    )
