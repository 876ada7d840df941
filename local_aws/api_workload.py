"""`make run`'s API part: concurrent requests with repeated keys through the local gateway,
then reused keys with another body and one request without a key, checked on the ledger.

Each payment key is sent by several clients at once, as retrying clients do; a client retries
a 409 or a 503 shortly after (a replay is served as soon as the first request completes), so
every client ends with a final answer. The verdict: each key's payment was executed exactly
once (one entry in the execution log), every client got the same response for its key, each
reused key got 422, and the request without a key got 400.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from exactly_once.http.caller import authorized_caller
from exactly_once.http.keys import scoped_key
from exactly_once_ops.api_client import ApiClient, ApiReply
from local_aws.demo import LedgerCheck, LedgerReader, check_ledger
from local_aws.http_gateway import iam_caller

ACCESS_KEY = "AKIALOCALDEMO"
RETRY_PAUSE_S = 0.05
MAX_TRIES = 400  # 20 s of 409s: far longer than any local request holds its key


@dataclass(frozen=True)
class ApiWorkload:
    payments: int = 30  # distinct Idempotency-Keys
    clients_per_key: int = 4  # each key sent this many times at once
    reused: int = 3  # keys then sent again with another body: 422 each
    transient_ratio: float = 0.1  # share of keys whose first run answers 503
    work_ms: int = 20
    seed: int = 7
    path: str = "/payments"


@dataclass
class ApiReport:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)  # every answer, retries included
    replays: int = 0
    inconsistent_keys: list[str] = field(default_factory=list)  # clients saw different bodies
    reused_refused: int = 0
    reused_planned: int = 0
    missing_key_refused: bool = False
    ledger: LedgerCheck | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            self.ledger is not None
            and self.ledger.ok
            and not self.inconsistent_keys
            and self.reused_refused == self.reused_planned
            and self.missing_key_refused
        )


def _caller() -> str:
    """The caller the gateway will name for this client's signature (the key's scope)."""
    from exactly_once import HttpRequest

    authorizer = iam_caller(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/x")
    event = {"version": "2.0", "requestContext": {"authorizer": {"iam": authorizer}}}
    caller = authorized_caller(HttpRequest.from_event(event))
    assert caller is not None
    return caller


def run_api_workload(endpoint: str, ledger: LedgerReader, workload: ApiWorkload) -> ApiReport:
    started = time.monotonic()
    rng = random.Random(workload.seed)
    run_id = uuid.uuid4().hex[:8]
    client = ApiClient(endpoint).as_caller(ACCESS_KEY)
    report = ApiReport(reused_planned=min(workload.reused, workload.payments))
    bodies: dict[str, dict[str, Any]] = {}
    for n in range(workload.payments):
        body: dict[str, Any] = {"accountId": f"acct-{n % 4}", "amount": f"{10 + n}.00"}
        body["workMs"] = workload.work_ms
        if rng.random() < workload.transient_ratio:
            body["failTimes"] = 1
        bodies[f"api-{run_id}-{n}"] = body

    def until_final(key: str, body: dict[str, Any]) -> tuple[str, list[ApiReply]]:
        replies = []
        for _ in range(MAX_TRIES):
            replies.append(client.request("POST", workload.path, body=body, key=key))
            if replies[-1].status not in (409, 503):
                break
            time.sleep(RETRY_PAUSE_S)
        return key, replies

    sends = [(k, b) for k, b in bodies.items() for _ in range(workload.clients_per_key)]
    rng.shuffle(sends)
    finals: dict[str, set[bytes]] = {}
    with ThreadPoolExecutor(max_workers=16) as pool:
        for key, replies in pool.map(lambda kb: until_final(*kb), sends):
            for reply in replies:
                _count(report, reply)
            finals.setdefault(key, set()).add(replies[-1].body)
    report.inconsistent_keys = sorted(k for k, seen in finals.items() if len(seen) != 1)

    for key in list(bodies)[: report.reused_planned]:
        changed = {**bodies[key], "amount": "999.00"}
        reply = client.request("POST", workload.path, body=changed, key=key)
        _count(report, reply)
        report.reused_refused += reply.status == 422
    missing = client.request("POST", workload.path, body={"accountId": "a", "amount": "1"})
    _count(report, missing)
    report.missing_key_refused = missing.status == 400

    caller = _caller()
    expected = {scoped_key(caller, key) for key in bodies}
    report.ledger = check_ledger(ledger, expected, run_id)
    report.elapsed_s = time.monotonic() - started
    return report


def _count(report: ApiReport, reply: ApiReply) -> None:
    report.requests += 1
    report.statuses[reply.status] += 1
    report.replays += reply.replayed


def describe(report: ApiReport) -> list[tuple[str, str]]:
    """The report's rows: (what, how many)."""
    s = report.statuses
    return [
        ("requests sent", str(report.requests)),
        ("  201 Created (the payment ran)", str(s[201] - report.replays)),
        ("  201 replayed (Idempotent-Replayed: true)", str(report.replays)),
        ("  409 in progress, retried", str(s[409])),
        ("  503 transient, retried", str(s[503])),
        ("  422 key reused with another body", str(s[422])),
        ("  400 no Idempotency-Key", str(s[400])),
        ("other answers", str(sum(n for code, n in s.items() if code not in _SHOWN))),
    ]


_SHOWN = {201, 409, 503, 422, 400}


def summary(report: ApiReport) -> dict[str, Any]:
    """For tests and logs: the numbers behind the verdict."""
    ledger = report.ledger
    return {
        "statuses": dict(report.statuses),
        "replays": report.replays,
        "inconsistent_keys": report.inconsistent_keys,
        "reused_refused": report.reused_refused,
        "missing_key_refused": report.missing_key_refused,
        "ledger": None
        if ledger is None
        else {
            "expected": ledger.expected,
            "executed_once": ledger.executed_once,
            "double_effects": len(ledger.double_effects),
            "unexpected": len(ledger.unexpected),
            "missing": len(ledger.missing),
        },
        "elapsed_s": round(report.elapsed_s, 1),
        "ok": report.ok,
    }
