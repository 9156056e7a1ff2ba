"""The change feed's pure part: which rows of one type each graph version inserted, updated or
deleted, computed from the Lance versions the manifest publishes (docs/change_feed.md, I25).

A graph version ``v`` of a branch is the ``__manifest`` version ``v``; the type's table is pinned
at ``p0`` in ``v - 1`` and at ``p1`` in ``v``. The change of ``v`` is the net difference of the
table between ``p0`` and ``p1``, found from fragment metadata, never from the whole table:

- a fragment in ``p1`` and not in ``p0`` holds new rows (its live rows at ``p1``);
- a fragment in ``p0`` and not in ``p1`` lost its live rows at ``p0``;
- a fragment in both with the same data files lost the rows its deletion file at ``p1`` names
  and its deletion file at ``p0`` does not (Lance never rewrites a deletion file in place, so the
  two files are the two versions' deleted offsets: :mod:`.deletion_files`); the planning reads those
  files, never the fragment's rows;
- deleted rows whose ``id`` is also inserted are update pre/post images, the others deletes and
  inserts.

Fragment ids stay stable across Append, Delete, Update and Restore, so the endpoints decide; the
Lance transactions of the steps between are read only to find what moves rows without changing
them or replaces the table: a step that changes no fragment (CreateIndex, config) is skipped
unread; an Overwrite makes the change "every old row deleted, every new row inserted" (no
pairing); a Rewrite (compaction) alone is no change, and beside a data step, or any step whose
operation is unknown or whose version cleanup removed, the change is found by comparing the two
versions row by row on ``id`` (exact, but it reads both versions: logged as a warning).

Rows are read per fragment at the pinned version that holds them (deleted rows by their
position among the fragment's live rows there): deletes and preimages from ``p0``, inserts and
postimages from ``p1``. Planning
(:func:`plan_changes`) runs where the Spark driver runs; reading (:func:`read_piece`) on
executors, from small picklable plans.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ChangeFeedRangeError, ChangeFeedVersionUnavailableError, CorruptGraphError, GraphError
from . import commits as _commits
from . import deletion_files as _deletion_files
from . import manifest as _manifest
from .fs import RootStorage
from .layout import MAIN, MANIFEST, join, normalize_branch

log = logging.getLogger(__name__)

INSERT = "insert"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
DELETE = "delete"
CHANGE_TYPES = (INSERT, UPDATE_PREIMAGE, UPDATE_POSTIMAGE, DELETE)

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
GRAPH_COMMIT_ID = "_graph_commit_id"
META_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string(), False),
    pa.field(COMMIT_VERSION, pa.int64(), False),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), False),
    pa.field(GRAPH_COMMIT_ID, pa.string(), True),
)

#: Lance operations that move or describe rows without changing them
_NO_CHANGE_OPS = frozenset({"Rewrite", "CreateIndex", "UpdateConfig", "ReserveFragments", "Project"})
#: operations whose change the fragment endpoints describe exactly
_ROW_OPS = frozenset({"Append", "Delete", "Update", "Restore"})
#: row addresses per piece: a piece is one read task's share of one fragment
MAX_PIECE_ROWS = 262_144


@dataclass(frozen=True)
class Pin:
    """One table version: the dataset's main location, its Lance branch (None: main) and version."""

    base_path: str
    branch: str | None
    version: int


@dataclass(frozen=True)
class Piece:
    """Rows of one fragment at one pinned version: ``offsets`` are positions among the
    fragment's live rows at that version (as ``LanceFragment.take`` counts them); None means
    every live row."""

    pin: Pin
    fragment_id: int
    offsets: tuple[int, ...] | None
    side: str  # "old" (deletes, preimages) or "new" (inserts, postimages)
    rows: int


@dataclass(frozen=True)
class CommitChanges:
    """What graph version ``version`` changed in one table: the pieces to read and the ids that
    were updated (present on both sides). ``diff`` set: compare ``base`` and ``head`` row by row."""

    table_key: str
    version: int
    timestamp_us: int
    commit_id: str | None
    pieces: tuple[Piece, ...] = ()
    updated_ids: frozenset[str] = frozenset()
    diff: tuple[Pin | None, Pin | None] | None = None
    rows: int = 0

    @property
    def empty(self) -> bool:
        return not self.pieces and self.diff is None


@dataclass
class _Lineage:
    """Opens versions of one Lance dataset along a branch's ancestry (a Lance branch holds its
    own versions from its fork version on; older ones live on its parent)."""

    uri: str
    storage_options: dict[str, str] | None
    _ds: lance.LanceDataset | None = None
    _branches: dict | None = None
    _cache: dict = field(default_factory=dict)
    _storage: RootStorage | None = None

    def dataset(self) -> lance.LanceDataset:
        if self._ds is None:
            self._ds = lance.dataset(self.uri, storage_options=self.storage_options)
        return self._ds

    def owner(self, branch: str | None, version: int) -> str | None:
        """The Lance branch (None: main) that holds ``version`` of ``branch``'s history."""
        if self._branches is None:
            self._branches = dict(self.dataset().branches.list()) if branch else {}
        while branch:
            info = self._branches.get(branch)
            if info is None or version >= int(info["parent_version"]):
                return branch
            branch = info.get("parent_branch")
        return None

    def storage(self) -> RootStorage:
        """Reads the dataset's side files (deletion files) with the lineage's storage options."""
        if self._storage is None:
            self._storage = RootStorage(self.uri, self.storage_options)
        return self._storage

    def location(self, branch: str | None, version: int) -> str:
        """The directory of the Lance branch that holds ``version`` of ``branch``'s history."""
        return _deletion_files.branch_location(self.uri, self.owner(branch, version))

    def at(self, branch: str | None, version: int) -> lance.LanceDataset:
        owner = self.owner(branch, version)
        key = (owner, version)
        ds = self._cache.get(key)
        if ds is None:
            base = self.dataset()
            ds = base.checkout_version((owner, version)) if owner else base.checkout_version(version)
            self._cache[key] = ds
        return ds


def _fragments(ds: lance.LanceDataset) -> dict[int, tuple[tuple[str, ...], str | None, int]]:
    """fragment id -> (data file paths, deletion file identity, physical rows)."""
    out = {}
    for f in ds.get_fragments():
        m = f.metadata
        d = m.deletion_file
        out[f.fragment_id] = (
            tuple(x.path for x in m.files),
            None if d is None else json.dumps(d.asdict(), sort_keys=True, default=str),
            int(m.physical_rows),
        )
    return out


def _operation_name(ds: lance.LanceDataset, version: int) -> str | None:
    """The Lance operation that made ``version``, or None when it cannot be read (Lance 7.0
    panics converting some CreateIndex details, which this module only reads when a step
    changed fragments; a panic is not an ``Exception``)."""
    try:
        t = ds.read_transaction(version)
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        log.debug("cannot read the transaction of version %d: %s", version, e)
        return None
    if t is None:
        return None
    name = type(t.operation).__name__
    return None if name == "BaseOperation" else name


def _fragment(ds: lance.LanceDataset, fragment_id: int) -> lance.LanceFragment:
    frag = ds.get_fragment(fragment_id)
    if frag is None:
        raise CorruptGraphError(
            f"fragment {fragment_id} is not in version {ds.version} of '{ds.uri}'", version=ds.version
        )
    return frag


def _newly_deleted(lin: _Lineage, base: Pin, head: Pin, fragment_id: int) -> np.ndarray | None:
    """The rows of one fragment live at ``base`` and deleted at ``head``, as positions among the
    fragment's live rows at ``base``; None when a row deleted at ``base`` is live again at
    ``head``. Reads the fragment's two deletion files only (:mod:`.deletion_files`)."""
    before, after = (
        _deletion_files.deleted_offsets(
            lin.at(p.branch, p.version), lin.location(p.branch, p.version), fragment_id, lin.storage()
        )
        for p in (base, head)
    )
    if len(np.setdiff1d(before, after, assume_unique=True)):
        return None
    gone = np.setdiff1d(after, before, assume_unique=True).astype(np.int64)
    return gone - np.searchsorted(before, gone)


def _split(pin: Pin, fid: int, offsets: Sequence[int] | None, side: str, rows: int) -> list[Piece]:
    if offsets is None:
        return [Piece(pin, fid, None, side, rows)]
    offs = sorted(int(o) for o in offsets)
    return [
        Piece(pin, fid, tuple(offs[i : i + MAX_PIECE_ROWS]), side, len(offs[i : i + MAX_PIECE_ROWS]))
        for i in range(0, len(offs), MAX_PIECE_ROWS)
    ]


def _read_ids(pieces: Sequence[Piece], lineages: dict[str, _Lineage]) -> set[str]:
    ids: set[str] = set()
    for p in pieces:
        ds = lineages[p.pin.base_path].at(p.pin.branch, p.pin.version)
        t = _piece_table(ds, p, ["id"])
        ids.update(t.column("id").to_pylist())
    return ids


def _table_changes(
    key: str,
    base: Pin | None,
    head: Pin | None,
    lineages: dict[str, _Lineage],
    storage_options,
) -> tuple[list[Piece], bool] | None:
    """The pieces of the change ``base`` -> ``head`` and whether to pair them by id; None: compare
    the two versions row by row."""
    if head is None and base is None:
        return [], False
    lin = lineages.setdefault(
        (head or base).base_path,  # type: ignore[union-attr]
        _Lineage((head or base).base_path, storage_options),  # type: ignore[union-attr]
    )
    if base is None or head is None:
        pin = head or base
        ds = lin.at(pin.branch, pin.version)  # type: ignore[union-attr]
        side = "new" if head is not None else "old"
        return [p for fid, (_, _, n) in _fragments(ds).items() for p in _split(pin, fid, None, side, n)], False  # type: ignore[arg-type]
    old_ds = lin.at(base.branch, base.version)
    new_ds = lin.at(head.branch, head.version)
    old_frags, new_frags = _fragments(old_ds), _fragments(new_ds)
    if base.version > head.version:
        return None  # a table pinned back in time (restore published as a new version): compare rows
    # what happened between the endpoints
    overwrite = rewrite = data = unknown = False
    prev = old_frags
    for v in range(base.version + 1, head.version + 1):
        try:
            step_ds = lin.at(head.branch, v)
        except (ValueError, OSError) as e:  # an unpublished step removed by cleanup
            log.info("%s: version %d is gone (%s): comparing the published versions row by row", key, v, e)
            unknown = True
            break
        cur = new_frags if v == head.version else _fragments(step_ds)
        if cur != prev:
            op = _operation_name(step_ds, v)
            if op == "Overwrite":
                overwrite = True
            elif op in _ROW_OPS:
                data = True
            elif op in _NO_CHANGE_OPS:
                rewrite = rewrite or op == "Rewrite"
            else:
                unknown = True
        prev = cur
    if overwrite:
        pieces = [p for fid, (_, _, n) in old_frags.items() for p in _split(base, fid, None, "old", n)]
        pieces += [p for fid, (_, _, n) in new_frags.items() for p in _split(head, fid, None, "new", n)]
        return pieces, False
    if unknown or (rewrite and data):
        return None
    if rewrite:
        return [], False
    pieces = []
    for fid, (files, dele, n) in old_frags.items():
        now = new_frags.get(fid)
        if now is None:
            pieces += _split(base, fid, None, "old", n)
        elif now[0] != files:
            return None  # rewritten data files (a column replaced in place): compare rows
        elif now[1] != dele:
            gone = _newly_deleted(lin, base, head, fid)
            if gone is None:
                return None  # rows live again (a Lance restore between the endpoints): compare rows
            if len(gone):
                pieces += _split(base, fid, gone.tolist(), "old", len(gone))
    for fid, (_, _, n) in new_frags.items():
        if fid not in old_frags:
            pieces += _split(head, fid, None, "new", n)
    return pieces, True


@dataclass(frozen=True)
class FeedRange:
    """The graph versions a feed read covers, inclusive, on one branch."""

    branch: str
    start: int
    end: int


def _manifest_lineage(root: str, storage_options) -> _Lineage:
    return _Lineage(join(root, MANIFEST), storage_options)


def head_version(root: str, branch: str = MAIN, storage_options: dict[str, str] | None = None) -> int:
    """The branch's newest graph version."""
    return _manifest.open_manifest(root, normalize_branch(branch), storage_options=storage_options).version


def _lance_branch(branch: str) -> str | None:
    return None if branch == MAIN else branch


def version_timestamps(root: str, branch: str, storage_options=None) -> dict[int, int]:
    """graph version -> commit timestamp (µs since the epoch, UTC) for the branch's history:
    the graph commit row's ``created_at`` where one exists, else the ``__manifest`` version's."""
    lin = _manifest_lineage(root, storage_options)
    out: dict[int, int] = {}
    b: str | None = _lance_branch(branch)
    upto: int | None = None
    while True:
        ds = lin.dataset() if b is None else lin.dataset().checkout_version((b, None))
        for v in ds.versions():
            n = int(v["version"])
            if upto is None or n < upto:
                ts = v["timestamp"]
                if isinstance(ts, dt.datetime):
                    ts = ts if ts.tzinfo else ts.astimezone()
                    out.setdefault(n, int(ts.timestamp() * 1_000_000))
        if b is None:
            break
        info: Any = dict(lin.dataset().branches.list()).get(b) or {}
        upto = int(info.get("parent_version", 0)) if upto is None else min(upto, int(info.get("parent_version", 0)))
        b = info.get("parent_branch")
    for c in _commits.list_commits(root, branch, storage_options, with_actors=False):
        out[c.manifest_version] = c.created_at_us
    return out


def commit_ids(root: str, branch: str, storage_options=None) -> dict[int, str]:
    """graph version -> the graph commit id that published it (the last one, if recovery
    recorded an audit commit for the same version)."""
    return {
        c.manifest_version: c.graph_commit_id
        for c in _commits.list_commits(root, branch, storage_options, with_actors=False)
    }


def resolve_range(
    root: str,
    branch: str,
    *,
    start: int | None = None,
    end: int | None = None,
    start_ts_us: int | None = None,
    end_ts_us: int | None = None,
    storage_options=None,
) -> FeedRange | None:
    """The inclusive version range the options name; None when a timestamp range holds no
    version. Raises ChangeFeedRangeError for a start past the end or past the head."""
    branch = normalize_branch(branch)
    head = head_version(root, branch, storage_options)
    if start_ts_us is not None or end_ts_us is not None:
        times = version_timestamps(root, branch, storage_options)
        if start_ts_us is not None:
            later = [v for v, t in sorted(times.items()) if t >= start_ts_us]
            if not later:
                raise ChangeFeedRangeError(
                    f"startingTimestamp is after the last commit of branch '{branch}' (version {head})",
                    option="startingTimestamp",
                    head=head,
                )
            start = later[0]
        if end_ts_us is not None:
            earlier = [v for v, t in sorted(times.items()) if t <= end_ts_us]
            end = earlier[-1] if earlier else 0
    start = 1 if start is None else start
    end = head if end is None else end
    if start > head:
        raise ChangeFeedRangeError(
            f"startingVersion {start} is after the latest version {head} of branch '{branch}'",
            option="startingVersion",
            start=start,
            head=head,
        )
    if end < start:
        if start_ts_us is not None or end_ts_us is not None:
            return None
        raise ChangeFeedRangeError(
            f"endingVersion {end} is before startingVersion {start}", option="endingVersion", start=start, end=end
        )
    return FeedRange(branch, start, min(end, head))


def _state_at(root: str, branch: str, version: int, lin: _Lineage) -> _manifest.ManifestState:
    ds = lin.at(_lance_branch(branch), version)
    return _manifest.read_state(ds, branch)


def oldest_readable(root: str, branch: str, table_key: str, storage_options=None) -> int:
    """The oldest graph version from which every version's changes of ``table_key`` up to the
    head can still be read (cleanup removes old versions; the head's are always readable)."""
    branch = normalize_branch(branch)
    head = head_version(root, branch, storage_options)
    for v in range(head, 0, -1):
        try:
            _plan(root, table_key, FeedRange(branch, v, v), storage_options, pair=False)
        except (ValueError, OSError, GraphError):
            return v + 1
    return 1


def _pin(root: str, st: _manifest.ManifestState, key: str) -> Pin | None:
    e = st.entries.get(key)
    return None if e is None else Pin(f"{root}/{e.table_path}", e.table_branch, e.version)


def plan_changes(
    root: str, table_key: str, rng: FeedRange, storage_options: dict[str, str] | None = None, *, pair: bool = True
) -> list[CommitChanges]:
    """Driver: the changes of ``table_key`` in each graph version of ``rng`` that changed it,
    oldest first. Reads manifests, fragment metadata, the deletion files of the fragments a
    version touched, and the ``id``s of the changed rows (to pair update images; ``pair``
    False skips them, for sizing a micro-batch).

    Raises:
        ChangeFeedVersionUnavailableError: a version the range needs was removed by cleanup.
    """
    try:
        return _plan(root, table_key, rng, storage_options, pair)
    except _Unavailable as e:
        oldest = oldest_readable(root, rng.branch, table_key, storage_options)
        raise ChangeFeedVersionUnavailableError(
            f"the changes of graph version {e.version} of branch '{rng.branch}' ({table_key}) are no longer "
            f"readable: cleanup removed a version they need ({e.cause}); the oldest version whose changes can "
            f"be read is {oldest}",
            version=e.version,
            branch=rng.branch,
            table=table_key,
            oldest=oldest,
        ) from e.cause


class _Unavailable(OSError):
    def __init__(self, version: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.version = version
        self.cause = cause


def _plan(
    root: str, table_key: str, rng: FeedRange, storage_options: dict[str, str] | None, pair: bool = True
) -> list[CommitChanges]:
    lin = _manifest_lineage(root, storage_options)
    tables: dict[str, _Lineage] = {}
    times = version_timestamps(root, rng.branch, storage_options)
    ids = commit_ids(root, rng.branch, storage_options)
    out: list[CommitChanges] = []
    prev: _manifest.ManifestState | None = None
    for v in range(rng.start, rng.end + 1):
        try:
            if prev is None and v > 1:
                prev = _state_at(root, rng.branch, v - 1, lin)
            cur = _state_at(root, rng.branch, v, lin)
        except (ValueError, OSError) as e:
            raise _Unavailable(v, e) from e
        base = _pin(root, prev, table_key) if prev is not None else None
        head = _pin(root, cur, table_key)
        prev = cur
        if base == head:
            continue
        meta: dict[str, Any] = {
            "table_key": table_key,
            "version": v,
            "timestamp_us": times.get(v, 0),
            "commit_id": ids.get(v),
        }
        try:
            found = _table_changes(table_key, base, head, tables, storage_options)
        except (ValueError, OSError) as e:
            raise _Unavailable(v, e) from e
        if found is None:
            log.warning(
                "%s: graph version %d rewrote rows beside changing them, made deleted rows live again, or "
                "holds a step cleanup removed: its change is found by comparing both versions row by row "
                "(reads the whole table)",
                table_key,
                v,
            )
            out.append(CommitChanges(**meta, diff=(base, head), rows=cur.entries[table_key].row_count))
            continue
        pieces, pairing = found
        if not pieces:
            continue
        updated: frozenset[str] = frozenset()
        if pair and pairing:
            olds = [p for p in pieces if p.side == "old"]
            news = [p for p in pieces if p.side == "new"]
            if olds and news:
                updated = frozenset(_read_ids(olds, tables) & _read_ids(news, tables))
        out.append(CommitChanges(**meta, pieces=tuple(pieces), updated_ids=updated, rows=sum(p.rows for p in pieces)))
    return out


# -- reading (executors) -------------------------------------------------------------------------


def _piece_table(ds: lance.LanceDataset, p: Piece, columns: list[str] | None) -> pa.Table:
    frag = _fragment(ds, p.fragment_id)
    if p.offsets is None:
        return frag.to_table(columns=columns)
    return frag.take(list(p.offsets), columns=columns)


def _with_meta(t: pa.Table, kinds: pa.Array, c: CommitChanges) -> pa.Table:
    n = t.num_rows
    ts = pa.array([c.timestamp_us] * n, pa.timestamp("us", tz="UTC"))
    cols = [kinds, pa.array([c.version] * n, pa.int64()), ts, pa.array([c.commit_id] * n, pa.string())]
    for f, col in zip(META_FIELDS, cols, strict=True):
        t = t.append_column(f, col)
    return t


def _kinds(ids: pa.ChunkedArray, updated: frozenset[str], side: str) -> pa.Array:
    plain, image = (DELETE, UPDATE_PREIMAGE) if side == "old" else (INSERT, UPDATE_POSTIMAGE)
    if not updated:
        return pa.array([plain] * len(ids), pa.string())
    hit = pc.is_in(ids, value_set=pa.array(sorted(updated), pa.string()))
    return pc.if_else(hit, image, plain).combine_chunks()


def read_piece(
    c: CommitChanges, p: Piece, columns: list[str] | None, storage_options=None, lineage: _Lineage | None = None
) -> pa.Table:
    """Executor: the rows of one piece of one commit, with the four change columns."""
    lin = lineage or _Lineage(p.pin.base_path, storage_options)
    ds = lin.at(p.pin.branch, p.pin.version)
    need = None if columns is None else list(dict.fromkeys([*columns, "id"]))
    t = _piece_table(ds, p, need)
    kinds = _kinds(t.column("id"), c.updated_ids, p.side)
    if columns is not None:
        t = t.select(columns)
    return _with_meta(t, kinds, c)


def _full(pin: Pin | None, storage_options) -> pa.Table | None:
    if pin is None:
        return None
    return _Lineage(pin.base_path, storage_options).at(pin.branch, pin.version).to_table()


def read_diff(c: CommitChanges, columns: list[str] | None, storage_options=None) -> pa.Table:
    """Executor: a commit's change found by comparing its two versions row by row on ``id``:
    rows equal on both sides are no change."""
    assert c.diff is not None
    old, new = (_full(p, storage_options) for p in c.diff)
    ref = new if new is not None else old
    if ref is None:
        raise CorruptGraphError(
            f"{c.table_key}: graph version {c.version} has no table on either side", table=c.table_key
        )
    empty = ref.schema.empty_table()
    old = old if old is not None else empty
    new = new if new is not None else empty
    old_rows = {r["id"]: r for r in old.to_pylist()}
    new_rows = {r["id"]: r for r in new.to_pylist()}
    gone = [r for i, r in old_rows.items() if i not in new_rows]
    pre = [old_rows[i] for i, r in new_rows.items() if i in old_rows and old_rows[i] != r]
    post = [r for i, r in new_rows.items() if i in old_rows and old_rows[i] != r]
    born = [r for i, r in new_rows.items() if i not in old_rows]
    parts = []
    for rows, kind in ((gone, DELETE), (pre, UPDATE_PREIMAGE), (post, UPDATE_POSTIMAGE), (born, INSERT)):
        t = pa.Table.from_pylist(rows, schema=ref.schema)
        if columns is not None:
            t = t.select(columns)
        parts.append(_with_meta(t, pa.array([kind] * t.num_rows, pa.string()), c))
    return pa.concat_tables(parts)


def read_changes(
    changes: Sequence[CommitChanges], columns: list[str] | None = None, storage_options=None
) -> Iterator[pa.Table]:
    """Every changed row of ``changes``, commit by commit (one table per piece)."""
    lineages: dict[str, _Lineage] = {}
    for c in changes:
        if c.diff is not None:
            yield read_diff(c, columns, storage_options)
            continue
        for p in c.pieces:
            lin = lineages.setdefault(p.pin.base_path, _Lineage(p.pin.base_path, storage_options))
            yield read_piece(c, p, columns, storage_options, lin)


def changes_table(
    root: str,
    table_key: str,
    rng: FeedRange,
    columns: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
) -> pa.Table | None:
    """Every changed row of ``table_key`` in ``rng`` as one Arrow table (tests and small feeds);
    None when nothing changed."""
    parts = list(read_changes(plan_changes(root, table_key, rng, storage_options), columns, storage_options))
    return pa.concat_tables(parts) if parts else None


def snapshot_changes(
    root: str, table_key: str, branch: str, version: int, storage_options: dict[str, str] | None = None
) -> list[CommitChanges]:
    """Every row of ``table_key`` at graph ``version`` as inserts of that version: where a
    stream without a starting version begins."""
    branch = normalize_branch(branch)
    st = _state_at(root, branch, version, _manifest_lineage(root, storage_options))
    head = _pin(root, st, table_key)
    found = _table_changes(table_key, None, head, {}, storage_options)
    pieces = found[0] if found else []
    if not pieces:
        return []
    return [
        CommitChanges(
            table_key,
            version,
            version_timestamps(root, branch, storage_options).get(version, 0),
            commit_ids(root, branch, storage_options).get(version),
            pieces=tuple(pieces),
            rows=sum(p.rows for p in pieces),
        )
    ]
