"""A production-safe stack: its own name and target, protection, tags, retained dead letters,
warm throughput. Each for the dev (default) and the prod (variant) synth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack

from infra.application import cdk_json_context, create_app
from infra.stack import PROJECT_TAG
from infra.streams import STREAMS
from infra.topics import TOPICS
from tests.infra.conftest import VARIANT_CONTEXT, Synth

QUEUE = "AWS::SQS::Queue"


def tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Properties", {}).get("Tags", [])}


class TestNameAndTarget:
    def test_dev_keeps_the_bare_name_and_no_target(self, default_synth: Synth) -> None:
        stack = default_synth.stack
        assert stack.stack_name == "ExactlyOnceSqs"  # the local stack, eonce, existing stacks
        assert Stack.of(stack).termination_protection is False
        assert stack.account.startswith("${Token")  # environment-agnostic
        names = [q["Properties"]["QueueName"] for q in default_synth.resources(QUEUE).values()]
        assert all(name.startswith("ExactlyOnceSqs-") for name in names)

    def test_prod_is_its_own_stack_in_its_own_account_and_region(
        self, variant_synth: Synth
    ) -> None:
        stack = variant_synth.stack
        assert stack.stack_name == f"{VARIANT_CONTEXT['stackName']}-prod"
        assert (stack.account, stack.region) == (
            VARIANT_CONTEXT["account"],
            VARIANT_CONTEXT["region"],
        )
        assert stack.termination_protection is True
        names = [q["Properties"]["QueueName"] for q in variant_synth.resources(QUEUE).values()]
        assert all(name.startswith("ExactlyOnceVariant-prod-") for name in names)

    def test_prod_without_a_target_does_not_synthesize(self, tmp_path: Path) -> None:
        """The forgotten flag fails loudly instead of deploying somewhere by default."""
        context = {**cdk_json_context(), "stage": "prod"}
        with pytest.raises(ValueError, match=r"-c account=<12-digit account id> -c region="):
            create_app(context, outdir=str(tmp_path))


class TestTags:
    @pytest.mark.parametrize(
        ("fixture", "stage"), [("default_synth", "dev"), ("variant_synth", "prod")]
    )
    def test_every_taggable_resource_and_the_stack(
        self, fixture: str, stage: str, request: pytest.FixtureRequest
    ) -> None:
        synth: Synth = request.getfixturevalue(fixture)
        wanted = {"Project": PROJECT_TAG, "Stage": stage, "ManagedBy": "aws-cdk"}
        assert synth.stack.tags.tag_values() == wanted  # the stack's own (CloudFormation) tags
        for type_ in ("AWS::SQS::Queue", "AWS::Lambda::Function", "AWS::DynamoDB::Table"):
            for logical_id, resource in synth.resources(type_).items():
                assert wanted.items() <= tags(resource).items(), logical_id


class TestRetention:
    def dead_letter_queues(self, synth: Synth) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in synth.resources(QUEUE).items() if "DeadLetterQueue" in k}

    def test_every_dead_letter_queue_is_counted(self, default_synth: Synth) -> None:
        from infra.consumers import CONSUMERS

        subscribers = [sub for topic in TOPICS for sub in topic.subscribers]
        assert len(self.dead_letter_queues(default_synth)) == (
            len(CONSUMERS) + len(subscribers) + len(STREAMS)
        )

    @pytest.mark.parametrize(
        ("fixture", "policy"), [("default_synth", "Delete"), ("variant_synth", "Retain")]
    )
    def test_queues_and_dead_letter_queues(
        self, fixture: str, policy: str, request: pytest.FixtureRequest
    ) -> None:
        """Prod keeps every queue, consumers' and subscribers' dead-letter queues included;
        dev deletes them with the stack."""
        synth: Synth = request.getfixturevalue(fixture)
        queues = synth.resources(QUEUE)
        assert self.dead_letter_queues(synth)
        for logical_id, queue in queues.items():
            assert (queue["DeletionPolicy"], queue["UpdateReplacePolicy"]) == (policy, policy), (
                logical_id
            )


class TestWarmThroughput:
    def test_unset_by_default(self, default_synth: Synth) -> None:
        for table in default_synth.resources("AWS::DynamoDB::Table").values():
            assert "WarmThroughput" not in table["Properties"]

    def test_from_context_on_the_idempotency_table_only(self, variant_synth: Synth) -> None:
        props = variant_synth.props("AWS::DynamoDB::Table", "TablesIdempotency")
        assert props["WarmThroughput"] == {
            "ReadUnitsPerSecond": int(VARIANT_CONTEXT["warmReadUnitsPerSecond"]),
            "WriteUnitsPerSecond": int(VARIANT_CONTEXT["warmWriteUnitsPerSecond"]),
        }
        assert "WarmThroughput" not in variant_synth.props("AWS::DynamoDB::Table", "TablesLedger")
