"""A short writer lease that serialises omnigraph-spark commit windows on one graph.

Why: pylance rebases an Append over a concurrent one even with ``max_retries=0`` (I6). Two of
our own jobs therefore must not commit the same table at once; holding this lease from the
fresh snapshot to the sidecar delete makes them take turns, so both succeed. The engine does
not know the lease; races with engine writers are still caught by the version checks.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from typing import Iterator, Optional

from ..errors import LeaseTimeoutError
from .fs import RootStorage
from .layout import RootPaths, join

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 900.0
UNPARSABLE_GRACE_S = 30.0


@contextlib.contextmanager
def hold(storage: RootStorage, root: str, *, timeout_s: float = 300.0, ttl_s: float = DEFAULT_TTL_S,
         owner: str = "") -> Iterator[str]:
    path = join(RootPaths(root).spark_dir, "commit.lease")
    token = uuid.uuid4().hex
    body = json.dumps({"token": token, "owner": owner, "host": socket.gethostname(), "pid": os.getpid(),
                       "acquired_at": time.time(), "expires_at": time.time() + ttl_s})
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        if storage.create_text(path, body):
            break
        _break_if_stale(storage, path)
        if time.monotonic() > deadline:
            raise LeaseTimeoutError(f"could not take the commit lease of graph '{root}' within {timeout_s:.0f} s; "
                                    f"another writer holds it ({path})", root=root, path=path)
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    try:
        yield token
    finally:
        try:
            cur = json.loads(storage.read_text(path))
            if cur.get("token") == token:
                storage.delete(path)
        except (FileNotFoundError, ValueError, OSError) as e:
            log.warning("commit lease release: %s", e)


def _alive(pid: int) -> bool:
    """Whether a process on this host still exists (a crashed holder frees the lease at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _break_if_stale(storage: RootStorage, path: str) -> None:
    try:
        cur = json.loads(storage.read_text(path))
    except FileNotFoundError:
        return
    except ValueError:
        # Unreadable content is a lease being written by a store without atomic create, or a
        # corrupt one. Only the second is stale, and only age tells them apart.
        try:
            age = storage.age_s(path)
        except (FileNotFoundError, OSError):
            return
        if age is not None and age < UNPARSABLE_GRACE_S:
            return
        cur = {"expires_at": 0}
    dead = cur.get("host") == socket.gethostname() and isinstance(cur.get("pid"), int) and not _alive(cur["pid"])
    if dead or cur.get("expires_at", 0) < time.time():
        log.warning("breaking stale commit lease %s held by %s", path, cur.get("owner"))
        if storage.local:
            _move_aside_if_same(path, cur.get("token"))
        else:
            storage.delete(path)


def _move_aside_if_same(path: str, token: Optional[str]) -> None:
    """Move a stale lease away, putting it back if a live holder replaced it meanwhile.

    Two waiters can judge the same dead lease stale; the slower one must not remove the lease
    a third writer has just taken. Safety never rests on this: the table and manifest version
    checks (I6, I4) still turn any overlap into a typed conflict.
    """
    aside = f"{path}.stale.{uuid.uuid4().hex}"
    try:
        os.replace(path, aside)
    except OSError:
        return
    try:
        with open(aside, encoding="utf-8") as f:
            moved = json.loads(f.read()).get("token")
    except (OSError, ValueError):
        moved = None
    if moved != token:
        try:
            os.link(aside, path)
            log.warning("commit lease %s was retaken while being broken; restored it", path)
        except OSError:
            pass
    for n in os.listdir(os.path.dirname(path)):
        if ".stale." in n:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(os.path.dirname(path), n))
