"""SNS notifications in the two shapes a subscriber meets them, built from one set of fields.

- The *envelope*: the JSON document SNS puts in an SQS message body (non-raw delivery) and
  POSTs to HTTP endpoints: `Type`, `MessageId`, `TopicArn`, `Message`, `Timestamp`, the
  signature fields, `SigningCertURL`, `UnsubscribeURL`, and `Subject` / `MessageAttributes`
  only when set.
- The *Lambda event*: what SNS hands a directly subscribed function, `Records[0].Sns` with
  the same fields (spelled `SigningCertUrl`, `UnsubscribeUrl`, `Subject` null when unset), plus
  `EventSource` "aws:sns", `EventVersion` and the subscription's ARN.

The local stack turns each envelope its tap queue receives into the Lambda event, the sample
generator writes both, and `invoke` recognises the event. Attributes are `{Name: {Type, Value}}`
in both shapes: Number values are strings, Binary values base64.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

SIGNATURE_VERSION = "1"
_ID_NAMESPACE = uuid.UUID("0b8f3c52-96f1-4a51-a7a4-5f0d3e1b6c77")


def timestamp(when: datetime | None = None) -> str:
    """SNS's Timestamp: ISO 8601 UTC with milliseconds and a Z."""
    moment = (when or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def region_of(arn: str) -> str:
    return arn.split(":")[3]


def subscription_arn(topic_arn: str, endpoint: str) -> str:
    """A subscription ARN as SNS writes them (`<topic ARN>:<uuid>`), stable per endpoint."""
    return f"{topic_arn}:{uuid.uuid5(_ID_NAMESPACE, f'{topic_arn}|{endpoint}')}"


def envelope_attribute(data_type: str, value: str | bytes) -> dict[str, str]:
    """One `MessageAttributes` entry: `{Type, Value}` (binary values base64-encoded)."""
    if isinstance(value, bytes):
        return {"Type": data_type, "Value": base64.b64encode(value).decode("ascii")}
    return {"Type": data_type, "Value": value}


def published_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Publish-call attributes (`{DataType, StringValue | BinaryValue}`, as SQS's) in the
    `{Type, Value}` form SNS delivers them in."""
    converted = {}
    for name, value in attributes.items():
        raw = value.get("BinaryValue")
        text = raw if isinstance(raw, bytes) else str(value.get("StringValue", ""))
        converted[name] = envelope_attribute(str(value["DataType"]), text)
    return converted


def signing_cert_url(region: str) -> str:
    """Where SNS's signing certificate would be (the name is 32 hex digits on AWS)."""
    return f"https://sns.{region}.amazonaws.com/SimpleNotificationService-{'0' * 32}.pem"


def _signature(message_id: str, message: str) -> str:
    """Stands in for SNS's RSA signature: base64 of the right length, stable per message."""
    seed = f"{message_id}|{message}".encode()
    digest = b"".join(hashlib.sha512(seed + bytes([n])).digest() for n in range(4))
    return base64.b64encode(digest[:256]).decode("ascii")


def sns_envelope(
    message: str,
    *,
    topic_arn: str,
    message_id: str,
    sent_at: str,
    subject: str | None = None,
    attributes: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The envelope SNS sends a subscribed queue (RawMessageDelivery false)."""
    region = region_of(topic_arn)
    envelope: dict[str, Any] = {
        "Type": "Notification",
        "MessageId": message_id,
        "TopicArn": topic_arn,
    }
    if subject is not None:
        envelope["Subject"] = subject
    envelope |= {
        "Message": message,
        "Timestamp": sent_at,
        "SignatureVersion": SIGNATURE_VERSION,
        "Signature": _signature(message_id, message),
        "SigningCertURL": signing_cert_url(region),
        "UnsubscribeURL": f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe"
        f"&SubscriptionArn={subscription_arn(topic_arn, 'unsubscribe')}",
    }
    if attributes:
        envelope["MessageAttributes"] = {name: dict(value) for name, value in attributes.items()}
    return envelope


def is_sns_envelope(document: Any) -> bool:
    """An SNS Notification envelope: Type Notification with a MessageId, TopicArn and Message."""
    return (
        isinstance(document, dict)
        and document.get("Type") == "Notification"
        and all(isinstance(document.get(k), str) for k in ("MessageId", "TopicArn", "Message"))
    )


def parse_envelope(body: str) -> dict[str, Any] | None:
    """The envelope in an SQS message body, or None when the body is something else."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if is_sns_envelope(document) else None


def lambda_sns_record(envelope: Mapping[str, Any], subscription: str) -> dict[str, Any]:
    """One `Records[i]` of the event SNS invokes a subscribed function with."""
    region = region_of(str(envelope["TopicArn"]))
    sns = {
        "Type": envelope["Type"],
        "MessageId": envelope["MessageId"],
        "TopicArn": envelope["TopicArn"],
        "Subject": envelope.get("Subject"),
        "Message": envelope["Message"],
        "Timestamp": envelope.get("Timestamp") or timestamp(),
        "SignatureVersion": envelope.get("SignatureVersion", SIGNATURE_VERSION),
        "Signature": envelope.get("Signature")
        or _signature(str(envelope["MessageId"]), str(envelope["Message"])),
        "SigningCertUrl": envelope.get("SigningCertURL") or signing_cert_url(region),
        "UnsubscribeUrl": f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe"
        f"&SubscriptionArn={subscription}",
        "MessageAttributes": dict(envelope.get("MessageAttributes") or {}),
    }
    return {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": subscription,
        "Sns": sns,
    }


def lambda_sns_event(envelopes: Sequence[Mapping[str, Any]], subscription: str) -> dict[str, Any]:
    """The event for a direct subscriber (SNS always sends one record; tests may send more)."""
    return {"Records": [lambda_sns_record(envelope, subscription) for envelope in envelopes]}


def is_sns_event(event: Any) -> bool:
    """A Lambda event from SNS: every record is `aws:sns` with an `Sns` object."""
    records = event.get("Records") if isinstance(event, dict) else None
    return (
        isinstance(records, list)
        and bool(records)
        and all(
            isinstance(r, dict)
            and r.get("EventSource") == "aws:sns"
            and isinstance(r.get("Sns"), dict)
            for r in records
        )
    )


def sample_message_id(topic_arn: str, sent_at: str, index: int, message: str) -> str:
    """A MessageId derived from its inputs, so regenerated samples are byte-identical."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"{topic_arn}|{sent_at}|{index}|{message}"))
