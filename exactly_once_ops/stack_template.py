"""What a deployed stack's template says that its outputs do not: the topic a subscriber's
function is subscribed to.

`replay SUBSCRIBER` needs that topic to rebuild a `permanent` message's SNS event. SNS itself
answers on AWS (the function's Lambda subscription), but the local stack takes that
subscription out of moto (a tap queue stands in for it), and a stack may have several topics
(the example has its alarm topic besides Sales). The template still names it, and the shared
template reader (`exactly_once_ops.app_template`, which the local emulator reads it with too)
finds it: an `AWS::SNS::Subscription` with protocol `lambda` whose endpoint is the function, or
the `topic` of the constructs' metadata on the function (a subscriber made without its
subscription). The stack's resources give the ARN.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from exactly_once_ops.app_model import physical_resource_ids
from exactly_once_ops.app_template import reference, subscribed_topic_values

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


def subscribed_topics(cloudformation: CloudFormationClient, stack: str, function: str) -> list[str]:
    """The ARNs of the topics the stack subscribes the function (by name) to; empty when the
    template or the resources cannot be read (e.g. not allowed)."""
    try:
        body: Any = cloudformation.get_template(StackName=stack)["TemplateBody"]
        physical = physical_resource_ids(cloudformation, stack)
        template = json.loads(body) if isinstance(body, str) else body
    except (ClientError, BotoCoreError, ValueError):
        return []
    return topics_in_template(template, physical, function)


def topics_in_template(
    template: Mapping[str, Any], physical: Mapping[str, str], function: str
) -> list[str]:
    """The topics (ARNs, by `physical` id of each logical one) the template subscribes the
    function whose physical id is `function` to."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    arns: list[str] = []
    for logical, name in physical.items():
        if name != function:
            continue
        for topic in subscribed_topic_values(resources, logical):
            logical_id = reference(topic)
            arn = physical.get(logical_id) if logical_id else topic
            if isinstance(arn, str) and arn.startswith("arn:") and arn not in arns:
                arns.append(arn)
    return arns
