"""`eonce replay SUBSCRIBER --dry-run` prints each message's reason as text, never as rich
markup (issue 26, defect 7's preview): the reason is the function's own error message, so one
holding "[/]" ended the preview with rich's MarkupError traceback, and "[type=...]" vanished."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from local_aws.sns_delivery import DEAD_LETTER_QUEUE, SubscriberBinding, dead_letter
from tests.cli.support import REGION, Invoke
from tests.cli.test_replay_subscriber import (
    FUNCTION,
    SUBSCRIPTION,
    Deployed,
    replay,
    sale,
    sns_event,
    subscriber,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

__all__ = ["subscriber"]  # the fixture, used here by name
pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")

ERROR = "price list [/] unreadable [type=missing, input_value={}]"


def test_the_dry_run_prints_the_functions_error_as_it_is(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "600")
    binding = SubscriberBinding(
        subscriber="SalesCounter",
        function_name=FUNCTION,
        source_dir=str(subscriber.source),
        handler="handler.handle",
        environment={},
        timeout_s=30,
        topic_arn=subscriber.topic_arn,
        subscription_arn=f"{subscriber.topic_arn}:{SUBSCRIPTION}",
        tap_queue_url="",
        dead_letter_queue_url=subscriber.dlq,
        failure_format=DEAD_LETTER_QUEUE,
        function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:{FUNCTION}",
    )
    event = sns_event(subscriber.topic_arn, sale("o-1"), "sns-1")
    dead_letter(sqs, binding, event, "req-1", RuntimeError(ERROR), 3)

    result = replay(cli, subscriber, "--dry-run")

    assert result.exit_code == 0, result.output
    assert ERROR in result.stdout, result.stdout
