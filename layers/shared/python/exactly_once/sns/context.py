"""What an SNS subscriber's business function learns about the notification it runs for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exactly_once.sqs.context import RecordContext


@dataclass
class NotificationContext(RecordContext):
    """An SNS notification's, for a Lambda subscribed to a topic: `message_id` is the SNS
    MessageId, `record` the event's record, and the topic's fields are at hand."""

    @property
    def sns(self) -> dict[str, Any]:
        sns = self.record.get("Sns") if isinstance(self.record, dict) else None
        return sns if isinstance(sns, dict) else {}

    @property
    def topic_arn(self) -> str | None:
        return _text(self.sns.get("TopicArn"))

    @property
    def subject(self) -> str | None:
        return _text(self.sns.get("Subject"))

    @property
    def published_at(self) -> str | None:
        """SNS's Timestamp (ISO 8601): when the message was published."""
        return _text(self.sns.get("Timestamp"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
