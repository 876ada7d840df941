"""Every variable through which botocore finds a profile or credentials names a target, so the
CLI does not take the local stack instead (issue 26, defect 4): AWS_DEFAULT_PROFILE (botocore
reads it as the profile, before AWS_PROFILE), a web identity (EKS, CI) and a container's
credentials endpoint (ECS, CodeBuild, aws-vault) each meant a real account, yet the command went
to a local stack that happened to be up."""

from __future__ import annotations

import pytest

from exactly_once_ops.local_target import explicit_setting
from tests.cli.support import Invoke
from tests.cli.test_local_stack_found import Served, nothing_named, served

__all__ = ["nothing_named", "served"]  # the fixtures, used here by name


@pytest.mark.parametrize(
    "variable",
    [
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ],
)
def test_a_credentials_variable_names_a_target(variable: str) -> None:
    assert explicit_setting(None, None, None, environ={variable: "x"}) == variable


def test_a_default_profile_variable_wins(
    cli: Invoke, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_PROFILE", "no-such-profile")
    result = cli("consumers")
    assert "using the local stack" not in result.output
    assert result.exit_code == 2, result.output
    assert "no-such-profile" in result.output
