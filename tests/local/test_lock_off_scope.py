"""The lock-off self-test stays a self-test: only `--lock-off` turns the lock off.

The switch reaches the function processes through their environment (EONCE_LOCK_OFF=1, which
they inherit from the command that starts them). So a shell that exported it would turn the
lock off in every function process of a plain `eonce up`, `eonce run` or `eonce chaos`, with no
SELF-TEST banner and past `chaos`'s refusal to write a docs page from a self-test; and
`run --lock-off --keep` would leave a stack serving with the lock off after its report. Each is
refused before anything starts (the starters are replaced here by ones that record a start).
"""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from exactly_once_cli import chaos as chaos_cli
from exactly_once_cli import run as run_cli
from exactly_once_cli import up as up_cli
from exactly_once_cli.app import app
from local_aws.lock_off import LOCK_OFF_ENV


class Started(Exception):
    """A command got as far as starting its stack or its workers."""


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each command's first start step, replaced by one that records the start and stops."""
    started: list[str] = []

    def starter(name: str) -> Any:
        def start(*args: Any, **kwargs: Any) -> Any:
            started.append(name)
            raise Started(name)

        return start

    monkeypatch.setattr(up_cli, "start_background", starter("up"))
    monkeypatch.setattr(run_cli, "StateLock", starter("run --keep"))
    monkeypatch.setattr(run_cli, "LocalStack", starter("run"))
    monkeypatch.setattr(chaos_cli, "run_chaos", starter("chaos"))
    return started


@pytest.mark.parametrize("command", [["up"], ["run"], ["chaos"]])
def test_an_inherited_switch_is_refused_without_the_flag(
    nothing_starts: list[str], command: list[str]
) -> None:
    result = CliRunner().invoke(app, command, env={LOCK_OFF_ENV: "1"})
    assert nothing_starts == [], result.output
    assert result.exit_code == 2, result.output
    assert LOCK_OFF_ENV in result.output


def test_a_self_test_run_is_not_kept_up(nothing_starts: list[str]) -> None:
    result = CliRunner().invoke(app, ["run", "--lock-off", "--keep"], env={LOCK_OFF_ENV: ""})
    assert nothing_starts == [], result.output
    assert result.exit_code == 2, result.output
    assert "--keep" in result.output


def test_the_flag_still_turns_it_on(
    nothing_starts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The self-test itself: `--lock-off` starts (here: reaches its start step) with the switch
    set for the processes it will start."""
    monkeypatch.setenv(LOCK_OFF_ENV, "")  # and removed again at teardown
    seen: list[str | None] = []

    def start(*args: Any, **kwargs: Any) -> Any:
        import os

        seen.append(os.environ.get(LOCK_OFF_ENV))
        raise Started("run")

    monkeypatch.setattr(run_cli, "LocalStack", start)
    result = CliRunner().invoke(app, ["run", "--lock-off"])
    assert isinstance(result.exception, Started), result.output
    assert seen == ["1"]
