"""`eonce up --app OTHER` keeps OTHER's state beside OTHER, even when run in a folder that has
a cdk.json of its own (another app, or this checkout).

Before, `up` took the working folder's state folder first: `up --app ../billing` run in the
orders app's folder put billing's stack in orders/.local/. Then `eonce down` in orders stopped
billing's stack, `eonce up` for orders was refused ("already up"), and in billing's folder
`eonce status` found nothing. The same held for this checkout (an editable install): `up --app
svc` anywhere went into the checkout's .local/, where the repository's `make down` stopped it.

start_background is replaced by one that records the state folder, so nothing starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly_once_ops.local_state import STATE_DIR_ENV
from tests.cli.up_support import up


def cdk_app(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "app.py").write_text("")
    (folder / "cdk.json").write_text('{"app": "python app.py"}')
    return folder


def test_up_of_another_app_from_an_apps_folder_keeps_the_state_beside_the_other(
    starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = cdk_app(tmp_path / "orders")
    billing = cdk_app(tmp_path / "billing")
    monkeypatch.chdir(orders)
    result = up("--app", "../billing")
    assert result.exit_code == 0, result.output
    assert starts == [billing / ".local"]
    assert f"`cd {billing} && eonce down` stops it" in result.output


def test_up_of_an_app_from_this_checkout_keeps_the_state_beside_the_app(
    starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This checkout's local_aws (the editable install) is found from anywhere: its .local/ is
    the fallback of a folder with no cdk.json, never the state of an app `--app` names."""
    billing = cdk_app(tmp_path / "billing")
    monkeypatch.chdir(tmp_path)
    result = up("--app", "billing")
    assert result.exit_code == 0, result.output
    assert starts == [billing / ".local"]
    assert "`cd billing && eonce down` stops it" in result.output


def test_the_app_in_the_working_folder_keeps_its_state_there(
    starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = cdk_app(tmp_path / "orders")
    monkeypatch.chdir(orders)
    assert up().exit_code == 0
    assert up("--app", ".").exit_code == 0
    assert starts == [orders / ".local", orders / ".local"]


def test_eonce_state_dir_still_wins(
    starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = cdk_app(tmp_path / "orders")
    cdk_app(tmp_path / "billing")
    monkeypatch.chdir(orders)
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    result = up("--app", "../billing")
    assert result.exit_code == 0, result.output
    assert starts == [tmp_path / "state"]


def test_up_below_another_apps_folder_never_deploys_this_checkouts_app(
    starts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a subfolder of an app (no cdk.json there, one above), `up` with this checkout's
    editable install deployed the checkout's example app into that app's state folder, where
    the app's `eonce status` and `down` then found it. The CDK CLI finds no app there either:
    one line says so."""
    orders = cdk_app(tmp_path / "orders")
    (orders / "functions").mkdir()
    monkeypatch.chdir(orders / "functions")
    result = up()
    assert result.exit_code == 1, result.output
    assert starts == []
    assert result.output.startswith(f"error: no cdk.json in {orders / 'functions'}")
