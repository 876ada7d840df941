"""SIGTERM and SIGHUP take Ctrl-C's way out, so every `finally` stops the children it started.

Without this, `kill -TERM`, `timeout`, CI cancellation or a closed terminal end the Python
process on the spot and leave moto, DynamoDB Local, the poller's workers and multiprocessing's
resource tracker running, parented to PID 1.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM/SIGHUP; a KeyboardInterrupt, so one path stops both."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def terminate_on_signals(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Turn the first of `signals` into `Terminated`; later ones are ignored so that the
    clean-up they triggered is not itself interrupted. Previous handlers come back on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may install handlers (and receives signals)
        return
    fired = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
