"""Start the local stack's serving process in the background (`up`) and stop it again (`down`).

The serving process runs in a session of its own, so closing the terminal that started it or
pressing Ctrl-C there leaves it alone; only `down` (SIGTERM) or a signal sent to it stops it.
While `up` still waits for it to start, `up` is the one told to stop (Ctrl-C, or SIGTERM and
SIGHUP under `terminate_on_signals`): it passes that on, so an interrupted start-up leaves no
stack behind.
A PostgreSQL store's server is no descendant of it (pg_ctl detaches the server), so `down`
counts it among the stack's processes through its data directory in the state folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from exactly_once_ops.local_state import AlreadyUp, StatePaths, UpState
from local_aws.app_source import AppSource
from local_aws.local_deploy import ROOT
from local_aws.local_postgres import postmaster
from local_aws.processes import (
    ProcessId,
    ProcStat,
    descendants,
    kill,
    session_members,
    stat,
    wait_gone,
)
from local_aws.signals import Terminated


class StartFailed(RuntimeError):
    """The serving process exited or timed out before the stack was up."""

    exit_code = 1


class StartInterrupted(StartFailed):
    """`up` was told to stop (Ctrl-C, SIGTERM, SIGHUP) before the stack was up; the serving
    process and everything it had started are stopped by then. Exits 128 + the signal's number,
    as a shell reports a process a signal ended."""

    def __init__(self, signum: int, left: list[ProcessId]) -> None:
        name = signal.Signals(signum).name
        pids = ", ".join(str(p.pid) for p in left)
        what = (
            f"but {len(left)} of its processes would not stop: {pids}"
            if left
            else "everything it had started is stopped"
        )
        super().__init__(f"start-up interrupted by {name}: {what}")
        self.exit_code = 128 + signum
        self.left = left


def start_background(
    paths: StatePaths,
    *,
    stack: str | None,
    workers: int,
    timeout_s: float = 300,
    store: str = "dynamodb",
    app: AppSource | None = None,
) -> tuple[UpState, UpState | None]:
    """Start `python -m local_aws.serve` detached and wait until it published its state.

    `stack` None deploys the app's one stack; `app` None, this checkout's app. The serving
    process runs in the app's folder, where its npm tools (the CDK CLI, DynamoDB Local) are.

    Returns the new state and, if one was cleaned up, the stale state a dead process left.
    """
    if (pid := paths.holder()) is not None:
        running = paths.running()
        where = f" at {running.endpoint_url}" if running else ", still starting or stopping"
        raise AlreadyUp(
            f"a local stack is already up (pid {pid or '?'}{where}); `eonce down` stops it"
        )
    stale = paths.clean_stale()
    paths.logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-u", "-m", "local_aws.serve", "--state-dir", str(paths.root)]
    cmd += [*(["--stack", stack] if stack else []), "--workers", str(workers), "--store", store]
    if app is not None:
        cmd += ["--app-dir", str(app.folder)]
        if app.command:
            cmd += ["--app-command", app.command]
    with paths.serve_log.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=app.folder if app is not None else ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        return _wait_ready(paths, proc, timeout_s), stale
    except KeyboardInterrupt as exc:  # SIGTERM/SIGHUP too, under `terminate_on_signals`
        left = _stop_child(proc, paths)
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        raise StartInterrupted(signum, left) from None
    except BaseException:
        _stop_child(proc, paths)
        raise


def _wait_ready(paths: StatePaths, proc: subprocess.Popen[bytes], timeout_s: float) -> UpState:
    deadline = time.monotonic() + timeout_s
    while True:
        state = paths.read_state()
        if state is not None and state.pid == proc.pid:
            return state
        code = proc.poll()
        if code is not None:
            raise StartFailed(
                f"the local stack did not start (exit {code}): {last_error(paths)} "
                f"(log: {paths.serve_log})"
            )
        if time.monotonic() >= deadline:
            raise StartFailed(
                f"the local stack was not up within {timeout_s:.0f}s (log: {paths.serve_log})"
            )
        time.sleep(0.2)


def _stop_child(proc: subprocess.Popen[bytes], paths: StatePaths) -> list[ProcessId]:
    """Stop a serving process that never got ready, with everything it started; return what
    still runs after that (nothing, unless even SIGKILL failed).

    SIGTERM lets it stop its children itself (moto, java, the CDK CLI's process group, the
    workers); whatever is left in its session afterwards (it was killed, or something outlived
    it) is killed here, and so is a PostgreSQL server it left (no member of the session).
    Another Ctrl-C, SIGTERM or SIGHUP meanwhile is ignored (`uninterruptible`).
    """
    with uninterruptible():
        return _stop_and_sweep(proc, paths)


@contextmanager
def uninterruptible() -> Iterator[None]:
    """Ignore Ctrl-C, SIGTERM and SIGHUP for the block (in the main thread; elsewhere none
    arrives): a second Ctrl-C from an impatient user, or a SIGTERM after a Ctrl-C, would end the
    clean-up half-way, `up` would exit and leave what it had not stopped yet running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_and_sweep(proc: subprocess.Popen[bytes], paths: StatePaths) -> list[ProcessId]:
    started = {p.id for p in session_members(proc.pid) if p.pid != proc.pid}
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        kill([p.id for p in session_members(proc.pid)])
        proc.wait()
        paths.remove_state()  # it could not remove them itself
        paths.remove_assemblies()
    started |= {p.id for p in session_members(proc.pid)}  # what it started since
    survivors = wait_gone(started, 15)
    kill(survivors)
    _stop_orphaned_server(paths)
    return wait_gone(survivors, 5)


def last_error(paths: StatePaths) -> str:
    """The serving process's last `error:` line (its one-line reason for giving up)."""
    try:
        lines = paths.serve_log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "no log"
    for line in reversed(lines):
        if "error: " in line:
            return line.split("error: ", 1)[1]
    return lines[-1] if lines else "no output"


@dataclass
class Stopped:
    """What `down` found and did."""

    pid: int | None  # None: nothing was up
    stale: UpState | None = None  # state files a dead process left, now removed
    children: list[ProcessId] = field(default_factory=list)  # recorded before SIGTERM
    forced: list[ProcessId] = field(default_factory=list)  # had to be killed
    left: list[ProcessId] = field(default_factory=list)  # still running at the end
    orphans: list[ProcessId] = field(default_factory=list)  # a dead stack's, stopped now


def _started_by(me: ProcStat, paths: StatePaths) -> set[ProcessId]:
    """Its descendants; for `up`'s process, which leads a session, the session's too (orphans
    and the CDK CLI's process group included); and its PostgreSQL server, if it runs one."""
    members = {p.id for p in descendants(me.pid)}
    if me.session == me.pid:
        members |= {p.id for p in session_members(me.pid) if p.pid != me.pid}
    if (server := postmaster(paths.postgres_data)) is not None:
        members.add(server)
    return members


def _stop_orphaned_server(paths: StatePaths, timeout_s: float = 30) -> list[ProcessId]:
    """The PostgreSQL server a stack that died left running: fast shutdown (SIGINT), then kill."""
    server = postmaster(paths.postgres_data)
    if server is None:
        return []
    kill([server], signal.SIGINT)
    kill(wait_gone([server], timeout_s))
    return [server]


def stop_background(paths: StatePaths, *, timeout_s: float = 60) -> Stopped:
    """SIGTERM the serving process, wait until it and every process it started are gone.

    Whatever outlives it (or the timeout) is killed and reported in `forced`; `left` lists
    anything that survived even that, which should never happen.
    """
    pid = paths.holder()
    if not pid:
        if pid == 0:  # locked, but no pid yet: a serving process is just starting
            raise AlreadyUp("a local stack is starting; run `eonce down` again in a moment")
        return Stopped(pid=None, stale=paths.clean_stale(), orphans=_stop_orphaned_server(paths))
    me = stat(pid)
    if me is None:
        return Stopped(pid=None, stale=paths.clean_stale(), orphans=_stop_orphaned_server(paths))
    members = _started_by(me, paths)
    os.kill(pid, signal.SIGTERM)
    forced: list[ProcessId] = []
    if wait_gone([me.id], timeout_s):
        forced.append(me.id)
        members |= _started_by(me, paths)  # including what it started since (a deploy's CDK CLI)
        kill([me.id, *members])
    # The children exit when their parent has stopped them; orphans (none expected) get a moment.
    survivors = wait_gone(members, 15)
    kill(survivors)
    forced += survivors
    left = wait_gone(forced, 5)
    if forced:  # the process could not remove them itself
        paths.remove_state()
        paths.remove_assemblies()
    return Stopped(pid=pid, children=sorted(members, key=lambda p: p.pid), forced=forced, left=left)
