"""A traceback the app printed and survived is not why the deploy failed (issue 26, defect 2).

`failure_reason` took the last Python traceback in the CDK CLI's output as the app's fatal
exception, whatever came after it. An app that logs an exception at synth (a retried lookup, a
`logging.exception`) and then deploys into a CloudFormation failure was reported as failing with
the logged exception, glued to the deploy's progress lines; the CLI's own error lines were lost.
"""

from __future__ import annotations

from local_aws.local_deploy import failure_reason
from tests.local.test_deploy_failure_reason import MISSING_PYTHON, STACK_FAILURE, SYNTH_FAILURE

LOGGED = """\
Traceback (most recent call last):
  File "/work/shop/app.py", line 12, in lookup
    return client.get_parameter(Name="/shop/vpc")["Parameter"]["Value"]
KeyError: 'Parameter'
using the default VPC settings instead
"""


def test_a_logged_traceback_before_a_cloudformation_failure_is_not_the_reason() -> None:
    assert failure_reason(LOGGED + STACK_FAILURE) == (
        "Shop failed to deploy: ToolkitError: The stack named Shop failed creation, it may need "
        "to be manually deleted from the AWS console: ROLLBACK_COMPLETE: Invalid value for the "
        "parameter MessageRetentionPeriod."
    )


def test_the_traceback_that_ended_the_app_still_is() -> None:
    assert failure_reason(LOGGED + SYNTH_FAILURE) == f"InterpreterNotFound: {MISSING_PYTHON}"
    assert failure_reason(SYNTH_FAILURE) == f"InterpreterNotFound: {MISSING_PYTHON}"
