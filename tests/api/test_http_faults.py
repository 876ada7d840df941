"""The API's writes under faults: a lease that runs out (zombies, blocked takeover), lost
replies and throttling injected through botocore's before-send hook, and hostile bodies."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import HttpRequest, IdempotencyStore, LeasePolicy, RequestContext
from exactly_once.effects import LeaseLost
from exactly_once.ledger import record_effect
from fault_injection.lost_replies import install_lost_replies, lose_next
from fault_injection.throttling import install_throttling
from tests.api.conftest import MakeApi, Served
from tests.api.test_http_semantics import counted, created, ledger_entries, problem_type
from tests.conftest import make_ddb_client
from tests.waiting import BOUND_S, wait_until

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

SHORT_LEASE = LeasePolicy(override_ms=400)


class Paused:
    """A handler whose first run stops until released: a request that outlives its lease."""

    def __init__(self, ledger_table: str, effect: bool = True) -> None:
        self.ledger_table = ledger_table
        self.effect = effect
        self.started = threading.Event()
        self.release = threading.Event()
        self.fences: list[int] = []

    def __call__(self, request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        self.fences.append(ctx.fence)
        if len(self.fences) == 1:
            self.started.set()
            self.release.wait(timeout=BOUND_S)  # released by the test; the bound ends a hang
        if self.effect:
            record_effect(ctx, {"fence": ctx.fence}, table=self.ledger_table)
        return created({"fence": ctx.fence})


class Switch(random.Random):
    """Throttles every request while `on`, none while off."""

    on = False

    def random(self) -> float:
        return 0.0 if self.on else 1.0


def outlived(served: Served, handler: Paused, key: str, until: Callable[[Any], bool]) -> Any:
    """Start a request whose handler pauses past its lease, retry the same request until
    `until(reply)`, then let the paused one finish: (the retry that ended it, the late reply)."""
    post: Callable[[], Any] = lambda: served.post({"amount": 1}, key)  # noqa: E731
    with ThreadPoolExecutor(max_workers=1) as pool:
        late = pool.submit(post)
        wait_until(handler.started.is_set, lambda: "the first request never reached the handler")
        seen: list[Any] = []

        def ended() -> Any:
            seen.append(post())
            return seen[-1] if until(seen[-1]) else None

        ended_by = wait_until(ended, lambda: seen[-1:])
        handler.release.set()
        return ended_by, late.result()


def not_409(reply: Any) -> bool:
    return bool(reply.status != 409)


def retry_until_not_409(post: Any) -> Any:
    replies: list[Any] = []

    def probe() -> Any:
        replies.append(post())
        return replies[-1] if replies[-1].status != 409 else None

    return wait_until(probe, lambda: replies[-1:])


def test_a_zombie_cannot_apply_its_effect_or_overwrite_its_successors_response(
    make_api: MakeApi, ddb: DynamoDBClient, ledger_table: str
) -> None:
    handler = Paused(ledger_table)
    served = make_api(handler, lease=SHORT_LEASE)
    successor, late = outlived(served, handler, "z-1", not_409)
    assert successor.status == 201
    assert not successor.replayed
    assert late.status == 409
    assert problem_type(late) == "lease-lost"
    replay = served.post({"amount": 1}, "z-1")
    assert replay.replayed
    assert replay.body == successor.body
    fences = [int(item["fence"]["N"]) for item in ledger_entries(ddb, ledger_table)]
    assert fences == [handler.fences[1]]
    assert handler.fences[1] > handler.fences[0]


def test_a_zombie_without_a_fenced_effect_still_cannot_store_its_response(
    make_api: MakeApi, ledger_table: str
) -> None:
    handler = Paused(ledger_table, effect=False)
    served = make_api(handler, lease=SHORT_LEASE)
    successor, late = outlived(served, handler, "z-2", not_409)
    assert late.status == 409
    assert served.post({"amount": 1}, "z-2").body == successor.body


def test_with_takeover_blocked_an_expired_lease_waits_for_a_person(
    make_api: MakeApi, ledger_table: str, idempotency_table: str, ddb: DynamoDBClient
) -> None:
    from exactly_once import IdempotencyStore

    handler = Paused(ledger_table)
    served = make_api(handler, lease=SHORT_LEASE, block_takeover=True)
    blocked, first = outlived(
        served, handler, "b-1", lambda reply: problem_type(reply) == "outcome-unknown"
    )
    assert first.status == 409  # blocked: its completion is refused too
    assert blocked.status == 409
    assert "retry-after" not in blocked.headers
    assert served.post({"amount": 1}, "b-1").status == 409  # until someone resets it
    config, _ = served.api.configured()
    record_key = served.api.last_result.key if served.api.last_result else ""
    assert IdempotencyStore(idempotency_table, client=ddb).reset(config.scope, record_key or "")
    after = served.post({"amount": 1}, "b-1")
    assert after.status == 201
    assert len(handler.fences) == 2


def test_acquire_throttled_past_the_retries_is_a_503_and_nothing_runs(
    make_api: MakeApi, dynamodb_local: DynamoDBLocal
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    throttled: list[str] = []
    throttling = Switch()
    throttling.on = True
    install_throttling(client, 1.0, throttling, throttled.append)
    runs: list[int] = []
    served = make_api(counted(runs, lambda: created({})), dynamodb_client=client)
    reply = served.post({"a": 1}, "t-1")
    assert reply.status == 503
    assert reply.headers["retry-after"] == "1"
    assert problem_type(reply) == "store-unavailable"
    assert runs == []
    assert throttled == ["UpdateItem", "UpdateItem"]
    # Nothing was written (as when the process dies just before the write): the retry runs.
    throttling.on = False
    again = served.post({"a": 1}, "t-1")
    assert again.status == 201
    assert not again.replayed
    assert len(runs) == 1


def test_a_crash_just_after_acquire_holds_the_key_until_its_lease_ends(
    make_api: MakeApi, store: IdempotencyStore, ledger_table: str, ddb: DynamoDBClient
) -> None:
    """The process that took the key died before running anything: retries meet 409 while
    its lease lives, then one takes the key over and runs."""
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.fence)
        record_effect(ctx, {}, table=ledger_table)
        return created({"fence": ctx.fence})

    served = make_api(handler, lease=SHORT_LEASE)
    first = served.post({"a": 1}, "crash-1")  # learn the record's key and fingerprint
    config, _ = served.api.configured()
    assert served.api.last_result is not None
    record_key = served.api.last_result.key or ""
    crashed_key = record_key.replace("crash-1", "crash-2")
    previous = store.get(config.scope, record_key)
    assert previous is not None
    dead = store.acquire(
        config.scope,
        crashed_key,
        lease_ms=SHORT_LEASE.override_ms or 0,
        owner="dead",
        fingerprint=previous.fingerprint,
    )
    assert dead.acquired
    assert first.status == 201
    after = retry_until_not_409(lambda: served.post({"a": 1}, "crash-2"))
    assert after.status == 201
    assert served.api.last_result is not None
    assert served.api.last_result.takeover
    assert len(runs) == 2  # crash-1 once, crash-2 once (after the takeover)
    assert len(ledger_entries(ddb, ledger_table)) == 2


def test_a_lost_reply_on_the_failed_write_still_lets_the_retry_run(
    make_api: MakeApi, dynamodb_local: DynamoDBLocal
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint)
    lost: list[str] = []
    attempts: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            install_lost_replies(client, lose_next("UpdateItem"), lost.append)  # the fail
            return {"statusCode": 503, "body": "busy"}
        return created({"attempt": ctx.attempt})

    served = make_api(handler, dynamodb_client=client)
    assert served.post({"a": 1}, "lf-1").status == 503
    assert lost == ["UpdateItem"]
    second = served.post({"a": 1}, "lf-1")
    assert second.status == 201
    assert attempts == [1, 2]


def test_a_failed_write_throttled_past_its_retries_gives_way_when_the_lease_ends(
    make_api: MakeApi, dynamodb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exactly_once import completion

    monkeypatch.setattr(completion, "time", SimpleNamespace(sleep=lambda _: None))
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    throttling = Switch()
    install_throttling(client, 1.0, throttling)
    attempts: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            throttling.on = True  # every try of the FAILED write is throttled
            return {"statusCode": 503, "body": "busy"}
        return created({"attempt": ctx.attempt})

    served = make_api(handler, dynamodb_client=client, lease=SHORT_LEASE)
    assert served.post({"a": 1}, "lt-1").status == 503
    throttling.on = False
    after = retry_until_not_409(lambda: served.post({"a": 1}, "lt-1"))
    assert after.status == 201
    assert attempts == [1, 2]


def test_a_key_sent_after_its_record_expired_runs_again_but_its_effect_does_not(
    make_api: MakeApi, ddb: DynamoDBClient, ledger_table: str
) -> None:
    """The clock passes the record's TTL (a day for APIs): the key is new again, as docs/http.md
    says ("Records last a day"), and the fenced effect refuses a second ledger entry."""
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        written = record_effect(ctx, {}, table=ledger_table)
        runs.append(ctx.fence)
        return created({"written": written is not None})

    served = make_api(handler)
    first = served.post({"a": 1}, "ttl-1")
    assert first.json() == {"written": True}
    _, store = served.api.configured()
    assert isinstance(store, IdempotencyStore)
    later = time.time() + store.record_ttl_s + 120
    store._clock = lambda: later  # the API's own store, read its clock from here on
    again = served.post({"a": 1}, "ttl-1")
    assert again.status == 201
    assert not again.replayed
    assert again.json() == {"written": False}
    assert len(runs) == 2
    assert len(ledger_entries(ddb, ledger_table)) == 1


def test_lost_replies_on_acquire_and_completion_still_run_once_and_replay(
    make_api: MakeApi, dynamodb_local: DynamoDBLocal, ddb: DynamoDBClient, ledger_table: str
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint)
    lost: list[str] = []
    install_lost_replies(client, lose_next("UpdateItem", times=2), lost.append)
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.fence)
        install_lost_replies(client, lose_next("UpdateItem", "TransactWriteItems"), lost.append)
        record_effect(ctx, {}, table=ledger_table)
        return created({"fence": ctx.fence})

    served = make_api(handler, dynamodb_client=client)
    first = served.post({"a": 1}, "lost-1")
    assert first.status == 201
    assert lost == ["UpdateItem", "UpdateItem", "TransactWriteItems", "UpdateItem"]
    again = served.post({"a": 1}, "lost-1")
    assert again.replayed
    assert again.body == first.body
    assert len(runs) == 1
    assert len(ledger_entries(ddb, ledger_table)) == 1


def test_completion_throttled_past_the_retries_answers_and_never_repeats_the_effect(
    make_api: MakeApi, dynamodb_local: DynamoDBLocal, ddb: DynamoDBClient, ledger_table: str
) -> None:
    """The process might as well have died after the effect: the record stays IN_PROGRESS
    with the effect's mark, a retry inside the lease gets 409, one after it runs again and
    the fenced effect refuses a second entry."""
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    throttling = Switch()
    install_throttling(client, 1.0, throttling)
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.fence)
        written = record_effect(ctx, {}, table=ledger_table)
        throttling.on = len(runs) == 1  # the first run's completion cannot land
        return created({"fence": ctx.fence, "written": written is not None})

    served = make_api(handler, dynamodb_client=client, lease=SHORT_LEASE)
    first = served.post({"a": 1}, "c-1")
    assert first.status == 201
    assert first.json()["written"] is True
    assert served.api.last_result is not None
    assert served.api.last_result.completion_failed
    throttling.on = False
    second = retry_until_not_409(lambda: served.post({"a": 1}, "c-1"))
    assert second.status == 201
    assert second.json()["written"] is False
    assert len(runs) == 2
    assert len(ledger_entries(ddb, ledger_table)) == 1


def test_hostile_bodies_get_a_clear_answer_and_are_replayed(make_api: MakeApi) -> None:
    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        try:
            body = request.json()
        except ValueError as exc:
            return {"statusCode": 400, "body": json.dumps({"error": str(exc)[:80]})}
        return {"statusCode": 200, "headers": {"__eo_set__": "look-alike"}, "body": repr(body)}

    served = make_api(handler)
    bodies = {
        "surrogate": '{"a": "\\ud83d"}',
        "deep": "[" * 50_000 + "]" * 50_000,
        "digits": '{"n": ' + "9" * 5000 + "}",
        "not-utf8": b'{"a": "\xff"}',
    }
    for name, body in bodies.items():
        first = served.post(body, f"hostile-{name}")
        assert first.status in (200, 400), (name, first.status, first.body[:200])
        again = served.post(body, f"hostile-{name}")
        assert again.replayed, name
        assert again.body == first.body, name
        assert again.headers.get("__eo_set__") == first.headers.get("__eo_set__")
    assert served.post(bodies["surrogate"], "hostile-surrogate").status == 200


def test_a_lease_lost_raised_by_the_handler_is_a_409_that_writes_nothing(
    make_api: MakeApi,
) -> None:
    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        raise LeaseLost("refused")

    served = make_api(handler)
    reply = served.post({"a": 1}, "ll-1")
    assert reply.status == 409
    assert problem_type(reply) == "lease-lost"
    assert served.post({"a": 1}, "ll-1").status == 409  # its lease is still live: in progress
