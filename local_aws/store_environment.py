"""Which idempotency store a local function process selects, by its environment (and that it
inherits no AWS profile from the shell: `PROFILE_VARIABLES`).

The library reads `IDEMPOTENCY_TABLE` (DynamoDB) or `IDEMPOTENCY_DSN` (PostgreSQL) and refuses
both at once. The CDK app deploys the table's variable into moto (it cannot deploy PostgreSQL
there), so on a PostgreSQL local stack every function's variables are rewritten to the DSN; and
a process takes the store its function names, whatever selector the shell that started it had.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

DSN_VARIABLE = "IDEMPOTENCY_DSN"
TABLE_VARIABLE = "IDEMPOTENCY_TABLE"
# A shell's named profile: the local stack hides the config files (AWS_CONFIG_FILE=/dev/null),
# and botocore refuses a profile it cannot find even when keys are given (ProfileNotFound).
PROFILE_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE")


def on_postgres(environment: Mapping[str, str], dsn: str) -> dict[str, str]:
    """A deployed function's variables with the PostgreSQL store in place of the table."""
    selected = {k: v for k, v in environment.items() if k != TABLE_VARIABLE}
    selected[DSN_VARIABLE] = dsn
    return selected


def apply_function_environment(
    environ: MutableMapping[str, str], function: Mapping[str, str]
) -> None:
    """Set a function's variables in a process environment; when they name a store, the other
    store's selector (inherited from the shell, say) goes, and so does the shell's profile
    (`PROFILE_VARIABLES`): a function, as in Lambda, has none."""
    environ.update(function)
    for name in PROFILE_VARIABLES:
        if name not in function:
            environ.pop(name, None)
    for mine, other in ((DSN_VARIABLE, TABLE_VARIABLE), (TABLE_VARIABLE, DSN_VARIABLE)):
        if function.get(mine):
            environ.pop(other, None)
