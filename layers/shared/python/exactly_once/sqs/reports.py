"""How a record that does not run its function is reported: hidden while another holder's
lease lasts, sent to the dead-letter queue with its reason, or reported failed for a retry.

Apart from the processor (processor.py), which decides which of these a record gets, because
each is a conversation with SQS of its own (a visibility change, a send that must not lose the
message), and the processor reads best as the state machine's path alone.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from exactly_once import clients, lifecycle, observability
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.messages import SqsMessage, queue_url_from_arn
from exactly_once.stores.records import ErrorInfo, StoredRecord

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_VISIBILITY_S = 43_200


class Reports:
    """The SQS side of a record's report; the processor's `config` and SQS client."""

    config: ConsumerConfig
    _sqs: SQSClient | None
    _sqs_generation: int | None

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None or self._sqs_generation not in (None, lifecycle.generation()):
            self._sqs = clients.sqs()
            self._sqs_generation = lifecycle.generation()
        return self._sqs

    def _in_progress(
        self, message: SqsMessage, key: str, holder: StoredRecord | None
    ) -> RecordResult:
        """Hide the message until the holder's lease ends, so retries don't burn receives. (A
        stream record cannot be hidden: it waited for its holder first, holder_wait.py.)"""
        mid, arn, receipt = message.message_id, message.event_source_arn, message.receipt_handle
        lease_end = holder.lease_expires_at_ms if holder else None
        if lease_end is not None and holder and holder.expected_by_ms:
            # A heartbeat lease is short and renewed: hide until the holder's budget ends
            # (`expected_by`), not once per renewal, which would burn the message's receives.
            lease_end = max(lease_end, holder.expected_by_ms)
        if lease_end is not None and receipt and arn:
            seconds = math.ceil((lease_end - time.time() * 1000) / 1000) + 1
            try:
                self.sqs.change_message_visibility(
                    QueueUrl=queue_url_from_arn(arn, self.sqs.meta.endpoint_url),
                    ReceiptHandle=receipt,
                    VisibilityTimeout=max(1, min(seconds, MAX_VISIBILITY_S)),
                )
            except Exception as exc:  # best effort: the queue's own timeout still applies
                observability.logger().warning(
                    "could not defer an in-progress duplicate",
                    extra={"message_id": mid, "error": repr(exc)},
                )
        return RecordResult(mid, Outcome.IN_PROGRESS, True, key=key, reason="lease held elsewhere")

    def _dead_letter(
        self,
        message: SqsMessage,
        key: str | None,
        error: ErrorInfo,
        attempt: int,
        *,
        takeover: bool = False,
        nonce: str | None = None,
    ) -> RecordResult:
        mid, reason = message.message_id, f"{error.type}: {error.message}"
        url = self.config.dead_letter_queue_url
        if not url:
            observability.logger().error(
                "permanent failure but no DEAD_LETTER_QUEUE_URL: reporting it failed instead",
                extra={"message_id": mid, "key": key, "reason": reason},
            )
            return RecordResult(mid, Outcome.ERROR, True, key=key, reason=reason)
        # Only a permanent failure gets here: the dead-letter module loads then, not in every
        # consumer's cold start.
        from exactly_once.sqs.dead_letter import send_to_dead_letter_queue

        try:
            send_to_dead_letter_queue(
                self.sqs,
                url,
                message,
                error,
                self.config.scope,
                attempt,
                replay_nonce=nonce or None,
            )
        except Exception as exc:
            observability.logger().error(
                "DLQ send failed: reporting the record failed so it is not lost",
                extra={"message_id": mid, "key": key, "reason": reason, "error": repr(exc)},
            )
            return RecordResult(mid, Outcome.ERROR, True, key=key, reason=f"DLQ send: {exc!r}")
        observability.logger().warning(
            "sent to the DLQ", extra={"message_id": mid, "key": key, "reason": reason}
        )
        return RecordResult(
            mid,
            Outcome.PERMANENT,
            False,
            key=key,
            reason=reason,
            dead_lettered=True,
            takeover=takeover,
        )

    def _infrastructure_error(self, mid: str, key: str, step: str, exc: Exception) -> RecordResult:
        observability.logger().error(
            f"{step} failed; the record will be retried",
            extra={"message_id": mid, "key": key, "error": repr(exc)},
        )
        return RecordResult(mid, Outcome.ERROR, True, key=key, reason=f"{step}: {exc!r}")
