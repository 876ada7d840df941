"""A local function process never inherits the shell's AWS profile.

The local stack hides the config files from its processes (AWS_CONFIG_FILE=/dev/null: they
must never reach a real account) and gives them moto's keys. A shell with `export
AWS_PROFILE=prod`, the usual way of working with several accounts, passed that variable on to
every worker, and botocore refuses a named profile it cannot find even when keys are given:
each worker's first `boto3.client(...)` raised ProfileNotFound, so with a profile in the shell
`eonce up` ran no message. Lambda gives a function no profile either.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
import pytest

from local_aws import local_deploy
from local_aws.moto_server import aws_env
from local_aws.store_environment import apply_function_environment
from tests.local.fake_cdk import fake_cdk_app

DEPLOYED = {"IDEMPOTENCY_TABLE": "idem", "CONSUMER_SCOPE": "orders"}


@pytest.mark.parametrize("variable", ["AWS_PROFILE", "AWS_DEFAULT_PROFILE"])
def test_the_shells_profile_does_not_reach_the_function(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {variable: "prod", "PATH": "/bin"}
    environ.update(aws_env("http://localhost:9"))  # as a worker process sets its own
    apply_function_environment(environ, DEPLOYED)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    # What a worker does first (before: botocore.exceptions.ProfileNotFound).
    client = boto3.session.Session().client("sqs")
    assert client.meta.endpoint_url == "http://localhost:9"
    assert variable not in environ
    assert environ["PATH"] == "/bin"


FAKE_CDK = """\
import json, os, sys
for arg in sys.argv[1:]:
    if arg.startswith("--outputs-file="):
        with open(arg.split("=", 1)[1], "w") as out:
            json.dump({"Shop": {}}, out)
        with open(os.environ["SEEN"], "w") as seen:
            json.dump({k: v for k, v in os.environ.items() if k.startswith("AWS_")}, seen)
"""


def test_the_cdk_cli_and_the_apps_synth_get_no_profile_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CDK CLI runs the app (`python app.py`) with its environment: an app that asks boto3
    something at synth would meet the same ProfileNotFound."""
    app = fake_cdk_app(tmp_path, FAKE_CDK, monkeypatch)
    monkeypatch.setenv("AWS_PROFILE", "prod")
    monkeypatch.setenv("AWS_DEFAULT_PROFILE", "prod")
    monkeypatch.setenv("SEEN", str(tmp_path / "seen.json"))
    deployment = local_deploy.deploy("http://127.0.0.1:9", app=app, work_dir=tmp_path)
    deployment.remove()
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["AWS_CONFIG_FILE"] == os.devnull  # the config files stay hidden...
    assert "AWS_PROFILE" not in seen  # ...so no profile can be named
    assert "AWS_DEFAULT_PROFILE" not in seen
