"""MkDocs hooks for the documentation site (mkdocs.yml `hooks:`).

The changelog lives once, in the repository's CHANGELOG.md, where GitHub and the sdist show it.
The site's changelog page (docs/changelog.md, a stand-in) is replaced by that file's text. Its
links are written from the repository's root (`docs/releasing.md`), so they are rewritten
relative to the page, which sits inside `docs/`; any other link is left as written, and
`mkdocs build --strict` still fails on one that leads nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

CHANGELOG_PAGE = "changelog.md"
CHANGELOG_FILE = "CHANGELOG.md"
ROOT_DOCS_LINK = re.compile(r"\]\(docs/")


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Any) -> str:
    """The changelog page becomes CHANGELOG.md, its `](docs/x.md)` links `](x.md)`."""
    if page.file.src_uri != CHANGELOG_PAGE:
        return markdown
    root = Path(config.config_file_path).parent
    text = (root / CHANGELOG_FILE).read_text(encoding="utf-8")
    return ROOT_DOCS_LINK.sub("](", text)
