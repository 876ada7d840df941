"""App shapes the deployed-app model must read right, or refuse in one clear line: a stack
inside a CDK `Stage` (its own nested assembly, `assembly-<Stage>/`), and two constructs given
the same id in different scopes (one name for two entry points).

Each app is synthesized in-process with the `exactly_once_cdk` constructs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, Stage
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from exactly_once_cdk import IdempotencyTable, IdempotentConsumer, IdempotentTopic
from exactly_once_ops.app_model import AppModelError
from local_aws.cloud_assembly import read_assembly

LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:other:1"


def code(root: Path, text: str) -> lambda_.Code:
    folder = root / "src" / text
    folder.mkdir(parents=True)
    (folder / "handler.py").write_text(f"WHO = {text!r}\n")
    return lambda_.Code.from_asset(str(folder))


def consumer(
    scope: Construct, table: IdempotencyTable, construct_id: str, root: Path, **kw: Any
) -> None:
    IdempotentConsumer(
        scope,
        construct_id,
        code=code(root, f"{scope.node.path}-{construct_id}".replace("/", "-")),
        table=table,
        layer=lambda_.LayerVersion.from_layer_version_arn(scope, f"{construct_id}Layer", LAYER_ARN),
        **kw,
    )


def test_a_stack_inside_a_stage_is_read_from_its_nested_assembly(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(Stage(app, "Dev"), "Shop")
    consumer(stack, IdempotencyTable(stack, "Records"), "Invoices", tmp_path)
    app.synth()
    assembly = tmp_path / "cdk.out"
    assert (assembly / "assembly-Dev").is_dir()  # the shape under test
    for name in (None, "Dev-Shop", "Dev/Shop"):
        model = read_assembly(assembly, name)
        assert model.stack_name == "Dev-Shop"
        (invoices,) = model.consumers
        assert invoices.id == "Invoices"
        staged = invoices.function.code_folder()
        assert staged.is_relative_to(assembly.resolve())
        assert (staged / "handler.py").read_text() == "WHO = 'Dev-Shop-Invoices'\n"
    with pytest.raises(AppModelError, match=r"0 matches for the stack 'Shop'.*\['Dev-Shop'\]"):
        read_assembly(assembly, "Shop")


def test_two_entry_points_with_one_id_are_refused_in_one_line(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Shop")
    table = IdempotencyTable(stack, "Records")
    consumer(stack, table, "Orders", tmp_path)
    consumer(Construct(stack, "Legacy"), table, "Orders", tmp_path, outputs=False)
    app.synth()
    with pytest.raises(AppModelError) as refused:
        read_assembly(tmp_path / "cdk.out")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("two entry points have the id 'Orders' (LegacyOrdersFunction")


def test_two_topics_with_one_id_are_refused(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Shop")
    IdempotentTopic(stack, "Sales", outputs=False)
    IdempotentTopic(Construct(stack, "Legacy"), "Sales", outputs=False)
    app.synth()
    with pytest.raises(AppModelError, match="two topics have the id 'Sales'"):
        read_assembly(tmp_path / "cdk.out")
