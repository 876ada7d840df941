"""The constructs follow the local emulator by themselves (issue 26): an app that passes none of
the local-only switches gets the moto shape under `-c localStack=true` (what
`local_aws.local_deploy` always sets) and the AWS shape without it.

Under the context: the consumer's event source mapping is disabled (moto would run it on send),
the HTTP API has no API Gateway resources (moto's CloudFormation has none), the topic subscribes
its queues in its own `Subscription` entries (moto has no `AWS::SNS::Subscription`), and the
direct subscriber has no Lambda subscription (moto's SNS would need Docker). An explicit value
still wins, and the context's value is read strictly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template

from exactly_once_cdk import (
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentHttpApi,
    IdempotentSubscriber,
    IdempotentTopic,
)
from exactly_once_cdk.local_mode import on_local_stack

LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:eonce:1"


def synth(
    tmp_path: Path, context: dict[str, Any] | None = None, **switches: Any
) -> tuple[dict[str, Any], list[str]]:
    """A small app with one of each entry point and `switches` passed to them (none by
    default); its template and the warnings synthesis left on the constructs."""
    code_dir = tmp_path / "code"
    code_dir.mkdir(parents=True, exist_ok=True)
    (code_dir / "handler.py").write_text("def handle(event, context):\n    return None\n")
    app = App(outdir=str(tmp_path / "cdk.out"), context=context or {})
    stack = Stack(app, "Mine")
    shared: dict[str, Any] = {
        "table": IdempotencyTable(stack, "Records"),
        "layer": lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN),
        "code": lambda_.Code.from_asset(str(code_dir)),
    }
    mapping = {k: v for k, v in switches.items() if k == "mapping_enabled"}
    invoices = IdempotentConsumer(stack, "Invoices", **shared, **mapping)
    refunds = IdempotentConsumer(stack, "Refunds", **shared, **mapping)
    billing = IdempotentTopic(stack, "Billing")
    billing.subscribe_queue(invoices, **{k: v for k, v in switches.items() if k == "inline"})
    billing.subscribe_queue(
        refunds,
        raw_message_delivery=switches.get("raw", False),
        **{k: v for k, v in switches.items() if k == "inline"},
    )
    IdempotentSubscriber(
        stack,
        "Tally",
        topic=billing.topic,
        **shared,
        **{k: v for k, v in switches.items() if k == "subscribe"},
    )
    IdempotentHttpApi(
        stack, "Quotes", **shared, **{k: v for k, v in switches.items() if k == "create_api"}
    )
    template = Template.from_stack(stack)
    found = Annotations.from_stack(stack).find_warning("*", Match.any_value())
    warnings = [str(message.entry.data) for message in found]
    return dict(template.to_json()), warnings


def of_type(template: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"].startswith(prefix)}


def mappings_enabled(template: dict[str, Any]) -> list[bool]:
    return [
        r["Properties"]["Enabled"]
        for r in of_type(template, "AWS::Lambda::EventSourceMapping").values()
    ]


def inline_entries(template: dict[str, Any]) -> list[str]:
    (topic,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Topic"]
    return [entry["Protocol"] for entry in topic["Properties"].get("Subscription", [])]


def subscription_protocols(template: dict[str, Any]) -> list[str]:
    return sorted(
        r["Properties"]["Protocol"] for r in of_type(template, "AWS::SNS::Subscription").values()
    )


def test_without_the_context_the_app_has_aws_shape(tmp_path: Path) -> None:
    template, warnings = synth(tmp_path)
    assert mappings_enabled(template) == [True, True]
    assert of_type(template, "AWS::ApiGatewayV2::")  # the API, its stage, route, integration
    assert inline_entries(template) == []
    assert subscription_protocols(template) == ["lambda", "sqs", "sqs"]
    assert not [w for w in warnings if "local emulator" in w]


@pytest.mark.parametrize("value", [True, "true", "1", "on"])
def test_under_the_context_the_app_has_the_emulators_shape(tmp_path: Path, value: Any) -> None:
    template, _ = synth(tmp_path, {"localStack": value})
    assert mappings_enabled(template) == [False, False]
    assert of_type(template, "AWS::ApiGatewayV2::") == {}
    assert inline_entries(template) == ["sqs", "sqs"]
    assert subscription_protocols(template) == []  # neither the queues' nor the subscriber's
    # Each queue still lets this topic send to it (what the subscription resource would add).
    policies = of_type(template, "AWS::SQS::QueuePolicy").values()
    sns_statements = [
        s
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Principal") == {"Service": "sns.amazonaws.com"}
    ]
    assert len(sns_statements) == 2


@pytest.mark.parametrize("value", [False, "false", "0", "off"])
def test_the_context_off_is_aws_shape(tmp_path: Path, value: Any) -> None:
    template, _ = synth(tmp_path, {"localStack": value})
    assert mappings_enabled(template) == [True, True]
    assert subscription_protocols(template) == ["lambda", "sqs", "sqs"]


def test_explicit_switches_win_over_the_context(tmp_path: Path) -> None:
    template, _ = synth(
        tmp_path / "local",
        {"localStack": "true"},
        mapping_enabled=True,
        create_api=True,
        inline=False,
        subscribe=True,
    )
    assert mappings_enabled(template) == [True, True]
    assert of_type(template, "AWS::ApiGatewayV2::")
    assert inline_entries(template) == []
    assert subscription_protocols(template) == ["lambda", "sqs", "sqs"]

    template, _ = synth(
        tmp_path / "aws", mapping_enabled=False, create_api=False, inline=True, subscribe=False
    )
    assert mappings_enabled(template) == [False, False]
    assert of_type(template, "AWS::ApiGatewayV2::") == {}
    assert inline_entries(template) == ["sqs", "sqs"]
    assert subscription_protocols(template) == []


def test_options_an_inline_subscription_cannot_carry_are_left_out_locally_with_a_warning(
    tmp_path: Path,
) -> None:
    template, warnings = synth(tmp_path / "local", {"localStack": "true"}, raw=True)
    assert inline_entries(template) == ["sqs", "sqs"]
    assert [w for w in warnings if "Refunds's subscription in the local emulator" in w]
    assert all("raw message delivery" in w for w in warnings if "local emulator" in w)
    # Asked for explicitly, an inline subscription still refuses them.
    with pytest.raises(ValueError, match="takes no raw delivery"):
        synth(tmp_path / "explicit", {"localStack": "true"}, raw=True, inline=True)
    # In AWS shape the subscription carries the option, with no warning.
    template, warnings = synth(tmp_path / "aws", raw=True)
    raw = [
        bool(r["Properties"].get("RawMessageDelivery"))
        for r in of_type(template, "AWS::SNS::Subscription").values()
        if r["Properties"]["Protocol"] == "sqs"
    ]
    assert sorted(raw) == [False, True]
    assert not [w for w in warnings if "local emulator" in w]


@pytest.mark.parametrize("value", ["maybe", "ture", 2])
def test_a_value_that_is_no_flag_is_refused(value: Any) -> None:
    stack = Stack(App(context={"localStack": value}), "Mine")
    with pytest.raises(ValueError, match="context 'localStack': expected true/false"):
        on_local_stack(stack)


def test_unset_is_off() -> None:
    assert on_local_stack(Stack(App(), "Mine")) is False
    assert on_local_stack(Stack(App(context={"localStack": True}), "Mine")) is True
    # Read wherever the construct is: a nested scope sees the app's context.
    topic = IdempotentTopic(Stack(App(context={"localStack": "yes"}), "Mine"), "T")
    assert on_local_stack(topic) is True
    assert isinstance(topic.topic, sns.Topic)
