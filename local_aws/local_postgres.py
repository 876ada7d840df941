"""The local stack's idempotency store when it runs on PostgreSQL (`--store postgres`): a
PostgreSQL server of the stack's own, migrated before any function starts (the functions' variables
are rewritten to it by `store_environment`).

`pg_ctl` detaches the server into a session of its own, so it is no descendant of the process
that started it: `postmaster` finds it through its data directory, which is how `down` stops a
server whose stack could not.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from local_aws.lifecycle import Lifecycle
from local_aws.postgres_server import PostgresServer, PostgresServerError
from local_aws.processes import ProcessId, stat

SERVER_COMMANDS = ("postgres", "postmaster")


def postmaster(data_dir: Path) -> ProcessId | None:
    """The server running on `data_dir` (its postmaster.pid, checked against /proc), if any."""
    try:
        first = (data_dir / "postmaster.pid").read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    info = stat(int(first)) if first.strip().isdigit() else None
    if info is None or info.state == "Z" or info.command not in SERVER_COMMANDS:
        return None  # a stale file, or its pid now names another program
    return info.id


def stop_stale(data_dir: Path) -> None:
    """Stop a server a dead stack left running on `data_dir` (a killed `up`), if there is one."""
    if postmaster(data_dir) is None:
        return
    # The stop itself fails when the server exits under it: what matters is that it is gone.
    with contextlib.suppress(PostgresServerError):
        PostgresServer(data_dir).stop()


class LocalPostgres(Lifecycle):
    """A fresh, migrated PostgreSQL cluster for one run of the local stack.

    With `data_dir` (the long-lived stack's, under its state folder) the cluster is made anew
    there at start, as DynamoDB Local's in-memory tables are, and kept after stop for a look at
    its log; without one it lives in a temporary folder, removed on stop.
    """

    def __init__(self, data_dir: Path | None = None, *, fsync: bool = True) -> None:
        self.data_dir = data_dir
        self.server = PostgresServer(data_dir, fsync=fsync)

    @property
    def dsn(self) -> str:
        return self.server.dsn

    def start(self) -> LocalPostgres:
        if self.data_dir is not None:
            stop_stale(self.data_dir)
            shutil.rmtree(self.data_dir, ignore_errors=True)
        self.server.start()
        try:
            from exactly_once.stores.postgres.migrations import migrate

            migrate(self.dsn)
        except BaseException:
            self.server.stop()
            raise
        return self

    def stop(self) -> None:
        if self.server.running:
            self.server.stop()
