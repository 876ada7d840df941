"""The import rules that keep the rooms apart, read from the source (tests/import_graph.py).

- The layer's modules import one another without a cycle, not even for type checking: a cycle
  hidden under TYPE_CHECKING still ties two modules together (processor.py and effects.py once
  did, over RecordContext), so each can only be understood, and moved, with the other.
- Each room imports only what it builds on: the stores know nothing of the lock or of an entry
  point; the entry points (`sqs/`, `sns/`, `streams/`, `http/`) know nothing of one another,
  except that the SNS subscriber and the stream consumer run their records on the queue
  consumer's record path.
- The library imports nothing outside itself but the standard library and its runtime
  dependencies: it ships alone, as the layer and the wheel.
- The local stack (`local_aws`) never imports this repository's app (`infra`, `app.py`): it
  learns what to run from the deployed stack, so it can run any app built with the constructs.
  Nor does the CLI (`exactly_once_cli`), by name (`importlib.import_module("infra.…")`) or
  otherwise: `eonce invoke` finds a function's code in the app's cloud assembly, whatever the app.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import exactly_once
import exactly_once_cli
import local_aws
from tests.import_graph import find_cycle, import_graph, outside_imports

LAYER = Path(exactly_once.__file__).parent
LOCAL_AWS = Path(local_aws.__file__).parent
CLI = Path(exactly_once_cli.__file__).parent

ROOMS = ("stores", "sqs", "sns", "streams", "http")
FOUNDATION = {
    f"exactly_once.{name}"
    for name in ("errors", "config", "lifecycle", "clients", "keys", "lease", "observability")
} | {"exactly_once.outcomes"}
"""The core modules every room may use: settings, errors, process lifecycle, clients, the key
rule, the lease policy and logging. The lock itself (once_lock, context, effects, ledger,
heartbeat, durable, completion) is not among them: it is built on the stores."""
MAY_IMPORT = {
    "stores": {"stores"},
    "sqs": {"sqs", "stores", "core"},
    "sns": {"sns", "sqs", "stores", "core"},
    "streams": {"streams", "sqs", "core"},
    "http": {"http", "stores", "core"},
    "core": {"core", "stores"},  # the façade (`exactly_once/__init__`) is exempt: it is lazy
}
RUNTIME_DEPENDENCIES = {
    "boto3",
    "botocore",
    "aws_lambda_powertools",
    "psycopg",  # the PostgreSQL store, imported only when a DSN selects it
    "psycopg_pool",
    "snapshot_restore_py",  # Lambda's SnapStart hooks, provided by the runtime
}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "core"


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that crosses into a room its importer may not use."""
    found = []
    for module, imported in sorted(graph.items()):
        if module == "exactly_once":
            continue
        for target in sorted(imported):
            mine, theirs = room(module), room(target)
            if theirs == "core" and target == "exactly_once":
                found.append(f"{module} -> {target} (the façade)")
            elif theirs == "core" and mine == "stores" and target not in FOUNDATION:
                found.append(f"{module} -> {target} (the lock)")
            elif theirs not in MAY_IMPORT[mine] and not (theirs == "core" and target in FOUNDATION):
                found.append(f"{module} -> {target}")
    return found


def foreign_imports(imports: dict[str, set[str]], allowed: set[str]) -> list[str]:
    """Every import of a top-level name outside the standard library and `allowed`."""
    return [
        f"{module} imports {name}"
        for module, names in sorted(imports.items())
        for name in sorted(names)
        if name not in sys.stdlib_module_names
        and name not in allowed
        and not name.startswith("mypy_boto3_")  # type stubs, under TYPE_CHECKING only
    ]


def test_the_layer_has_no_import_cycle() -> None:
    graph = import_graph(LAYER)
    assert "exactly_once.sqs.context" in graph["exactly_once.sqs.processor"]  # the graph is read
    assert "exactly_once.context" in graph["exactly_once.effects"]  # TYPE_CHECKING too
    assert "exactly_once.lifecycle" in graph["exactly_once.sqs.batch"]  # `from pkg import sub`
    assert "exactly_once.stores.dynamodb.store" in graph  # nested rooms are read
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_each_room_imports_only_what_it_builds_on() -> None:
    graph = import_graph(LAYER)
    assert {room(m) for m in graph} == {"core", *ROOMS}
    assert room_violations(graph) == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("exactly_once.stores.postgres.ledger", "exactly_once.context"),  # a store on the lock
        ("exactly_once.stores.records", "exactly_once.sqs.messages"),  # a store on an entry
        ("exactly_once.sqs.processor", "exactly_once.sns.messages"),  # SQS on SNS
        ("exactly_once.http.api", "exactly_once.sqs.keys"),  # HTTP on SQS
        ("exactly_once.once_lock", "exactly_once.http.request"),  # the lock on an entry
        ("exactly_once.sqs.batch", "exactly_once"),  # a room on the façade
    ],
)
def test_a_crossing_is_caught(importer: str, imported: str) -> None:
    graph = import_graph(LAYER)
    graph[importer] = {*graph[importer], imported}
    assert room_violations(graph) == [
        next(v for v in room_violations(graph) if v.startswith(f"{importer} -> {imported}"))
    ]


def test_the_library_imports_nothing_outside_itself() -> None:
    imports = outside_imports(LAYER)
    assert "boto3" in set().union(*imports.values())  # the imports are read
    assert foreign_imports(imports, RUNTIME_DEPENDENCIES) == []


def test_an_outside_import_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "exactly_once"
    (package / "sqs").mkdir(parents=True)
    (package / "__init__.py").write_text("import boto3\n")
    (package / "sqs" / "late.py").write_text(
        "def f():\n    from infra.consumers import CONSUMERS\n    import exactly_once_cdk\n"
    )
    assert foreign_imports(outside_imports(package), RUNTIME_DEPENDENCIES) == [
        "exactly_once.sqs.late imports exactly_once_cdk",
        "exactly_once.sqs.late imports infra",
    ]


def app_imports(imports: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} imports {name}"
        for module, names in sorted(imports.items())
        for name in sorted(names & {"infra", "app"})
    ]


def test_the_local_stack_never_imports_this_repositorys_app() -> None:
    imports = outside_imports(LOCAL_AWS)
    assert "exactly_once_cdk" in set().union(*imports.values())  # the imports are read
    assert app_imports(imports) == []


def test_an_app_import_in_the_local_stack_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "local_aws"
    package.mkdir()
    (package / "stack.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from infra.apis import ApiSpec\n"
    )
    (package / "run.py").write_text("def main():\n    import app\n")
    assert app_imports(outside_imports(package)) == [
        "local_aws.run imports app",
        "local_aws.stack imports infra",
    ]


def test_the_cli_never_imports_this_repositorys_app() -> None:
    """`invoke` imported `infra.consumers`, `infra.apis` and `infra.topics` by a computed name
    to find a function's code folder, which the rules could not even read."""
    imports = outside_imports(CLI)
    assert "local_aws" in imports["exactly_once_cli.invoke"]  # read inside functions too
    assert app_imports(imports) == []


def test_an_app_import_by_name_in_the_cli_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "exactly_once_cli"
    package.mkdir()
    (package / "invoke.py").write_text(
        "import importlib\ndef f():\n    return importlib.import_module('infra.topics')\n"
    )
    assert app_imports(outside_imports(package)) == ["exactly_once_cli.invoke imports infra"]


def loaded_after(code: str) -> list[str]:
    """The exactly_once modules loaded in a fresh interpreter after `code`, one line each."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def test_a_queue_consumer_never_loads_another_entry_point_or_postgresql() -> None:
    """The SNS and HTTP rooms and the PostgreSQL store load on first use: a queue consumer's
    cold start stays as lean as it was."""
    code = (
        "import sys, exactly_once\n"
        "from exactly_once import sqs_consumer, RecordContext, once\n"
        "other = ('exactly_once.http', 'exactly_once.sns', 'exactly_once.stores.postgres')\n"
        "print(sorted(m for m in sys.modules if m.startswith(other) or m == 'psycopg'))\n"
        "exactly_once.idempotent_api\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.http.api')))\n"
        "exactly_once.NotificationContext\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.sns.context')))\n"
    )
    assert loaded_after(code) == [
        "[]",
        "['exactly_once.http.api']",
        "['exactly_once.sns.context']",
    ]


def test_once_loads_on_first_use_and_its_name_stays_the_function() -> None:
    """The queue consumer runs on the lock's state machine (claims, held_lock), not on `once`
    and `begin`, which resolve a store from settings: their module loads when the name is first
    used, not in a consumer's cold start. It is not called `once`, because importing a submodule
    sets it as the package's attribute and would hide the function."""
    code = (
        "import sys, exactly_once\n"
        "from exactly_once import sqs_consumer, RecordContext\n"
        "print('exactly_once.once_lock' in sys.modules)\n"
        "from exactly_once import once\n"
        "import exactly_once.once_lock\n"
        "from exactly_once import once as again\n"
        "print(once is again is exactly_once.once, once.__module__)\n"
        "print(sorted(m for m in sys.modules if m.startswith('exactly_once.http')))\n"
    )
    assert loaded_after(code) == ["False", "True exactly_once.once_lock", "[]"]


def test_a_consumers_cold_start_leaves_the_paths_it_may_never_run() -> None:
    """`once`/`begin` (a consumer never calls them) and the dead-letter send (a permanent
    failure's path) load on first use, not in every consumer's cold start."""
    code = (
        "import sys\n"
        "from exactly_once import sqs_consumer, RecordContext\n"
        "rare = ('exactly_once.once_lock', 'exactly_once.once_block', "
        "'exactly_once.sqs.dead_letter')\n"
        "print(sorted(m for m in rare if m in sys.modules))\n"
        "from exactly_once.sqs import reports\n"
        "print('exactly_once.sqs.reports' in sys.modules)\n"
    )
    assert loaded_after(code) == ["[]", "True"]


def test_every_public_name_still_imports() -> None:
    """What `import exactly_once` offered before the rooms, it offers still, lazily or not."""
    code = (
        "import exactly_once\n"
        "missing = [n for n in exactly_once.__all__ if getattr(exactly_once, n, None) is None]\n"
        "print(len(exactly_once.__all__), missing)\n"
    )
    assert loaded_after(code) == [f"{len(exactly_once.__all__)} []"]
    # the 43 names 0.2.0 offered, none dropped, the stream consumer's two, the resumables' five
    assert len(exactly_once.__all__) == 50
    assert {"StreamConsumer", "stream_consumer"} <= set(exactly_once.__all__)
    resumables = {"Resumable", "resumable", "complete_abandoned", "Completer", "NotFinished"}
    assert resumables <= set(exactly_once.__all__)
