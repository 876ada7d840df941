"""Context parsing, per-consumer resolution and the consumer registry (no CDK needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from exactly_once_cdk.consumer_rules import queue_name
from infra.consumers import CONSUMERS, ROOT, by_id
from infra.settings import OVERRIDE_KEYS, Settings, resolve


def settings(**context: Any) -> Settings:
    return Settings.from_context(context.get)


class TestRegistry:
    def test_two_consumers_with_unique_ids_and_scopes(self) -> None:
        assert [c.id for c in CONSUMERS] == ["Orders", "Payments"]
        assert len({c.scope for c in CONSUMERS}) == len(CONSUMERS)

    def test_orders_is_standard_and_payments_is_fifo_without_takeover(self) -> None:
        orders, payments = by_id("Orders"), by_id("Payments")
        assert (orders.fifo, orders.block_expired_leases) == (False, False)
        assert (payments.fifo, payments.block_expired_leases) == (True, True)
        assert {orders.handler, payments.handler} == {"handler.handle"}
        assert orders.source_path == ROOT / "functions" / "orders"

    def test_queue_names(self) -> None:
        assert queue_name("S-Orders", fifo=False) == "S-Orders"
        assert queue_name("S-Payments-dlq", fifo=True) == "S-Payments-dlq.fifo"
        with pytest.raises(ValueError, match="over 80 characters"):
            queue_name("S" * 63 + "-Payments-dlq", fifo=True)

    def test_unknown_id_names_the_known_ones(self) -> None:
        with pytest.raises(KeyError, match="Orders"):
            by_id("Nope")

    def test_registry_imports_without_cdk(self) -> None:
        """The local poller imports it; it must not pay for (or need) jsii."""
        code = "import sys, infra.consumers, infra.settings; print('aws_cdk' in sys.modules)"
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "False"


class TestSettings:
    def test_defaults_match_cdk_json(self) -> None:
        context = json.loads((ROOT / "cdk.json").read_text())["context"]
        assert Settings.from_context(context.get) == replace(
            Settings(), alarm_email=None, consumer_overrides={"Orders": {}, "Payments": {}}
        )

    def test_cli_strings_are_parsed(self) -> None:
        s = settings(
            xray="true",
            localStack="1",
            batchSize="25",
            stage="prod",
            alarmEmail="a@b.example",
            account="123456789012",
            region="eu-west-1",
            warmReadUnitsPerSecond="12000",
        )
        assert (s.xray, s.local_stack, s.batch_size, s.is_prod) == (True, True, 25, True)
        assert s.alarm_email == "a@b.example"
        assert (s.account, s.region) == ("123456789012", "eu-west-1")
        assert (s.warm_read_units_per_second, s.warm_write_units_per_second) == (12_000, None)


class TestProductionTarget:
    """A prod stage is a stack of its own, bound to an explicit account and region."""

    TARGET: ClassVar[dict[str, str]] = {"account": "123456789012", "region": "eu-west-1"}

    def test_prod_is_named_apart_and_dev_keeps_the_bare_name(self) -> None:
        assert settings().deployed_stack_name == "ExactlyOnceSqs"
        assert settings(stage="staging").deployed_stack_name == "ExactlyOnceSqs"
        prod = settings(stage="prod", **self.TARGET)
        assert prod.deployed_stack_name == "ExactlyOnceSqs-prod"
        assert settings(
            stage="production", stackName="Shop", **self.TARGET
        ).deployed_stack_name == ("Shop-production")

    @pytest.mark.parametrize(
        "target", [{}, {"account": "123456789012"}, {"region": "eu-west-1"}, {"account": ""}]
    )
    def test_prod_without_account_and_region_is_refused(self, target: dict[str, str]) -> None:
        with pytest.raises(ValueError, match=r"-c account=<12-digit account id> -c region"):
            settings(stage="prod", **target)

    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("account", "12345", "expected 12 digits"),
            ("account", "12345678901a", "expected 12 digits"),
            ("region", "Europe", "expected a region"),
        ],
    )
    def test_malformed_targets_are_refused(self, key: str, value: str, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            settings(stage="prod", **{**self.TARGET, key: value})

    def test_dev_may_be_bound_too_and_needs_nothing(self) -> None:
        assert (settings().account, settings().region) == (None, None)
        assert settings(region="us-east-1").region == "us-east-1"

    def test_a_name_cloudformation_refuses_is_refused(self) -> None:
        with pytest.raises(ValueError, match="letters, digits and hyphens"):
            settings(stackName="exactly_once")

    def test_consumer_overrides_may_come_as_json_text(self) -> None:
        s = settings(consumers='{"Orders": {"batchSize": 3}}')
        assert resolve(by_id("Orders"), s).batch_size == 3

    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("batchSize", "ten", "expected an integer"),
            ("batchSize", 0, "outside 1..10000"),
            ("maxConcurrency", 1, "outside 2..1000"),
            ("functionTimeoutSeconds", 901, "outside 1..900"),
            ("xray", "maybe", "expected true/false"),
            ("logRetentionDays", 8, "not in"),
            ("consumers", {"Orders": {"batchsize": 3}}, "unknown keys"),
            ("consumers", "[1]", "expected an object"),
            ("store", "mysql", "expected one of dynamodb, postgres"),
            ("warmReadUnitsPerSecond", 100, "outside 12000.."),
            ("warmWriteUnitsPerSecond", "many", "expected an integer"),
            ("lockMonitorIntervalMinutes", 721, "outside 1..720"),
        ],
    )
    def test_invalid_values_are_refused(self, key: str, value: Any, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            settings(**{key: value})

    def test_store_defaults_to_dynamodb_and_takes_postgres_as_text(self) -> None:
        assert settings().store == "dynamodb"
        assert settings(store=" PostgreS ").store == "postgres"  # as `-c store=...` passes it

    def test_postgres_is_refused_for_the_local_emulator(self) -> None:
        """moto has neither Aurora nor RDS Proxy: a local deploy would quietly be another store."""
        with pytest.raises(ValueError, match="postgres cannot be deployed into the local emulator"):
            settings(store="postgres", localStack="true")
        assert settings(store="dynamodb", localStack="true").local_stack is True


class TestResolve:
    def test_precedence_context_consumer_over_registry_over_global(self) -> None:
        spec = replace(by_id("Orders"), batch_size=7, timeout_seconds=40)
        s = settings(batchSize=20, batchingWindowSeconds=2, consumers={"Orders": {"batchSize": 4}})
        config = resolve(spec, s)
        assert config.batch_size == 4  # per-consumer context wins
        assert config.timeout_seconds == 40  # then the registry
        assert config.batching_window_seconds == 2  # then the global setting

    def test_every_override_key_maps_to_a_field(self) -> None:
        overrides = {
            "functionTimeoutSeconds": 11,
            "memorySize": 512,
            "batchSize": 12,
            "batchingWindowSeconds": 3,
            "maxConcurrency": 14,
            "maxReceiveCount": 15,
            "leaseMarginSeconds": 16,
        }
        pollers = {"minPollers": 3, "maxPollers": 30}  # instead of maxConcurrency, never with it
        assert set(overrides) | set(pollers) == set(OVERRIDE_KEYS)
        config = resolve(by_id("Orders"), settings(consumers={"Orders": overrides}))
        assert [getattr(config, OVERRIDE_KEYS[k]) for k in overrides] == list(overrides.values())
        config = resolve(by_id("Orders"), settings(consumers={"Orders": pollers}))
        assert [getattr(config, OVERRIDE_KEYS[k]) for k in pollers] == list(pollers.values())

    def test_visibility_timeout_is_six_timeouts_plus_the_window(self) -> None:
        config = resolve(
            by_id("Orders"), settings(functionTimeoutSeconds=45, batchingWindowSeconds=7)
        )
        assert config.visibility_timeout_seconds == 6 * 45 + 7

    def test_fifo_ignores_the_global_window_but_refuses_its_own(self) -> None:
        payments = by_id("Payments")
        assert resolve(payments, settings(batchingWindowSeconds=5)).batching_window_seconds == 0
        with pytest.raises(ValueError, match="FIFO queues have no batching window"):
            resolve(payments, settings(consumers={"Payments": {"batchingWindowSeconds": 5}}))

    def test_fifo_batch_limit(self) -> None:
        with pytest.raises(ValueError, match="at most 10"):
            resolve(by_id("Payments"), settings(batchSize=11, batchingWindowSeconds=1))

    def test_large_batches_need_a_window(self) -> None:
        with pytest.raises(ValueError, match="batching window of 1 s"):
            resolve(by_id("Orders"), settings(batchSize=100))
