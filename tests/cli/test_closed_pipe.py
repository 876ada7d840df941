"""A reader that goes away (`eonce env | head -1`) ends eonce quietly, as it ends other Unix
tools: no "error: Broken pipe" line and no traceback (click's own ending for it: exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EONCE = Path(sys.executable).parent / "eonce"


def test_a_closed_reader_is_no_error() -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before eonce writes a line
    try:
        result = subprocess.run(
            [str(EONCE), "event", "--body", '{"orderId": "o-1"}'],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == 1
