"""The server settings every store connection runs with, without importing psycopg: the CDK app
reads them (RDS Proxy's init query) at synth time."""

from __future__ import annotations

from exactly_once.config import env_int

STATEMENT_TIMEOUT_MS = 10_000  # a store statement that takes longer is failing, not slow
# A holder frozen between its completion and its commit (Lambda's freeze) keeps the record's row
# locked; an acquire waits this long for it, then reports the key in progress.
LOCK_TIMEOUT_MS = 2_000
# A holder's transaction left idle this long (a frozen or hung function) is ended by the server,
# so its locks cannot block the key's next holder for longer. Slow work belongs outside it.
IDLE_IN_TRANSACTION_MS = 60_000


def session_settings() -> dict[str, int]:
    """The settings, in milliseconds (IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS,
    IDEMPOTENCY_PG_LOCK_TIMEOUT_MS and IDEMPOTENCY_PG_IDLE_IN_TRANSACTION_MS override them)."""
    return {
        "statement_timeout": env_int("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS", STATEMENT_TIMEOUT_MS),
        "lock_timeout": env_int("IDEMPOTENCY_PG_LOCK_TIMEOUT_MS", LOCK_TIMEOUT_MS),
        "idle_in_transaction_session_timeout": env_int(
            "IDEMPOTENCY_PG_IDLE_IN_TRANSACTION_MS", IDLE_IN_TRANSACTION_MS
        ),
    }


def lent_settings() -> dict[str, int]:
    """The settings of the connections lent to holders (`ctx.transaction`): the same, but no
    statement_timeout. The store's bound is for its own statements; a holder's business
    statements run under the database's own setting, and the completion sets the store's for
    itself (`SET LOCAL`, statements.COMPLETE_AND_COMMIT). A frozen holder's idle transaction is
    still ended after idle_in_transaction_session_timeout."""
    return {k: v for k, v in session_settings().items() if k != "statement_timeout"}


def init_query() -> str:
    """The same settings as SQL, for a server-side hook that applies them to each connection
    (RDS Proxy's init query): behind the proxy, a client's own session settings would pin it
    to one database connection."""
    return "; ".join(f"SET {name} = {value}" for name, value in session_settings().items())
