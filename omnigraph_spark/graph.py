"""The Graph handle: schema + store for one Omnigraph 0.7 graph root.

Example::

    g = Graph.init("/tmp/g", open("test.pg").read())
    snap = g.snapshot()                  # branch main, latest
    snap.tables["node:Person"].version   # 1
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import lance

from .errors import (
    AlreadyInitializedError,
    CommitNotFoundError,
    GraphNotFoundError,
    RecoveryPendingError,
    SchemaContractError,
)
from .schema import compile_schema, ir_hash_of_text
from .schema.catalog import Catalog
from .store import branches as _branches
from .store import commits as _commits
from .store import lease as _lease
from .store import maintenance
from .store import manifest as _manifest
from .store import recovery as _recovery
from .store import sidecar as _sidecar
from .store import tables as _tables
from .store.fs import RootStorage
from .store.layout import (
    MAIN,
    SCHEMA_IR,
    SCHEMA_PG,
    SCHEMA_STATE,
    RootPaths,
    normalize_branch,
    normalize_root,
    table_path_for_key,
    table_uri,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableInfo:
    """One table as a snapshot pins it."""

    table_key: str
    path: str  # the dataset URI holding this version (root/<path>[/tree/<branch>])
    base_path: str  # root/<path>: the dataset's main location
    table_path: str  # relative, e.g. nodes/40d76f1f51639ec0
    version: int
    branch: str  # the Lance lineage owning the version ("main" or a branch name)
    row_count: int

    @property
    def lance_branch(self) -> str | None:
        return None if self.branch == MAIN else self.branch


@dataclass(frozen=True)
class Snapshot:
    """A consistent, immutable view of one branch at one manifest (graph) version."""

    root: str
    branch: str
    version: int
    tables: Mapping[str, TableInfo]
    commit_id: str | None = None

    def table(self, key: str) -> TableInfo:
        try:
            return self.tables[key]
        except KeyError:
            raise GraphNotFoundError(
                f"table '{key}' is not in the snapshot of branch '{self.branch}' "
                f"v{self.version} (tables: {sorted(self.tables)})",
                table=key,
            ) from None


def _snapshot_from_state(root: str, state: _manifest.ManifestState, commit_id: str | None = None) -> Snapshot:
    infos = {}
    for k, e in state.entries.items():
        infos[k] = TableInfo(
            k,
            table_uri(root, e.table_path, e.table_branch),
            f"{root}/{e.table_path}",
            e.table_path,
            e.version,
            e.branch,
            e.row_count,
        )
    return Snapshot(root, state.branch, state.version, infos, commit_id)


class Graph:
    """An open graph root. Cheap to create; holds no open files and no caches that go stale."""

    def __init__(self, root: str, catalog: Catalog, ir: dict, storage_options: dict[str, str] | None = None):
        self.root = root
        self.catalog = catalog
        self.ir = ir
        self.storage_options = dict(storage_options or {}) or None
        self.storage = RootStorage(root, self.storage_options)
        self.paths = RootPaths(root)

    # -- lifecycle ----------------------------------------------------------------------
    @classmethod
    def init(cls, uri: str, schema_text: str, storage_options: dict[str, str] | None = None) -> Graph:
        """Create a graph root exactly as ``omnigraph init`` does (§C.5). Refuses an existing one."""
        root = normalize_root(uri)
        st = RootStorage(root, storage_options)
        # an object store's create-if-absent is check-then-put: racing inits take turns under the
        # commit lease, so the second one sees the first one's files (I14)
        with contextlib.nullcontext() if st.local else _lease.hold(st, root, owner="init"):
            return cls._init(root, st, schema_text, storage_options)

    @classmethod
    def _init(cls, root: str, st: RootStorage, schema_text: str, storage_options: dict[str, str] | None) -> Graph:
        paths = RootPaths(root)
        for name in (SCHEMA_PG, SCHEMA_IR, SCHEMA_STATE):
            if st.exists(paths.file(name)):
                raise AlreadyInitializedError(f"graph already initialized at '{root}' ({name} exists)", root=root)
        compiled = compile_schema(schema_text)
        catalog = compiled.catalog()
        if not st.create_text(paths.file(SCHEMA_PG), schema_text):
            raise AlreadyInitializedError(f"graph already initialized at '{root}' (lost the init race)", root=root)
        st.write_text(paths.file(SCHEMA_IR), compiled.ir_pretty_json())
        st.write_text(paths.file(SCHEMA_STATE), compiled.state_json())
        locations, updates = {}, []
        for t in catalog.types():
            rel = table_path_for_key(t.table_key)
            uri_t = f"{root}/{rel}"
            _tables.create_empty(uri_t, t.arrow_schema(), storage_options)
            locations[t.table_key] = rel
            updates.append(
                _manifest.TableUpdate(
                    t.table_key, 1, None, 0, _tables.version_metadata_json(uri_t, 1, rel, storage_options)
                )
            )
        mds = _manifest.create(root, locations, updates, storage_options)
        _commits.init(root, mds.version, storage_options)
        log.info("initialised graph %s (%d tables, manifest v%d)", root, len(locations), mds.version)
        return cls(root, catalog, compiled.ir, storage_options)

    @classmethod
    def open(cls, uri: str, storage_options: dict[str, str] | None = None) -> Graph:
        """Open a graph root: stamp must be 3 and the schema contract must hold (§B.1, §C.4)."""
        root = normalize_root(uri)
        st = RootStorage(root, storage_options)
        paths = RootPaths(root)
        mds = _manifest.open_manifest(root, MAIN, storage_options=storage_options)
        _manifest.check_stamp(mds, root)
        try:
            ir_text = st.read_text(paths.file(SCHEMA_IR))
            state_text = st.read_text(paths.file(SCHEMA_STATE))
        except FileNotFoundError as e:
            raise SchemaContractError(
                f"graph '{root}' lacks {SCHEMA_IR} or {SCHEMA_STATE}; open it once with "
                "Omnigraph 0.7.x to bootstrap the schema contract",
                root=root,
            ) from e

        ir = json.loads(ir_text)
        state = json.loads(state_text)
        actual = ir_hash_of_text(ir_text)  # the engine's rule: parse, re-serialise compact, sha256
        if state.get("schema_ir_hash") != actual:
            raise SchemaContractError(
                f"schema contract broken at '{root}': {SCHEMA_STATE} says {state.get('schema_ir_hash')} but "
                f"{SCHEMA_IR} hashes to {actual}",
                root=root,
            )
        return cls(root, Catalog.from_ir(ir), ir, storage_options)

    # -- reading ------------------------------------------------------------------------
    def snapshot(
        self,
        branch: str = MAIN,
        version: int | None = None,
        *,
        commit: str | None = None,
        timestamp: None | str | dt.datetime = None,
    ) -> Snapshot:
        """The snapshot of ``branch`` at its head, at a manifest ``version``, at a graph ``commit``
        id, or at the latest commit at or before ``timestamp``."""
        branch = normalize_branch(branch)
        commit_id = None
        if commit is not None:
            c = _commits.find(self.root, commit, self.branches(), self.storage_options)
            branch, version, commit_id = c.branch, c.manifest_version, c.graph_commit_id
        elif timestamp is not None:
            ts = _to_us(timestamp)
            cands = [c for c in self.log(branch) if c.created_at_us <= ts]
            if not cands:
                raise CommitNotFoundError(
                    f"no commit on branch '{branch}' at or before {timestamp}", branch=branch, timestamp=str(timestamp)
                )
            c = cands[-1]
            branch, version, commit_id = c.branch, c.manifest_version, c.graph_commit_id
        ds = _manifest.open_manifest(self.root, branch, version, storage_options=self.storage_options)
        return _snapshot_from_state(self.root, _manifest.read_state(ds, branch), commit_id)

    def open_table(self, key: str, snapshot: Snapshot | None = None) -> lance.LanceDataset:
        """The Lance dataset of ``key`` at the snapshot's pinned version."""
        snap = snapshot or self.snapshot()
        t = snap.table(key)
        return _tables.open_dataset(
            t.base_path, branch=t.lance_branch, version=t.version, storage_options=self.storage_options
        )

    def read_table(self, key: str, snapshot: Snapshot | None = None, **scanner_kw):
        return self.open_table(key, snapshot).to_table(**scanner_kw)

    # -- branches and history ---------------------------------------------------------
    def branches(self) -> list[str]:
        return _branches.list_branches(self.root, self.storage_options)

    def create_branch(self, name: str, from_branch: str = MAIN) -> None:
        _branches.create(self.root, name, from_branch, self.storage_options)

    def delete_branch(self, name: str) -> None:
        _branches.delete(self.root, name, self.storage_options)

    def log(self, branch: str = MAIN) -> list[_commits.GraphCommit]:
        """Commit rows of ``branch``'s lineage, oldest first."""
        return _commits.list_commits(self.root, normalize_branch(branch), self.storage_options)

    # -- recovery -----------------------------------------------------------------------
    def pending_sidecars(self) -> list[str]:
        return _sidecar.list_paths(self.storage, self.root)

    def recover(self, mode: str = "full") -> list[_recovery.RecoveryOutcome]:
        """Run the recovery sweep (the engine's open-time sweep): roll forward, back, or abort."""
        return _recovery.sweep(self.root, self.storage, mode=mode, storage_options=self.storage_options)

    def require_clean(self, what: str) -> None:
        pending = self.pending_sidecars()
        if pending:
            raise RecoveryPendingError(
                f"{what} requires a clean recovery state; pending sidecars: {pending}. "
                "Run graph.recover() (or `omnigraph-spark recover`) first.",
                sidecars=pending,
            )

    # -- maintenance --------------------------------------------------------------------
    def optimize(self, branch: str = MAIN, **kwargs):
        """Compact small fragments of every table on ``branch`` and publish the compacted
        versions (``omnigraph_spark.store.maintenance.optimize``)."""
        return maintenance.optimize(self, normalize_branch(branch), **kwargs)

    def cleanup(self, **kwargs):
        """Remove old table versions by policy and reclaim files of failed jobs
        (``omnigraph_spark.store.maintenance.cleanup``)."""
        return maintenance.cleanup(self, **kwargs)

    def status(self, branch: str = MAIN) -> dict:
        snap = self.snapshot(branch)
        return {
            "root": self.root,
            "branch": snap.branch,
            "version": snap.version,
            "tables": {
                k: {"version": t.version, "branch": t.branch, "row_count": t.row_count, "path": t.table_path}
                for k, t in snap.tables.items()
            },
            "branches": self.branches(),
            "pending_sidecars": self.pending_sidecars(),
        }


def _to_us(ts: str | dt.datetime | int | float) -> int:
    if isinstance(ts, (int, float)):
        return int(ts * 1_000_000) if ts < 1e12 else int(ts)
    if isinstance(ts, str):
        ts = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.timezone.utc)
    return int(ts.timestamp() * 1_000_000)
