"""`invoke NAME` finds the function's code in the app's cloud assembly, whatever the app (issue
26: every eonce command works on any CDK app built with the constructs). It used to import this
repository's `infra/` registries and fall back on its `functions/<name>` layout, so another
app's function ran this repository's code, or none.

The order: `--source DIR`; else the assembly the local stack `eonce up` serves was deployed from
(kept in its state folder); else the current folder's `cdk.out`, as `cdk synth` leaves it (the
`--stack` one when it holds several stacks); else one error line. The app here is synthesized
in-process with the constructs; its entry points' ids differ from their code folders' names
(`Invoices` runs `src/billing`), so only the assembly can name the folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from exactly_once_ops.local_state import StateLock, StatePaths, UpState, utc_now
from exactly_once_ops.sample_events import sqs_event
from local_aws.ports import free_port
from tests.cli.support import REGION, Invoke

EVENTS = Path(__file__).resolve().parents[2] / "events"
LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:other:1"
STACK = "shop-local"

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")

# folder -> (module, function, answer): each handler prints whose code it is and where it ran
HANDLERS: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "billing": ("billing", "consume", {"batchItemFailures": []}),
    "counting": ("tally", "count", None),
    "refund_api": ("refunds", "serve", {"statusCode": 200, "body": "{}"}),
}


def write_code(root: Path, build: str) -> None:
    for folder, (module, function, answer) in HANDLERS.items():
        (root / folder).mkdir(parents=True)
        (root / folder / f"{module}.py").write_text(
            "import json, os\n"
            f"def {function}(event, context):\n"
            f"    print('RAN', {folder!r}, {build!r}, os.path.dirname(os.path.abspath(__file__)))\n"
            f"    return json.loads({json.dumps(json.dumps(answer))})\n"
        )


def synthesize(
    outdir: Path, code_root: Path, build: str, stacks: tuple[str, ...] = ("Shop",)
) -> Path:
    """Another app, built with the constructs, into `outdir`: per stack an `Invoices` consumer
    (code `billing/`), a `Tally` subscriber (`counting/`) and a `Refunds` API (`refund_api/`);
    its code says which build and stack it is ("synthesized-Shop"), so a run says which
    assembly and stack it came from."""
    app = App(outdir=str(outdir))
    for name in stacks:  # the first is `shop-local` (artifact id != stack name), then its own
        write_code(code_root / name, f"{build}-{name}")

        def code(folder: str, name: str = name) -> lambda_.Code:
            return lambda_.Code.from_asset(str(code_root / name / folder))

        stack = Stack(app, name, stack_name=STACK if name == stacks[0] else name)
        shared: dict[str, Any] = {
            "table": IdempotencyTable(stack, "Records"),
            "layer": lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN),
        }
        IdempotentConsumer(
            stack, "Invoices", code=code("billing"), handler="billing.consume", **shared
        )
        topic = IdempotentTopic(stack, "Billing")
        IdempotentSubscriber(
            stack,
            "Tally",
            topic=topic.topic,
            code=code("counting"),
            handler="tally.count",
            **shared,
        )
        IdempotentHttpApi(
            stack,
            "Refunds",
            code=code("refund_api"),
            handler="refunds.serve",
            routes=[("POST", "/refunds")],
            **shared,
        )
    app.synth()
    return outdir


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder outside the repository, and a state folder with no stack up."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("EONCE_STATE_DIR", str(tmp_path / "state"))
    return folder


@pytest.fixture
def synthesized(here: Path, tmp_path: Path) -> Path:
    """`cdk synth` was run here: the app's assembly is ./cdk.out."""
    return synthesize(here / "cdk.out", tmp_path / "src", "synthesized")


def sqs_file(tmp_path: Path) -> str:
    path = tmp_path / "sqs.json"
    path.write_text(json.dumps(sqs_event(['{"invoice": 1}'])), encoding="utf-8")
    return str(path)


def ran(output: str) -> tuple[str, str, Path]:
    """(folder, build, where) of the handler's one RAN line."""
    (line,) = [x for x in output.splitlines() if x.startswith("RAN ")]
    _, folder, build, where = line.split(" ", 3)
    return folder, build, Path(where)


def invoke(cli: Invoke, name: str, event: str, *options: str) -> Any:
    return cli(
        "invoke", name, "--no-from-stack", "-e", event, "--env", "IDEMPOTENCY_TABLE=t", *options
    )


@pytest.mark.parametrize(
    ("name", "event", "folder"),
    [
        ("Invoices", "sqs", "billing"),
        ("invoices", "sqs", "billing"),
        ("TALLY", str(EVENTS / "sns-sale.json"), "counting"),
        ("refunds", str(EVENTS / "api-payment-http-api.json"), "refund_api"),
    ],
    ids=["consumer", "any-case", "subscriber", "api"],
)
def test_cdk_out_here_names_the_code_folder_of_an_entry_point(
    cli: Invoke, synthesized: Path, tmp_path: Path, name: str, event: str, folder: str
) -> None:
    """Before: `Invoices` is none of this repository's registries and there is no
    functions/invoices here, so invoke said "no handler source at functions/invoices"."""
    result = invoke(cli, name, sqs_file(tmp_path) if event == "sqs" else event)
    assert result.exit_code == 0, result.output
    found, build, where = ran(result.stdout)
    assert (found, build) == (folder, "synthesized-Shop")
    assert where.is_relative_to(synthesized.resolve())  # the staged copy, as Lambda runs it
    # ...a copy as of the synth, which the output says (an edit since then is not in it).
    assert "code from ./cdk.out as synthesized at" in result.output


def test_nothing_to_read_is_one_error_line(cli: Invoke, here: Path, tmp_path: Path) -> None:
    """Before: the checkout's registries gave `orders` this repository's functions/orders,
    whatever folder invoke ran in, and ran it."""
    result = invoke(cli, "orders", sqs_file(tmp_path))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: no code folder for 'orders': pass --source DIR, or run `cdk synth` here"
    ]
    assert "RAN" not in result.output


def test_a_name_the_assembly_lacks_lists_its_entry_points(
    cli: Invoke, synthesized: Path, tmp_path: Path
) -> None:
    result = invoke(cli, "invoics", sqs_file(tmp_path))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: no consumer, API or subscriber 'invoics' in stack {STACK!r}; they are: "
        "invoices, refunds, tally (did you mean 'invoices'?)"
    ]


def test_source_wins_over_the_assembly(cli: Invoke, synthesized: Path, tmp_path: Path) -> None:
    own = tmp_path / "own"
    write_code(own, "given")
    result = invoke(
        cli,
        "invoices",
        sqs_file(tmp_path),
        "--source",
        str(own / "billing"),
        "--handler",
        "billing.consume",
    )
    assert result.exit_code == 0, result.output
    assert ran(result.stdout) == ("billing", "given", (own / "billing").resolve())


def test_of_several_stacks_the_stack_option_picks_one(
    cli: Invoke, here: Path, tmp_path: Path
) -> None:
    assembly = synthesize(here / "cdk.out", tmp_path / "src", "synthesized", ("Shop", "Depot"))
    event = sqs_file(tmp_path)
    for stack in ("Depot", STACK, "Shop"):  # by name or artifact id
        result = invoke(cli, "invoices", event, "--stack", stack)
        assert result.exit_code == 0, result.output
        _, build, where = ran(result.stdout)
        assert build == ("synthesized-Depot" if stack == "Depot" else "synthesized-Shop")
        assert where.is_relative_to(assembly.resolve())

    unnamed = invoke(cli, "invoices", event)  # the default stack is neither of them
    assert unnamed.exit_code == 2, unnamed.output
    (line,) = unnamed.output.strip().splitlines()
    assert line.startswith("error: no code folder for 'invoices': ")
    assert "'Depot', 'shop-local'" in line
    assert "--stack" in line


@pytest.fixture
def served(here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A local stack `eonce up` serves from the state folder (this process holds its lock),
    deployed from an assembly of the app built as "served"; the shell names no target."""
    for name in list(os.environ):
        if name.startswith(("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY", "AWS_SECRET", "AWS_SESSION")):
            monkeypatch.delenv(name)
    paths = StatePaths(tmp_path / "state")
    assembly = synthesize(
        paths.assemblies / "cdk.out.local-x" / "assembly", tmp_path / "served-src", "served"
    )
    endpoint = f"http://127.0.0.1:{free_port()}"  # never called: --no-from-stack
    with StateLock(paths):
        paths.write_state(
            UpState(
                pid=os.getpid(),
                stack=STACK,
                region=REGION,
                endpoint_url=endpoint,
                dynamodb_endpoint_url=endpoint,
                environment={  # what `eonce env` prints (the endpoint is added by the test)
                    "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing",
                    "EONCE_STACK": STACK,
                },
                outputs={},
                logs={},
                workers=1,
                started_at=utc_now(),
            )
        )
        yield assembly


def test_the_served_stacks_assembly_names_the_code_folder(
    cli: Invoke, served: Path, tmp_path: Path
) -> None:
    """No cdk.out here: the served stack's own assembly has the code."""
    result = invoke(cli, "invoices", sqs_file(tmp_path))
    assert result.exit_code == 0, result.output
    assert "using the local stack shop-local" in result.output
    _, build, where = ran(result.stdout)
    assert build == "served-Shop"
    assert where.is_relative_to(served.resolve())


def test_the_served_stack_named_by_its_endpoint_is_the_local_stack(
    cli: Invoke, served: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After `eval "$(eonce env)"` the shell names the served stack's endpoint explicitly."""
    state = StatePaths(tmp_path / "state").read_state()
    assert state is not None
    for name, value in {**state.environment, "AWS_ENDPOINT_URL": state.endpoint_url}.items():
        monkeypatch.setenv(name, value)
    result = invoke(cli, "refunds", str(EVENTS / "api-payment-http-api.json"))
    assert result.exit_code == 0, result.output
    assert "using the local stack" not in result.output  # named, not found by itself
    assert ran(result.stdout)[:2] == ("refund_api", "served-Shop")


def test_the_served_stack_wins_over_cdk_out_here(
    cli: Invoke, served: Path, here: Path, tmp_path: Path
) -> None:
    """What runs locally is what was deployed, not what was synthesized since."""
    synthesize(here / "cdk.out", tmp_path / "src", "synthesized")
    result = invoke(cli, "tally", str(EVENTS / "sns-sale.json"))
    assert result.exit_code == 0, result.output
    assert ran(result.stdout)[:2] == ("counting", "served-Shop")
    assert "code from ./cdk.out" not in result.output


def test_up_json_names_the_served_assembly(cli: Invoke, served: Path, tmp_path: Path) -> None:
    """`up` records the assembly it deployed from (up.json's assembly_dir): that one runs, not
    whatever else the state folder holds."""
    paths = StatePaths(tmp_path / "state")
    recorded = synthesize(tmp_path / "elsewhere" / "assembly", tmp_path / "rec-src", "recorded")
    state = paths.read_state()
    assert state is not None
    paths.write_state(dataclasses.replace(state, assembly_dir=str(recorded)))
    result = invoke(cli, "invoices", sqs_file(tmp_path))
    assert result.exit_code == 0, result.output
    assert ran(result.stdout)[:2] == ("billing", "recorded-Shop")
