"""SNS events for trying a topic subscriber with `eonce invoke salescounter -e events/sns-*.json`.

- `sns-sale.json`: one sale, as SNS invokes a directly subscribed function. Invoking it twice is
  SNS delivering the same message twice (same MessageId): the second run is a duplicate.
- `sns-sale-attributes.json`: a sale whose key is also a message attribute (`orderId`), for a
  subscriber keyed on `attribute:orderId`, with a String, a Number and a Binary attribute.
- `sns-sale-published-twice-1.json` / `-2.json`: the same sale published twice, so two SNS
  messages (two MessageIds) with one orderId: keyed on the orderId, the second is a duplicate;
  keyed on the MessageId, it would run again.
- `sns-sale-poison.json`: a Message that is not JSON: dead-lettered with its reason, no retry.

The fan-out sample (an SQS event whose body is the SNS envelope) is with the queue samples.
Business ids are the samples' own (o-5xxx), so invoking them in any order never reuses a key
for another payload.
"""

from __future__ import annotations

import json
from typing import Any

from exactly_once_ops.sample_events import ACCOUNT_ID, REGION, Attr, typed
from exactly_once_ops.sns_events import (
    envelope_attribute,
    lambda_sns_event,
    sample_message_id,
    sns_envelope,
    subscription_arn,
)

TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:sales"
FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:sales-counter"
SUBSCRIPTION_ARN = subscription_arn(TOPIC_ARN, FUNCTION_ARN)
SAMPLE_TIMES = ("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:04.250Z")


def sale(order_id: str, amount: int, customer: str) -> str:
    return json.dumps({"orderId": order_id, "amount": amount, "customerId": customer})


def attributes(values: dict[str, str | int | bytes | Attr]) -> dict[str, dict[str, str]]:
    """Attributes in SNS's delivered form, typed as `sample_events.typed` types them."""
    converted = {}
    for name, value in values.items():
        attr = typed(value)
        converted[name] = envelope_attribute(attr.data_type, attr.value)
    return converted


def envelope(
    message: str,
    index: int = 0,
    *,
    sent_at: str = SAMPLE_TIMES[0],
    extra: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A sample SNS message with a MessageId derived from its inputs."""
    return sns_envelope(
        message,
        topic_arn=TOPIC_ARN,
        message_id=sample_message_id(TOPIC_ARN, sent_at, index, message),
        sent_at=sent_at,
        subject="sale",
        attributes={"kind": {"Type": "String", "Value": "sale"}, **(extra or {})},
    )


def sns_sample_events() -> dict[str, dict[str, Any]]:
    """The committed SNS samples, by file name."""
    twice = sale("o-5201", 30, "c-2")
    with_key = attributes(
        {"orderId": "o-5101", "amount": 42, "checksum": b"\x00\x01sale", "channel": "web"}
    )
    return {
        "sns-sale.json": lambda_sns_event([envelope(sale("o-5001", 25, "c-7"))], SUBSCRIPTION_ARN),
        "sns-sale-attributes.json": lambda_sns_event(
            [envelope(sale("o-5101", 42, "c-1"), extra=with_key)], SUBSCRIPTION_ARN
        ),
        "sns-sale-published-twice-1.json": lambda_sns_event([envelope(twice)], SUBSCRIPTION_ARN),
        "sns-sale-published-twice-2.json": lambda_sns_event(
            [envelope(twice, 1, sent_at=SAMPLE_TIMES[1])], SUBSCRIPTION_ARN
        ),
        "sns-sale-poison.json": lambda_sns_event(
            [envelope("orderId=o-5301;amount=12 (not JSON)")], SUBSCRIPTION_ARN
        ),
    }


def fanout_envelope() -> dict[str, Any]:
    """The SNS envelope of one sale as the orders queue receives it (RawMessageDelivery off)."""
    return envelope(sale("o-6001", 18, "c-4"))
