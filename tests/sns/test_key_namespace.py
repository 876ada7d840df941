"""The SNS subscriber keeps hashed and plain keys apart (tests/stores/test_key_namespace.py has
the rule on both stores): a message keyed `sha256:<digest of K>` runs as its own work, and is
not taken for K's duplicate."""

from __future__ import annotations

import json
from typing import Any

from exactly_once import NotificationContext
from exactly_once.stores.codec import sha256_hex
from tests.sns.conftest import MakeSubscriber, sns_event, sns_record


def test_a_plain_sha256_key_is_not_a_duplicate_of_the_key_it_hashes(
    make_subscriber: MakeSubscriber,
) -> None:
    hidden = "o-" + "x" * 2000  # stored hashed: too long for a partition key
    alias = "sha256:" + sha256_hex(hidden)
    ran: list[str] = []

    def charge(message: Any, ctx: NotificationContext) -> str:
        ran.append(message["orderId"])
        return "charged"

    handler = make_subscriber(charge)
    for key in (hidden, alias, hidden):
        handler(sns_event(sns_record(json.dumps({"orderId": key}))))
    assert ran == [hidden, alias]
