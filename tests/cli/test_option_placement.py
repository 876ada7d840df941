"""An option given on the wrong side of the command name says where it belongs (issue 26,
defect 12): click alone said only "No such option", as if the option did not exist."""

from __future__ import annotations

import pytest

from tests.cli.support import Invoke


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (
            ["consumers", "--region", "eu-west-1"],
            "--region is a global option: give it before the command, "
            "as `eonce --region ... consumers ...`",
        ),
        (
            ["locks", "list", "--endpoint-url", "http://127.0.0.1:1"],
            "--endpoint-url is a global option: give it before the command, "
            "as `eonce --endpoint-url ... locks list ...`",
        ),
        (
            ["replay", "copy", "--profile", "dev"],
            "--profile is a global option: give it before the command, "
            "as `eonce --profile ... replay copy ...`",
        ),
    ],
    ids=["command", "group-command", "replay-command"],
)
def test_a_global_option_after_the_command_says_it_goes_before(
    cli: Invoke, args: list[str], hint: str
) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: No such option: {args[-2]}")
    assert line.endswith(hint)


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (
            ["--stack", "Mine", "consumers"],
            "--stack is an option of `eonce consumers`: give it after `eonce consumers`",
        ),
        (
            ["--stack", "Mine", "locks", "list"],
            "--stack is an option of `eonce locks list`: give it after `eonce locks list`",
        ),
        (
            ["--dry-run", "replay", "copy"],
            "--dry-run is an option of `eonce replay copy`: give it after `eonce replay copy`",
        ),
        (
            ["--stack", "Mine", "replay", "salescounter"],
            "--stack is an option of `eonce replay copy`, `eonce replay native`, "
            "`eonce replay list`, `eonce replay subscriber`: give it after the command name",
        ),
    ],
    ids=["command", "group-command", "replay-command", "replay-subscriber"],
)
def test_a_command_option_before_the_command_says_which_command_takes_it(
    cli: Invoke, args: list[str], hint: str
) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line == f"error: No such option: {args[0]}; {hint}"


def test_an_option_no_command_takes_keeps_clicks_suggestions(cli: Invoke) -> None:
    result = cli("send", "--bodyy", "x")
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line == "error: No such option: --bodyy (Possible options: --body) (see --help)"
