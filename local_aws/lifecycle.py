"""Start/stop lifecycles for the local servers and stacks, usable as context managers."""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

from local_aws.ports import wait_for_port


class Lifecycle(ABC):
    """Something started and stopped once; `with X() as x:` stops it even on errors."""

    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ChildServer(Lifecycle):
    """A server in a child process, listening on a loopback port."""

    _proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, cmd: list[str], port: int, timeout_s: float, **popen: Any) -> None:
        """Start the process and wait until the port accepts connections (stop it if not)."""
        self._proc = subprocess.Popen(cmd, **popen)
        try:
            wait_for_port(port, timeout_s)
        except BaseException:  # a timeout, or `up` told to stop (SIGTERM) while it waits
            self.stop()
            raise

    def _terminate(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
