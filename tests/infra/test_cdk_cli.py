"""`cdk synth` with the pinned CLI: cdk.json's app command, context and nag, end to end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from infra.consumers import CONSUMERS, ROOT
from infra.streams import STREAMS

CDK = ROOT / "node_modules" / ".bin" / "cdk"


def cdk_synth(outdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    cmd = [str(CDK), "synth", "--quiet", "--no-notices", f"--output={outdir}", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_cli_synth_with_cdk_json(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((tmp_path / "ExactlyOnceSqs.template.json").read_text())
    # The default synthesizer for real accounts: bootstrap-version check, mappings enabled.
    assert "CheckBootstrapVersion" in template["Rules"]
    mappings = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    assert len(mappings) == len(CONSUMERS) + len(STREAMS)  # queues, then Kinesis streams
    assert all(m["Properties"]["Enabled"] is True for m in mappings)


def test_cli_synth_refuses_bad_context(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path, "--context", "batchSize=0")
    assert result.returncode != 0
    assert "context 'batchSize': 0 is outside 1..10000" in result.stderr


def test_cli_synth_refuses_prod_without_account_and_region(tmp_path: Path) -> None:
    """`-c stage=prod` alone names no target: refused before anything is synthesized."""
    result = cdk_synth(tmp_path, "--context", "stage=prod")
    assert result.returncode != 0
    assert "-c account=<12-digit account id> -c region=<region>" in result.stderr


def test_cli_synth_refuses_postgres_for_the_local_emulator(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path, "--context", "store=postgres", "--context", "localStack=true")
    assert result.returncode != 0
    message = "context 'store': postgres cannot be deployed into the local emulator"
    (line,) = [line for line in result.stderr.splitlines() if message in line]
    assert "use store=dynamodb" in line  # the reason and the way out, on one line
