"""The documentation site builds in strict mode, and the README stays a short start.

- `mkdocs build --strict` (what `make docs` runs) succeeds on the repository's docs/, so a broken
  link, a missing anchor or a page left out of the nav fails `make test`, not a reader.
- Strict mode really catches them: the same build on a copy of the docs with one broken link
  (or one missing anchor) injected exits non-zero and names it.
- The README fits in about 250 lines, opens with the two commands, and its links to the docs
  lead to pages that exist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.packaging.support import REPO

README = REPO / "README.md"
README_MAX_LINES = 260
TWO_COMMANDS = (
    "```bash\n"
    "make run    # sets up .venv + node_modules, starts a local AWS, deploys the CDK app,"
    " runs a workload, reports\n"
    "make test   # sets up the same, then lint (ruff), types (mypy) and the whole test suite"
    " (pytest)\n"
    "```\n"
)
# What the site's build reads besides docs/: its configuration, its hook, the changelog.
SITE_INPUTS = ("mkdocs.yml", "mkdocs_hooks.py", "CHANGELOG.md")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of the site configured in `root`, into `site`."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def copy_of_the_site(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "docs", root / "docs")
    for name in SITE_INPUTS:
        shutil.copy2(REPO / name, root / name)
    return root


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = build(REPO, site)
    assert result.returncode == 0, result.stdout + result.stderr
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "make run" in home
    # Every page of docs/ is built (strict mode also refuses one the nav leaves out).
    pages = sorted(p.stem for p in (REPO / "docs").glob("*.md") if p.stem != "index")
    assert "concepts" in pages
    assert [p for p in pages if not (site / p / "index.html").is_file()] == []
    # The changelog page is the repository's CHANGELOG.md, not its stand-in.
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    first_heading = next(
        line.lstrip("# ").strip()
        for line in (REPO / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    )
    assert first_heading.split()[0].strip("[]") in changelog
    assert "puts its text here" not in changelog


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    root = copy_of_the_site(tmp_path)
    intact = build(root, tmp_path / "intact")
    assert intact.returncode == 0, intact.stdout + intact.stderr  # the copy alone builds
    page = root / "docs" / "concepts.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [gone](no-such-page.md).\n")
    broken = build(root, tmp_path / "broken")
    assert broken.returncode != 0
    assert "no-such-page.md" in broken.stdout + broken.stderr


def test_a_missing_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    root = copy_of_the_site(tmp_path)
    page = root / "docs" / "concepts.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [gone](sqs.md#no-such-section).\n")
    broken = build(root, tmp_path / "broken")
    assert broken.returncode != 0
    assert "no-such-section" in broken.stdout + broken.stderr


def test_the_readme_is_a_short_start() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    title, _, rest = text.partition("\n\n")
    assert title.startswith("# ")
    assert rest.startswith(TWO_COMMANDS)  # the two commands come first, exactly as before


def test_the_readmes_links_lead_to_files_that_exist() -> None:
    targets = MARKDOWN_LINK.findall(README.read_text(encoding="utf-8"))
    local = sorted({t.split("#")[0] for t in targets if "://" not in t and t.split("#")[0]})
    assert "docs/index.md" in local
    assert [t for t in local if not (REPO / t).exists()] == []
