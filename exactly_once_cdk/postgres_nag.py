"""The cdk-nag rules the PostgreSQL store acknowledges, each for a reason nag cannot see."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_rds as rds


def acknowledge_database_rules(cluster: rds.DatabaseCluster, *, keep: bool) -> None:
    """SMG4 always; RDS10 only where the stage does not keep its data (`keep` False)."""
    # The generated secret itself: `cluster.secret` is its attachment to the cluster, a sibling.
    Validations.of(cluster.node.find_child("Secret")).acknowledge(
        Acknowledgment(
            id="AwsSolutions-SMG4",
            reason="Only RDS Proxy uses this password: the functions and the schema migration "
            "log in with IAM tokens through the proxy, no person or job reads the secret, and "
            "the database accepts connections from the proxy's security group alone. Rotation "
            "would need a rotation function in the isolated VPC and a Secrets Manager endpoint "
            "(an hourly charge per AZ); docs/infrastructure.md shows how to add it.",
        )
    )
    if not keep:
        Validations.of(cluster).acknowledge(
            Acknowledgment(
                id="AwsSolutions-RDS10",
                reason="Non-prod stage: the stack is meant to be destroyed with its data, like "
                "its DynamoDB tables there. Prod stages (stage=prod) turn deletion protection "
                "on and delete the cluster only through a final snapshot.",
            )
        )
