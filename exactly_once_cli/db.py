"""`db`: the PostgreSQL store's database: apply the schema, see what is missing, delete expired
records.

PostgreSQL has neither DynamoDB's implicit schema nor its TTL, so these are the two chores an
operator (or a deploy, or a schedule) runs; the library never does them on its own.
"""

from __future__ import annotations

from typing import Annotated

import typer

from exactly_once_cli.common import stdout
from exactly_once_cli.store_target import DSN_ENV, database_dsn, database_errors, describe

db_app = typer.Typer(
    help="The PostgreSQL store's database: schema migrations and expired-record cleanup.",
    no_args_is_help=True,
)

DbDsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar=DSN_ENV,
        show_envvar=False,
        help=f"libpq DSN or URL of the database (default: ${DSN_ENV}, else the local stack's "
        "PostgreSQL when `eonce up --store postgres` is up).",
    ),
]


@db_app.command("migrate")
def migrate_cmd(dsn: DbDsnOption = None) -> None:
    """Apply the schema migrations this version ships that the database lacks (idempotent)."""
    url = database_dsn(dsn)
    with database_errors(url):
        from exactly_once.stores.postgres.migrations import migrate

        applied = migrate(url)
    if applied:
        stdout().print(f"[green]✓[/] applied {', '.join(applied)} to {describe(url)}")
    else:
        stdout().print(f"nothing to apply: {describe(url)} is up to date", markup=False)


@db_app.command("pending")
def pending_cmd(dsn: DbDsnOption = None) -> None:
    """List the shipped migrations the database has not applied (`db migrate` applies them)."""
    url = database_dsn(dsn)
    with database_errors(url):
        from exactly_once.stores.postgres.migrations import pending

        missing = pending(url)
    out = stdout()
    for version in missing:
        out.print(version, markup=False)
    if missing:
        out.print(
            f"{len(missing)} migration(s) pending on {describe(url)}: `eonce db migrate` "
            "applies them",
            markup=False,
        )
    else:
        out.print(f"nothing pending: {describe(url)} is up to date", markup=False)


@db_app.command("cleanup")
def cleanup_cmd(
    dsn: DbDsnOption = None,
    batch: Annotated[
        int, typer.Option(min=1, help="Rows deleted per transaction (short ones lock less).")
    ] = 1000,
) -> None:
    """Delete the records whose expiry passed (reads already treat them as absent)."""
    url = database_dsn(dsn)
    with database_errors(url):
        from exactly_once.stores.postgres.cleanup import delete_expired

        deleted = delete_expired(url, batch=batch)
    stdout().print(f"deleted {deleted} expired record(s) from {describe(url)}", markup=False)
