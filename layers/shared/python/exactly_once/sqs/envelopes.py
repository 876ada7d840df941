"""SNS notification envelopes in a queue message's body (a queue subscribed to a topic
without raw delivery): recognised by shape and unwrapped into the `SqsMessage` the state
machine reads, so the key, fingerprint and replay are the notification's."""

from __future__ import annotations

from typing import Any

from exactly_once.errors import PermanentError
from exactly_once.sqs.messages import SqsMessage

ENVELOPE_MODES = ("auto", "on", "off")
"""How a queue consumer reads SNS envelopes in bodies: `auto` unwraps a body that is one,
`on` requires one (anything else goes to the DLQ), `off` never looks."""


class NotAnEnvelope(PermanentError):
    """SNS_ENVELOPE=on, and the body is not an SNS notification envelope."""


def unwrap(outer: SqsMessage, body: Any) -> SqsMessage | None:
    """The notification in a queue message's parsed body, or None when the body is not an
    SNS envelope. The result keeps the queue record (key functions and `ctx.record` see what
    was delivered) and the queue message's own attributes, under the notification's."""
    if not is_envelope(body):
        return None
    return SqsMessage.of(
        outer.record,
        body["MessageId"],
        body["Message"],
        {**outer.message_attributes, **sqs_attributes(body.get("MessageAttributes"))},
        receipt_handle=outer.receipt_handle,
        event_source_arn=outer.event_source_arn,
        group_id=outer.group_id,
        deduplication_id=outer.deduplication_id,
        receive_count=outer.receive_count,
    )


def is_envelope(body: Any) -> bool:
    """What SNS sends a queue without raw delivery. Trusted by its shape alone (checking the
    signature would fetch a certificate per cold start): a queue whose senders are not
    trusted to look like a topic should use SNS_ENVELOPE=off."""
    return (
        isinstance(body, dict)
        and body.get("Type") == "Notification"
        and _nonempty(body.get("MessageId"))
        and isinstance(body.get("Message"), str)
        and _nonempty(body.get("TopicArn"))
        and body["TopicArn"].startswith("arn:")
    )


def sqs_attributes(attributes: Any) -> dict[str, dict[str, str]]:
    """SNS's {"Type": "String", "Value": "x"} as SQS's {"dataType": "String", "stringValue":
    "x"}; binary values stay base64. What is malformed is left out, as for queue messages."""
    if not isinstance(attributes, dict):
        return {}
    converted: dict[str, dict[str, str]] = {}
    for name, attribute in attributes.items():
        if not isinstance(name, str) or not isinstance(attribute, dict):
            continue
        data_type, value = attribute.get("Type"), attribute.get("Value")
        if not isinstance(data_type, str) or not isinstance(value, str):
            continue
        field = "binaryValue" if data_type.startswith("Binary") else "stringValue"
        converted[name] = {"dataType": data_type, field: value}
    return converted


def _nonempty(value: Any) -> bool:
    return isinstance(value, str) and value != ""
