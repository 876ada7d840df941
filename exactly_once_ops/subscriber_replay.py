"""Replay a topic subscriber's dead-letter queue: rebuild, for each message, the SNS event the
function would have received, invoke the function with it, and delete the message only once
that invocation was accepted.

A direct subscriber (`IdempotentSubscriber`) has one DLQ for every way a notification can die,
each in its own shape:

- `permanent`: the handler's own permanent failure (exactly_once/sqs/dead_letter.py). The body is
  the SNS Message; the attributes are the SNS message attributes plus the layer's `eo-*`
  (`eo-original-message-id` is the SNS MessageId). The event is rebuilt around them, with
  every attribute in SNS form, `eo-replay-nonce` included: the FAILED record's nonce is what
  lets a permanent failure whose cause was fixed run once more (a forged one never does).
- `on-failure`: Lambda's on-failure destination record after its asynchronous retries
  (`requestContext.condition` RetriesExhausted or EventAgeExceeded). Its `requestPayload` is
  the SNS event itself, replayed as it is.
- `lambda-dlq`: a function configured with a DeadLetterConfig instead gets the event itself as
  the body, with `RequestID` / `ErrorCode` / `ErrorMessage` attributes; replayed as it is.
- `sns-redrive`: what SNS could not deliver at all (the subscription's RedrivePolicy: the
  function missing, a permission refused). A Lambda subscription has no raw delivery, so the
  body is the SNS notification envelope; the event is built from it, as SNS would have.

Everything else stays in the DLQ and is listed as `unknown`. Reading, holding and deleting
are copy mode's (`DeadLetterReplay`); a message whose invocation fails stays, and one the
run's own invocations dead-lettered again is recognised and left ("came back").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from exactly_once_cdk.outputs import DEAD_LETTER_QUEUE_URL, FUNCTION_NAME
from exactly_once_ops.message_attributes import (
    ERROR_TYPE_ATTRIBUTE,
    ORIGINAL_ID_ATTRIBUTE,
    layer_attribute,
    scalar,
)
from exactly_once_ops.replay import DeadLetterReplay, DlqRunReport, ReplayFailure, SweepOptions
from exactly_once_ops.sns_events import (
    envelope_attribute,
    is_sns_envelope,
    is_sns_event,
    lambda_sns_event,
    sns_envelope,
    subscription_arn,
    timestamp,
)
from exactly_once_ops.targets import TargetError, consumers_in, no_such_name, subscribers_in

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueOutputTypeDef, MessageTypeDef

PERMANENT = "permanent"
ON_FAILURE = "on-failure"
LAMBDA_DLQ = "lambda-dlq"
SNS_REDRIVE = "sns-redrive"
UNKNOWN = "unknown"
ERROR_MESSAGE_ATTRIBUTE = "eo-error-message"
NO_ID = "(none)"  # what the layer writes for a message that had no id
DETAIL_CHARS = 300  # of an error or a response, in a report line


class NoSuchSubscriber(TargetError):
    """The stack has no topic subscriber of that name."""


@dataclass(frozen=True)
class SubscriberTarget:
    """A direct topic subscriber as the stack's outputs name it."""

    name: str  # as the stack spells it: SalesCounter
    function_name: str
    dlq_url: str


def subscriber_target(outputs: Mapping[str, str], name: str, stack: str) -> SubscriberTarget:
    """The subscriber `name` (any case) with its function and DLQ, from the stack's outputs."""
    for found in subscribers_in(outputs):
        if found.lower() == name.lower():
            return SubscriberTarget(
                found,
                outputs[f"{found}{FUNCTION_NAME}"],
                outputs[f"{found}{DEAD_LETTER_QUEUE_URL}"],
            )
    if name.lower() in (consumer.lower() for consumer in consumers_in(outputs)):
        raise TargetError(
            f"{name!r} is a queue consumer of stack {stack!r}, not a topic subscriber: "
            f"use `eonce replay copy --consumer {name}`"
        )
    raise NoSuchSubscriber(str(no_such_name("subscriber", name, stack, subscribers_in(outputs))))


@dataclass(frozen=True)
class Subscription:
    """The function's subscription, for the events rebuilt here (`EventSubscriptionArn`).

    `topic_arn` is where a `permanent` message came from (its DLQ copy does not say); None
    when it could not be told, and then such messages cannot be replayed.
    """

    function_arn: str
    topic_arn: str | None = None
    arn: str | None = None

    def arn_for(self, topic_arn: str) -> str:
        """The real subscription ARN when known, else one as SNS writes them (`<topic>:<id>`)."""
        if self.arn and topic_arn == self.topic_arn:
            return self.arn
        return subscription_arn(topic_arn, self.function_arn)


def find_subscription(
    sns: Any, function_arn: str, topic_arns: Sequence[str], topic_arn: str | None = None
) -> Subscription:
    """The function's Lambda subscription on `topic_arn` (else on any of `topic_arns`).

    Without one (the local stack keeps none in moto) a single candidate topic is taken as it
    is; several leave the topic unknown.
    """
    candidates = [topic_arn] if topic_arn else list(topic_arns)
    for candidate in candidates:
        found = _lambda_subscription(sns, candidate, function_arn)
        if found is not None:
            return Subscription(function_arn, candidate, found)
    if len(candidates) == 1:
        return Subscription(function_arn, candidates[0])
    return Subscription(function_arn)


def _lambda_subscription(sns: Any, topic_arn: str, function_arn: str) -> str | None:
    try:
        for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic_arn):
            for sub in page.get("Subscriptions", []):
                endpoint = str(sub.get("Endpoint", ""))
                if sub.get("Protocol") == "lambda" and (
                    endpoint == function_arn or endpoint.startswith(f"{function_arn}:")
                ):
                    return str(sub["SubscriptionArn"])
    except ClientError:  # not allowed to list: fall back to the stack's topics
        return None
    return None


@dataclass(frozen=True)
class Rebuilt:
    """A DLQ message read back: its shape, why it failed, and the event to invoke with."""

    shape: str
    reason: str
    event: dict[str, Any] | None = None
    """None when it cannot be replayed: `problem` says why."""
    sns_message_ids: tuple[str, ...] = ()
    problem: str = ""


def rebuild(message: MessageTypeDef, subscription: Subscription) -> Rebuilt:
    """The SNS event the function would have received for this DLQ message (see the module)."""
    attributes = message.get("MessageAttributes", {})
    if layer_attribute(attributes, ERROR_TYPE_ATTRIBUTE) is not None:
        return _from_handler(message, attributes, subscription)
    try:
        document = json.loads(message.get("Body", ""))
    except (ValueError, RecursionError):
        document = None
    if isinstance(document, dict) and {"requestContext", "requestPayload"} <= document.keys():
        return _from_on_failure(document)
    if is_sns_event(document):
        error = attributes.get("ErrorMessage")
        reason = (scalar(error) if error else None) or "Lambda's retries ran out"
        return _replayable(LAMBDA_DLQ, reason, document)
    if is_sns_envelope(document):
        envelope = dict(document)
        if "MessageAttributes" not in envelope and attributes:
            envelope["MessageAttributes"] = sns_attributes(attributes)
        event = lambda_sns_event([envelope], subscription.arn_for(envelope["TopicArn"]))
        return _replayable(SNS_REDRIVE, "SNS could not deliver it (subscription DLQ)", event)
    return Rebuilt(
        UNKNOWN,
        "",
        problem="not a layer failure (eo-error-type), an on-failure record, a Lambda DLQ event "
        "or an SNS envelope",
    )


def sns_attributes(
    attributes: Mapping[str, MessageAttributeValueOutputTypeDef],
) -> dict[str, dict[str, str]]:
    """SQS message attributes in SNS's `{Type, Value}` form (binary values base64)."""
    converted = {}
    for name, attribute in attributes.items():
        value = attribute.get("BinaryValue", attribute.get("StringValue"))
        if value is not None:
            converted[name] = envelope_attribute(attribute["DataType"], value)
    return converted


def _from_handler(
    message: MessageTypeDef,
    attributes: Mapping[str, MessageAttributeValueOutputTypeDef],
    subscription: Subscription,
) -> Rebuilt:
    """Shape `permanent`: the Message and its attributes, eo-replay-nonce included."""
    kind = layer_attribute(attributes, ERROR_TYPE_ATTRIBUTE)
    text = layer_attribute(attributes, ERROR_MESSAGE_ATTRIBUTE)
    reason = f"{kind}: {text}" if text else str(kind)
    original = layer_attribute(attributes, ORIGINAL_ID_ATTRIBUTE)
    if not original or original == NO_ID:
        return Rebuilt(PERMANENT, reason, problem=f"no {ORIGINAL_ID_ATTRIBUTE}: no SNS MessageId")
    if subscription.topic_arn is None:
        return Rebuilt(
            PERMANENT,
            reason,
            sns_message_ids=(original,),
            problem="its topic is unknown (no subscription of the function found, and the "
            "stack has no single topic): pass --topic-arn",
        )
    envelope = sns_envelope(
        message.get("Body", ""),
        topic_arn=subscription.topic_arn,
        message_id=original,
        sent_at=_sent_at(message),
        attributes=sns_attributes(attributes),
    )
    event = lambda_sns_event([envelope], subscription.arn_for(subscription.topic_arn))
    return _replayable(PERMANENT, reason, event)


def _from_on_failure(record: dict[str, Any]) -> Rebuilt:
    """Shape `on-failure`: Lambda's invocation record; the event is its requestPayload."""
    context = record.get("requestContext")
    condition = context.get("condition") if isinstance(context, dict) else None
    response = record.get("responsePayload")
    error = ""
    if isinstance(response, dict) and response.get("errorType"):
        error = f": {response.get('errorType')}: {response.get('errorMessage', '')}"
    reason = f"{condition or 'on-failure'}{error}"
    payload = record.get("requestPayload")
    if not isinstance(payload, dict) or not is_sns_event(payload):
        return Rebuilt(ON_FAILURE, reason, problem="its requestPayload is not an SNS event")
    return _replayable(ON_FAILURE, reason, payload)


def _replayable(shape: str, reason: str, event: dict[str, Any]) -> Rebuilt:
    ids = tuple(str(record["Sns"].get("MessageId", "")) for record in event["Records"])
    return Rebuilt(shape, reason[:DETAIL_CHARS], event, ids)


def _sent_at(message: MessageTypeDef) -> str:
    """When the message was dead-lettered (SQS's SentTimestamp), as an SNS Timestamp."""
    sent = message.get("Attributes", {}).get("SentTimestamp")
    if sent is None or not sent.isdigit():
        return timestamp()
    return timestamp(datetime.fromtimestamp(int(sent) / 1000, UTC))


@dataclass(frozen=True)
class Invocation:
    """How one invocation went: `accepted` lets the DLQ message go."""

    accepted: bool
    code: str
    detail: str
    outcomes: tuple[str, ...] = ()
    """Each record's outcome (processed, duplicate, permanent...) when the invoker knows it."""


class Invoker(Protocol):
    def __call__(self, event: dict[str, Any]) -> Invocation: ...


class LambdaInvoker:
    """The deployed function through `lambda.invoke`.

    `Event` (the default) is how SNS invokes a subscriber: accepted once Lambda has queued it
    (HTTP 202), after which the function's own asynchronous retries and on-failure destination
    apply, so a replay that fails again comes back to this DLQ as an on-failure record.
    `RequestResponse` (`wait`) waits for the function: accepted only when it returned without
    a FunctionError; a failure leaves the message where it is (no retries, no new record).
    """

    def __init__(self, client: LambdaClient, function_name: str, *, wait: bool = False) -> None:
        self.client = client
        self.function_name = function_name
        self.wait = wait

    def __call__(self, event: dict[str, Any]) -> Invocation:
        try:
            response = self.client.invoke(
                FunctionName=self.function_name,
                InvocationType="RequestResponse" if self.wait else "Event",
                Payload=json.dumps(event).encode("utf-8"),
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            return Invocation(False, error.get("Code", "ClientError"), error.get("Message", ""))
        status = response.get("StatusCode", 0)
        if not self.wait:  # Lambda has queued it (202), or it has not
            return Invocation(status == 202, "Queued" if status == 202 else f"HTTP {status}", "")
        body = response["Payload"].read() if "Payload" in response else b""
        text = body.decode("utf-8", "replace")
        if response.get("FunctionError"):
            return Invocation(False, "FunctionError", text[:DETAIL_CHARS])
        outcomes = _summary(text)  # the subscriber's own counts say it all
        detail = "" if outcomes else text[:DETAIL_CHARS]
        return Invocation(200 <= status < 300, "Returned", detail, outcomes)


def _summary(text: str) -> tuple[str, ...]:
    """The outcomes in the subscriber's response ({"processed": 1}), else none."""
    try:
        counts = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(counts, dict):
        return ()
    return tuple(name for name, n in counts.items() if isinstance(n, int) for _ in range(max(n, 0)))


class LocalInvoker:
    """The subscriber's code in this process, for the local stack (moto cannot run functions):
    accepted when the handler returned, as Lambda would count it; the outcome of each record
    from the handler's `last_results`."""

    def __init__(self, handler: Callable[[Any, Any], Any], context: Callable[[], Any]) -> None:
        self.handler = handler
        self.context = context

    def __call__(self, event: dict[str, Any]) -> Invocation:
        before = getattr(self.handler, "last_results", None)
        try:
            self.handler(event, self.context())
        except Exception as exc:  # what Lambda would retry, then send to the on-failure DLQ
            return Invocation(
                False, type(exc).__name__, str(exc)[:DETAIL_CHARS], self._seen(before)
            )
        return Invocation(True, "Returned", "", self._seen(before))

    def _seen(self, before: Any) -> tuple[str, ...]:
        results = getattr(self.handler, "last_results", None)
        if results is None or results is before:  # not set by this call
            return ()
        return tuple(str(getattr(r.outcome, "value", r.outcome)) for r in results)


@dataclass(frozen=True)
class SubscriberOptions(SweepOptions):
    """How a subscriber replay behaves; see the `replay subscriber` help for each option."""

    shapes: tuple[str, ...] = ()
    """Only these shapes (empty: every one)."""
    visibility_timeout: int = 300  # each invocation may take up to the function's timeout


@dataclass(frozen=True)
class Row:
    """One DLQ message as read: listed by a dry run, replayed (with its `invocation`), or
    left because no event could be rebuilt (`problem` says why)."""

    message_id: str
    shape: str
    sns_message_ids: tuple[str, ...]
    reason: str
    problem: str = ""
    invocation: Invocation | None = None


@dataclass
class SubscriberReport(DlqRunReport):
    replayed: list[Row] = field(default_factory=list)
    """Invocations accepted (their messages deleted unless a delete failed)."""
    candidates: list[Row] = field(default_factory=list)
    """Dry run: what would be replayed."""
    unreplayable: list[Row] = field(default_factory=list)
    """Messages no event could be rebuilt from: left in the DLQ."""


class SubscriberReplay(DeadLetterReplay[SubscriberReport]):
    """One replay of a subscriber's DLQ into `invoker` (None: a dry run, which invokes
    nothing)."""

    def __init__(
        self,
        sqs: SQSClient,
        dlq_url: str,
        invoker: Invoker | None,
        *,
        subscription: Subscription,
        options: SubscriberOptions,
    ) -> None:
        super().__init__(sqs, dlq_url, SubscriberReport(), options)
        self.invoker = invoker
        self.subscription = subscription
        self.options = options
        self._invoked: set[str] = set()  # SNS MessageIds this run invoked

    def _handle(self, messages: list[MessageTypeDef]) -> None:
        """Invoke each message's event; delete those accepted, even if the run stops here.

        A message for an SNS MessageId this run invoked in an earlier receive is a replay
        that failed again (or a second copy): it is left for a later run, never looped on.
        """
        invoked_before = set(self._invoked)
        accepted: list[MessageTypeDef] = []
        try:
            for message in messages:
                rebuilt = rebuild(message, self.subscription)
                if invoked_before.intersection(rebuilt.sns_message_ids):
                    self.report.returned += 1
                elif self._limit_reached():
                    continue  # beyond --limit: untouched, released at the end
                elif self.options.shapes and rebuilt.shape not in self.options.shapes:
                    self.report.skipped += 1
                elif rebuilt.event is None:
                    self.report.unreplayable.append(_row(message, rebuilt))
                else:
                    self._matched += 1
                    if self.options.dry_run or self.invoker is None:
                        self.report.candidates.append(_row(message, rebuilt))
                    elif self._invoke(self.invoker, message, rebuilt, rebuilt.event):
                        accepted.append(message)
        finally:
            deleted, failures = self.reader.delete(accepted, "invoked")
            self.report.deleted += deleted
            self.report.failures.extend(failures)

    def _invoke(
        self, invoker: Invoker, message: MessageTypeDef, rebuilt: Rebuilt, event: dict[str, Any]
    ) -> bool:
        self.pacer.wait(1)
        invocation = invoker(event)
        self._invoked.update(rebuilt.sns_message_ids)
        if not invocation.accepted:
            self.report.failures.append(
                ReplayFailure(message["MessageId"], "invoke", invocation.code, invocation.detail)
            )
            return False
        self.report.replayed.append(_row(message, rebuilt, invocation))
        return True


def _row(message: MessageTypeDef, rebuilt: Rebuilt, invocation: Invocation | None = None) -> Row:
    return Row(
        message["MessageId"],
        rebuilt.shape,
        rebuilt.sns_message_ids,
        rebuilt.reason,
        rebuilt.problem,
        invocation,
    )
