"""`invoke NAME` (and `replay SUBSCRIBER`'s local run) runs a function whose handler imports
what only the app's own layer holds, as the local stack's workers do (EONCE_LAYER_PATHS) and
Lambda does (/opt/python).

Before, both found the function's code folder in the assembly but not its layers: the same
handler the served stack runs failed there with "cannot load the handler ... No module named".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from exactly_once_cli.replay import _local_invoker
from exactly_once_ops.sample_events import sqs_event
from exactly_once_ops.targets import AwsTarget
from tests.cli.support import Invoke
from tests.layered_app import synthesize

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")


def synthesize_app(root: Path, outdir: Path) -> None:
    handler = (
        "import invoke_layer_dep\n\n"
        "def handle(event, context):\n"
        "    print('RAN', invoke_layer_dep.WHO)\n"
        "    return {'batchItemFailures': []}\n"
    )
    layers = {"Deps": {"python/invoke_layer_dep.py": "WHO = 'the-layer'\n"}}
    synthesize(root, handler, layers, outdir)


@pytest.fixture
def synthesized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cdk synth` was run in the working folder (outside the repository; no stack is up)."""
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("EONCE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "invoke_layer_dep", raising=False)
    synthesize_app(tmp_path / "app", here / "cdk.out")


@pytest.mark.usefixtures("synthesized")
def test_invoke_puts_the_apps_own_layer_on_the_path(cli: Invoke, tmp_path: Path) -> None:
    event = tmp_path / "sqs.json"
    event.write_text(json.dumps(sqs_event(['{"id": 1}'])), encoding="utf-8")
    result = cli(
        "invoke", "pay", "--no-from-stack", "-e", str(event), "--env", "IDEMPOTENCY_TABLE=t"
    )
    assert result.exit_code == 0, result.output
    assert "RAN the-layer" in result.stdout


@pytest.mark.usefixtures("synthesized")
def test_replays_local_run_puts_the_apps_own_layer_on_the_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs = {"LocalDynamoDbEndpoint": "http://127.0.0.1:9"}  # never called
    invoker = _local_invoker(AwsTarget(region="us-east-1"), outputs, "Shop", "pay", {}, None, None)
    invoker.handler(sqs_event(['{"id": 1}']), None)
    assert "RAN the-layer" in capsys.readouterr().out
