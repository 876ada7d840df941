"""A deployed CDK app's model read from its cloud assembly: the emulator's only source of what
to run, and of the code folders it runs.

manifest.json names each stack's template; a stack inside a `Stage` is listed in the nested
assembly its stage made (`assembly-<Stage>/`), read as well. The template is read by
`exactly_once_ops.app_template` (entry points, wiring, topics, tables), here with the assembly
it came from, so each function's code is its staged asset folder (`aws:asset:path`, else the
asset manifest's entry for its S3 key): the assembly must outlive whoever runs the code. The
physical ids come from CloudFormation (`DeployedApp.bind`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly_once_ops.app_model import AppModelError, DeployedApp
from exactly_once_ops.app_template import read_template

STACK_ARTIFACT = "aws:cloudformation:stack"
ASSET_MANIFEST_ARTIFACT = "cdk:asset-manifest"
NESTED_ASSEMBLY_ARTIFACT = "cdk:cloud-assembly"  # a Stage's own assembly, in a subfolder


def read_assembly(assembly_dir: Path, stack_name: str | None = None) -> DeployedApp:
    """The app's model from a cloud assembly; `stack_name` picks a stack (by its CloudFormation
    name, artifact id or construct path, "Stage/Stack") when the assembly has more than one.
    Stacks inside a `Stage` are in nested assemblies (`assembly-<Stage>/`), read as well."""
    assembly_dir = assembly_dir.resolve()
    stacks = list(_stack_artifacts(assembly_dir))
    chosen = [
        found
        for found in stacks
        if stack_name is None
        or stack_name in (found.artifact_id, found.name, found.artifact.get("displayName"))
    ]
    if len(chosen) != 1:
        wanted = "one stack" if stack_name is None else f"the stack {stack_name!r}"
        raise AppModelError(
            f"{assembly_dir} has {len(chosen)} matches for {wanted}; "
            f"stacks: {sorted(found.name for found in stacks)}"
        )
    (found,) = chosen
    template = json.loads(
        (found.directory / found.artifact["properties"]["templateFile"]).read_text()
    )
    return read_template(
        template,
        stack_name=found.name,
        assembly_dir=found.directory,
        assets=_asset_paths(found.directory, found.artifacts, found.artifact),
    )


@dataclass(frozen=True)
class _StackArtifact:
    directory: Path  # the (nested) assembly whose manifest lists it: its paths are relative here
    artifacts: Mapping[str, Any]  # that manifest's artifacts (its asset manifests among them)
    artifact_id: str
    artifact: Mapping[str, Any]

    @property
    def name(self) -> str:
        return _stack_name(self.artifact_id, self.artifact)


def _stack_artifacts(directory: Path) -> Iterable[_StackArtifact]:
    """Every stack artifact of the assembly and of the nested assemblies its stages made."""
    artifacts: Mapping[str, Any] = json.loads((directory / "manifest.json").read_text()).get(
        "artifacts", {}
    )
    for artifact_id, artifact in artifacts.items():
        if artifact.get("type") == STACK_ARTIFACT:
            yield _StackArtifact(directory, artifacts, artifact_id, artifact)
        elif artifact.get("type") == NESTED_ASSEMBLY_ARTIFACT:
            nested = artifact.get("properties", {}).get("directoryName")
            if nested:
                yield from _stack_artifacts(directory / str(nested))


def _stack_name(artifact_id: str, artifact: Mapping[str, Any]) -> str:
    return str(artifact.get("properties", {}).get("stackName") or artifact_id)


def _asset_paths(
    assembly_dir: Path, artifacts: Mapping[str, Any], stack: Mapping[str, Any]
) -> dict[str, str]:
    """Object key -> staged folder, from the stack's asset manifests (the S3 keys the template
    names, for a template written without asset metadata)."""
    paths: dict[str, str] = {}
    for dependency in stack.get("dependencies", []):
        artifact = artifacts.get(dependency, {})
        if artifact.get("type") != ASSET_MANIFEST_ARTIFACT:
            continue
        manifest = json.loads((assembly_dir / artifact["properties"]["file"]).read_text())
        for asset in manifest.get("files", {}).values():
            for destination in asset.get("destinations", {}).values():
                paths[str(destination["objectKey"])] = str(asset["source"]["path"])
    return paths
