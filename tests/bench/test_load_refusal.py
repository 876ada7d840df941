"""`make bench` leaves the committed report alone when the machine was loaded: the rule in
benchmarks/load.py, with the load readings and the waits given, never read from the clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.load import MAX_LOAD, POLL_S, Load, destination, settled


@pytest.mark.parametrize(
    ("start", "end"),
    [(1.2, 0.4), (0.4, 1.01), (3.0, 2.0), (None, 0.2), (0.2, None)],
)
def test_a_loaded_or_unknown_machine_gets_the_loaded_files(
    start: float | None, end: float | None
) -> None:
    where = destination(Path("docs"), Load(start, end))
    assert where.refused
    assert (where.report, where.chart) == (
        Path("docs/benchmarks.loaded.md"),
        Path("docs/benchmarks.loaded.png"),
    )
    notice = where.notice(Load(start, end))
    assert "left docs/benchmarks.md as it is" in notice
    assert "run it again on a quiet machine" in notice


@pytest.mark.parametrize(("start", "end"), [(0.3, 0.9), (MAX_LOAD, MAX_LOAD), (0.0, 0.0)])
def test_a_quiet_machine_overwrites_the_committed_report(start: float, end: float) -> None:
    where = destination(Path("docs"), Load(start, end))
    assert not where.refused
    assert (where.report, where.chart) == (Path("docs/benchmarks.md"), Path("docs/benchmarks.png"))


def _readings(*values: float | None) -> Iterator[float | None]:
    yield from values
    raise AssertionError("read once too often")


def test_settled_waits_for_the_load_to_fall_to_one() -> None:
    readings = _readings(1.7, 1.3, 0.95, 0.5)
    slept: list[float] = []
    found = settled(60.0, read=lambda: next(readings), sleep=slept.append)
    assert found == 0.95
    assert slept == [POLL_S, POLL_S]


def test_settled_gives_up_when_the_load_cannot_fall_to_one_in_the_time_left() -> None:
    """1.2 can fall to 1 in 60 * ln(1.2) = 10.9 s were nothing to run: it is polled while at
    least that much of the wait is left (60, 55, ..., 15 s), then reported as it is."""
    readings = _readings(*[1.2] * 11)
    slept: list[float] = []
    found = settled(60.0, read=lambda: next(readings), sleep=slept.append)
    assert found == 1.2  # still loaded: the caller refuses to overwrite
    assert slept == [POLL_S] * 10


def test_settled_does_not_wait_for_a_load_that_cannot_fall_in_time() -> None:
    """3.0 needs 60 * ln(3) = 66 s at the least: more than the wait, so no wait at all."""
    readings = _readings(3.0)
    slept: list[float] = []
    assert settled(60.0, read=lambda: next(readings), sleep=slept.append) == 3.0
    assert slept == []


def test_settled_without_a_wait_reads_once() -> None:
    readings = _readings(1.4)
    slept: list[float] = []
    assert settled(0.0, read=lambda: next(readings), sleep=slept.append) == 1.4
    assert slept == []


def test_settled_keeps_an_unknown_load_unknown() -> None:
    readings = _readings(None, None)
    slept: list[float] = []
    assert settled(POLL_S, read=lambda: next(readings), sleep=slept.append) is None
    assert destination(Path("out"), Load(None, None)).refused
