"""The three-step workload's plan: the orders plan, its crashes and pauses moved between steps.

Each key runs three steps (charge, ship, email). The faults that matter for steps sit between
them and inside them, so the orders plan (same seed, same messages, duplicates, poison and
transient failures) is kept and only the planned points are re-dealt, round robin over the
step points: a worker killed after step 1 or after step 2 (the next holder must resume, not
repeat), inside step 2 after its call to the outside world and before its recovery point (the
next holder runs it again with the same step idempotency key), after step 3 before the
completion, and after the completion before the SQS delete. Zombies freeze between steps 1
and 2, or inside step 2: when they wake, their next recovery point must be refused.

A duplicate repeats its original's body verbatim, so a body is re-dealt once and its copies
follow it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from fault_injection import injection
from fault_injection.settings import ChaosSettings
from fault_injection.workload import Kind, Plan, plan_run

STEPS = ("charge", "ship", "email")
AFTER_STEP_1 = "after-step-1"  # charge's recovery point is written; ship has not started
AFTER_STEP_2 = "after-step-2"  # ship's recovery point is written; email has not started
IN_STEP_2 = "in-step-2"  # ship called the outside world; its recovery point is not written
AFTER_STEPS = injection.AFTER_EFFECT  # all three points written, the completion is not
CRASH_POINTS = (AFTER_STEP_1, AFTER_STEP_2, IN_STEP_2, AFTER_STEPS, injection.BEFORE_DELETE)
PAUSE_POINTS = (AFTER_STEP_1, IN_STEP_2)
# Where each point fires: after the named step's recovery point, or inside it.
AFTER = {"charge": AFTER_STEP_1, "ship": AFTER_STEP_2}
INSIDE = {"ship": IN_STEP_2}


def plan_steps(settings: ChaosSettings) -> Plan:
    """The orders plan for `settings`, with its crash and pause points dealt over the steps."""
    plan = plan_run(settings)
    dealt: dict[str, str] = {}  # original body -> its body with the step points
    faults: Counter[str] = Counter(
        {name: n for name, n in plan.faults.items() if name == "transient"}
    )
    crashes = pauses = 0
    messages = []
    for message in plan.messages:
        if message.kind not in (Kind.VALID, Kind.DUPLICATE):
            messages.append(message)
            continue
        if message.body not in dealt:
            body = json.loads(message.body)
            if "crash" in body:
                body["crash"] = CRASH_POINTS[crashes % len(CRASH_POINTS)]
                crashes += 1
                faults[f"crash: {body['crash']}"] += 1
            if "pause" in body:
                body["pause"] = PAUSE_POINTS[pauses % len(PAUSE_POINTS)]
                pauses += 1
                faults[f"pause: {body['pause']}"] += 1
            dealt[message.body] = json.dumps(body)
        messages.append(replace(message, body=dealt[message.body]))
    return Plan(messages=messages, keys=set(plan.keys), faults=faults)
