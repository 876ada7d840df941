"""A consumer scales with MaximumConcurrency (the default, 5) or provisioned pollers, never both:
the rule, its reach from the context settings, and the event source mappings it gives."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk.consumer import IdempotentConsumer
from exactly_once_cdk.consumer_rules import check_scaling
from exactly_once_cdk.layer import ExactlyOnceLayer
from exactly_once_cdk.tables import IdempotencyTable
from infra.consumers import CONSUMERS
from infra.settings import Settings, resolve
from tests.infra.conftest import Synth, synthesize
from tests.infra.test_template import ref_id

POLLERS: dict[str, Any] = {"consumers": {"Orders": {"minPollers": 2, "maxPollers": "20"}}}
ESM = "AWS::Lambda::EventSourceMapping"


@pytest.fixture(scope="session")
def pollers_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(POLLERS, tmp_path_factory.mktemp("cdk-pollers"))


def _spec(consumer_id: str) -> Any:
    return next(spec for spec in CONSUMERS if spec.id == consumer_id)


class TestRule:
    def test_both_kinds_is_an_error_that_says_why(self) -> None:
        with pytest.raises(ValueError, match="cannot be combined") as raised:
            check_scaling("Orders", max_concurrency=5, min_pollers=2, max_pollers=None)
        assert "around the clock" in str(raised.value)  # the cost note travels with it

    @pytest.mark.parametrize(
        ("scaling", "words"),
        [
            ({"max_concurrency": 1}, "maxConcurrency 1 is outside 2..1000"),
            ({"min_pollers": 1}, "minPollers 1 is outside 2..200"),
            ({"min_pollers": 201}, "minPollers 201 is outside 2..200"),
            ({"max_pollers": 2001}, "maxPollers 2001 is outside 2..2000"),
            ({"min_pollers": 10, "max_pollers": 5}, "minPollers 10 is over maxPollers 5"),
        ],
    )
    def test_service_limits(self, scaling: dict[str, int], words: str) -> None:
        kinds: dict[str, int | None] = {
            "max_concurrency": None,
            "min_pollers": None,
            "max_pollers": None,
        }
        with pytest.raises(ValueError, match=words):
            check_scaling("Orders", **{**kinds, **scaling})

    @pytest.mark.parametrize(
        "scaling",
        [
            {"max_concurrency": 5, "min_pollers": None, "max_pollers": None},
            {"max_concurrency": None, "min_pollers": 2, "max_pollers": None},
            {"max_concurrency": None, "min_pollers": None, "max_pollers": 2000},
            {"max_concurrency": None, "min_pollers": None, "max_pollers": None},
        ],
    )
    def test_one_kind_is_accepted(self, scaling: dict[str, int | None]) -> None:
        check_scaling("Orders", **scaling)


class TestSettings:
    def test_pollers_replace_the_stack_wide_max_concurrency(self) -> None:
        context = {**POLLERS, "maxConcurrency": 7}
        settings = Settings.from_context(context.get)
        orders = resolve(_spec("Orders"), settings)
        assert (orders.min_pollers, orders.max_pollers, orders.max_concurrency) == (2, 20, None)
        payments = resolve(_spec("Payments"), settings)
        assert (payments.min_pollers, payments.max_pollers, payments.max_concurrency) == (
            None,
            None,
            7,
        )

    def test_both_for_one_consumer_is_refused(self) -> None:
        context = {"consumers": {"Orders": {"maxPollers": 10, "maxConcurrency": 5}}}
        settings = Settings.from_context(context.get)
        with pytest.raises(ValueError, match=r"consumers\.Orders: provisioned pollers"):
            resolve(_spec("Orders"), settings)

    def test_limits_are_checked_per_key(self) -> None:
        context = {"consumers": {"Orders": {"minPollers": 1}}}
        settings = Settings.from_context(context.get)
        with pytest.raises(ValueError, match=r"consumers.Orders.minPollers.*outside 2..200"):
            resolve(_spec("Orders"), settings)


def test_the_construct_refuses_both() -> None:
    stack = Stack(App(), "Scaling")
    with pytest.raises(ValueError, match="cannot be combined"):
        IdempotentConsumer(
            stack,
            "Orders",
            code=lambda_.Code.from_inline("def handle(event, context): pass"),
            table=IdempotencyTable(stack, "Table"),
            layer=ExactlyOnceLayer(stack, "Layer"),
            max_concurrency=10,
            max_pollers=50,
        )


def queue_mappings(synth: Synth) -> dict[str, dict[str, Any]]:
    """The SQS consumers' mappings (a stream's mapping scales by shard, not by concurrency)."""
    return {
        logical_id: mapping
        for logical_id, mapping in synth.resources(ESM).items()
        if synth.template["Resources"][ref_id(mapping["Properties"]["EventSourceArn"])]["Type"]
        == "AWS::SQS::Queue"
    }


def test_the_default_is_max_concurrency_5_everywhere(default_synth: Synth) -> None:
    mappings = queue_mappings(default_synth)
    assert len(mappings) == len(CONSUMERS)
    for logical_id, mapping in mappings.items():
        props = mapping["Properties"]
        assert props["ScalingConfig"] == {"MaximumConcurrency": 5}, logical_id
        assert "ProvisionedPollerConfig" not in props, logical_id


def test_a_consumer_with_pollers_gets_provisioned_mode_alone(pollers_synth: Synth) -> None:
    orders = pollers_synth.props(ESM, "OrdersEventSourceMapping")
    assert orders["ProvisionedPollerConfig"] == {"MinimumPollers": 2, "MaximumPollers": 20}
    assert "ScalingConfig" not in orders
    others = {k: v for k, v in queue_mappings(pollers_synth).items() if not k.startswith("Orders")}
    assert len(others) == len(CONSUMERS) - 1
    for logical_id, mapping in others.items():
        assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 5}, logical_id
        assert "ProvisionedPollerConfig" not in mapping["Properties"], logical_id
