"""The distribution as `make dist` builds it: the sdist, then the wheel built from that sdist.

Shared by the packaging tests through one session fixture (tests/packaging/conftest.py), so the
wheel is built once per run whichever of them ask for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.packaging.support import DEV_BIN, REPO, run


@dataclass(frozen=True)
class Dists:
    wheel: Path
    sdist: Path
    log: str


def build_dists(out: Path) -> Dists:
    """`python -m build` without flags: the sdist, and the wheel *from the sdist*, so a file
    missing from the sdist breaks the wheel."""
    result = run([DEV_BIN / "python", "-m", "build", "--outdir", out, REPO], cwd=REPO)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1, wheels
    assert len(sdists) == 1, sdists
    return Dists(wheel=wheels[0], sdist=sdists[0], log=result.stdout + result.stderr)
