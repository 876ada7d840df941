"""`eonce up --app` from another folder, and an app with no cdk.json (`--app app.py`).

The other commands find the stack through the state folder of the folder they run in (beside
the nearest cdk.json). So `up --app svc` run elsewhere must print hints that work from there
(`cd svc && eonce down`), not `eonce down`, which says "no local stack state here"; and
`up --app app.py` with no cdk.json must keep its state beside the app, where the other
commands then find it, instead of refusing with "no local stack state here".

The installed package has no checkout to fall back on: `local_aws` is not found beside a
cdk.json, which is simulated by hiding its spec. start_background is replaced by one that
records the state folder and returns a served state (or raises AlreadyUp), so nothing starts.
"""

from __future__ import annotations

import importlib.util
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from exactly_once_cli import up as up_cli
from exactly_once_cli.app import app
from exactly_once_ops.local_state import (
    STATE_DIR_ENV,
    AlreadyUp,
    StatePaths,
    default_state_dir,
)
from tests.cli.up_support import ENDPOINT, up


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """As with the wheel: no EONCE_STATE_DIR, and no checkout's .local to fall back on."""
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    find_spec = importlib.util.find_spec

    def without_checkout(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == "local_aws" else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_checkout)


def app_folder(root: Path, *, cdk_json: bool) -> Path:
    folder = root / "svc"
    (folder / "functions").mkdir(parents=True)
    (folder / "app.py").write_text("")
    if cdk_json:
        (folder / "cdk.json").write_text('{"app": "python app.py"}')
    return folder


def test_up_from_another_folder_prints_hints_that_work_there(
    installed: None, starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = app_folder(tmp_path, cdk_json=True)
    monkeypatch.chdir(tmp_path)
    result = up("--app", "svc")
    assert result.exit_code == 0, result.output
    assert starts == [svc / ".local"]
    assert default_state_dir() is None  # `eonce down` here would not find it
    assert "(pid 4242; `cd svc && eonce down` stops it)" in result.output
    assert 'eval "$(cd svc && eonce env)"' in result.output
    assert "Then: cd svc && eonce status · eonce send --consumer orders" in result.output
    assert "`eonce down` stops it" not in result.output


def test_up_in_the_apps_folder_prints_plain_hints(
    installed: None, starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = app_folder(tmp_path, cdk_json=True)
    monkeypatch.chdir(svc / "functions")  # below the app's folder finds its cdk.json
    result = up("--app", "..")
    assert result.exit_code == 0, result.output
    assert starts == [svc / ".local"]
    assert "(pid 4242; `eonce down` stops it)" in result.output
    assert "Then: eonce status" in result.output
    assert "cd " not in result.output


def test_a_second_up_from_elsewhere_says_where_to_stop_the_first(
    installed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app_folder(tmp_path, cdk_json=True)

    def already_up(paths: StatePaths, **kwargs: Any) -> None:
        raise AlreadyUp(
            f"a local stack is already up (pid 4242 at {ENDPOINT}); `eonce down` stops it"
        )

    monkeypatch.setattr(up_cli, "start_background", already_up)
    monkeypatch.chdir(tmp_path)
    result = up("--app", "svc")
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"error: a local stack is already up (pid 4242 at {ENDPOINT}); "
        "`cd svc && eonce down` stops it"
    ]


@pytest.mark.parametrize("app_arg", ["svc/app.py", "python3 app.py"])
def test_an_app_without_cdk_json_keeps_its_state_beside_it(
    installed: None,
    starts: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    app_arg: str,
) -> None:
    """docs/local.md's `eonce up --app app.py` and `--app "python3 app.py"`."""
    svc = app_folder(tmp_path, cdk_json=False)
    monkeypatch.chdir(svc if app_arg.startswith("python3") else tmp_path)
    result = up("--app", app_arg)
    assert result.exit_code == 0, result.output
    assert starts == [svc / ".local"]


def test_the_other_commands_find_a_state_folder_up_used_without_cdk_json(
    installed: None, tmp_path: Path
) -> None:
    svc = app_folder(tmp_path, cdk_json=False)
    assert default_state_dir(svc) is None  # nothing was ever up here
    paths = StatePaths(svc / ".local")
    paths.root.mkdir()
    paths.lock.touch()  # `up` made it; the lock stays after `down`
    assert default_state_dir(svc) == paths.root
    assert default_state_dir(svc / "functions") == paths.root
    assert default_state_dir(tmp_path) is None


def test_down_where_no_stack_can_be_is_not_an_error(
    installed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: exit 2, "no local stack state here", although `down` says nothing up is not an
    error. A folder with no cdk.json at or above it has no stack to stop."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["down"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("no local stack is up here")
