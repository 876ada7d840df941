"""`--app` names an executable file or a .js file, as the CDK CLI's own `--app` takes them
(it runs an executable as it is and a .js file with node).

Before, any existing file that was neither a folder nor a .py file was refused ("not a CDK
app's folder, a .py file or a command"), so `eonce up --app ./synth.sh` or `--app bin/app.js`
could not run an app the CDK CLI runs.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from local_aws.app_source import AppNotFound, AppSource


def test_an_executable_file_is_the_apps_command(tmp_path: Path) -> None:
    folder = tmp_path / "my app"
    folder.mkdir()
    script = folder / "synth.sh"
    script.write_text("#!/bin/sh\necho synthesized\n")
    script.chmod(0o755)
    for given in ("my app/synth.sh", str(script)):
        app = AppSource.resolve(given, tmp_path)
        assert app.folder == tmp_path.resolve()  # the CDK CLI runs an --app in its own folder
        assert app.command is not None
        # What the CDK CLI runs it with: a shell, in that folder.
        ran = subprocess.run(
            ["/bin/sh", "-c", app.command], cwd=app.folder, capture_output=True, text=True
        )
        assert ran.stdout == "synthesized\n"


def test_a_js_file_runs_with_node(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "app.js").write_text("")
    app = AppSource.resolve("bin/app.js", tmp_path)
    assert app.folder == tmp_path.resolve()
    assert app.command is not None
    assert shlex.split(app.command) == ["node", str(tmp_path.resolve() / "bin" / "app.js")]


def test_a_file_that_is_no_app_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(AppNotFound, match="not a CDK app's folder"):
        AppSource.resolve("notes.txt", tmp_path)


def test_a_commands_program_under_home_is_found_as_the_shell_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--app "~/venvs/cdk/bin/python app.py"`: the CDK CLI's shell expands the `~`; the check
    that the program exists refused it ("no such folder, file or command")."""
    home = tmp_path / "home"
    program = home / "venvs" / "cdk" / "bin" / "python"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    command = "~/venvs/cdk/bin/python app.py"
    assert AppSource.resolve(command, tmp_path) == AppSource(tmp_path.resolve(), command)
    with pytest.raises(AppNotFound, match="no such folder, file or command"):
        AppSource.resolve("~/venvs/cdk/bin/pyton app.py", tmp_path)  # still: a misspelt one
    svc = home / "svc"
    svc.mkdir()
    (svc / "cdk.json").write_text("{}")
    assert AppSource.resolve("~/svc", tmp_path) == AppSource(svc)  # a folder, quoted
