"""Connections to the store's database: one pool per DSN per process, created on first use.

The pool is psycopg_pool's. Its connections are in autocommit, so each store statement is its
own transaction; a holder's `ctx.transaction` borrows one and turns autocommit off until it
commits or rolls back. In the cloud the password is not in the DSN: with
IDEMPOTENCY_DB_IAM_AUTH it is an RDS IAM token made for each new connection (RDS Proxy), or it
is read from the Secrets Manager secret IDEMPOTENCY_DB_SECRET_ARN (the migration function).
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

import psycopg

from exactly_once import lifecycle
from exactly_once.config import env_bool, env_choice, env_int
from exactly_once.errors import ConfigurationError
from exactly_once.stores.postgres.session import lent_settings, session_settings

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

# Pool connections are closed after this long: IAM tokens are valid for 15 minutes.
MAX_LIFETIME_S = 600.0
# IDEMPOTENCY_PG_SESSION_SETTINGS: "startup" sends the session settings with each connection;
# "server" leaves them to the server or RDS Proxy. A misspelling is refused, not read as startup.
SESSION_SETTINGS_MODES = ("startup", "server")

STATEMENTS = "statements"  # the store's own short statements, in autocommit
TRANSACTIONS = "transactions"  # the holders' open transactions (`ctx.transaction`)
# The holders' running steps' transactions (steps/): a step needs one while its holder's own
# stays open, so from a pool of their own, or holders as many as the pool would starve it.
STEPS = "steps"

_lock = threading.Lock()
_pools: dict[tuple[str, str], ConnectionPool[Connection[Any]]] = {}
# A forked child's inherited pools: kept referenced and never closed, because an explicit close
# sends Terminate on a socket the parent still uses (psycopg's own finaliser checks the pid and
# leaves a connection made by another process alone, but a pool's close does not).
_inherited: list[ConnectionPool[Connection[Any]]] = []


def pool(conninfo: str, purpose: str = STATEMENTS) -> ConnectionPool[Connection[Any]]:
    """The process's pool for `conninfo` and `purpose`, opened on first use (never at import).

    Apart by purpose, so that holders' open transactions can never starve the store's own
    statements (a holder with its transaction open still extends its lease, and its neighbours
    still acquire and complete), nor a step's transaction (STEPS).
    """
    found = _pools.get((conninfo, purpose))
    if found is not None:
        return found
    checked(conninfo)
    with _lock:
        found = _pools.get((conninfo, purpose))
        if found is None:
            found = new_pool(conninfo, purpose)
            _pools[(conninfo, purpose)] = found
    return found


def new_pool(conninfo: str, purpose: str = STATEMENTS) -> ConnectionPool[Connection[Any]]:
    """A new pool of store connections, not the process's (`pool` keeps those; tools and
    tests that need a pool of their own close it themselves)."""
    from psycopg_pool import ConnectionPool

    return ConnectionPool(
        conninfo,
        connection_class=HolderConnection,
        kwargs=lambda: _connect_kwargs(conninfo, purpose),
        min_size=0,
        # A batch runs 10 records at a time (BATCH_CONCURRENCY): each may hold one
        # transaction and run one statement at once.
        max_size=env_int("IDEMPOTENCY_PG_POOL_MAX", 10),
        # How long a caller waits for a pooled connection. Generous: waiting for one is
        # better than failing work that would run a moment later (a burst of requests in one
        # process, new connections forked slowly on a loaded server).
        timeout=float(env_int("IDEMPOTENCY_PG_POOL_WAIT_S", 30)),
        max_lifetime=MAX_LIFETIME_S,
        name=f"exactly-once-{purpose}",
        open=True,
    )


class HolderConnection(psycopg.Connection[Any]):
    """A pooled connection that can be lent to a holder as `ctx.transaction`.

    While lent, its transaction belongs to the store, which commits it with the completion or
    rolls it back; a commit, rollback or close of the holder's own would break that promise
    (a zombie's writes committed apart from its refused completion), so they raise. A
    `with conn.transaction():` block is a savepoint inside it, and works.
    """

    _lent = False

    def lend(self, lent: bool) -> None:
        self._lent = lent

    def _refuse(self, what: str) -> None:
        if self._lent:
            raise RuntimeError(
                f"ctx.transaction cannot {what}: it commits with the key's completion when the "
                "function returns, and rolls back when it raises"
            )

    def commit(self) -> None:
        self._refuse("commit")
        super().commit()

    def rollback(self) -> None:
        self._refuse("roll back")
        super().rollback()

    def close(self) -> None:
        self._refuse("be closed")
        super().close()

    def __enter__(self) -> HolderConnection:
        self._refuse("be used as a context manager (it commits on exit)")
        return self


def lend(conn: Any, *, lent: bool) -> None:
    """Mark a pooled connection lent to a holder, or taken back (a no-op for a connection
    that is not a HolderConnection)."""
    method = getattr(conn, "lend", None)
    if method is not None:
        method(lent)


def checked(conninfo: str) -> str:
    """`conninfo`, once it parses; else a ConfigurationError that never quotes it (libpq's own
    message can carry the password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(conninfo)
    except Exception:
        raise ConfigurationError(
            "the PostgreSQL DSN cannot be parsed (check its quoting and percent-encoding)"
        ) from None
    return conninfo


def close_all() -> None:
    """Close every pool (tests, tools and a SnapStart restore need fresh connections)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for each in pools:
        each.close()


def connect(conninfo: str) -> Connection[Any]:
    """One connection outside the pool, for migrations and the cleanup job."""
    import psycopg

    return psycopg.connect(checked(conninfo), **_connect_kwargs(conninfo))


def _connect_kwargs(conninfo: str, purpose: str = STATEMENTS) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": env_int("IDEMPOTENCY_PG_CONNECT_TIMEOUT", 5),
        "application_name": "exactly-once",
        # No server-side prepared statements: behind RDS Proxy they pin a client to one
        # database connection, which defeats its pooling.
        "prepare_threshold": None,
    }
    # "server": the server or RDS Proxy sets them (init_query), so sending them would only pin.
    if env_choice("IDEMPOTENCY_PG_SESSION_SETTINGS", SESSION_SETTINGS_MODES, "startup") != "server":
        settings = lent_settings() if purpose in (TRANSACTIONS, STEPS) else session_settings()
        kwargs["options"] = " ".join(f"-c {k}={v}" for k, v in settings.items())
    password = _password(conninfo)
    if password is not None:
        kwargs["password"] = password
    return kwargs


def _password(conninfo: str) -> str | None:
    """An IAM token or the secret's password, when the DSN does not carry one."""
    secret_arn = os.environ.get("IDEMPOTENCY_DB_SECRET_ARN")
    if secret_arn:
        from exactly_once import clients

        secret = clients.secretsmanager().get_secret_value(SecretId=secret_arn)
        value: dict[str, Any] = json.loads(secret["SecretString"])
        return str(value["password"])
    if not env_bool("IDEMPOTENCY_DB_IAM_AUTH", False):
        return None
    from psycopg.conninfo import conninfo_to_dict

    from exactly_once import clients

    params = conninfo_to_dict(conninfo)
    return str(
        clients.rds().generate_db_auth_token(
            DBHostname=str(params["host"]),
            Port=int(str(params.get("port") or 5432)),
            DBUsername=str(params["user"]),
            Region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        )
    )


def describe(conninfo: str) -> str:
    """The DSN for people: host, port and database, never a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(conninfo)
    except Exception:  # an unparsable DSN fails when connecting; here it is only a name
        return "postgresql (unparsable DSN)"
    host = params.get("host") or "localhost"
    return f"postgresql://{host}:{params.get('port') or 5432}/{params.get('dbname') or ''}"


def _forget() -> None:
    """In a clone: new pools on first use, with a lock nobody holds (see `_inherited`)."""
    global _lock
    _lock = threading.Lock()
    _inherited.extend(_pools.values())
    _pools.clear()


def _close() -> None:
    """Before a SnapStart snapshot: close every pool, so no restored copy inherits a session."""
    with _lock:
        for found in _pools.values():
            found.close()
        _pools.clear()


lifecycle.on_clone(_forget)
lifecycle.on_snapshot(_close)
