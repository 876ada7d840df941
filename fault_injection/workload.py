"""Plan a run's messages from the seed: bodies, duplicates, poison, and which faults each carries.

Faults that belong to a record (crash, pause, transient failure) are written into its body, so
every consumer under test meets the same faults at the same messages. Duplicates repeat an
earlier body verbatim; half of them follow it closely (both copies are likely in flight at
once), half arrive much later (the first has long completed).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from fault_injection import injection
from fault_injection.settings import ChaosSettings


class Kind(StrEnum):
    VALID = "valid"
    DUPLICATE = "duplicate"
    BAD_JSON = "poison: not JSON"
    BAD_AMOUNT = "poison: negative amount"
    NO_KEY = "poison: no orderId"

    @property
    def poison(self) -> bool:
        return self not in (Kind.VALID, Kind.DUPLICATE)


POISON_KINDS = (Kind.BAD_JSON, Kind.BAD_AMOUNT, Kind.NO_KEY)


@dataclass(frozen=True)
class PlannedMessage:
    body: str
    kind: Kind
    key: str | None = None  # the orderId, when the body has one


@dataclass
class Plan:
    messages: list[PlannedMessage] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # each must take effect exactly once
    faults: Counter[str] = field(default_factory=Counter)  # planned, e.g. "crash: after-effect"

    @property
    def poison(self) -> int:
        return sum(m.kind.poison for m in self.messages)

    @property
    def duplicates(self) -> int:
        return sum(m.kind is Kind.DUPLICATE for m in self.messages)


def share(total: int, rate: float) -> int:
    """round(total * rate), but at least one when the rate is above zero."""
    if rate <= 0 or total <= 0:
        return 0
    return min(total, max(1, round(total * rate)))


def plan_run(settings: ChaosSettings) -> Plan:
    rng = random.Random(settings.seed)
    rates = settings.rates
    total = settings.messages
    poison = share(total, rates.poison)
    duplicates = min(share(total, rates.duplicates), max(0, total - poison - 1))
    unique = total - poison - duplicates
    plan = Plan()

    order = list(range(unique))
    rng.shuffle(order)
    crashes = share(unique, rates.crash)
    pauses = min(share(unique, rates.zombie), unique - crashes)
    crash_at = {n: injection.CRASH_POINTS[i % 3] for i, n in enumerate(order[:crashes])}
    pause_at = {
        n: injection.PAUSE_POINTS[i % 2] for i, n in enumerate(order[crashes : crashes + pauses])
    }
    transient = set(rng.sample(range(unique), share(unique, rates.transient)))

    base: list[PlannedMessage] = []
    for n in range(unique):
        key = f"o-{settings.seed}-{n}"
        body: dict[str, object] = {"orderId": key, "amount": n % 97, "workMs": settings.work_ms}
        if n in transient:
            body["failTimes"] = 2 if n % 4 == 0 else 1
            plan.faults["transient"] += 1
        if n in crash_at:
            body["crash"] = crash_at[n]
            plan.faults[f"crash: {crash_at[n]}"] += 1
        if n in pause_at:
            body["pause"] = pause_at[n]
            plan.faults[f"pause: {pause_at[n]}"] += 1
        base.append(PlannedMessage(json.dumps(body), Kind.VALID, key))
        plan.keys.add(key)
    for n in range(poison):
        base.append(_poison(POISON_KINDS[n % len(POISON_KINDS)], settings.seed, n))
    rng.shuffle(base)

    # Position each duplicate after its original: fractional slots keep the base order.
    slots: list[tuple[float, PlannedMessage]] = [(float(i), m) for i, m in enumerate(base)]
    valid = [i for i, m in enumerate(base) if m.kind is Kind.VALID]
    for _ in range(duplicates if valid else 0):
        i = rng.choice(valid)
        gap = rng.uniform(0.5, 20) if rng.random() < 0.5 else rng.uniform(20, len(base))
        original = base[i]
        slots.append((i + gap, PlannedMessage(original.body, Kind.DUPLICATE, original.key)))
    slots.sort(key=lambda slot: slot[0])
    plan.messages = [m for _, m in slots]
    return plan


def _poison(kind: Kind, seed: int, n: int) -> PlannedMessage:
    if kind is Kind.BAD_JSON:
        return PlannedMessage(f"order {n} is not JSON {{", kind)
    if kind is Kind.BAD_AMOUNT:
        key = f"bad-{seed}-{n}"
        return PlannedMessage(json.dumps({"orderId": key, "amount": -1}), kind, key)
    return PlannedMessage(json.dumps({"amount": 5, "note": f"no key {n}"}), kind)
