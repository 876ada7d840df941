"""A CDK CLI installed globally (`npm install -g aws-cdk@2`) is found where npm puts it, even when
its bin folder is not on PATH (nvm's in a non-interactive shell, make run from an IDE).

npm's global root (`npm root -g`) holds packages, not a `.bin` folder: the global `cdk` link is
in the prefix's bin/, which is on PATH or not. find_cdk asked `npm root -g` for `.bin/cdk`, which
is never there, so without PATH the CLI was reported missing although it was installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from local_aws import node_tools


def test_the_global_packages_cdk_cli_is_found_without_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    global_root = tmp_path / "prefix" / "lib" / "node_modules"
    cli = global_root / "aws-cdk" / "bin" / "cdk"
    cli.parent.mkdir(parents=True)
    cli.write_text("#!/usr/bin/env node\n")
    cli.chmod(0o755)
    monkeypatch.setattr(node_tools, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setattr(node_tools, "_global_root", lambda: global_root)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    app = tmp_path / "svc"
    app.mkdir()
    assert node_tools.find_cdk(app) == cli


def test_a_cdk_on_path_comes_before_the_global_root_and_asks_npm_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_path = tmp_path / "bin" / "cdk"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)

    def no_npm() -> Path:
        raise AssertionError("npm root -g was run although cdk is on PATH")

    monkeypatch.setattr(node_tools, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setattr(node_tools, "_global_root", no_npm)
    monkeypatch.setenv("PATH", str(on_path.parent))
    app = tmp_path / "svc"
    app.mkdir()
    assert node_tools.find_cdk(app) == on_path
