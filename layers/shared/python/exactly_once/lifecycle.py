"""Who this process is, and keeping process-wide state right when the process is cloned.

Lambda clones a process's memory in two ways, and both break state that assumes one request
per sandbox:

- **SnapStart** restores many sandboxes from one snapshot taken after init: each copy would
  share the same `random` state, instance id, open sockets and cached clients. The runtime's
  `snapshot_restore_py` module offers `register_before_snapshot` / `register_after_restore`.
- **fork** (a process-per-request runtime such as Lambda Managed Instances, or a user's own
  worker pool): the child inherits clients whose sockets the parent also uses, thread pools
  whose threads did not survive, and locks another thread may have held at the fork.

After either, `generation()` moves on, the instance id is new, `random` is re-seeded from the OS
and every module's `on_clone` callback drops what it cached (clients, pools, locks), so it is
made again on first use. Lock tokens and nonces never came from `random`: they are `secrets`
(the OS's generator), which a restore does not repeat. Before a snapshot, `on_snapshot`
callbacks close connections so that no copy inherits a socket.

No library does this for us: Powertools' SnapStart support is Java-only, and the runtime hook
module exists only inside Lambda, so it is imported here when present and skipped elsewhere.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

_generation = 0
# os.urandom, not `secrets`: the same OS source without importing hmac, base64 and random at
# the layer's import (a consumer's cold start imports boto3 lazily).
_instance = os.urandom(6).hex()
_on_clone: list[Callable[[], None]] = []
_on_snapshot: list[Callable[[], None]] = []
_installed_fork = False
_hooked: set[int] = set()  # id() of hook modules already given our callbacks
_lock = threading.Lock()


def generation() -> int:
    """Moves on at every fork and restore: objects holding a client or pool compare it."""
    return _generation


def instance_id() -> str:
    """Random per process and per restore; owners carry it so copies never share a name."""
    return _instance


def on_clone(callback: Callable[[], None]) -> None:
    """Run `callback` in a forked child and after a SnapStart restore (in registration order).

    It must only forget state (drop references, replace locks), never close what the parent
    may still be using: a child closing an inherited database connection would end the
    parent's session.
    """
    _on_clone.append(callback)


def on_snapshot(callback: Callable[[], None]) -> None:
    """Run `callback` before a SnapStart snapshot: close connections nobody should inherit."""
    _on_snapshot.append(callback)


def cloned() -> None:
    """This process is a copy (fork child, restored snapshot): new identity, new randomness,
    forget shared state."""
    global _generation, _instance
    _generation += 1
    _instance = os.urandom(6).hex()
    import random

    random.seed()  # from os.urandom: copies of one snapshot must not draw the same numbers
    for callback in list(_on_clone):
        callback()


def before_snapshot() -> None:
    for callback in list(_on_snapshot):
        callback()


def install(hooks: ModuleType | Any | None = None) -> None:
    """Register the fork handler once, and the SnapStart hooks when the runtime offers them.

    `hooks` is the runtime's `snapshot_restore_py` module (found by import when None); tests
    pass a stand-in. Calling it again with the same module registers nothing twice.
    """
    global _installed_fork
    with _lock:
        if not _installed_fork:
            os.register_at_fork(after_in_child=cloned)
            _installed_fork = True
        if hooks is None:
            try:
                import snapshot_restore_py as found  # type: ignore[import-not-found]
            except ImportError:  # not in Lambda, or a runtime without SnapStart
                return
            hooks = found
        if id(hooks) in _hooked:
            return
        _hooked.add(id(hooks))
    hooks.register_before_snapshot(before_snapshot)
    hooks.register_after_restore(cloned)
