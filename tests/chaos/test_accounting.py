"""Closing the books: each invariant breaks the verdict, and doubles get their cause."""

from __future__ import annotations

from fault_injection.accounting import (
    KILLED,
    OVERRUN,
    ZOMBIE,
    DeadLetter,
    LedgerEntry,
    account,
    read_dead_letter,
)
from fault_injection.workload import Kind, Plan, PlannedMessage


def plan() -> Plan:
    return Plan(
        messages=[
            PlannedMessage('{"orderId": "a"}', Kind.VALID, "a"),
            PlannedMessage('{"orderId": "b"}', Kind.VALID, "b"),
            PlannedMessage('{"orderId": "a"}', Kind.DUPLICATE, "a"),
            PlannedMessage("not json", Kind.BAD_JSON),
        ],
        keys={"a", "b"},
    )


SENT = {0: "m0", 1: "m1", 2: "m2", 3: "m3"}


def entry(key: str, pid: int, fence: int = 1) -> LedgerEntry:
    return LedgerEntry(key, fence, pid, 0)


def test_a_clean_run_passes() -> None:
    verdict = account(
        plan(),
        SENT,
        {"a": [entry("a", 1)], "b": [entry("b", 2)]},
        [DeadLetter("m3", "NonJsonBody")],
        ([], []),
        0,
        set(),
        set(),
    )

    assert verdict.ok
    assert (verdict.exactly_once, verdict.processed) == (2, 3)
    assert verdict.dead_lettered == {"NonJsonBody": 1}
    assert (verdict.poison, verdict.poison_with_reason) == (1, 1)


def test_doubles_are_attributed_to_the_fault_of_a_writer() -> None:
    ledger = {"a": [entry("a", 10), entry("a", 11, 2)], "b": [entry("b", 12), entry("b", 13)]}
    verdict = account(plan(), SENT, ledger, [], ([], []), 0, {10}, {13})

    assert verdict.doubles == {"a": 2, "b": 2}
    assert verdict.double_causes == {KILLED: 1, ZOMBIE: 1}
    assert not verdict.ok
    assert account(plan(), SENT, ledger, [], ([], []), 0, set(), set()).double_causes == {
        OVERRUN: 2
    }


def test_a_message_neither_processed_nor_dead_lettered_is_lost() -> None:
    verdict = account(plan(), SENT, {"a": [entry("a", 1)]}, [], ([], []), 0, set(), set())

    assert verdict.missing == {"b"}
    assert verdict.lost == ["m1", "m3"]
    assert not verdict.ok


def test_a_redrive_without_reason_breaks_the_verdict_even_for_poison() -> None:
    verdict = account(
        plan(),
        SENT,
        {"a": [entry("a", 1)], "b": [entry("b", 2)]},
        [DeadLetter("m3", None)],
        ([], []),
        0,
        set(),
        set(),
    )

    assert verdict.redriven == 1
    assert verdict.poison_with_reason == 0
    assert not verdict.ok


def test_stuck_and_retryable_records_break_the_verdict() -> None:
    ledger = {"a": [entry("a", 1)], "b": [entry("b", 2)]}
    letters = [DeadLetter("m3", "NonJsonBody")]

    assert not account(plan(), SENT, ledger, letters, (["x"], []), 0, set(), set()).ok
    assert not account(plan(), SENT, ledger, letters, ([], ["y"]), 0, set(), set()).ok
    assert not account(plan(), SENT, ledger, letters, ([], []), 1, set(), set()).ok


def test_dead_letters_are_read_in_both_attribute_forms() -> None:
    plain = {
        "MessageId": "dlq-1",
        "MessageAttributes": {
            "eo-original-message-id": {"StringValue": "m1"},
            "eo-error-type": {"StringValue": "PermanentError"},
        },
    }
    packed = {
        "MessageId": "dlq-2",
        "MessageAttributes": {
            "eo-failure": {
                "StringValue": '{"eo-error-type": "MissingKey", "eo-original-message-id": "m2"}'
            }
        },
    }
    redriven = {"MessageId": "m3", "MessageAttributes": {}}

    assert read_dead_letter(plain) == DeadLetter("m1", "PermanentError")
    assert read_dead_letter(packed) == DeadLetter("m2", "MissingKey")
    assert read_dead_letter(redriven) == DeadLetter("m3", None)
