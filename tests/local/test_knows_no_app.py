"""The local stack learns what to run from a deployed app's cloud assembly, whatever the app.

An app unlike this repository's (other construct ids, scopes, handlers and code folders, two
topics, APIs with and without API Gateway, subscribers with and without their subscription) is
synthesized in-process with the `exactly_once_cdk` constructs; `local_aws.cloud_assembly` must
read its consumers, APIs, topics and subscribers from the assembly alone. The functions' code
runs from the assembly's staged folders, so the local stack keeps it until it stops. (That no
`local_aws` module imports this repository's app is checked in
tests/packaging/test_import_rules.py.)
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import (
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentHttpApi,
    IdempotentSubscriber,
    IdempotentTopic,
)
from exactly_once_cdk.outputs import ENTRY_POINT_METADATA
from exactly_once_ops.app_model import AppModelError, DeployedApp, Function
from exactly_once_ops.app_template import read_template
from local_aws.cloud_assembly import read_assembly
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.local_deploy import Deployment
from local_aws.local_stack import LocalStack
from local_aws.moto_server import MotoServer

LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:other:1"
CODE = {  # folder -> (file, text): each function's code says whose it is
    "invoices": ("billing.py", "WHO = 'invoices'\n"),
    "audit": ("handler.py", "WHO = 'audit'\n"),
    "tally": ("tally.py", "WHO = 'tally'\n"),
    "ghost": ("handler.py", "WHO = 'ghost'\n"),
    "refunds": ("refunds.py", "WHO = 'refunds'\n"),
    "quotes": ("handler.py", "WHO = 'quotes'\n"),
}


def other_app(root: Path) -> Path:
    """Synthesize the other app into `root/cdk.out`; its assembly folder."""
    for folder, (name, text) in CODE.items():
        (root / "src" / folder).mkdir(parents=True)
        (root / "src" / folder / name).write_text(text)

    def code(folder: str) -> lambda_.Code:
        return lambda_.Code.from_asset(str(root / "src" / folder))

    app = App(outdir=str(root / "cdk.out"))
    stack = Stack(app, "ShopStack", stack_name="shop-local")  # artifact id != stack name
    table = IdempotencyTable(stack, "Records")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN)
    shared: dict[str, Any] = {"table": table, "layer": layer}
    invoices = IdempotentConsumer(
        stack,
        "Invoices",
        code=code("invoices"),
        handler="billing.consume",
        idempotency_scope="billing",
        **shared,
    )
    audit = IdempotentConsumer(stack, "Audit", code=code("audit"), **shared)
    IdempotentConsumer(stack, "Unheard", code=code("audit"), **shared)  # on no topic
    billing = IdempotentTopic(stack, "Billing")
    billing.subscribe_queue(invoices)  # an AWS::SNS::Subscription
    legacy = IdempotentTopic(stack, "Legacy")
    legacy.subscribe_queue(audit, inline=True)  # the topic's own Subscription entries
    IdempotentSubscriber(
        stack,
        "Tally",
        topic=billing.topic,
        code=code("tally"),
        handler="tally.count",
        idempotency_scope="tallies",
        retry_attempts=1,
        **shared,
    )
    IdempotentSubscriber(  # no subscription: the metadata names the topic
        stack,
        "Ghost",
        topic=legacy.topic,
        code=code("ghost"),
        retry_attempts=0,
        subscribe=False,
        **shared,
    )
    IdempotentHttpApi(  # API Gateway's routes and integration
        stack,
        "Refunds",
        code=code("refunds"),
        handler="refunds.serve",
        routes=[("POST", "/refunds"), ("put", "/refunds/{id}")],
        **shared,
    )
    IdempotentHttpApi(  # no API: the metadata lists the routes
        stack,
        "Quotes",
        code=code("quotes"),
        routes=[("post", "/quotes")],
        create_api=False,
        **shared,
    )
    app.synth()
    return root / "cdk.out"


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return other_app(tmp_path_factory.mktemp("other-app"))


@pytest.fixture(scope="module")
def model(assembly: Path) -> DeployedApp:
    return read_assembly(assembly)


def functions(model: DeployedApp) -> list[Function]:
    return [
        *(c.function for c in model.consumers),
        *(a.function for a in model.apis),
        *(s.function for s in model.subscribers),
    ]


def staged_code(source_dir: Path, assembly: Path) -> str:
    """The one file of a function's staged folder, which must be inside the assembly."""
    assert source_dir.is_relative_to(assembly.resolve())
    (only,) = [p for p in source_dir.iterdir() if p.is_file()]
    return only.read_text()


def test_the_consumers_are_the_apps(model: DeployedApp, assembly: Path) -> None:
    assert model.stack_name == "shop-local"
    found = {
        c.id: (
            c.function.handler,
            c.function.scope,
            staged_code(c.function.code_folder(), assembly),
        )
        for c in model.consumers
    }
    assert found == {
        "Invoices": ("billing.consume", "billing", CODE["invoices"][1]),
        "Audit": ("handler.handle", "audit", CODE["audit"][1]),
        "Unheard": ("handler.handle", "unheard", CODE["audit"][1]),
    }
    queues = {c.id: c.queue for c in model.consumers}
    assert queues["Invoices"].startswith("InvoicesQueue")
    assert queues["Audit"].startswith("AuditQueue")


def test_the_apis_and_their_routes(model: DeployedApp, assembly: Path) -> None:
    found = {
        a.id: (a.routes, a.function.handler, a.function.scope)
        for a in model.apis
        if staged_code(a.function.code_folder(), assembly) == CODE[a.id.lower()][1]
    }
    assert found == {
        "Refunds": ((("POST", "/refunds"), ("PUT", "/refunds/{id}")), "refunds.serve", "refunds"),
        "Quotes": ((("POST", "/quotes"),), "handler.handle", "quotes"),
    }


def test_the_topics_fan_out_to_their_queues_and_subscribers(
    model: DeployedApp, assembly: Path
) -> None:
    topics = {t.id: (t.queues, t.subscribers) for t in model.topics}
    assert topics == {"Billing": (("Invoices",), ("Tally",)), "Legacy": (("Audit",), ("Ghost",))}
    subscribers = {
        s.id: (
            model.topic_of(s).id,
            s.retry_attempts,
            s.function.handler,
            s.function.scope,
            staged_code(s.function.code_folder(), assembly),
        )
        for s in model.subscribers
    }
    assert subscribers == {
        "Tally": ("Billing", 1, "tally.count", "tallies", CODE["tally"][1]),
        "Ghost": ("Legacy", 0, "handler.handle", "ghost", CODE["ghost"][1]),
    }
    destinations = {s.id: s.failure_destination or "" for s in model.subscribers}
    assert destinations["Tally"].startswith("TallyDeadLetterQueue")
    assert destinations["Ghost"].startswith("GhostDeadLetterQueue")
    assert model.topic("Legacy").logical_id.startswith("LegacyTopic")
    with pytest.raises(KeyError, match="no topic 'Sales'; known: \\['Billing', 'Legacy'\\]"):
        model.topic("Sales")


def test_a_stack_is_picked_by_name_or_artifact_id(assembly: Path) -> None:
    assert read_assembly(assembly, "ShopStack").stack_name == "shop-local"
    assert read_assembly(assembly, "shop-local").stack_name == "shop-local"
    with pytest.raises(AppModelError, match="0 matches for the stack 'ExactlyOnceSqs'"):
        read_assembly(assembly, "ExactlyOnceSqs")


def test_the_code_folder_comes_from_the_asset_metadata_the_cli_writes(assembly: Path) -> None:
    """The CDK CLI writes `aws:asset:path` on each function (this in-process synthesis does
    not, and was read through the asset manifest): either way the same staged folder."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    template = json.loads(
        (assembly / manifest["artifacts"]["ShopStack"]["properties"]["templateFile"]).read_text()
    )
    by_manifest = read_assembly(assembly)
    staged = {f.logical_id: f.code_folder() for f in functions(by_manifest)}
    assert len(set(staged.values())) == len(CODE)  # one folder per code folder (audit twice)
    with_metadata = copy.deepcopy(template)
    for logical_id, folder in staged.items():
        metadata = with_metadata["Resources"][logical_id].setdefault("Metadata", {})
        metadata["aws:asset:path"] = folder.name  # relative to the assembly, as the CLI's
    read = read_template(with_metadata, stack_name="s", assembly_dir=assembly.resolve())
    assert {f.logical_id: f.source_dir for f in functions(read)} == staged
    with pytest.raises(AppModelError, match="no staged code folder or handler"):
        read_template(template, stack_name="s", assembly_dir=assembly, assets={})


def test_functions_no_construct_marked_are_not_entry_points(assembly: Path) -> None:
    manifest = json.loads((assembly / "manifest.json").read_text())
    template = json.loads(
        (assembly / manifest["artifacts"]["ShopStack"]["properties"]["templateFile"]).read_text()
    )
    for resource in template["Resources"].values():
        resource.get("Metadata", {}).pop(ENTRY_POINT_METADATA, None)
    bare = read_template(template, stack_name="s", assembly_dir=assembly)
    assert (bare.consumers, bare.apis, bare.subscribers, bare.topics) == ((), (), (), ())


def test_a_template_read_from_cloudformation_gives_the_same_entry_points(
    model: DeployedApp, assembly: Path
) -> None:
    """Without its cloud assembly (the template `get_template` returns, as `eonce` reads it),
    the one reader still gives every entry point, its wiring and the topics: only the code
    folders are unknown, and asking for one says why."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    template = json.loads(
        (assembly / manifest["artifacts"]["ShopStack"]["properties"]["templateFile"]).read_text()
    )
    read = read_template(template, stack_name=model.stack_name)
    assert {f.source_dir for f in functions(read)} == {None}
    assert {f.logical_id for f in functions(read)} == {f.logical_id for f in functions(model)}

    def codeless(function: Function) -> Function:
        return replace(function, source_dir=None)

    assert read.consumers == tuple(
        replace(c, function=codeless(c.function)) for c in model.consumers
    )
    assert read.apis == tuple(replace(a, function=codeless(a.function)) for a in model.apis)
    assert read.subscribers == tuple(
        replace(s, function=codeless(s.function)) for s in model.subscribers
    )
    assert (read.topics, read.tables) == (model.topics, model.tables)
    with pytest.raises(AppModelError, match=r"no code folder .*without its cloud assembly"):
        read.consumers[0].function.code_folder()


class Stopped:
    """A server stand-in for a stack whose servers are already down."""

    def stop(self) -> None:
        return None


def test_the_assembly_the_code_runs_from_lives_until_the_stack_stops(tmp_path: Path) -> None:
    temporary = tmp_path / "cdk.out.local-x"
    (temporary / "assembly" / "asset.abc").mkdir(parents=True)
    stack = LocalStack(moto=cast(MotoServer, Stopped()), dynamodb=cast(DynamoDBLocal, Stopped()))
    stack.deployment = Deployment("S", {}, temporary / "assembly", temporary)
    stack.stop()
    assert not temporary.exists()
    stack.stop()  # twice is harmless
