"""Where a new service's `make setup` installs exactly-once-sqs from: where this one came from.

A wheel built from a checkout (`make dist`) or the checkout itself is on no index, so the
service's requirements name its file (PEP 610's direct_url.json says where it was installed
from); an index's installation gets `~=X.Y.Z`. tests/e2e/test_init_setup.py has pip resolve the
line with the real wheel.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from exactly_once_cli import init
from exactly_once_cli.init import installed_from
from tests.cli.support import Invoke


def archive(url: str) -> str:
    return json.dumps({"url": url, "archive_info": {}})


def test_a_wheel_file_that_is_still_there(tmp_path: Path) -> None:
    wheel = tmp_path / "exactly_once_sqs-0.3.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    assert installed_from(archive(wheel.as_uri())) == wheel
    assert installed_from(archive(f"file://localhost{wheel}")) == wheel


def test_a_wheel_file_that_is_gone(tmp_path: Path) -> None:
    assert installed_from(archive((tmp_path / "gone.whl").as_uri())) is None


def test_a_project_folder(tmp_path: Path) -> None:
    editable = json.dumps({"url": tmp_path.as_uri(), "dir_info": {"editable": True}})
    assert installed_from(editable) is None  # no pyproject.toml: not a project
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    assert installed_from(editable) == tmp_path


@pytest.mark.parametrize(
    "direct_url",
    [
        None,  # from an index: pip writes no direct_url.json
        "not json",
        "[]",
        archive("https://example.com/exactly_once_sqs-0.3.0-py3-none-any.whl"),
        archive("file://otherhost/exactly_once_sqs-0.3.0-py3-none-any.whl"),
        json.dumps({"url": "git+https://example.com/x.git", "vcs_info": {"vcs": "git"}}),
    ],
)
def test_anything_else_is_from_an_index(direct_url: str | None) -> None:
    assert installed_from(direct_url) is None


class Installed:
    """An exactly-once-sqs distribution as importlib.metadata sees it."""

    def __init__(self, direct_url: str | None) -> None:
        self.version = "0.3.0"
        self._direct_url = direct_url

    def read_text(self, filename: str) -> str | None:
        return self._direct_url if filename == "direct_url.json" else None


def requirement_line(service: Path) -> str:
    lines = (service / "requirements.txt").read_text().splitlines()
    [line] = [line for line in lines if line.startswith(init.DISTRIBUTION)]
    return line


def test_the_service_installs_the_wheel_this_one_came_from(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "dist" / "exactly_once_sqs-0.3.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    monkeypatch.setattr(metadata, "distribution", lambda name: Installed(archive(wheel.as_uri())))
    result = cli("init", "shop", "--directory", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert requirement_line(tmp_path / "shop") == (
        f"exactly-once-sqs[cdk,cli,local] @ {wheel.as_uri()}"
    )
    assert f"installs exactly-once-sqs from {wheel.as_uri()}" in result.output


def test_an_index_installation_pins_compatible_releases(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata, "distribution", lambda name: Installed(None))
    result = cli("init", "shop", "--directory", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert requirement_line(tmp_path / "shop") == "exactly-once-sqs[cdk,cli,local]~=0.3.0"
    assert "installs exactly-once-sqs from" not in result.output
