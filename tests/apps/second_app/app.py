"""A second CDK app, written by hand as a user would, unlike this repository's own: `eonce up
--app tests/apps/second_app` must run it (tests/e2e/test_second_app.py)."""

from aws_cdk import App

# The app's folder is on the path when the CDK CLI runs `python app.py` there; the
# repository's mypy run checks this file from the repository root, where it is not.
from billing_service.stack import BillingStack  # type: ignore[import-not-found]

app = App()
BillingStack(app, "SecondApp")
app.synth()
