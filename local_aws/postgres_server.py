"""Start and stop a throwaway PostgreSQL server for tests and local runs.

The server binaries come from, in order: the directory named by `EONCE_PG_BIN`, `initdb` and
`pg_ctl` on PATH, or the binaries shipped inside the PyPI wheel `pgserver` (a dev requirement;
only its `pginstall/bin` is used, never its Python API), so a fresh checkout needs no system
PostgreSQL.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_aws.lifecycle import Lifecycle
from local_aws.ports import free_port

BIN_ENV = "EONCE_PG_BIN"
SUPERUSER = "postgres"
LOG_NAME = "server.log"
LOG_TAIL_LINES = 20
# An automatically chosen port can be taken between free_port() and the bind: try afresh.
PORT_TRIES = 3


class PostgresServerError(RuntimeError):
    """The server could not be found, initialised, started or stopped; the message says why."""


@dataclass(frozen=True)
class Binaries:
    """The server programs a PostgresServer runs, and where they were found."""

    initdb: Path
    pg_ctl: Path
    source: str  # "EONCE_PG_BIN", "PATH" or "pgserver wheel"

    @property
    def bin_dir(self) -> Path:
        return self.pg_ctl.parent


def wheel_bin_dir() -> Path | None:
    """The pgserver wheel's binary folder, found without importing the package (it has side
    effects and dependencies we do not need)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bin_dir if (bin_dir / "pg_ctl").is_file() else None


def _in_dir(bin_dir: Path, source: str) -> Binaries:
    missing = [name for name in ("initdb", "pg_ctl", "postgres") if not (bin_dir / name).is_file()]
    if missing:
        raise PostgresServerError(f"{source} directory {bin_dir} has no {', '.join(missing)}")
    return Binaries(initdb=bin_dir / "initdb", pg_ctl=bin_dir / "pg_ctl", source=source)


def find_binaries() -> Binaries:
    """EONCE_PG_BIN if set, else PATH, else the pgserver wheel; raise if none has them."""
    forced = os.environ.get(BIN_ENV)
    if forced:
        return _in_dir(Path(forced), BIN_ENV)
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Binaries(initdb=Path(initdb), pg_ctl=Path(pg_ctl), source="PATH")
    wheel = wheel_bin_dir()
    if wheel is not None:
        return _in_dir(wheel, "pgserver wheel")
    raise PostgresServerError(
        "no PostgreSQL server binaries: put initdb and pg_ctl on PATH, set EONCE_PG_BIN to "
        "their directory, or install the dev requirements (pgserver ships them)"
    )


def _unprivileged_user() -> pwd.struct_passwd | None:
    """The account to run the server as, or None to run as ourselves.

    PostgreSQL refuses to run as root (initdb, pg_ctl and postgres all exit), and containers and
    CI machines often run everything as root. Then the server runs as the `postgres` account, or
    `nobody` where there is none, and its directory is handed to that account.
    """
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresServerError("running as root, and there is no postgres or nobody account")


def _server_env() -> dict[str, str]:
    """Our environment without PG* variables (PGPORT, PGDATA, ...), which the programs read."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PG")}


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty server log)"


class PostgresServer(Lifecycle):
    """A PostgreSQL cluster of its own, listening on a loopback port with trust auth.

    With no data_dir it makes a temporary one and removes it on stop; a given data_dir is
    initialised if empty, reused if it already holds a cluster, and kept.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int | None = None,
        *,
        fsync: bool = True,
        max_connections: int = 200,
    ) -> None:
        self._given_port = port
        self.port = port or free_port()
        self.fsync = fsync
        self.max_connections = max_connections
        self._given_dir = Path(data_dir).resolve() if data_dir is not None else None
        self._workdir: Path | None = None  # the temporary folder we made, removed on stop
        self.data_dir: Path | None = self._given_dir
        self._binaries: Binaries | None = None
        self._user = _unprivileged_user()
        self.running = False

    @property
    def binaries(self) -> Binaries:
        """The initdb/pg_ctl this server uses (looked up on first use)."""
        if self._binaries is None:
            self._binaries = find_binaries()
        return self._binaries

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        """A libpq conninfo string for one database of this server, as the superuser."""
        return f"host={self.host} port={self.port} dbname={dbname} user={SUPERUSER}"

    @property
    def log_path(self) -> Path:
        return self._data() / LOG_NAME

    def _data(self) -> Path:
        if self.data_dir is None:
            raise PostgresServerError("the server has no data directory until start()")
        return self.data_dir

    def _call(self, cmd: list[str | Path], what: str, timeout_s: float) -> tuple[int, str]:
        """Run a server program (as the unprivileged account if we are root): exit code, output."""
        extra: dict[str, Any] = {}
        if self._user is not None:
            extra = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}
        try:
            done = subprocess.run(
                [str(part) for part in cmd],
                env=_server_env(),
                cwd=self._workdir or self._data(),  # somewhere the server account may stand
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
                **extra,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PostgresServerError(f"{what} failed: {exc}") from exc
        return done.returncode, done.stdout.decode(errors="replace").strip()

    def _run(self, cmd: list[str | Path], what: str, timeout_s: float) -> None:
        code, output = self._call(cmd, what, timeout_s)
        if code != 0:
            raise PostgresServerError(
                f"{what} failed (exit {code}, {self.binaries.bin_dir}):\n{output}"
            )

    def _prepare_dir(self) -> None:
        if self._given_dir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="eonce-pg-"))
            self.data_dir = self._workdir / "data"
        else:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self.data_dir = self._given_dir
        if self._user is not None:
            for path in (self._workdir, self.data_dir):
                if path is not None and path.exists():
                    os.chown(path, self._user.pw_uid, self._user.pw_gid)

    def _initdb(self, timeout_s: float) -> None:
        data = self._data()
        if (data / "PG_VERSION").exists():
            return
        self._run(
            [
                self.binaries.initdb,
                "-D",
                data,
                "-A",
                "trust",
                "-U",
                SUPERUSER,
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",  # the machine's locale may be missing; C is always there
            ],
            "initdb",
            timeout_s,
        )

    def _server_options(self) -> str:
        options = [
            f"-p {self.port}",
            f"-c listen_addresses={self.host}",
            f"-c unix_socket_directories={shlex.quote(str(self._data()))}",
            f"-c max_connections={self.max_connections}",
        ]
        if not self.fsync:
            options.append("-c fsync=off")
        return " ".join(options)

    def _pg_ctl_start(self, timeout_s: float) -> None:
        cmd: list[str | Path] = [self.binaries.pg_ctl, "start", "-w", "-t", str(int(timeout_s))]
        cmd += ["-D", self._data(), "-l", self.log_path, "-o", self._server_options()]
        code, output = self._call(cmd, "pg_ctl start", timeout_s + 10)
        if code != 0:
            raise PostgresServerError(
                f"PostgreSQL did not start on {self.host}:{self.port} (pg_ctl from "
                f"{self.binaries.bin_dir} exited {code}); the end of its log:\n"
                f"{_tail(self.log_path)}\npg_ctl said: {output}"
            )

    def start(self, timeout_s: float = 60.0) -> PostgresServer:
        _ = self.binaries  # fail on missing binaries before making anything
        self._prepare_dir()
        try:
            self._initdb(timeout_s)
            for attempt in range(PORT_TRIES):
                try:
                    self._pg_ctl_start(timeout_s)
                    break
                except PostgresServerError as exc:
                    taken = "Address already in use" in str(exc)
                    if self._given_port is not None or not taken or attempt == PORT_TRIES - 1:
                        raise
                    self.port = free_port()
                    self.log_path.unlink(missing_ok=True)  # the next tail is the next try's
        except BaseException:
            self._discard()
            raise
        self.running = True
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the server (fast shutdown: sessions are cut) and remove a temporary data dir."""
        try:
            if self.data_dir is not None and (self.data_dir / "postmaster.pid").exists():
                self._run(
                    [self.binaries.pg_ctl, "stop", "-m", "fast", "-w", "-D", self.data_dir],
                    "pg_ctl stop",
                    timeout_s,
                )
        finally:
            self.running = False
            self._discard()

    def _discard(self) -> None:
        """After a failed start or a stop: kill a half-started server and drop our folder."""
        if self.data_dir is not None and (self.data_dir / "postmaster.pid").exists():
            # A non-zero exit here means nothing was running after all: a stale pid file.
            with contextlib.suppress(PostgresServerError):
                self._call(
                    [self.binaries.pg_ctl, "stop", "-m", "immediate", "-w", "-D", self.data_dir],
                    "pg_ctl stop",
                    30.0,
                )
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
            self.data_dir = None
