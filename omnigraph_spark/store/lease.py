"""A short writer lease that serialises omnigraph-spark commit windows on one graph.

Why: pylance rebases an Append over a concurrent one even with ``max_retries=0`` (I6). Two of
our own jobs therefore must not commit the same table at once; holding this lease from the
fresh snapshot to the sidecar delete makes them take turns, so both succeed. The engine does
not know the lease; races with engine writers are still caught by the version checks.

Taking the lease needs an atomic "create if absent". Locally that is a hard link of a complete
file (``commit.lease``). Object stores have no such file operation in pyarrow, so there the lease
is a tiny Lance dataset (``commit_lease.lance``, no data files): its latest version's schema
metadata holds the record, and a change is an Overwrite committed at ``read_version`` with no
retries, which Lance lands at exactly the next version (a conditional PUT) or refuses. That
compare-and-swap takes, breaks (stale holder) and releases the lease.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator

import lance
import pyarrow as pa

from ..errors import GraphNotFoundError, LeaseTimeoutError
from . import tables as _tables
from .fs import RootStorage
from .layout import RootPaths, join

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 900.0
UNPARSABLE_GRACE_S = 30.0
CAS_LEASE_KEY = b"omnigraph_spark.lease"
CAS_PRUNE_EVERY = 64  # releases prune the lease dataset's versions (manifests only) older than:
CAS_PRUNE_OLDER_THAN_S = 3600.0


@contextlib.contextmanager
def hold(
    storage: RootStorage,
    root: str,
    *,
    timeout_s: float = 300.0,
    ttl_s: float = DEFAULT_TTL_S,
    owner: str = "",
    deletes_graph: bool = False,
) -> Iterator[str]:
    """Hold the graph's commit lease for the block; LeaseTimeoutError naming the holder after
    ``timeout_s``. ``deletes_graph``: the block deletes the graph with the lease in it (DROP
    NAMESPACE), so a lease gone at release is expected, not a broken one."""
    token = uuid.uuid4().hex
    record = {
        "token": token,
        "owner": owner,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "acquired_at": time.time(),
        "expires_at": time.time() + ttl_s,
    }
    spark_dir = RootPaths(root).spark_dir
    slot: _FileSlot | _LanceSlot
    if storage.local:
        slot = _FileSlot(storage, join(spark_dir, "commit.lease"))
    else:
        slot = _LanceSlot(join(spark_dir, "commit_lease.lance"), storage.storage_options)
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while not slot.try_take(record):
        if time.monotonic() > deadline:
            holder = slot.holder()
            raise LeaseTimeoutError(
                f"could not take the commit lease of graph '{root}' within {timeout_s:g} s; "
                f"another writer holds it: {describe_holder(holder)} ({slot.path})",
                root=root,
                path=slot.path,
                holder=holder.get("owner"),
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    try:
        yield token
    finally:
        try:
            slot.release(token)
        except FileNotFoundError as e:
            if not deletes_graph:
                log.warning("commit lease release: %s", e)
        except (ValueError, OSError) as e:
            log.warning("commit lease release: %s", e)


def describe_holder(record: dict) -> str:
    """A lease record in words: who holds it, where, since when (the lease's own fields)."""
    if not record.get("token"):
        return "a writer that released it meanwhile, or whose record is being written"
    since = dt.datetime.fromtimestamp(float(record.get("acquired_at", 0)), dt.timezone.utc)
    return (
        f"owner '{record.get('owner') or '-'}' on host {record.get('host')} pid {record.get('pid')} "
        f"since {since.isoformat(timespec='seconds')}"
    )


def _is_stale(cur: dict) -> bool:
    """A holder that died on this host, or a lease past its expiry."""
    dead = cur.get("host") == socket.gethostname() and isinstance(cur.get("pid"), int) and not _alive(cur["pid"])
    return dead or cur.get("expires_at", 0) < time.time()


def _alive(pid: int) -> bool:
    """Whether a process on this host still exists (a crashed holder frees the lease at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _FileSlot:
    """The local lease: a file created by hard link (atomic create-if-absent)."""

    def __init__(self, storage: RootStorage, path: str) -> None:
        self.storage, self.path = storage, path

    def try_take(self, record: dict) -> bool:
        if self.storage.create_text(self.path, json.dumps(record)):
            return True
        _break_if_stale(self.storage, self.path)
        return False

    def holder(self) -> dict:
        """The current record ({} when free or unreadable)."""
        try:
            return json.loads(self.storage.read_text(self.path))
        except (FileNotFoundError, ValueError, OSError):
            return {}

    def release(self, token: str) -> None:
        if json.loads(self.storage.read_text(self.path)).get("token") == token:
            self.storage.delete(self.path)


class _LanceSlot:
    """The object-store lease: a compare-and-swap on a Lance dataset's next version."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None) -> None:
        self.path, self.storage_options = uri, storage_options

    def _read(self) -> tuple[lance.LanceDataset | None, dict]:
        """(the latest version, its record; {} = free), or (None, {}) before the first lease."""
        try:
            ds = _tables.open_dataset(self.path, storage_options=self.storage_options)
        except GraphNotFoundError:
            return None, {}
        raw = (ds.schema.metadata or {}).get(CAS_LEASE_KEY)
        return ds, json.loads(raw) if raw else {}

    def _swap(self, ds: lance.LanceDataset | None, record: dict) -> lance.LanceDataset | None:
        """Write ``record`` as the version after ``ds`` (None: the first version). Returns the new
        version, or None if another writer got there first. ``max_retries=0`` makes Lance refuse
        instead of rebasing (creating included: ``write_dataset(mode="create")`` would rebase)."""
        schema = pa.schema([pa.field("lease", pa.string())], metadata={CAS_LEASE_KEY: json.dumps(record)})
        expected = 1 if ds is None else ds.version + 1
        try:
            landed = lance.LanceDataset.commit(
                self.path,
                lance.LanceOperation.Overwrite(schema, []),
                read_version=None if ds is None else ds.version,
                max_retries=0,
                storage_options=self.storage_options,
            )
        except (OSError, ValueError):
            again, _ = self._read()  # lost the race, or a real storage error
            if again is not None and again.version >= expected:
                return None
            raise
        return landed if landed.version == expected else None

    def holder(self) -> dict:
        """The current record ({} when free)."""
        return self._read()[1]

    def try_take(self, record: dict) -> bool:
        ds, cur = self._read()
        if cur.get("token"):
            if not _is_stale(cur):
                return False
            log.warning("breaking stale commit lease %s held by %s", self.path, cur.get("owner"))
        return self._swap(ds, record) is not None

    def release(self, token: str) -> None:
        ds, cur = self._read()
        if cur.get("token") != token:
            return
        landed = self._swap(ds, {})
        if landed is None:
            log.warning("commit lease %s changed while being released (broken as stale?)", self.path)
        elif landed.version % CAS_PRUNE_EVERY == 0:  # two versions per commit window: keep it small
            landed.cleanup_old_versions(older_than=dt.timedelta(seconds=CAS_PRUNE_OLDER_THAN_S))


def _break_if_stale(storage: RootStorage, path: str) -> None:
    try:
        cur = json.loads(storage.read_text(path))
    except FileNotFoundError:
        return
    except ValueError:
        # Unreadable content is a lease being written (a store without hard links writes it in
        # place), or a corrupt one. Only the second is stale, and only age tells them apart.
        try:
            age = storage.age_s(path)
        except (FileNotFoundError, OSError):
            return
        if age is not None and age < UNPARSABLE_GRACE_S:
            return
        cur = {"expires_at": 0}
    if _is_stale(cur):
        log.warning("breaking stale commit lease %s held by %s", path, cur.get("owner"))
        _move_aside_if_same(path, cur.get("token"))


def _move_aside_if_same(path: str, token: str | None) -> None:
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
