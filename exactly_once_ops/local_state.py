"""What `eonce up` leaves on disk for other commands: its state file, its stats file and a lock.

The process serving the local stack holds `up.lock` for its whole life, so the kernel, not a
pid that may have been reused, says whether it still runs. It writes `up.json` once it is
ready (endpoints, region, the stack's outputs, the variables a shell needs, log paths) and
`up-stats.json` about once a second (the poller's counts per consumer since it started, and
the health of each function's worker processes), and removes both when it stops. The folder
is `$EONCE_STATE_DIR`, else `.local/` beside the nearest cdk.json at or above the working
folder (the app's), else `.local/` in the checkout that holds `local_aws`
(`default_state_dir`; docs/local.md, "Where its state lives").
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

STATE_DIR_ENV = "EONCE_STATE_DIR"
FORMAT_VERSION = 1


class AlreadyUp(Exception):
    """Another process serves a local stack from this state folder."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def default_state_dir(cwd: Path | None = None) -> Path | None:
    """`$EONCE_STATE_DIR`, else `.local/` beside the nearest cdk.json at or above the working
    folder (the app's folder, where `eonce up` runs) or the nearest `.local/` that an `up`
    has used (its lock stays: an app named by `--app app.py` needs no cdk.json), else
    `.local/` next to a checkout's `local_aws`, else None."""
    if configured := os.environ.get(STATE_DIR_ENV):
        return Path(configured)
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "cdk.json").is_file() or StatePaths(folder / ".local").lock.is_file():
            return folder / ".local"
    spec = importlib.util.find_spec("local_aws")
    if spec is None or spec.origin is None:
        return None
    checkout = Path(spec.origin).resolve().parents[1]  # site-packages, when installed
    return checkout / ".local" if (checkout / "cdk.json").is_file() else None


@dataclass(frozen=True)
class UpState:
    """The contents of `up.json`."""

    pid: int
    stack: str
    region: str
    endpoint_url: str
    dynamodb_endpoint_url: str
    environment: dict[str, str]  # what another shell exports to reach the stack
    outputs: dict[str, str]
    logs: dict[str, str]
    workers: int
    started_at: str
    version: int = FORMAT_VERSION
    postgres_dsn: str | None = None  # the idempotency store's, when it is PostgreSQL
    app: str = ""  # the CDK app deployed (its cdk.json, or the --app command)
    assembly_dir: str | None = None  # the cloud assembly it was deployed from (code folders)

    @classmethod
    def from_json(cls, text: str) -> UpState:
        data: dict[str, Any] = json.loads(text)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class WorkerHealth:
    """One function's worker processes as their supervisor sees them (local_aws.workers): how
    many it runs, how many are alive, how many it replaced after they died, and, once it gave
    up replacing them, why (`failing`), as Lambda marks a function whose environments keep
    failing to start."""

    workers: int
    running: int = 0
    restarts: int = 0
    failing: str = ""

    def describe(self) -> str:
        """'2/2 running', '2/2 running, restarted 1 time', 'failing, 0/2 running'."""
        alive = f"{self.running}/{self.workers} running"
        if self.failing:
            return f"failing, {alive}"
        if self.restarts:
            times = "time" if self.restarts == 1 else "times"
            return f"{alive}, restarted {self.restarts} {times}"
        return alive


@dataclass(frozen=True)
class UpStats:
    """The contents of `up-stats.json`: outcome counts per consumer since the poller started,
    and per direct topic subscriber since the SNS delivery started (kept apart: a subscriber's
    counts are deliveries, not queue messages), and each one's worker health (by the same
    names)."""

    updated_at: str
    consumers: dict[str, dict[str, int]] = field(default_factory=dict)
    subscribers: dict[str, dict[str, int]] = field(default_factory=dict)
    workers: dict[str, WorkerHealth] = field(default_factory=dict)

    def health(self, name: str) -> WorkerHealth | None:
        """The workers of a consumer or subscriber (any case), if the stats name them."""
        for label, health in self.workers.items():
            if label.lower() == name.lower():
                return health
        return None

    def count(self, consumer: str, outcome: str) -> int:
        for name, counts in self.consumers.items():
            if name.lower() == consumer.lower():
                return int(counts.get(outcome, 0))
        return 0

    def subscriber_count(self, subscriber: str, outcome: str) -> int:
        for name, counts in self.subscribers.items():
            if name.lower() == subscriber.lower():
                return int(counts.get(outcome, 0))
        return 0

    def totals(self) -> dict[str, int]:
        """Counts summed over consumers."""
        total: dict[str, int] = {}
        for counts in self.consumers.values():
            for key, value in counts.items():
                total[key] = total.get(key, 0) + int(value)
        return total


@dataclass(frozen=True)
class StatePaths:
    """The files of one state folder."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "up.json"

    @property
    def stats(self) -> Path:
        return self.root / "up-stats.json"

    @property
    def lock(self) -> Path:
        return self.root / "up.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def serve_log(self) -> Path:
        return self.logs / "up.log"

    @property
    def function_logs(self) -> Path:
        return self.logs / "functions"

    @property
    def workload(self) -> Path:
        return self.root / "workload.json"

    @property
    def assemblies(self) -> Path:
        """The cloud assemblies the served stack was deployed from: its functions' code lives
        there while it serves (local_aws.local_deploy), and goes with the state when the
        serving process could not remove it itself (killed, or died)."""
        return self.root / "assemblies"

    @property
    def postgres_data(self) -> Path:
        """The PostgreSQL store's cluster, when the stack runs on it (made anew at each start)."""
        return self.root / "postgres"

    def write_state(self, state: UpState) -> None:
        _write_atomically(self.state, json.dumps(asdict(state), indent=2))

    def write_stats(self, stats: UpStats) -> None:
        _write_atomically(self.stats, json.dumps(asdict(stats)))

    def read_state(self) -> UpState | None:
        text = _read(self.state)
        return UpState.from_json(text) if text else None

    def read_stats(self) -> UpStats | None:
        text = _read(self.stats)
        if not text:
            return None
        data = json.loads(text)
        return UpStats(
            updated_at=str(data["updated_at"]),
            consumers=dict(data["consumers"]),
            subscribers=dict(data.get("subscribers") or {}),
            workers={
                label: WorkerHealth(**health)
                for label, health in (data.get("workers") or {}).items()
            },
        )

    def remove_state(self) -> None:
        for path in (self.state, self.stats):
            path.unlink(missing_ok=True)

    def holder(self) -> int | None:
        """The pid serving from this folder, 0 while it has not written its pid, else None."""
        try:
            fd = os.open(self.lock, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.read(fd, 32).decode(errors="replace").strip()
                return int(text) if text.isdigit() else 0
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def running(self) -> UpState | None:
        """The state of the stack served from here, if one is up and ready."""
        pid = self.holder()
        if not pid:
            return None
        state = self.read_state()
        return state if state is not None and state.pid == pid else None

    def remove_assemblies(self) -> None:
        shutil.rmtree(self.assemblies, ignore_errors=True)

    def clean_stale(self) -> UpState | None:
        """Remove the state files (and the functions' code) a process left when it died
        without cleaning up; return the state."""
        if self.holder() is not None:
            return None
        stale = self.read_state()
        self.remove_state()
        self.remove_assemblies()
        return stale


class StateLock:
    """Held by the process that serves the stack: `with StateLock(paths):` or raises AlreadyUp.

    Readers probe the lock for an instant, so taking it retries briefly before giving up.
    """

    def __init__(self, paths: StatePaths, retry_s: float = 2.0) -> None:
        self.paths = paths
        self.retry_s = retry_s
        self._fd: int | None = None

    def __enter__(self) -> Self:
        self.paths.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    pid = self.paths.holder()
                    raise AlreadyUp(
                        f"a local stack is already up (pid {pid or '?'}); `eonce down` stops it"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # releases the lock
            self._fd = None


def _write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def default_paths(cwd: Path | None = None) -> StatePaths | None:
    """The state folder's files, if there is a folder (see `default_state_dir`)."""
    root = default_state_dir(cwd)
    return StatePaths(root) if root is not None else None


def serving(endpoint_url: str | None, stack: str) -> tuple[UpState, UpStats | None] | None:
    """The `up` stack and its latest stats, when `endpoint_url` and `stack` name that stack."""
    paths = default_paths()
    state = paths.running() if paths is not None else None
    if paths is None or state is None:
        return None
    if state.endpoint_url != endpoint_url or state.stack != stack:
        return None
    return state, paths.read_stats()
