"""`make scan`'s matching of checkov findings to acknowledgments, on canned checkov JSON
(checkov itself runs only in `make scan`, from its own venv)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from infra.checkov_scan import (
    ACKNOWLEDGMENTS,
    Acknowledgment,
    compare,
    failed_checks,
    load_acknowledgments,
)


def checkov_report(*failed: tuple[str, str]) -> dict[str, Any]:
    """What `checkov -o json -f template` prints for one framework."""
    return {
        "check_type": "cloudformation",
        "results": {
            "passed_checks": [{"check_id": "CKV_AWS_26", "resource": "AWS::SNS::Topic.T"}],
            "failed_checks": [
                {"check_id": check, "resource": resource, "check_name": f"{check} name"}
                for check, resource in failed
            ],
        },
        "summary": {"passed": 1, "failed": len(failed)},
    }


def test_findings_are_read_from_one_report_or_a_list_of_them() -> None:
    one = checkov_report(("CKV_AWS_27", "AWS::SQS::Queue.OrdersQueue1234"))
    assert [f.check_id for f in failed_checks("dev", one)] == ["CKV_AWS_27"]
    assert len(failed_checks("prod", [one, one])) == 2


def test_acknowledged_unacknowledged_and_stale() -> None:
    findings = failed_checks(
        "dev",
        checkov_report(
            ("CKV_AWS_27", "AWS::SQS::Queue.OrdersQueue1234"),
            ("CKV_AWS_27", "AWS::SQS::Queue.PaymentsQueue5678"),
            ("CKV_AWS_117", "AWS::Lambda::Function.OrdersFunction9"),
            ("CKV_AWS_158", "AWS::Logs::LogGroup.OrdersLogs1"),
        ),
    )
    acknowledgments = [
        Acknowledgment("CKV_AWS_27", "SSE-SQS is on", "AWS::SQS::Queue.*"),
        Acknowledgment("CKV_AWS_117", "no private resources", None),  # every resource
        Acknowledgment("CKV_AWS_158", "only the access logs", "AWS::Logs::LogGroup.Api*"),
        Acknowledgment("CKV_AWS_999", "a check that no longer fails"),
    ]
    report = compare(findings, acknowledgments)
    assert [(f.check_id, f.resource) for f in report.unacknowledged] == [
        ("CKV_AWS_158", "AWS::Logs::LogGroup.OrdersLogs1")  # the pattern does not match
    ]
    assert report.acknowledged == 3
    assert [a.check_id for a in report.stale] == ["CKV_AWS_158", "CKV_AWS_999"]
    assert not report.ok
    assert compare(findings[:3], acknowledgments[:2]).ok


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"id": "CKV_AWS_27"}, "no reason given"),
        ({"id": "CKV_AWS_27", "reason": "   "}, "no reason given"),
        ({"reason": "why"}, "no check id"),
    ],
)
def test_an_acknowledgment_needs_an_id_and_a_reason(entry: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_acknowledgments({"acknowledgments": [entry]})


def test_the_repository_file_loads_and_every_reason_says_something() -> None:
    acknowledgments = load_acknowledgments(yaml.safe_load(ACKNOWLEDGMENTS.read_text()))
    assert acknowledgments
    for ack in acknowledgments:
        assert len(ack.reason) > 80, ack.check_id
    (sqs,) = [a for a in acknowledgments if a.check_id == "CKV_AWS_27"]
    assert "SqsManagedSseEnabled" in sqs.reason  # the false positive, and why
