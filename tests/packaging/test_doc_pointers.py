"""Where the code sends a reader for more, the text is there.

The README was cut to a short start and its reference moved into the documentation site
(docs/). A docstring or comment that still says "see the README" for something that now lives
on a docs page sends the reader to a page without it, and a `docs/<page>.md` that no longer
exists sends them nowhere. So, in the Python source of the shipped packages and of this
repository's app, harnesses and functions:

- no docstring or comment points at the README (the service templates of `eonce init` write a
  README of their own and are not scanned);
- every `docs/<page>.md` named exists, and a `#anchor` after it is a heading of that page.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from tests.packaging.support import PACKAGE_SOURCES, REPO

# The app, its harnesses and its functions name pages too.
SOURCES = (
    *PACKAGE_SOURCES.values(),
    REPO / "infra",
    REPO / "fault_injection",
    REPO / "benchmarks",
    REPO / "functions",
)
SKIPPED = (PACKAGE_SOURCES["exactly_once_cli"] / "templates",)
DOC_LINK = re.compile(r"\bdocs/([a-z0-9_-]+\.md)(?:#([a-z0-9_-]+))?")
README = re.compile(r"\bREADME\b")


def python_files() -> Iterator[Path]:
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts or any(path.is_relative_to(s) for s in SKIPPED):
                continue
            yield path


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """Each comment and string literal of `path` (docstrings included), with its line."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            yield token.start[0], token.string


def heading_anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as the site's slugify (GitHub's) makes them."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            text = match.group(1).strip().lower()
            text = re.sub(r"[^\w\- ]", "", text)
            anchors.add(text.replace(" ", "-"))
    return anchors


def readme_pointers() -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{line}"
        for path in python_files()
        for line, text in prose(path)
        if README.search(text)
    ]


def broken_page_links() -> list[str]:
    broken = []
    for path in python_files():
        for line, text in prose(path):
            for page, anchor in DOC_LINK.findall(text):
                target = REPO / "docs" / page
                if not target.is_file() or (anchor and anchor not in heading_anchors(target)):
                    broken.append(f"{path.relative_to(REPO)}:{line}: docs/{page}#{anchor}")
    return broken


def test_the_scan_reads_the_sources() -> None:
    files = list(python_files())
    assert any(p.name == "context.py" and "exactly_once" in p.parts for p in files)
    assert not any(p.is_relative_to(SKIPPED[0]) for p in files)
    # It sees the page links the code has today (the chaos report's generator names its page).
    assert any("docs/chaos.md" in text for p in files for _, text in prose(p))


def test_no_docstring_or_comment_points_at_the_readme() -> None:
    assert readme_pointers() == []


def test_every_docs_page_the_code_names_exists() -> None:
    assert broken_page_links() == []


def test_the_anchor_check_sees_a_missing_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# The page\n\n## Choosing a store\n\n### `eonce up --app`\n", encoding="utf-8")
    assert heading_anchors(page) == {"the-page", "choosing-a-store", "eonce-up---app"}
