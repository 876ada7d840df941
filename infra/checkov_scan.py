"""`make scan`: checkov over the synthesized dev and prod templates, every finding acknowledged.

Checkov runs from its own venv (`.venv-scan`): it pins dozens of packages that would clash with
requirements-dev.txt. This module synthesizes with the project's venv, runs that checkov with
JSON output on each template, and compares its failed checks with
`infra/checkov-acknowledgments.yaml`. It fails on a finding no acknowledgment covers and on an
acknowledgment without a reason; acknowledgments that match nothing any more are reported, so
the file shrinks when the stack improves.

    .venv/bin/python -m infra.checkov_scan --checkov .venv-scan/bin/checkov
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ACKNOWLEDGMENTS = Path(__file__).resolve().parent / "checkov-acknowledgments.yaml"
# The prod stage refuses to synthesize without a target; any well-formed one does for a scan.
STAGES: dict[str, dict[str, str]] = {
    "dev": {},
    "prod": {"stage": "prod", "account": "123456789012", "region": "eu-west-1"},
}


@dataclass(frozen=True)
class Finding:
    """One failed check on one resource of one template."""

    template: str
    check_id: str
    resource: str  # checkov's "<Type>.<LogicalId>"
    name: str


@dataclass(frozen=True)
class Acknowledgment:
    """A check accepted with a reason, on every resource or on those matching `resource` (a
    shell pattern over checkov's "<Type>.<LogicalId>", since logical ids end in a hash)."""

    check_id: str
    reason: str
    resource: str | None = None

    def covers(self, finding: Finding) -> bool:
        return finding.check_id == self.check_id and (
            self.resource is None or fnmatch.fnmatchcase(finding.resource, self.resource)
        )


@dataclass(frozen=True)
class Report:
    unacknowledged: list[Finding]
    stale: list[Acknowledgment]
    acknowledged: int

    @property
    def ok(self) -> bool:
        return not self.unacknowledged


def load_acknowledgments(data: Any) -> list[Acknowledgment]:
    """From the YAML's `acknowledgments` list; an entry without a reason is an error."""
    entries = (data or {}).get("acknowledgments") or []
    found: list[Acknowledgment] = []
    for number, entry in enumerate(entries, 1):
        check_id = str(entry.get("id") or "").strip()
        reason = str(entry.get("reason") or "").strip()
        if not check_id:
            raise ValueError(f"acknowledgment {number}: no check id")
        if not reason:
            raise ValueError(f"acknowledgment {number} ({check_id}): no reason given")
        resource = entry.get("resource")
        found.append(Acknowledgment(check_id, reason, str(resource) if resource else None))
    return found


def failed_checks(template: str, output: Any) -> list[Finding]:
    """The failed checks in checkov's JSON: one report object, or a list of them (one per
    framework)."""
    reports = output if isinstance(output, list) else [output]
    return [
        Finding(template, check["check_id"], check["resource"], check.get("check_name", ""))
        for report in reports
        for check in report.get("results", {}).get("failed_checks", [])
    ]


def compare(findings: Iterable[Finding], acknowledgments: Sequence[Acknowledgment]) -> Report:
    used: set[Acknowledgment] = set()
    unacknowledged: list[Finding] = []
    acknowledged = 0
    for finding in findings:
        covering = [ack for ack in acknowledgments if ack.covers(finding)]
        used.update(covering)
        if covering:
            acknowledged += 1
        else:
            unacknowledged.append(finding)
    stale = [ack for ack in acknowledgments if ack not in used]
    return Report(unacknowledged, stale, acknowledged)


def synthesize(outdir: Path) -> dict[str, Path]:
    """Each stage's template (nag on, as `make synth`)."""
    from infra.application import cdk_json_context, create_app

    templates: dict[str, Path] = {}
    for stage, overrides in STAGES.items():
        app, stack = create_app({**cdk_json_context(), **overrides}, outdir=str(outdir / stage))
        assembly = app.synth()
        templates[stage] = Path(assembly.get_stack_artifact(stack.artifact_id).template_full_path)
    return templates


def run_checkov(checkov: str, template: Path) -> Any:
    """checkov exits 1 when any check fails; the JSON on stdout is what counts."""
    completed = subprocess.run(
        [checkov, "--quiet", "--framework", "cloudformation", "-o", "json", "-f", str(template)],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode not in (0, 1) or not completed.stdout.strip():
        raise RuntimeError(f"checkov failed ({completed.returncode}): {completed.stderr[-2000:]}")
    return json.loads(completed.stdout)


def summary(results: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{stage}: {report.get('summary', {}).get('passed', '?')} passed, "
        f"{report.get('summary', {}).get('failed', '?')} failed"
        for stage, report in results.items()
        for report in ([report] if not isinstance(report, list) else report)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--checkov", default=".venv-scan/bin/checkov")
    parser.add_argument("--acknowledgments", type=Path, default=ACKNOWLEDGMENTS)
    args = parser.parse_args(argv)
    acknowledgments = load_acknowledgments(yaml.safe_load(args.acknowledgments.read_text()))
    with tempfile.TemporaryDirectory(prefix="checkov-") as workdir:
        templates = synthesize(Path(workdir))
        results = {stage: run_checkov(args.checkov, path) for stage, path in templates.items()}
    findings = [f for stage, output in results.items() for f in failed_checks(stage, output)]
    report = compare(findings, acknowledgments)
    print(f"checkov: {summary(results)}; {report.acknowledged} acknowledged")
    for ack in report.stale:
        print(f"stale acknowledgment (matches nothing): {ack.check_id} {ack.resource or '*'}")
    for finding in report.unacknowledged:
        print(f"UNACKNOWLEDGED {finding.template}: {finding.check_id} {finding.resource}")
        print(f"    {finding.name}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
