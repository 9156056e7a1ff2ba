"""The ``__manifest`` dataset: rows <-> snapshot, and publish (merge-insert CAS on object_id).

The manifest is the visibility authority (format.md §C–§E): a table version exists for readers
only once a ``table_version`` row names it. Publish is the engine's: expected-version check
first (never retried), then one merge-insert with no conflict retries; a lost row-level CAS
race reloads and retries, up to 6 attempts in all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import lance
import pyarrow as pa

from ..errors import (
    BranchNotFoundError,
    CommitNotFoundError,
    CorruptGraphError,
    ExpectedVersionMismatchError,
    GraphNotFoundError,
    RowLevelCasContentionError,
    SchemaApplyLockedError,
    StorageError,
    UnsupportedFormatError,
)
from . import tables
from .layout import (
    MAIN,
    MANIFEST,
    MANIFEST_STAMP,
    MANIFEST_STAMP_KEY,
    SCHEMA_APPLY_LOCK_BRANCH,
    join,
    table_uri,
    version_object_id,
)

log = logging.getLogger(__name__)

PUBLISH_RETRY_BUDGET = 5  # the engine's: 6 attempts in all

OBJ_TABLE = "table"
OBJ_VERSION = "table_version"
OBJ_TOMBSTONE = "table_tombstone"


def manifest_schema() -> pa.Schema:
    """§C.1: exactly Utf8 and UInt64; PK metadata on object_id (immutable once set)."""
    return pa.schema(
        [
            pa.field("object_id", pa.string(), False, metadata={"lance-schema:unenforced-primary-key": "true"}),
            pa.field("object_type", pa.string(), False),
            pa.field("location", pa.string(), True),
            pa.field("metadata", pa.string(), True),
            pa.field("base_objects", pa.list_(pa.field("item", pa.string(), True)), True),
            pa.field("table_key", pa.string(), False),
            pa.field("table_version", pa.uint64(), True),
            pa.field("table_branch", pa.string(), True),
            pa.field("row_count", pa.uint64(), True),
        ]
    )


@dataclass(frozen=True)
class TableEntry:
    """One table as a snapshot sees it."""

    table_key: str
    table_path: str  # relative, e.g. nodes/40d76f1f51639ec0
    version: int
    table_branch: str | None  # None = main lineage
    row_count: int
    metadata: str

    @property
    def branch(self) -> str:
        return self.table_branch or MAIN

    def uri(self, root: str) -> str:
        return table_uri(root, self.table_path, self.table_branch)


@dataclass(frozen=True)
class ManifestState:
    """The reduced manifest of one branch at one ``__manifest`` version."""

    branch: str
    version: int  # the __manifest Lance version = the graph version
    entries: Mapping[str, TableEntry]
    locations: Mapping[str, str] = field(default_factory=dict)
    latest_visible: Mapping[str, int] = field(default_factory=dict)
    existing_versions: frozenset = frozenset()


@dataclass(frozen=True)
class TableUpdate:
    """A new table version to publish (ManifestChange::Update)."""

    table_key: str
    version: int
    table_branch: str | None
    row_count: int
    metadata: str


def open_manifest(
    root: str, branch: str = MAIN, version: int | None = None, storage_options: dict[str, str] | None = None
) -> lance.LanceDataset:
    uri = join(root, MANIFEST)
    try:
        ds = lance.dataset(uri, storage_options=storage_options)
    except (ValueError, OSError) as e:
        what = (
            "there is no __manifest dataset there: create a graph with Graph.init or `omnigraph-spark init`"
            if "not found" in str(e).lower()
            else f"its __manifest is unreadable ({e})"
        )
        raise GraphNotFoundError(f"no Omnigraph graph at '{root}': {what}", root=root) from e
    if branch != MAIN:
        if branch not in ds.branches.list():
            raise BranchNotFoundError(f"branch '{branch}' not found in graph '{root}'", branch=branch)
        ds = ds.checkout_version((branch, version))
    elif version is not None:
        try:
            ds = ds.checkout_version(version)
        except (ValueError, OSError) as e:
            raise CommitNotFoundError(
                f"graph version {version} not found on branch '{branch}': {e}", version=version, branch=branch
            ) from e
    return ds


def check_stamp(ds: lance.LanceDataset, root: str) -> None:
    """Refuse any internal schema stamp but 3 (we never migrate another writer's graph)."""
    meta = ds.schema.metadata or {}
    raw = meta.get(MANIFEST_STAMP_KEY.encode())
    stamp = raw.decode() if raw is not None else "1"
    if stamp != MANIFEST_STAMP:
        if stamp.isdigit() and int(stamp) > int(MANIFEST_STAMP):
            msg = (
                f"__manifest at '{root}' is stamped at internal schema v{stamp} but omnigraph-spark expects "
                f"v{MANIFEST_STAMP}: the graph was written by a newer Omnigraph; upgrade omnigraph-spark"
            )
        else:
            msg = (
                f"__manifest at '{root}' is stamped at internal schema v{stamp} but omnigraph-spark expects "
                f"v{MANIFEST_STAMP}: open it once read-write with Omnigraph 0.7.x to migrate it"
            )
        raise UnsupportedFormatError(msg, stamp=stamp, expected=MANIFEST_STAMP)


def _col(tbl: pa.Table, name: str) -> list:
    return tbl.column(name).to_pylist()


def read_state(ds: lance.LanceDataset, branch: str) -> ManifestState:
    """Reduce manifest rows to a snapshot (§D.2): highest version per key, hidden by a later-or-
    equal tombstone."""
    tbl = ds.to_table()
    for name, typ in (("object_id", pa.string()), ("table_version", pa.uint64()), ("row_count", pa.uint64())):
        if tbl.schema.field(name).type != typ:
            raise CorruptGraphError(f"manifest column '{name}' is {tbl.schema.field(name).type}, expected {typ}")
    locations: dict[str, str] = {}
    versions: dict[str, TableEntry] = {}
    tombstones: dict[str, int] = {}
    existing = set()
    obj_types = _col(tbl, "object_type")
    keys = _col(tbl, "table_key")
    locs = _col(tbl, "location")
    metas = _col(tbl, "metadata")
    tvers = _col(tbl, "table_version")
    tbrs = _col(tbl, "table_branch")
    rcs = _col(tbl, "row_count")
    for i, ot in enumerate(obj_types):
        key = keys[i]
        if ot == OBJ_TABLE:
            if locs[i] is None:
                raise CorruptGraphError(f"manifest table row missing location for {key}", table=key)
            locations[key] = locs[i]
        elif ot == OBJ_VERSION:
            for col, v in (("table_version", tvers[i]), ("row_count", rcs[i])):
                if v is None:
                    raise CorruptGraphError(f"manifest column '{col}' is null at row {i}", table=key, row=i)
            if metas[i] is None:
                raise CorruptGraphError(f"manifest table_version row missing metadata for {key}", table=key)
            existing.add((key, tvers[i]))
            cur = versions.get(key)
            if cur is None or tvers[i] > cur.version:
                versions[key] = TableEntry(key, "", int(tvers[i]), tbrs[i], int(rcs[i]), metas[i])
        elif ot == OBJ_TOMBSTONE:
            if tvers[i] is not None:
                tombstones[key] = max(tombstones.get(key, 0), int(tvers[i]))
    entries: dict[str, TableEntry] = {}
    latest: dict[str, int] = {}
    for key, e in versions.items():
        if key not in locations:
            raise CorruptGraphError(f"manifest missing table row for {key}", table=key)
        t = tombstones.get(key)
        if t is None or t < e.version:
            entries[key] = TableEntry(key, locations[key], e.version, e.table_branch, e.row_count, e.metadata)
            latest[key] = e.version
        else:
            latest[key] = t
    for key, t in tombstones.items():
        latest.setdefault(key, t)
    return ManifestState(
        branch=branch,
        version=ds.version,
        entries=dict(sorted(entries.items())),
        locations=locations,
        latest_visible=latest,
        existing_versions=frozenset(existing),
    )


def rows_batch(rows: list[dict]) -> pa.Table:
    schema = manifest_schema()
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.table(cols, schema=schema)


def table_row(table_key: str, location: str) -> dict:
    return {"object_id": table_key, "object_type": OBJ_TABLE, "location": location, "table_key": table_key}


def version_row(u: TableUpdate) -> dict:
    return {
        "object_id": version_object_id(u.table_key, u.version),
        "object_type": OBJ_VERSION,
        "metadata": u.metadata,
        "table_key": u.table_key,
        "table_version": u.version,
        "table_branch": u.table_branch,
        "row_count": u.row_count,
    }


def create(
    root: str,
    locations: Mapping[str, str],
    updates: Iterable[TableUpdate],
    storage_options: dict[str, str] | None = None,
) -> lance.LanceDataset:
    """§C.5 step 7: write (v1), update_config (v2), stamp 3 (v3)."""
    rows = [table_row(k, loc) for k, loc in locations.items()] + [version_row(u) for u in updates]
    ds = tables.write_new(join(root, MANIFEST), rows_batch(rows), storage_options)
    ds.update_config({"table_version_management": "true"})
    ds = lance.dataset(join(root, MANIFEST), storage_options=storage_options)
    ds.update_schema_metadata({MANIFEST_STAMP_KEY: MANIFEST_STAMP})
    return lance.dataset(join(root, MANIFEST), storage_options=storage_options)


def check_not_locked(root: str, storage_options: dict[str, str] | None = None) -> None:
    ds = open_manifest(root, MAIN, storage_options=storage_options)
    if SCHEMA_APPLY_LOCK_BRANCH in ds.branches.list():
        raise SchemaApplyLockedError(
            f"graph '{root}' is unavailable while schema apply is in progress (branch "
            f"'{SCHEMA_APPLY_LOCK_BRANCH}' exists); retry when it finishes",
            root=root,
        )


def _is_cas_contention(e: Exception) -> bool:
    m = str(e).lower()
    return "too many concurrent writers" in m or "too much write contention" in m or "toomuchwritecontention" in m


def publish(
    root: str,
    branch: str,
    updates: list[TableUpdate],
    expected: Mapping[str, int],
    storage_options: dict[str, str] | None = None,
    *,
    sleep=time.sleep,
) -> ManifestState:
    """Publish ``updates`` on ``branch`` if every ``expected`` pin still holds (§E).

    Raises ExpectedVersionMismatchError (not retried here: the caller decides, using the
    convergence rule) or RowLevelCasContentionError after the retry budget.
    """
    if not updates and not expected:
        ds = open_manifest(root, branch, storage_options=storage_options)
        return read_state(ds, branch)
    last: Exception | None = None
    for attempt in range(PUBLISH_RETRY_BUDGET + 1):
        ds = open_manifest(root, branch, storage_options=storage_options)
        check_stamp(ds, root)
        tables.check_no_auto_cleanup(ds, "__manifest")
        state = read_state(ds, branch)
        for key, exp in expected.items():
            actual = state.latest_visible.get(key, 0)
            if actual != exp:
                raise ExpectedVersionMismatchError(
                    f"stale view of '{key}': expected manifest table version {exp} but current is {actual} "
                    "— refresh and retry",
                    table=key,
                    expected=exp,
                    actual=actual,
                )
        if not updates:
            return state
        seen = set()
        for u in updates:
            if u.table_key not in state.locations:
                raise CorruptGraphError(f"table {u.table_key} not found", table=u.table_key)
            if (u.table_key, u.version) in seen or (u.table_key, u.version) in state.existing_versions:
                raise ExpectedVersionMismatchError(
                    f"table version {u.version} already exists for {u.table_key}",
                    table=u.table_key,
                    expected=expected.get(u.table_key),
                    actual=u.version,
                )
            seen.add((u.table_key, u.version))
        batch = rows_batch([version_row(u) for u in updates])
        try:
            (
                ds.merge_insert("object_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .conflict_retries(0)
                .use_index(False)
                .execute(batch)
            )
        except OSError as e:
            if _is_cas_contention(e):
                last = e
                log.info("manifest publish lost a row-level CAS race (attempt %d): %s", attempt + 1, e)
                sleep(0.05 * (attempt + 1))
                continue
            raise StorageError(f"storage: manifest publish failed: {e}", root=root) from e
        return read_state(open_manifest(root, branch, storage_options=storage_options), branch)
    raise RowLevelCasContentionError(f"manifest publish lost a row-level CAS race: {last}", root=root)
