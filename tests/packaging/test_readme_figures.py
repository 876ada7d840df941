"""The headline figures are quoted from the generated reports, not retyped.

`make bench` writes docs/benchmarks.md and `eonce chaos --markdown` docs/chaos.md (and
docs/chaos-postgres.md, chaos-kinesis.md and chaos-steps.md); the README's "Headline figures"
section and docs/performance.md quote them. A figure rounded on the way (5.9x for the report's
5.91x) or left from an earlier run is a claim no report backs, so every measured figure there
(a decimal, or a whole number of three digits or more; not a version such as 0.2.0, nor a size
such as "a 200-message version") must occur, as the same token, in one of the reports.
"""

from __future__ import annotations

import re

from tests.packaging.support import REPO

README = REPO / "README.md"
PERFORMANCE = REPO / "docs" / "performance.md"
REPORTS = tuple(
    REPO / "docs" / name
    for name in (
        "benchmarks.md",
        "chaos.md",
        "chaos-postgres.md",
        "chaos-kinesis.md",
        "chaos-steps.md",
    )
)
SECTION = re.compile(r"^## Headline figures\n(.*?)(?=^## )", re.MULTILINE | re.DOTALL)
# A figure: digits with an optional decimal part, thousands separators allowed ("10,000").
# Not a version (0.2.0) nor a count that names a thing ("a 200-message version").
FIGURE = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\d])(?!\.\d)(?!-[A-Za-z])")
LINK = re.compile(r"\]\([^)]*\)")


def figures(text: str) -> set[str]:
    """The measured figures of `text`: decimals, and whole numbers of three digits or more
    (smaller ones, call counts and the like, occur in any report by chance)."""
    found = set()
    for token in FIGURE.findall(LINK.sub("]", text)):
        plain = token.replace(",", "")
        if "." in plain or len(plain) >= 3:
            found.add(plain)
    return found


def occurs(figure: str, text: str) -> bool:
    """`figure` (thousands separators dropped, as `figures` drops them) is a token of `text`."""
    plain = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", plain) is not None


def test_every_headline_figure_is_in_a_report() -> None:
    match = SECTION.search(README.read_text(encoding="utf-8"))
    assert match is not None, "the README has no 'Headline figures' section"
    quoted = figures(match.group(1))
    assert {"56.0", "364.9", "8900", "2670", "1780", "374"} <= quoted  # table and chaos lines
    reports = "\n".join(path.read_text(encoding="utf-8") for path in REPORTS)
    assert sorted(f for f in quoted if not occurs(f, reports)) == []


def test_every_figure_of_the_performance_page_is_in_a_report() -> None:
    quoted = figures(PERFORMANCE.read_text(encoding="utf-8"))
    assert {"56.0", "1230", "796"} <= quoted  # bench, chaos and chaos-postgres figures alike
    reports = "\n".join(path.read_text(encoding="utf-8") for path in REPORTS)
    assert sorted(f for f in quoted if not occurs(f, reports)) == []


def test_a_rounded_figure_is_caught() -> None:
    reports = "5.91x (367 ms / 62 ms); 7.07x"
    assert not occurs("5.9", reports)
    assert not occurs("7.1", reports)
    assert occurs("5.91", reports)
    line = "**5.9\N{MULTIPLICATION SIGN} slower**, 10,000 messages, 2 / 1 / 1"
    assert figures(line) == {"5.9", "10000"}
    assert figures("the 0.2.0 tree; a 200-message version; 0.5-5 s") == {"0.5"}
