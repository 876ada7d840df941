"""The local stack's moto: a Kinesis put invokes only the functions of enabled mappings.

moto 5.2.5 invokes every function mapped to a stream on each PutRecord, disabled mappings
included, and an invocation needs Docker. The local stack's stream mappings are disabled (its
own poller reads the shards), so without the patch every put would try Docker once per record.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.awslambda.models import LambdaBackend
from moto.kinesis.models import Stream

from local_aws import moto_entry


def _function(lam: Any, role: str, name: str) -> None:
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("h.py", "def handle(event, context):\n    return {}\n")
    lam.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="h.handle",
        Code={"ZipFile": code.getvalue()},
    )


def test_a_put_invokes_the_enabled_mappings_functions_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Stream, "put_record", moto_entry._put_record)
    invoked: list[str] = []
    monkeypatch.setattr(
        LambdaBackend,
        "send_kinesis_message",
        lambda self, function_name, **kwargs: invoked.append(function_name.rsplit(":", 1)[-1]),
    )
    with mock_aws():
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lam = boto3.client("lambda", region_name="us-east-1")
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        for name in ("polled-locally", "invoked-by-moto"):
            kinesis.create_stream(StreamName=name, ShardCount=1)
            _function(lam, role, name)
            lam.create_event_source_mapping(
                FunctionName=name,
                EventSourceArn=kinesis.describe_stream(StreamName=name)["StreamDescription"][
                    "StreamARN"
                ],
                StartingPosition="TRIM_HORIZON",
                Enabled=name == "invoked-by-moto",
            )
        for name in ("polled-locally", "invoked-by-moto"):
            put = kinesis.put_record(StreamName=name, Data=b"{}", PartitionKey="k")
            assert put["SequenceNumber"]
            records = kinesis.put_records(
                StreamName=name, Records=[{"Data": b"{}", "PartitionKey": "k"}]
            )
            assert records["FailedRecordCount"] == 0
        iterator = kinesis.get_shard_iterator(
            StreamName="polled-locally",
            ShardId="shardId-000000000000",
            ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
        assert len(kinesis.get_records(ShardIterator=iterator)["Records"]) == 2
    assert invoked == ["invoked-by-moto", "invoked-by-moto"]
