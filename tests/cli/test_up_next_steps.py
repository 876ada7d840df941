"""`eonce up`'s closing hint names the app's own consumer and topic, in a form that works."""

from __future__ import annotations

import json
import shlex

from exactly_once_cli.send import default_template
from exactly_once_cli.up import next_steps


def send_command(hint: str) -> list[str]:
    (send,) = [step for step in hint.removeprefix("Then: ").split(" · ") if "send" in step]
    return shlex.split(send)


def test_this_repositorys_app_gets_its_built_in_bodies() -> None:
    hint = next_steps({"OrdersQueueUrl": "q", "SalesTopicArn": "t", "AlarmTopicArn": "a"})
    assert send_command(hint) == ["eonce", "send", "--consumer", "orders", "--count", "100"]
    assert "--topic sales" in hint  # the alarm topic is CloudWatch's, not for messages
    default_template("orders")  # the body send will use exists


def test_another_apps_consumer_gets_a_body_shape() -> None:
    """Before: `eonce send --consumer invoices --count 100`, which send refuses ("needs
    --template") for a consumer it has no built-in body for."""
    hint = next_steps({"InvoicesQueueUrl": "q", "BillingTopicArn": "t"})
    command = send_command(hint)
    assert command[:4] == ["eonce", "send", "--consumer", "invoices"]
    template = command[command.index("--template") + 1]
    assert json.loads(template.replace("{id}", "i-1")) == {"id": "i-1"}
    assert "--topic billing" in hint
