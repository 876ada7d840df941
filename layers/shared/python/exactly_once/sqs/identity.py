"""What a queue record is to the state machine: its body, its idempotency key and the
fingerprint of its input, read from the message (or from the SNS notification inside it).

Its own module because reading the input is a job of its own with one rule: every failure
here comes from the input, so it is permanent (the record goes to the DLQ at once, since a
retry cannot change it), where every failure in processor.py's state machine is the store's
or the handler's. The processor keeps the answer per message, so a batch that orders chains
by key and the record's run read it once.
"""

from __future__ import annotations

from typing import Any

from exactly_once.errors import PermanentError, UnusableInput
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.envelopes import NotAnEnvelope, unwrap
from exactly_once.sqs.keys import KeySpec, resolve_key
from exactly_once.sqs.messages import NonJsonBody, SqsMessage, parse_body
from exactly_once.stores.codec import fingerprint


def identify(
    message: SqsMessage, key_spec: KeySpec, config: ConsumerConfig
) -> tuple[Any, str, str | None]:
    """Body, key and fingerprint. Every failure here comes from the input: permanent.

    Valid JSON can still break code (deep nesting, lone surrogates, a key function that
    raises); retrying cannot change the input, so such a record goes to the DLQ at once.
    """
    try:
        source, body = message_source(message, config)
        key = resolve_key(key_spec, source, body)
        fp = fingerprint(body, config.fingerprint_fields) if config.fingerprint else None
    except PermanentError:
        raise
    except Exception as exc:
        raise UnusableInput(f"{type(exc).__name__}: {exc}") from exc
    return body, key, fp


def message_source(message: SqsMessage, config: ConsumerConfig) -> tuple[SqsMessage, Any]:
    """The message the key and body come from, and the body: the SNS notification inside
    the body when it is an envelope (SNS -> SQS without raw delivery), else the message.
    Unwrapped, a key of None is the SNS MessageId: the same for every delivery of one
    published message, where each copy in the queue has its own SQS messageId."""
    mode = config.sns_envelope
    if mode == "off":
        return message, parse_body(message, config.raw_body)
    try:
        outer = parse_body(message, False)
    except NonJsonBody:
        if mode == "on":
            raise NotAnEnvelope("SNS_ENVELOPE=on, and the body is not JSON") from None
        if not config.raw_body or message.body is None:
            raise  # not JSON and not accepted raw, or no body at all
        return message, message.body  # a raw body, as it is
    inner = unwrap(message, outer)
    if inner is not None:
        return inner, parse_body(inner, config.raw_body)
    if mode == "on":
        raise NotAnEnvelope("SNS_ENVELOPE=on, and the body is not an SNS notification")
    return message, (message.body if config.raw_body else outer)
