"""`--app` that names no folder, file or program is refused in one line (local_aws.app_source).

`eonce up --app nothere` (a misspelt folder) was taken for an app command: `up` went on to make
a state folder in the working folder and start servers, and failed on whatever was missing
first (DynamoDB Local, the CDK CLI), never naming the misspelling.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from local_aws.app_source import AppNotFound, AppSource


@pytest.mark.parametrize("app", ["nothere", "my-servce", "no-such-program app.py"])
def test_a_name_that_is_nothing_is_refused(tmp_path: Path, app: str) -> None:
    with pytest.raises(AppNotFound) as caught:
        AppSource.resolve(app, tmp_path)
    message = str(caught.value)
    assert message.startswith(f"--app {app}: no such folder, file or command")
    assert "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_program_on_path_or_at_a_path_is_a_command(tmp_path: Path) -> None:
    assert AppSource.resolve("python3 app.py", tmp_path).command == "python3 app.py"
    script = tmp_path / "bin" / "synth.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert AppSource.resolve("bin/synth.sh --fast", tmp_path).command == "bin/synth.sh --fast"


@pytest.mark.parametrize("app", ["STAGE=dev python3 app.py", "python3 'app.py"])
def test_shell_syntax_is_left_to_the_cdk_cli(tmp_path: Path, app: str) -> None:
    assert AppSource.resolve(app, tmp_path).command == app
