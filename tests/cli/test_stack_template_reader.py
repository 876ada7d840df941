"""`replay SUBSCRIBER` finds a subscriber's topic with the same template reader the local stack
runs the app with (`exactly_once_ops.app_template`), so the two cannot disagree about which
topic a subscriber hears: the CLI once had a second reader of its own, which did not know the
short form of `Fn::GetAtt` ("Fn.Arn") that the emulator's did.
"""

from __future__ import annotations

from typing import Any

from exactly_once_ops.app_template import read_template
from exactly_once_ops.stack_template import topics_in_template

FUNCTION = "shop-TallyFunction"
PHYSICAL = {
    "TallyFunction": FUNCTION,
    "BillingTopic": "arn:aws:sns:us-east-1:123456789012:Billing",
    "AlarmsTopic": "arn:aws:sns:us-east-1:123456789012:Alarms",
}


def template(endpoint: Any) -> dict[str, Any]:
    """A subscriber whose Lambda subscription names its function by `endpoint`."""
    marked = {"ExactlyOnce": {"kind": "subscriber", "id": "Tally"}}
    return {
        "Resources": {
            "BillingTopic": {"Type": "AWS::SNS::Topic"},
            "AlarmsTopic": {"Type": "AWS::SNS::Topic"},
            "TallyFunction": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Handler": "tally.count", "Code": {"ZipFile": "pass"}},
                "Metadata": marked,
            },
            "TallyToBilling": {
                "Type": "AWS::SNS::Subscription",
                "Properties": {
                    "Protocol": "lambda",
                    "Endpoint": endpoint,
                    "TopicArn": {"Ref": "BillingTopic"},
                },
            },
        }
    }


def test_the_short_get_att_names_the_function_for_both_readers() -> None:
    short = template({"Fn::GetAtt": "TallyFunction.Arn"})
    (tally,) = read_template(short, stack_name="shop").subscribers
    assert tally.topic == "BillingTopic"
    assert topics_in_template(short, PHYSICAL, FUNCTION) == [PHYSICAL["BillingTopic"]]


def test_the_replay_and_the_emulator_name_one_topic() -> None:
    for endpoint in ({"Fn::GetAtt": ["TallyFunction", "Arn"]}, {"Ref": "TallyFunction"}):
        found = template(endpoint)
        (tally,) = read_template(found, stack_name="shop").subscribers
        assert topics_in_template(found, PHYSICAL, FUNCTION) == [PHYSICAL[tally.topic]]


def test_a_topic_outside_the_stack_is_named_by_its_arn() -> None:
    """The metadata may name a topic by ARN (one another stack made): replay takes it as it
    is, where the emulator, which delivers only its own stack's topics, refuses it."""
    elsewhere = "arn:aws:sns:us-east-1:123456789012:Elsewhere"
    found = template({"Ref": "SomethingElse"})
    found["Resources"]["TallyFunction"]["Metadata"]["ExactlyOnce"]["topic"] = elsewhere
    assert topics_in_template(found, PHYSICAL, FUNCTION) == [elsewhere]
