"""The plan: deterministic per seed, faults where the rates say, duplicates after originals."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from fault_injection.settings import ChaosSettings, FaultRates
from fault_injection.workload import Kind, plan_run, share


def test_the_same_seed_gives_the_same_plan() -> None:
    settings = ChaosSettings(messages=500, seed=3)

    assert plan_run(settings) == plan_run(settings)
    assert plan_run(settings) != plan_run(ChaosSettings(messages=500, seed=4))


def test_counts_follow_the_rates() -> None:
    rates = FaultRates(duplicates=0.2, poison=0.02, transient=0.1, crash=0.03, zombie=0.01)
    plan = plan_run(ChaosSettings(messages=1000, rates=rates))

    kinds = Counter(m.kind for m in plan.messages)
    assert len(plan.messages) == 1000
    assert kinds[Kind.DUPLICATE] == 200
    assert plan.poison == 20
    assert len(plan.keys) == kinds[Kind.VALID] == 780
    assert sum(plan.faults[f"crash: {p}"] for p in ("before-effect", "after-effect")) == 16
    assert plan.faults["crash: before-delete"] == 7
    assert plan.faults["pause: before-effect"] + plan.faults["pause: after-effect"] == 8
    assert plan.faults["transient"] == 78


def test_every_duplicate_comes_after_its_original_with_the_same_body() -> None:
    plan = plan_run(ChaosSettings(messages=400))
    first_seen: dict[str, int] = {}
    for index, message in enumerate(plan.messages):
        if message.kind is Kind.VALID:
            first_seen[message.body] = index
        elif message.kind is Kind.DUPLICATE:
            assert first_seen[message.body] < index


def test_each_body_carries_at_most_one_crash_or_pause() -> None:
    rates = FaultRates(crash=0.5, zombie=0.5)
    plan = plan_run(ChaosSettings(messages=100, rates=rates))
    for message in plan.messages:
        if message.kind is Kind.VALID:
            body = json.loads(message.body)
            assert not ("crash" in body and "pause" in body)


def test_poison_kinds_are_all_present() -> None:
    plan = plan_run(ChaosSettings(messages=300, rates=FaultRates(poison=0.01)))

    assert {m.kind for m in plan.messages if m.kind.poison} == {
        Kind.BAD_JSON,
        Kind.BAD_AMOUNT,
        Kind.NO_KEY,
    }


def test_a_small_positive_rate_still_injects_once() -> None:
    assert share(10, 0.001) == 1
    assert share(10, 0.0) == 0


def test_rates_are_validated() -> None:
    with pytest.raises(ValueError, match="within"):
        FaultRates(crash=1.5)
    with pytest.raises(ValueError, match="room"):
        FaultRates(duplicates=0.6, poison=0.5)
