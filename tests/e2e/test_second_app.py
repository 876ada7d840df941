"""A second, hand-written app runs under `eonce up --app` (issue 26): tests/apps/second_app.

Unlike this repository's app it is a plain `Stack` with the default synthesizer, passes none of
the constructs' local-only switches, and has its own ids, scopes, handler modules and code
folders: two consumers (Invoices; Refunds, scope `refunds-v2`), a topic of its own (Billing,
fanning out to both queues and to the Audit subscriber), its own ledger (Effects) and a plain
DynamoDB table (Notices); the Invoices function imports a package vendored in its own folder.

Every command is the console script in a subprocess, run from a folder outside the repository,
as a user runs them: up, status, send (with duplicates), publish, locks, invoke, replay, down.
The verdict is exactly one execution per business key, read from the app's own tables in
DynamoDB Local; the same verdict fails on an invoice run twice with the lock off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths, UpState
from local_aws.processes import (
    ProcessId,
    descendants,
    session_members,
    stat,
    still_running,
    wait_gone,
)
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "tests" / "apps" / "second_app"
EONCE = ROOT / ".venv" / "bin" / "eonce"
WAIT_S = 240  # generous: a wait for a condition, never a timing assertion
RUN = uuid.uuid4().hex[:6]  # this run's business keys, apart from any earlier run's
SENT = 30
PUBLISHED = 10


@dataclass
class Up:
    cwd: Path  # a folder outside the repository: the app is found by --app alone
    paths: StatePaths
    state: UpState
    env: dict[str, str]
    output: str

    def eonce(self, *args: str, code: int = 0) -> str:
        result = eonce(self.cwd, self.env, *args)
        assert result.returncode == code, result.stdout + result.stderr
        return result.stdout

    def dynamodb(self) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=self.state.dynamodb_endpoint_url,
            region_name=self.state.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


def eonce(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EONCE), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    cwd = tmp_path_factory.mktemp("elsewhere")
    state_dir = tmp_path_factory.mktemp("second-app-state")
    env = {
        **os.environ,
        STATE_DIR_ENV: str(state_dir),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "COLUMNS": "200",
    }
    # No AWS settings at all (the suite's own credentials included), as in a new shell: every
    # command finds the running local stack by itself.
    for key in [k for k in env if k.startswith("AWS_") or k == "EONCE_STACK"]:
        env.pop(key)
    started = eonce(cwd, env, "up", "--app", str(APP))
    assert started.returncode == 0, started.stdout + started.stderr
    paths = StatePaths(state_dir)
    state = paths.running()
    assert state is not None, started.stdout
    try:
        yield Up(cwd, paths, state, env, started.stdout)
    finally:
        if paths.holder():  # the down test failed or did not run: leave nothing behind
            eonce(cwd, env, "down")


# --- the verdict ----------------------------------------------------------------------------


def scan(up: Up, table: str) -> list[dict[str, Any]]:
    client, items, start = up.dynamodb(), [], None
    while True:
        page = client.scan(TableName=table, **({"ExclusiveStartKey": start} if start else {}))
        items += page["Items"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def effects(items: Iterable[dict[str, Any]], scope: str, name: str) -> Counter[str]:
    """Executions per business key in an `append_effect` log: one entry per execution, its
    sort key "{scope}#{name}#<execution id>" (the bare "{scope}#{name}" is the key's mark)."""
    prefix = f"{scope}#{name}#"
    return Counter(i["pk"]["S"] for i in items if i["sk"]["S"].startswith(prefix))


def notices(items: Iterable[dict[str, Any]]) -> Counter[str]:
    """Executions per event id in the app's own Notices table (one item per execution)."""
    return Counter(i["eventId"]["S"] for i in items)


def not_once(executions: Counter[str], keys: Iterable[str]) -> dict[str, int]:
    """Each of `keys` that did not take effect exactly once, with its count (0 if never)."""
    return {key: executions[key] for key in sorted(set(keys)) if executions[key] != 1}


def sent_keys(ids_out: Path, field: str) -> list[str]:
    """The business key of every message `send`/`publish --ids-out` wrote, duplicates kept."""
    lines = ids_out.read_text().splitlines()
    return [json.loads(json.loads(line)["body"])[field] for line in lines]


# --- the run -----------------------------------------------------------------------------------


def status(up: Up) -> dict[str, dict[str, Any]]:
    document = json.loads(up.eonce("status", "--json"))
    assert document["local"]["pid"] == up.state.pid
    entries = [*document["consumers"], *document["subscribers"]]
    return {e.get("consumer") or e["subscriber"]: e for e in entries}


def test_up_runs_the_apps_own_stack(up: Up) -> None:
    assert up.state.stack == "SecondApp"
    assert "stack        SecondApp: invoices, refunds" in up.output
    assert "topics       billing" in up.output
    assert "audit run here" in up.output
    entries = status(up)
    assert sorted(entries) == ["audit", "invoices", "refunds"]
    assert (entries["invoices"]["scope"], entries["refunds"]["scope"]) == (
        "invoices",
        "refunds-v2",
    )
    assert {e["workers"]["state"] for e in entries.values()} == {"2/2 running"}
    # The app's tables, its plain Notices table too, live in DynamoDB Local.
    tables = set(up.dynamodb().list_tables()["TableNames"])
    for output in ("IdempotencyTableName", "LedgerTableName", "NoticesTableName"):
        assert up.state.outputs[output] in tables


def test_sent_and_published_messages_take_effect_once_per_key(up: Up, tmp_path: Path) -> None:
    for consumer, field, amount in (("invoices", "invoiceId", "12.35"), ("refunds", "refundId", 3)):
        up.eonce(
            "send",
            "--consumer",
            consumer,
            "--count",
            str(SENT),
            "--duplicates",
            "0.3",
            "--template",
            json.dumps({field: "{id}", "amount": amount}),
            "--key-prefix",
            f"{consumer[:3]}-{RUN}-",
            "--ids-out",
            str(tmp_path / f"{consumer}.jsonl"),
        )
    up.eonce(
        "publish",
        "--topic",
        "billing",
        "--count",
        str(PUBLISHED),
        "--template",
        '{"invoiceId": "{id}", "refundId": "{id}", "eventId": "{id}", "amount": 7}',
        "--key-prefix",
        f"bill-{RUN}-",
        "--ids-out",
        str(tmp_path / "billing.jsonl"),
    )
    invoices = sent_keys(tmp_path / "invoices.jsonl", "invoiceId")
    refunds = sent_keys(tmp_path / "refunds.jsonl", "refundId")
    billing = sent_keys(tmp_path / "billing.jsonl", "eventId")
    # Duplicates were really sent: fewer keys than messages.
    assert len(invoices) == len(refunds) == SENT
    assert len(set(invoices)) < SENT
    assert len(set(refunds)) < SENT
    assert len(set(billing)) == PUBLISHED
    want = {
        "invoices": set(invoices) | set(billing),
        "refunds": set(refunds) | set(billing),
    }

    delivered = {"invoices": len(invoices) + PUBLISHED, "refunds": len(refunds) + PUBLISHED}

    def handled(counts: dict[str, int]) -> int:
        return counts["processed"] + counts["duplicate"]

    def drained() -> dict[str, dict[str, Any]] | None:
        # Every delivery counted, not only an empty queue: the counts are published about
        # once a second, so the queue can be empty before the last duplicate is counted.
        seen = status(up)
        queues_empty = all(
            seen[c]["queue"]["visible"] == seen[c]["queue"]["in_flight"] == 0
            and seen[c]["since_start"]["processed"] >= len(want[c])
            and handled(seen[c]["since_start"]) >= delivered[c]
            for c in want
        )
        audited = seen["audit"]["since_start"]["processed"] >= PUBLISHED
        return seen if queues_empty and audited else None

    seen = wait_until(
        drained, lambda: json.dumps(status(up), indent=2), bound_s=WAIT_S, interval_s=0.5
    )
    for consumer in ("invoices", "refunds"):
        counts = seen[consumer]["since_start"]
        assert counts["processed"] == len(want[consumer]), counts
        # At least once: a message redelivered after its visibility timeout (a loaded machine)
        # is one more duplicate, never one more execution (the ledger below counts those).
        assert handled(counts) >= delivered[consumer], counts
        assert counts["permanent"] == 0
        assert seen[consumer]["dead_letters"]["visible"] == 0

    ledger = scan(up, up.state.outputs["LedgerTableName"])
    assert not_once(effects(ledger, "invoices", "invoice"), want["invoices"]) == {}
    assert not_once(effects(ledger, "refunds-v2", "refund"), want["refunds"]) == {}
    # The vendored centsmath worked the totals out: 12.35 -> 1235 cents, plus 20% tax.
    totals = {
        json.loads(i["detail"]["S"])["totalCents"]
        for i in ledger
        if i["pk"]["S"] in set(invoices) and i["sk"]["S"].startswith("invoices#invoice#")
    }
    assert totals == {1482}
    audited = notices(scan(up, up.state.outputs["NoticesTableName"]))
    assert not_once(audited, billing) == {}


def test_locks_list_finds_the_apps_failed_record(up: Up) -> None:
    key = f"neg-{RUN}"
    up.eonce("send", "--consumer", "refunds", "--body", json.dumps({"refundId": key, "amount": -1}))

    def failed() -> list[dict[str, Any]] | None:
        records = json.loads(up.eonce("locks", "list", "--json"))["records"]
        return [r for r in records if r["record_id"] == f"refunds-v2#{key}"] or None

    (record,) = wait_until(
        failed, lambda: up.eonce("locks", "list", "--json"), bound_s=WAIT_S, interval_s=0.5
    )
    assert record["status"] == "FAILED"
    assert record["error"]["type"] == "PermanentError"


def test_replay_previews_the_apps_dead_letter(up: Up) -> None:
    def dead_lettered() -> bool:
        return bool(status(up)["refunds"]["dead_letters"]["visible"] >= 1)

    wait_until(dead_lettered, lambda: status(up)["refunds"], bound_s=WAIT_S, interval_s=0.5)
    preview = up.eonce("replay", "copy", "--consumer", "refunds", "--dry-run")
    assert f"neg-{RUN}" in preview
    assert "a refund needs a positive amount, got -1" in preview
    assert "dry run: nothing changed" in preview
    assert status(up)["refunds"]["dead_letters"]["visible"] >= 1  # left where it was
    subscriber = up.eonce("replay", "audit", "--dry-run")
    assert "replay subscriber Audit (dry run: nothing changed)" in subscriber


def sqs_event(up: Up, tmp_path: Path, *bodies: dict[str, Any]) -> Path:
    path = tmp_path / f"event-{uuid.uuid4().hex[:6]}.json"
    args = [a for body in bodies for a in ("--body", json.dumps(body))]
    up.eonce("event", *args, "--queue", "SecondApp-Invoices", "--output", str(path))
    return path


def invoiced(up: Up) -> Counter[str]:
    return effects(scan(up, up.state.outputs["LedgerTableName"]), "invoices", "invoice")


def outcomes(output: str, key: str) -> list[str]:
    """The outcome column of `invoke`'s table rows for `key`."""
    rows = [[cell.strip() for cell in line.split("│")] for line in output.splitlines()]
    return [row[3] for row in rows if len(row) > 3 and row[2] == key]


def test_invoke_runs_the_apps_handler_once_per_key(up: Up, tmp_path: Path) -> None:
    key = f"inv-invoked-{RUN}"
    event = sqs_event(
        up, tmp_path, {"invoiceId": key, "amount": 1}, {"invoiceId": key, "amount": 1}
    )
    output = up.eonce("invoke", "invoices", "--event", str(event))
    assert "invoices: 2 record(s)" in output
    assert outcomes(output, key) == ["processed", "duplicate"]
    assert not_once(invoiced(up), [key]) == {}


def test_the_verdict_fails_when_the_lock_is_off(up: Up, tmp_path: Path) -> None:
    """The same two-record event through the CLI's invoke, in a process whose store acquires a
    fresh record per delivery (local_aws.lock_off): the invoice runs twice, and the verdict
    that passed above names it."""
    key = f"inv-twice-{RUN}"
    event = sqs_event(
        up, tmp_path, {"invoiceId": key, "amount": 1}, {"invoiceId": key, "amount": 1}
    )
    lock_off_invoke = (
        "import sys\n"
        "from local_aws.lock_off import install\n"
        "install()\n"
        "from exactly_once_cli.console import main\n"
        "sys.argv[0] = 'eonce'\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", lock_off_invoke, "invoke", "invoices", "--event", str(event)],
        cwd=up.cwd,
        env={**up.env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcomes(result.stdout, key) == ["processed", "processed"]
    assert not_once(invoiced(up), [key]) == {key: 2}


def test_down_stops_every_process_and_removes_the_state(up: Up) -> None:
    pid = up.state.pid
    me = stat(pid)
    assert me is not None
    recorded: set[ProcessId] = {me.id, *(p.id for p in descendants(pid))}
    recorded |= {p.id for p in session_members(pid)}
    assert "java" in {p.command for p in descendants(pid)}  # DynamoDB Local
    assert len(recorded) >= 1 + 1 + 1 + 6  # serve, moto, java, 2 workers x 3 functions

    stopped = up.eonce("down")
    assert "nothing left running" in stopped
    assert wait_gone(recorded, 30) == []
    assert still_running(recorded) == []
    assert not up.paths.state.exists()
    assert not up.paths.stats.exists()
    assert up.paths.holder() is None
    assert up.eonce("down").strip() == "no local stack is up"
