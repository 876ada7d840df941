"""Whether the app is being deployed into the local emulator (`eonce up`): the `localStack`
context, which `local_aws.local_deploy` always sets.

The constructs read it themselves so that any app built with them runs locally as it is
written: under moto a consumer's event source mapping stays disabled (moto would run it
synchronously on send and delete failed messages; the local poller polls instead), an HTTP API
has no API Gateway (moto's CloudFormation has no `AWS::ApiGatewayV2::*` models; the local
gateway serves the routes), a topic subscribes its queues in its own `Subscription` entries
(moto's CloudFormation has no `AWS::SNS::Subscription` model) and a direct subscriber has no
subscription (moto's SNS would need Docker to invoke it; the local stack delivers). Each of
those keywords left unset follows this flag; an explicit value wins.
"""

from __future__ import annotations

from constructs import IConstruct

LOCAL_STACK_CONTEXT = "localStack"
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")  # the same words infra.settings reads it with


def on_local_stack(scope: IConstruct) -> bool:
    """The app's `localStack` context as a flag: unset is off; `-c` gives text ("true").
    Anything else is refused: a misspelt value must not deploy the emulator's shape to AWS,
    nor AWS's shape into the emulator."""
    value = scope.node.try_get_context(LOCAL_STACK_CONTEXT)
    if value is None or isinstance(value, bool):
        return value is True
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"context {LOCAL_STACK_CONTEXT!r}: expected true/false, got {value!r}")
