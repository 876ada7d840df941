"""Where a local deploy puts its cloud assembly: under the caller's work folder when given (a
served stack's state folder, which `down` removes), removed again when the deploy fails."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from local_aws import local_deploy


def fake_cdk(returncode: int) -> object:
    """Stands in for `cdk deploy`: writes the outputs file it is given, as the CLI would."""

    def run(cmd: Sequence[str], *, env: Mapping[str, str], timeout_s: float, cwd: Path) -> object:
        outputs = next(a.split("=", 1)[1] for a in cmd if a.startswith("--outputs-file="))
        assembly = Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("--output=")))
        assembly.mkdir(parents=True)
        Path(outputs).write_text(json.dumps({"Shop": {"QueueUrl": "q"}}))
        return subprocess.CompletedProcess(list(cmd), returncode, "", "it broke")

    return run


@pytest.fixture(autouse=True)
def no_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_deploy, "ensure_assets_bucket", lambda endpoint: None)


def test_the_assembly_is_made_under_the_work_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_deploy, "run_in_own_group", fake_cdk(0))
    work = tmp_path / "state" / "assemblies"
    deployment = local_deploy.deploy("http://localhost:1", work_dir=work)
    assert deployment.stack_name == "Shop"
    assert deployment.assembly_dir.is_dir()
    assert work in deployment.assembly_dir.parents
    deployment.remove()
    assert list(work.iterdir()) == []


def test_a_failed_deploy_leaves_nothing_in_the_work_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_deploy, "run_in_own_group", fake_cdk(1))
    work = tmp_path / "assemblies"
    with pytest.raises(local_deploy.DeployError, match="it broke"):
        local_deploy.deploy("http://localhost:1", work_dir=work)
    assert list(work.iterdir()) == []
