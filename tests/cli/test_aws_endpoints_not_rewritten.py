"""Queue URLs are rewritten to the emulator's form only at an emulator's endpoint (issue 26,
defect 9): `is_aws_endpoint` knew only *.amazonaws.com(.cn), so a real account reached through
SQS's dual-stack endpoint (`sqs.<region>.api.aws`, AWS_ENDPOINT_URL_SQS on an IPv6 network) or
another partition's had its stack's queue URLs rewritten onto that endpoint as if it were an
emulator's."""

from __future__ import annotations

import pytest

from exactly_once_ops.targets import is_aws_endpoint


@pytest.mark.parametrize(
    "url",
    [
        "https://sqs.us-east-1.api.aws",  # dual-stack
        "https://sqs-fips.us-east-1.api.aws",
        "https://sqs.cn-north-1.api.amazonwebservices.com.cn",
        "https://sqs.eusc-de-east-1.amazonaws.eu",  # the European Sovereign Cloud
        "https://sqs.us-iso-east-1.c2s.ic.gov",
    ],
)
def test_every_partitions_endpoints_are_aws(url: str) -> None:
    assert is_aws_endpoint(url)


@pytest.mark.parametrize(
    "url", ["http://localhost:4566", "http://127.0.0.1:5000", "https://sqs.example.api.aws.test"]
)
def test_an_emulator_is_not(url: str) -> None:
    assert not is_aws_endpoint(url)
