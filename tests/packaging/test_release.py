"""Release-ready: what `make dist` builds passes the checks PyPI and a careful packager apply.

`twine check --strict` renders the long description as PyPI would and refuses missing metadata;
check-wheel-contents reads the wheel's layout with the repository's `[tool.check-wheel-contents]`
(the exact top-level packages). Each check is also shown to refuse a broken copy, so a pass
means something. The version in the wheel is pyproject's, and CHANGELOG.md has its section.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

from tests.packaging.dists import Dists
from tests.packaging.support import DEV_BIN, REPO, run

CHANGELOG = REPO / "CHANGELOG.md"
# A release heading as Keep a Changelog writes it: "## [0.3.0] - 2026-11-27".
RELEASE_HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\d{4}-\d{2}-\d{2})$", re.M)


def pyproject_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        version: str = tomllib.load(f)["project"]["version"]
    return version


def wheel_metadata(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(zf.read(name).decode())
    return {key: str(value) for key, value in message.items()}


def twine_check(*paths: Path) -> tuple[int, str]:
    result = run([DEV_BIN / "twine", "check", "--strict", *paths], cwd=REPO, check=False)
    return result.returncode, result.stdout + result.stderr


def wheel_contents_check(wheel: Path) -> tuple[int, str]:
    # The config named explicitly: check-wheel-contents otherwise reads only the cwd's.
    cmd: list[str | Path] = [
        DEV_BIN / "check-wheel-contents",
        "--config",
        REPO / "pyproject.toml",
        wheel,
    ]
    result = run(cmd, cwd=REPO, check=False)
    return result.returncode, result.stdout + result.stderr


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def rewrite_wheel(wheel: Path, out: Path, edit: dict[str, bytes]) -> Path:
    """A copy of `wheel` in `out` with members replaced or added, its RECORD written anew (the
    checkers read the file list from RECORD, as an installer does)."""
    copy = out / wheel.name
    with zipfile.ZipFile(wheel) as src:
        members = {name: src.read(name) for name in src.namelist()}
    members.update(edit)
    (record,) = [name for name in members if name.endswith(".dist-info/RECORD")]
    lines = [record_line(name, data) for name, data in members.items() if name != record]
    members[record] = ("\n".join([*lines, f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    return copy


def test_twine_accepts_the_wheel_and_the_sdist(dists: Dists) -> None:
    code, output = twine_check(dists.wheel, dists.sdist)
    assert code == 0, output
    assert output.count("PASSED") == 2, output


def test_twine_refuses_metadata_pypi_would_not_render(dists: Dists, tmp_path: Path) -> None:
    """The check bites: without a description content type PyPI guesses the format."""
    with zipfile.ZipFile(dists.wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(name).decode()
    stripped = re.sub(r"^Description-Content-Type: .*\n", "", metadata, count=1, flags=re.M)
    assert stripped != metadata
    broken = rewrite_wheel(dists.wheel, tmp_path, {name: stripped.encode()})
    code, output = twine_check(broken)
    assert code != 0
    assert "long_description_content_type" in output, output


def test_check_wheel_contents_accepts_the_wheel(dists: Dists) -> None:
    code, output = wheel_contents_check(dists.wheel)
    assert code == 0, output
    assert output.strip().endswith(": OK"), output


def test_check_wheel_contents_refuses_an_undeclared_top_level(dists: Dists, tmp_path: Path) -> None:
    """The configured top-level list is enforced: a stray package in the wheel fails (W202)."""
    broken = rewrite_wheel(dists.wheel, tmp_path, {"tests/__init__.py": b""})
    code, output = wheel_contents_check(broken)
    assert code != 0
    assert "W202" in output, output


def test_the_wheel_and_sdist_carry_pyproject_version(dists: Dists) -> None:
    version = pyproject_version()
    metadata = wheel_metadata(dists.wheel)
    assert metadata["Name"] == "exactly-once-sqs"
    assert metadata["Version"] == version
    assert dists.wheel.name == f"exactly_once_sqs-{version}-py3-none-any.whl"
    assert dists.sdist.name == f"exactly_once_sqs-{version}.tar.gz"
    with tarfile.open(dists.sdist) as sdist:
        member = sdist.extractfile(f"exactly_once_sqs-{version}/PKG-INFO")
        assert member is not None
        pkg_info = Parser().parsestr(member.read().decode())
    assert pkg_info["Version"] == version


def test_changelog_has_a_dated_section_for_this_version() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    releases = {m["version"]: m["date"] for m in RELEASE_HEADING.finditer(text)}
    assert pyproject_version() in releases, sorted(releases)


def test_changelog_lists_unreleased_first_then_releases_newest_first() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert headings[0] == "Unreleased", headings
    versions = [tuple(int(part) for part in v.split(".")) for v in headings[1:]]
    assert versions == sorted(versions, reverse=True), headings
    assert len(set(versions)) == len(versions), headings


def test_make_dist_runs_both_checks() -> None:
    """`make dist` is what the publish workflow runs: it must check what it built."""
    dry = run(["make", "-n", "dist"], cwd=REPO, env=None)
    lines = dry.stdout.splitlines()
    build = next(i for i, line in enumerate(lines) if " -m build " in line)
    twine = next(i for i, line in enumerate(lines) if "twine check --strict dist/" in line)
    contents = next(i for i, line in enumerate(lines) if "check-wheel-contents dist/" in line)
    assert build < twine, lines
    assert build < contents, lines


def test_twine_and_check_wheel_contents_are_pinned_dev_requirements() -> None:
    pins = {
        line.split("==")[0].strip()
        for line in (REPO / "requirements-dev.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    assert {"twine", "check-wheel-contents"} <= pins
