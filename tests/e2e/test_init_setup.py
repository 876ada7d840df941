"""A service made by `eonce init` from an installed wheel can install that wheel again: its
`make setup` runs `pip install -r requirements.txt`, and `make dist`'s wheel is on no index.

The requirement line is handed to pip with `--no-index` (nothing from PyPI) and
`--ignore-installed`, `--dry-run`: pip must find the distribution from the line alone. With
`exactly-once-sqs[cdk,cli,local]~=0.3.0` it says "No matching distribution found".
"""

from __future__ import annotations

from pathlib import Path

from tests.packaging.dists import Dists
from tests.packaging.support import clean_env, run, wheel_venv


def test_the_service_requirement_installs_the_wheel(dists: Dists, tmp_path: Path) -> None:
    env = clean_env()
    root, _ = wheel_venv(tmp_path, dists.wheel, env)
    python = root / "bin" / "python"

    run([root / "bin" / "eonce", "init", "svc"], cwd=tmp_path, env=env)
    lines = (tmp_path / "svc" / "requirements.txt").read_text().splitlines()
    [line] = [line for line in lines if line.startswith("exactly-once-sqs")]
    assert line == f"exactly-once-sqs[cdk,cli,local] @ {dists.wheel.as_uri()}"

    resolved = run(
        [python, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps", "-I", line],
        cwd=tmp_path / "svc",
        env=env,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    version = dists.wheel.name.split("-")[1]
    assert f"Would install exactly-once-sqs-{version}" in resolved.stdout, resolved.stdout
