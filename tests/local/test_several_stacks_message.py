"""An app with several stacks (a Dev and a Prod stack, say) under `eonce up` without `--stack`:
the one line names the option that picks one.

Before: "the local stack runs one; pick it with the stackName context", which `eonce up` has no
way to give but `--stack`. The CDK CLI is a stand-in that writes the outputs file of two
stacks (nothing is deployed); the assets bucket is not made (no moto).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from local_aws import local_deploy
from tests.local.fake_cdk import fake_cdk_app

FAKE_CDK = """\
import json, sys
for arg in sys.argv[1:]:
    if arg.startswith("--outputs-file="):
        with open(arg.split("=", 1)[1], "w") as out:
            json.dump({"Dev": {}, "Prod": {}}, out)
"""


def test_several_stacks_name_the_option_that_picks_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = fake_cdk_app(tmp_path, FAKE_CDK, monkeypatch)
    with pytest.raises(local_deploy.DeployError) as caught:
        local_deploy.deploy("http://127.0.0.1:9", app=app, work_dir=tmp_path / "w")
    message = str(caught.value)
    assert message.startswith("the app deployed 2 stacks (Dev, Prod): ")
    assert "eonce up --stack NAME" in message
