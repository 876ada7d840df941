"""A CDK app folder deployed by a stand-in CDK CLI: `local_deploy.deploy` runs a script of the
test's in place of `cdk deploy`, with nothing to upload, so a test sees exactly what the local
deploy hands the CLI (its environment, its arguments) and what it makes of the CLI's output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from local_aws import local_deploy
from local_aws.app_source import AppSource


def fake_cdk_app(root: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> AppSource:
    """An app in `root/app` whose CDK CLI is `script` (Python, run by this interpreter)."""
    cdk = root / "cdk"
    cdk.write_text(f"#!{sys.executable}\n{script}")
    cdk.chmod(0o755)
    app = root / "app"
    app.mkdir()
    (app / "cdk.json").write_text(json.dumps({"app": "python app.py"}))
    monkeypatch.setattr(local_deploy, "find_cdk", lambda folder: cdk)
    monkeypatch.setattr(local_deploy, "ensure_assets_bucket", lambda endpoint: None)
    return AppSource(app)
