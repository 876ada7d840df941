"""The idempotency store a command works on: a DynamoDB table, or a PostgreSQL database (DSN).

The local stack runs on either (`--store`) and records a PostgreSQL store's DSN in its state
file, so the commands that target that stack find the database without being told. psycopg is
imported only once a DSN is in play, and a database error ends as one `error:` line (exit 1),
as an AWS error does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from exactly_once_cli.common import CliError, fail
from exactly_once_ops.local_state import default_paths, serving

if TYPE_CHECKING:
    from exactly_once.stores.postgres.store import PostgresStore

DSN_ENV = "IDEMPOTENCY_DSN"
# The extra, not the bare drivers: it pins the psycopg versions the store is tested with.
PG_REQUIREMENTS = "pip install 'exactly-once-sqs[postgres]'"


class LocalStore(StrEnum):
    """The store the local stack's functions use."""

    dynamodb = "dynamodb"
    postgres = "postgres"

    @property
    def servers(self) -> str:
        """What the local stack starts for it, for progress lines."""
        if self is LocalStore.postgres:
            return "moto, DynamoDB Local and PostgreSQL"
        return "moto and DynamoDB Local"


StoreOption = Annotated[
    LocalStore,
    typer.Option(
        "--store",
        help="The idempotency store of the local functions: the stack's DynamoDB table, or a "
        "PostgreSQL server started with the stack (IDEMPOTENCY_DSN for every function).",
    ),
]

DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        help="Read the PostgreSQL store at this libpq DSN or URL instead of the stack's table "
        "(default: the local stack's PostgreSQL, when `eonce up --store postgres` serves the "
        "stack).",
    ),
]


def recorded_dsn(endpoint_url: str | None, stack: str) -> str | None:
    """The PostgreSQL DSN of the local stack, when `endpoint_url` and `stack` name it."""
    local = serving(endpoint_url, stack)
    return None if local is None else local[0].postgres_dsn


def running_dsn() -> str | None:
    """The PostgreSQL DSN of the local stack that is up, if it runs on PostgreSQL."""
    paths = default_paths()
    state = paths.running() if paths is not None else None
    return None if state is None else state.postgres_dsn


def database_dsn(dsn: str | None) -> str:
    """--dsn (or $IDEMPOTENCY_DSN, which typer reads into it), else the local stack's."""
    chosen = dsn or running_dsn()
    if not chosen:
        raise CliError(
            f"no database: pass --dsn, set {DSN_ENV}, or start the local stack with "
            "`eonce up --store postgres`"
        )
    return chosen


def describe(dsn: str) -> str:
    """The database for people: host, port and name, never a password."""
    from exactly_once.stores.postgres.connections import describe as described

    return described(dsn)


@contextmanager
def database_errors(dsn: str | None) -> Iterator[None]:
    """Turn psycopg's errors (unreachable server, bad DSN, SQL errors) into one line naming
    the database. Nothing to do without a DSN. (The pools stay open: their threads are daemons,
    and a store the caller still holds may go on using its pool.)"""
    if dsn is None:
        yield
        return
    try:
        import psycopg
    except ModuleNotFoundError as exc:
        fail(f"the PostgreSQL store needs {exc.name}, which is not installed: {PG_REQUIREMENTS}")
    from exactly_once.errors import ConfigurationError

    try:
        yield
    except psycopg.Error as exc:
        fail(f"{describe(dsn)}: {type(exc).__name__}: {exc}")
    except ConfigurationError as exc:  # an unparsable DSN: never quoted (it may hold a password)
        fail(f"{describe(dsn)}: {exc}")


def postgres_store(dsn: str) -> PostgresStore:
    """The store at `dsn`, once a connection proved it reachable (the pool would retry first)."""
    from exactly_once.stores.postgres import connections
    from exactly_once.stores.postgres.store import PostgresStore

    connections.connect(dsn).close()
    return PostgresStore(dsn)
