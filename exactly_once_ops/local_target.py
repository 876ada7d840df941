"""The local stack as the CLI's target when none is named: after `eonce up`, `send`, `locks`,
`replay` and the rest work in any shell, without `eval "$(eonce env)"`.

The rule. The CLI talks to the stack `eonce up` serves from the state folder (`up.json`,
exactly_once_ops.local_state) when that stack is up and nothing names a target explicitly:

- no `--endpoint-url`, `--profile` or `--region` option on the command line;
- none of AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, AWS_PROFILE or AWS_ACCESS_KEY_ID in
  the environment, nor the other variables through which botocore finds a profile or
  credentials: AWS_DEFAULT_PROFILE (botocore's older name for AWS_PROFILE), a web identity
  (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE: EKS, CI) or a container's credentials endpoint
  (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI: ECS, CodeBuild, aws-vault --ecs-server).

Any of them is an explicit choice and wins, as before. A region variable alone (AWS_REGION,
AWS_DEFAULT_REGION, which many shells export for every tool) names no account, and neither do
the configuration files: a default profile in ~/.aws is reached with `--profile default` while
a local stack is up. The local target carries moto's endpoint, DynamoDB Local's, the region and
the test credentials `up` recorded; `--stack` then defaults to the served stack's name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from exactly_once_ops.local_state import default_paths
from exactly_once_ops.targets import AwsTarget, LocalStackTarget

EXPLICIT_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
"""Variables that name a target (with any AWS_ENDPOINT_URL_<SERVICE>): an endpoint, a profile,
or credentials botocore would use (a web identity's role, a container's credentials endpoint)."""


def explicit_setting(
    endpoint_url: str | None,
    profile: str | None,
    region: str | None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """What names a target explicitly (a variable's name, else the option), else None.

    `region` is the --region option's value (from the command line, not a variable)."""
    variables = os.environ if environ is None else environ
    for name, value in sorted(variables.items()):
        if value and (name in EXPLICIT_VARIABLES or name.startswith("AWS_ENDPOINT_URL_")):
            return name
    given = (("--endpoint-url", endpoint_url), ("--profile", profile), ("--region", region))
    return next((option for option, chosen in given if chosen), None)


def local_target(
    endpoint_url: str | None = None,
    profile: str | None = None,
    region: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> AwsTarget | None:
    """The local stack as a target, when it is up and no target is named explicitly (`region`:
    the --region option's value, given on the command line)."""
    if explicit_setting(endpoint_url, profile, region, environ) is not None:
        return None
    paths = default_paths()
    state = paths.running() if paths is not None else None
    if state is None:
        return None
    env = state.environment
    return AwsTarget(
        endpoint_url=state.endpoint_url,
        region=state.region,
        local=LocalStackTarget(
            pid=state.pid,
            stack=state.stack,
            dynamodb_endpoint_url=state.dynamodb_endpoint_url,
            access_key_id=env.get("AWS_ACCESS_KEY_ID", "testing"),
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY", "testing"),
            session_token=env.get("AWS_SESSION_TOKEN"),
        ),
    )
