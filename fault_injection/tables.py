"""Fresh tables for each consumer run, so one run's records never meet another's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fault_injection.consumers import Library
from local_aws.tables import create_idempotency_table, create_ledger_table, create_powertools_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def create_run_tables(client: DynamoDBClient, library: Library, prefix: str) -> tuple[str, str]:
    """(idempotency table, ledger table) named after `prefix`."""
    idempotency, ledger = f"{prefix}-idempotency", f"{prefix}-ledger"
    if library is Library.POWERTOOLS:
        create_powertools_table(client, idempotency)
    else:
        create_idempotency_table(client, idempotency)
    create_ledger_table(client, ledger)
    return idempotency, ledger
