"""What a deployed stack's template says that its outputs do not: the topic a subscriber's
function is subscribed to.

`replay SUBSCRIBER` needs that topic to rebuild a `permanent` message's SNS event. SNS itself
answers on AWS (the function's Lambda subscription), but the local stack takes that
subscription out of moto (a tap queue stands in for it), and a stack may have several topics
(the example has its alarm topic besides Sales). The template still names it, as the local
emulator reads it (local_aws/deployed_app.py): an `AWS::SNS::Subscription` with protocol
`lambda` whose endpoint is the function, or the `topic` of the constructs' metadata on the
function (a subscriber made without its subscription). The stack's resources give the ARN.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from exactly_once_cdk.outputs import ENTRY_POINT_METADATA

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


def subscribed_topics(cloudformation: CloudFormationClient, stack: str, function: str) -> list[str]:
    """The ARNs of the topics the stack subscribes the function (by name) to; empty when the
    template or the resources cannot be read (e.g. not allowed)."""
    try:
        body: Any = cloudformation.get_template(StackName=stack)["TemplateBody"]
        physical = {
            summary["LogicalResourceId"]: summary.get("PhysicalResourceId", "")
            for page in cloudformation.get_paginator("list_stack_resources").paginate(
                StackName=stack
            )
            for summary in page["StackResourceSummaries"]
        }
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
    functions = {logical for logical, name in physical.items() if name == function}
    named: list[Any] = []
    for logical, resource in resources.items():
        properties = resource.get("Properties") or {}
        if (
            resource.get("Type") == "AWS::SNS::Subscription"
            and properties.get("Protocol") == "lambda"
            and _reference(properties.get("Endpoint")) in functions
        ):
            named.append(properties.get("TopicArn"))
        if logical in functions:
            marked = (resource.get("Metadata") or {}).get(ENTRY_POINT_METADATA) or {}
            named.append(marked.get("topic"))
    arns: list[str] = []
    for topic in named:
        logical_id = _reference(topic)
        arn = physical.get(logical_id) if logical_id else topic
        if isinstance(arn, str) and arn.startswith("arn:") and arn not in arns:
            arns.append(arn)
    return arns


def _reference(value: Any) -> str | None:
    """The logical id in `{"Ref": id}` or `{"Fn::GetAtt": [id, attribute]}`."""
    if isinstance(value, Mapping):
        if isinstance(ref := value.get("Ref"), str):
            return ref
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
            return attribute[0]
    return None
