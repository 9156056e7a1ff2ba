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
        cur = {"expires_at": 0}
    dead = cur.get("host") == socket.gethostname() and isinstance(cur.get("pid"), int) and not _alive(cur["pid"])
    if dead or cur.get("expires_at", 0) < time.time():
        log.warning("breaking stale commit lease %s held by %s", path, cur.get("owner"))
        if storage.local:
            try:
                os.replace(path, f"{path}.stale.{uuid.uuid4().hex}")
                for n in os.listdir(os.path.dirname(path)):
                    if ".stale." in n:
                        os.remove(os.path.join(os.path.dirname(path), n))
            except OSError:
                pass
        else:
            storage.delete(path)
