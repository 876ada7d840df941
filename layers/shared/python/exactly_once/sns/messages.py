"""SNS notifications read as the `SqsMessage` the state machine already reads.

Two ways in: a Lambda subscribed to a topic gets `Records[].Sns`; a queue subscribed without
raw delivery gets the same notification as a JSON envelope in its body. Either way the
notification becomes a message whose id is the SNS MessageId, whose body is the SNS Message,
and whose attributes are the SNS message attributes in SQS's event form, so keys, fingerprints,
dead-lettering and replays work exactly as for a queue.
"""

from __future__ import annotations

from typing import Any

from exactly_once.sqs.envelopes import sqs_attributes
from exactly_once.sqs.messages import SqsMessage


def from_lambda_record(record: Any) -> SqsMessage:
    """One record of an SNS event. Never raises: a malformed record gets an empty id (it is
    then reported failed) or no body (it is then dead-lettered with its reason)."""
    fields = record if isinstance(record, dict) else {}
    sns = fields.get("Sns")
    sns = sns if isinstance(sns, dict) else {}
    message_id = sns.get("MessageId")
    message = sns.get("Message")
    return SqsMessage.of(
        record,
        message_id if isinstance(message_id, str) else "",
        message if isinstance(message, str) else None,
        sqs_attributes(sns.get("MessageAttributes")),
        event_source_arn=_text(fields.get("EventSubscriptionArn")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
