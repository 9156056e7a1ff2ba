"""The write protocol: stage on executors, then one commit-and-publish on the driver.

Values, not calls (house style: a commit is a value):
- ``WriteTarget``: where and how a table is staged; made on the driver, pickled to executors.
- ``StagedTable``: what an executor task wrote (uncommitted fragments + stats); its commit message.
- ``commit_load``: under the commit lease, re-read the snapshot, check drift, validate, then
  sidecar -> one Lance commit per table -> manifest publish (CAS) -> commit row -> sidecar delete.

Invariants upheld here are numbered in docs/invariants.md (I1..I16) and cited inline.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import lance
import pyarrow as pa
import pyarrow.compute as pc
from lance.fragment import FragmentMetadata

from ..errors import (
    CommitRebasedError,
    CorruptGraphError,
    ExpectedVersionMismatchError,
    OptionError,
    RecoveryPendingError,
    TableDriftError,
)
from . import branches as _branches
from . import commits as _commits
from . import failpoints
from . import indexes as _indexes
from . import lease as _lease
from . import manifest as _manifest
from . import recovery as _recovery
from . import side_files as _side_files
from . import sidecar as _sidecar
from . import tables as _tables
from .fs import RootStorage
from .id_probe import ROW_ADDR, CommittedIds, fragments_of
from .layout import MAIN, RootPaths, join, table_uri

log = logging.getLogger(__name__)

MODES = ("append", "merge", "overwrite", "delete")
OP_PROP = "omnigraph-spark.operation_id"
TXN_APP_PROP = "omnigraph-spark.txn_app_id"
TXN_VER_PROP = "omnigraph-spark.txn_version"
#: an upper bound of the edges any one source has in the table version a load's commit creates,
#: found by the load-wide @card check, so that the next append's check need not count every
#: committed edge again (invariant I16; spark/writer.py)
SRC_BOUND_PROP = "omnigraph-spark.max_edges_per_src"
#: ``stage`` hands Lance batches of at least this many rows (fewer only at the end of the input
#: or past STAGE_BATCH_BYTES): Lance's writer pays a fixed cost per batch it is given, and
#: Spark sends a Python worker batches of 10,000 rows
STAGE_BATCH_ROWS = 65_536
#: ... and of at most about this many bytes, so a wide row never makes a batch large
STAGE_BATCH_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class WriteTarget:
    """Where executors stage one table's rows. Made on the driver (``prepare_target``)."""

    root: str
    table_key: str
    mode: str
    branch: str
    base_uri: str  # root/<path>
    lance_branch: str | None  # Lance branch the commit lands on (None = main)
    base_version: int  # the manifest pin when the job was planned
    schema: pa.Schema  # the dataset's Arrow schema (exact column order and types)
    storage_options: dict[str, str] | None = field(default=None, repr=False)  # credentials: never in reprs
    max_rows_per_file: int = _tables.DEFAULT_MAX_ROWS_PER_FILE
    max_bytes_per_file: int | None = None
    data_storage_version: str | None = None  # the dataset's ("2.2"): staged files must match it

    def open_for_staging(self) -> lance.LanceDataset:
        return _tables.open_dataset(
            self.base_uri, branch=self.lance_branch, version=self.base_version, storage_options=self.storage_options
        )

    @property
    def stage_uri(self) -> str:
        """The directory staged files land in (a branch's own ``tree/<b>`` on a branch;
        ``LanceDataset.uri`` would name the base)."""
        if self.lance_branch:
            return join(self.base_uri, "tree", *self.lance_branch.split("/"))
        return self.base_uri


@dataclass(frozen=True)
class IdSource:
    """The ids a node type has for a load's endpoint check: the committed table at a pinned
    Lance version (``(base_path, lance_branch, version)``; None when the load overwrites the
    type) plus the data files the load staged for it (absolute paths)."""

    table: tuple[str, str | None, int] | None
    files: tuple[str, ...] = ()

    def to_json(self) -> dict:
        t = self.table
        return {
            "table": None if t is None else {"path": t[0], "branch": t[1], "version": t[2]},
            "files": list(self.files),
        }


@dataclass(frozen=True)
class EndsProof:
    """What the staging tasks of an edge table proved while staging (see docs/invariants.md I15):
    ``dangling`` rows had a src/dst missing from ``src_ids``/``dst_ids``, and no source has more
    than ``src_bound`` edges in the load. Valid for the driver only while the snapshot still has
    exactly these id sources."""

    src_ids: IdSource
    dst_ids: IdSource
    dangling: int
    src_bound: int
    #: the bucket-count files of the tasks that handed theirs over (jvm-shim
    #: ``EndpointCheck.sketch``): added bucket by bucket they bound every source more tightly
    #: than the sum of the tasks' bounds (:func:`proven_src_bound`)
    src_sketches: tuple[str, ...] = ()
    #: the part of ``src_bound`` from the tasks without such a file (None: all of it)
    unsketched_bound: int | None = None


@dataclass(frozen=True)
class FreshIdsProof:
    """What the staging tasks of an append proved while staging (invariant I17, the way I15
    proves endpoints): ``conflicts`` staged ids were found among the ids of ``committed`` (the
    target table at its pinned version). Valid for the driver only while the snapshot still
    pins exactly that version; otherwise it checks exactly."""

    committed: IdSource
    conflicts: int


@dataclass(frozen=True)
class StagedTable:
    """Uncommitted fragments one or more tasks wrote for one table, plus small statistics."""

    table_key: str
    mode: str
    stage_uri: str
    base_version: int
    fragments: tuple[FragmentMetadata, ...]
    rows: int
    bytes: int
    #: every row's id was minted here (a fresh monotonic ULID: a random start per task or batch,
    #: + 1 per id): no input id to collide,
    #: so load-wide validation skips the id uniqueness pass (as the engine does for its own)
    minted_ids: bool = False
    #: edges staged by tasks that checked endpoints as they went (None: not checked)
    ends: EndsProof | None = None
    #: files of 64-bit fingerprints of ``key_column``'s non-null values, one per task (None: none);
    #: no two equal means no two equal values (invariant I15)
    key_hashes: tuple[str, ...] | None = None
    key_column: str | None = None
    #: an append's staged ids probed against the committed ids while staging (None: not probed)
    fresh: FreshIdsProof | None = None
    #: mode "delete": the rows to delete, as a table of ``id`` (or, for edges, ``src`` + ``dst``)
    #: strings; the validator resolves them (and their cascades) against the fresh snapshot
    deletes: pa.Table | None = field(default=None, compare=False, repr=False)
    #: the rows were computed from the table at ``base_version`` (a SQL UPDATE or MERGE): the
    #: commit refuses a moved pin, as an overwrite does, instead of retrying on top of it
    strict_base: bool = False

    @staticmethod
    def merge(parts: Sequence[StagedTable]) -> StagedTable:
        first = parts[0]
        return StagedTable(
            first.table_key,
            first.mode,
            first.stage_uri,
            first.base_version,
            tuple(f for p in parts for f in p.fragments),
            sum(p.rows for p in parts),
            sum(p.bytes for p in parts),
            all(p.minted_ids or p.rows == 0 for p in parts),
            _merged_proof([p.ends for p in parts]),
            *_merged_key_hashes(parts),
            fresh=_merged_fresh([p.fresh for p in parts]),
            deletes=_merged_deletes(parts),
            strict_base=any(p.strict_base for p in parts),
        )


def _merged_deletes(parts: Sequence[StagedTable]) -> pa.Table | None:
    tables = [p.deletes for p in parts if p.deletes is not None]
    return pa.concat_tables(tables, promote_options="default") if tables else None


def _merged_fresh(proofs: Sequence[FreshIdsProof | None]) -> FreshIdsProof | None:
    """One proof for several tasks: only if every task probed the same committed ids."""
    first = proofs[0]
    if first is None or any(p is None or p.committed != first.committed for p in proofs):
        return None
    every = [p for p in proofs if p is not None]  # all of them (checked above)
    return replace(first, conflicts=sum(p.conflicts for p in every))


def _merged_key_hashes(parts: Sequence[StagedTable]) -> tuple[tuple[str, ...] | None, str | None]:
    """Every task's fingerprint files, only if every task wrote them for the same column."""
    column = parts[0].key_column
    if any(p.key_hashes is None or p.key_column != column for p in parts):
        return None, None
    return tuple(f for p in parts for f in p.key_hashes or ()), column


def _merged_proof(proofs: Sequence[EndsProof | None]) -> EndsProof | None:
    """One proof for a table staged by several tasks: only if every task checked against the
    same id sources (the counts add up; a source's edges are at most the sum of the bounds)."""
    first = proofs[0]
    if first is None or any(p is None or (p.src_ids, p.dst_ids) != (first.src_ids, first.dst_ids) for p in proofs):
        return None
    every = [p for p in proofs if p is not None]  # all of them (checked above)
    return replace(
        first,
        dangling=sum(p.dangling for p in every),
        src_bound=sum(p.src_bound for p in every),
        src_sketches=tuple(f for p in every for f in p.src_sketches),
        unsketched_bound=sum(p.src_bound if p.unsketched_bound is None else p.unsketched_bound for p in every),
    )


def proven_src_bound(proof: EndsProof, storage_options: dict[str, str] | None = None) -> int:
    """The most edges any one source has in the load, as its staging tasks proved it (I15).
    A source's edges are its bucket's count in each task that has them, so the tasks' bucket
    counts added bucket by bucket bound it, plus each other task's bound; never more than the
    sum of every task's bound. Reads one file at a time (a fixed 2 MB sum on the driver)."""
    if not proof.src_sketches:
        return proof.src_bound
    summed = _side_files.summed_counts_max(proof.src_sketches, storage_options)
    if summed is None:  # a count saturated its 16 bits
        return proof.src_bound
    rest = proof.src_bound if proof.unsketched_bound is None else proof.unsketched_bound
    return min(proof.src_bound, summed + rest)


@dataclass(frozen=True)
class TableResult:
    table_key: str
    from_version: int
    to_version: int
    rows_written: int
    row_count: int
    fragments: int
    bytes: int
    #: rows this commit deleted from the table (a delete, its cascade, orphaned edges with cascade)
    rows_deleted: int = 0
    #: keys of a delete that matched no committed row (reported, not an error)
    keys_missing: int = 0
    #: the indexes this commit created or extended by a delta (I23), and the seconds it took
    indexes: tuple[str, ...] = ()
    index_seconds: float = 0.0

    @classmethod
    def unchanged(cls, key: str, table, keys_missing: int = 0) -> TableResult:
        """A table the load staged but did not commit (a delete whose keys matched nothing)."""
        return cls(key, table.version, table.version, 0, table.row_count, 0, 0, 0, keys_missing)


@dataclass(frozen=True)
class Checked:
    """What load-wide validation decided besides "go": returned by a :data:`Validator`.

    ``facts``: per table key, properties for that table's Lance transaction (e.g. SRC_BOUND_PROP).
    ``deletions``: per table key, the ids of committed rows to delete in the same commit (a
    delete, the edges it cascades to, orphaned edges of an overwrite with ``cascade``); a table
    here that the load did not stage is committed too, under the same sidecar (I1, I18).
    ``missing``: per table key, delete keys that matched no committed row."""

    facts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    deletions: Mapping[str, pa.Array] = field(default_factory=dict)
    missing: Mapping[str, int] = field(default_factory=dict)
    #: per merged table key, the committed rows the merge replaces, found before the commit
    replaced: Mapping[str, Replaced] = field(default_factory=dict)


@dataclass(frozen=True)
class Replaced:
    """The committed rows a merge replaces, found by Spark jobs (``spark/dist_checks.py``) at
    one version of the table: the new metadata (JSON) of each fragment that got a deletion
    file for them, and the fragments they emptied. The commit uses it only when it lands on
    exactly that version; the deletion files of one it does not use are orphans for cleanup."""

    version: int
    updated: tuple[str, ...] = ()
    removed: tuple[int, ...] = ()
    rows: int = 0


@dataclass(frozen=True)
class LoadResult:
    """What one committed load did. ``skipped`` is True for an idempotent re-run (txn token).
    ``rejected_rows``: rows quarantined instead of committed (option rejectedRowsPath), in
    ``rejected_path`` (spark/quarantine.py)."""

    graph_commit_id: str | None
    manifest_version: int
    branch: str
    tables: tuple[TableResult, ...]
    operation_id: str | None
    skipped: bool = False
    attempts: int = 1
    rejected_rows: int = 0
    rejected_path: str | None = None


@dataclass(frozen=True)
class TxnToken:
    """Delta-style idempotency: (app id, monotonically increasing version)."""

    app_id: str
    version: int


def prepare_target(
    graph,
    branch: str,
    table_key: str,
    mode: str,
    *,
    max_rows_per_file: int = _tables.DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int | None = None,
) -> WriteTarget:
    """Driver, at planning: pin the table and fork it on the branch if needed (§J.4), so executors
    stage their files where the commit will land."""
    if mode not in MODES:
        raise OptionError(f"write mode '{mode}' is not one of {MODES}", option="writeMode", value=mode)
    snap = graph.snapshot(branch)
    t = snap.table(table_key)
    entry = _manifest.TableEntry(
        t.table_key, t.table_path, t.version, None if t.branch == MAIN else t.branch, t.row_count, ""
    )
    ds = _branches.ensure_fork(graph.root, entry, snap.branch, graph.storage_options)
    _tables.check_no_auto_cleanup(ds, table_key)
    return WriteTarget(
        graph.root,
        table_key,
        mode,
        snap.branch,
        t.base_path,
        None if snap.branch == MAIN else snap.branch,
        t.version,
        ds.schema,
        graph.storage_options,
        max_rows_per_file,
        max_bytes_per_file,
        ds.data_storage_version,
    )


def stage(target: WriteTarget, batches: Iterable[pa.RecordBatch]) -> StagedTable:
    """Executor: write ``batches`` (already in ``target.schema``) as uncommitted fragments.

    Streams: lance consumes the iterator batch by batch, so memory stays bounded (I11).
    """
    ds = target.open_for_staging()
    counter = {"rows": 0}

    def gen():
        for b in coalesce(batches, STAGE_BATCH_ROWS, STAGE_BATCH_BYTES):
            counter["rows"] += b.num_rows
            yield b

    reader = pa.RecordBatchReader.from_batches(target.schema, gen())
    frags = _tables.stage_fragments(
        ds,
        reader,
        target.schema,
        max_rows_per_file=target.max_rows_per_file,
        max_bytes_per_file=target.max_bytes_per_file,
    )
    nbytes = sum(df.file_size_bytes or 0 for f in frags for df in f.files)
    return StagedTable(
        target.table_key, target.mode, target.stage_uri, target.base_version, tuple(frags), counter["rows"], nbytes
    )


def coalesce(batches: Iterable[pa.RecordBatch], rows: int, nbytes: int) -> Iterator[pa.RecordBatch]:
    """``batches`` in their order, consecutive small ones concatenated until a batch has at
    least ``rows`` rows or ``nbytes`` bytes (a run cut short by a large batch or by the end has
    fewer); a batch that large already passes as it is. Holds at most one output batch's worth
    of input."""
    held: list[pa.RecordBatch] = []
    n = size = 0
    for b in batches:
        if b.num_rows >= rows or b.nbytes >= nbytes:  # large enough as it is: never copied
            if held:
                yield held[0] if len(held) == 1 else pa.concat_batches(held)
                held, n, size = [], 0, 0
            yield b
            continue
        held.append(b)
        n += b.num_rows
        size += b.nbytes
        if n >= rows or size >= nbytes:
            yield held[0] if len(held) == 1 else pa.concat_batches(held)
            held, n, size = [], 0, 0
    if held:
        yield held[0] if len(held) == 1 else pa.concat_batches(held)


def abort(staged: Iterable[StagedTable], storage_options: dict[str, str] | None = None) -> int:
    """Delete the uncommitted files of a failed job, best effort (I10). Returns files removed."""
    return sum(
        discard_staged_files(
            s.stage_uri, [df.path for f in s.fragments for df in f.files], storage_options, what=s.table_key
        )
        for s in staged
    )


def discard_staged_files(
    stage_uri: str, names: Sequence[str], storage_options: dict[str, str] | None = None, *, what: str = ""
) -> int:
    """Delete staged data files ``stage_uri/data/<name>`` that provably nothing references.

    If the table's HEAD references any of them (the commit landed) or a recovery sidecar is
    pending for the graph (recovery may still roll the write forward), they are left for
    ``cleanup``, which knows what every retained version references.
    """
    if not names:
        return 0
    root = _root_of(stage_uri)
    if root and _sidecar.list_paths(RootStorage(root, storage_options), root):
        log.warning(
            "abort: a recovery sidecar is pending on %s; leaving %d staged files of %s for cleanup",
            root,
            len(names),
            what or stage_uri,
        )
        return 0
    if _referenced_by_head(stage_uri, set(names), storage_options):
        log.warning("abort: %s's HEAD references staged files; leaving them", what or stage_uri)
        return 0
    return _tables.delete_files(stage_uri, names, storage_options)


def _root_of(stage_uri: str) -> str | None:
    for seg in ("/nodes/", "/edges/"):
        i = stage_uri.rfind(seg)
        if i > 0:
            return stage_uri[:i]
    return None


def _referenced_by_head(stage_uri: str, names: set, storage_options) -> bool:
    try:
        ds = lance.dataset(stage_uri, storage_options=storage_options)
    except Exception:
        return False
    return any(df.path in names for frag in ds.get_fragments() for df in frag.metadata.files)


# -- idempotency ---------------------------------------------------------------------------


def _txn_path(root: str, app_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else f"%{ord(c):02x}" for c in app_id)
    return join(RootPaths(root).spark_dir, "txn", f"{safe}.json")


def _txn_landed(graph, rec: dict) -> bool:
    """A txn record counts only if every table version it names is published on its branch and
    was produced by its operation (the id is stored in the Lance transaction: I12)."""
    try:
        snap_state = _manifest.read_state(
            _manifest.open_manifest(graph.root, rec["branch"], storage_options=graph.storage_options), rec["branch"]
        )
    except Exception:
        return False
    for key, ver in rec["tables"].items():
        if (key, ver) not in snap_state.existing_versions and (key, ver + 1) not in snap_state.existing_versions:
            return False
        base = f"{graph.root}/{snap_state.locations[key]}"
        lb = rec["branch"] if rec["branch"] != MAIN else None
        try:
            ds = _tables.open_dataset(base, branch=lb, storage_options=graph.storage_options)
        except Exception:
            return False
        if not _published_by(snap_state, ds, key, ver, rec["operation_id"]):
            return False
    return True


def _published_by(snap_state, ds: lance.LanceDataset, key: str, ver: int, operation_id: str) -> bool:
    """Whether ``operation_id``'s commit of ``key`` at ``ver`` is published: at ``ver``, or at
    ``ver + 1`` by the same operation's index commit (I23)."""
    return any(
        (key, v) in snap_state.existing_versions and _tables.transaction_property(ds, v, OP_PROP) == operation_id
        for v in (ver, ver + 1)
    )


def _txn_committed(graph, rec: dict) -> bool:
    """A completed record (rewritten with its graph commit id after the commit row was
    appended) whose commit row is on its branch: the load landed, also when ``cleanup`` has
    since removed the table versions whose transactions prove it (I19)."""
    cid = rec.get("graph_commit_id")
    if not cid:
        return False
    try:
        return _commits.exists(graph.root, rec["branch"], str(cid), graph.storage_options)
    except Exception as e:  # unreadable: not proven
        log.debug("txn record's commit %s unreadable: %s", cid, e)
        return False


def already_applied(graph, txn: TxnToken) -> dict | None:
    """The record of the load that applied ``txn`` or a later version of its app id (I12, I19),
    or None. One record per app id names the last load that carried the id; it counts only if
    that load landed: every table version it names is published and carries its operation id
    (I12), or, for a completed record, its graph commit row exists."""
    try:
        rec = json.loads(graph.storage.read_text(_txn_path(graph.root, txn.app_id)))
    except FileNotFoundError:
        return None
    if rec.get("version", -1) >= txn.version and (_txn_landed(graph, rec) or _txn_committed(graph, rec)):
        return rec
    return None


# -- the commit ------------------------------------------------------------------------------


def _merge_operation(
    ds: lance.LanceDataset, staged: StagedTable, storage_options, also: pa.Array | None = None
) -> lance.LanceOperation.Update:
    """Upsert on ``id`` as one Update: delete matched existing rows (and the rows of ``also``),
    add the staged fragments."""
    incoming = (
        _tables.read_staged_columns(staged.stage_uri, staged.fragments, ["id"], storage_options)
        if ds.count_rows()
        else None
    )  # onto an empty table a merge replaces nothing
    parts = [] if incoming is None else [c for c in incoming.column("id").chunks]
    if also is not None:
        parts.append(also)
    ids = pa.chunked_array(parts, pa.string()) if parts else None
    return _delete_operation(ds, ids, list(staged.fragments), storage_options)


def _delete_operation(
    ds: lance.LanceDataset,
    ids: pa.ChunkedArray | None,
    new_fragments: Sequence[FragmentMetadata] = (),
    storage_options: dict[str, str] | None = None,
) -> lance.LanceOperation.Update:
    """One Update that deletes the rows whose ``id`` is in ``ids`` through deletion files (a
    fragment left empty is removed; no other row is rewritten) and adds ``new_fragments``.

    The rows are found through the table's ``id`` index (:meth:`~.id_probe.CommittedIds.locate`:
    the index pages the ids fall in, then the candidate rows taken and checked), so memory and
    reads follow ``ids``, not the table (I27); only the fragments holding one get a deletion file."""
    updated: list[FragmentMetadata] = []
    removed: list[int] = []
    if ids is not None and len(ids) and ds.count_rows():
        ids = pc.unique(ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids)
        probe = CommittedIds(ds, "id", storage_options)
        found = probe.locate(ids)
        frag_of = fragments_of(found.column(ROW_ADDR).combine_chunks())
        names = found.column(probe.row_id).combine_chunks()
        for fid in sorted(set(frag_of.tolist())):
            frag = ds.get_fragment(fid)
            assert frag is not None  # an address found in this version names one of its fragments
            # by row id: exactly the live rows found (and an IN list of integers is far cheaper
            # for Lance than one of strings)
            hits = pc.filter(names, pa.array(frag_of == fid)).to_pylist()
            new_meta = frag.delete(f"{probe.row_id} IN ({', '.join(str(a) for a in hits)})")
            _check_deleted(ds, frag, new_meta, len(hits))
            if new_meta is None:
                removed.append(fid)
            else:
                updated.append(new_meta)
    return lance.LanceOperation.Update(
        removed_fragment_ids=removed, updated_fragments=updated, new_fragments=list(new_fragments)
    )


def _check_deleted(ds: lance.LanceDataset, frag, new_meta: FragmentMetadata | None, n: int) -> None:
    """A fragment's delete of ``n`` rows found live in it deleted exactly ``n`` (a predicate Lance
    does not match would silently delete nothing)."""
    before = frag.metadata.deletion_file
    deleted_before = 0 if before is None else int(before.num_deleted_rows or 0)
    if new_meta is None:
        got = int(frag.metadata.physical_rows) - deleted_before
    else:
        after = new_meta.deletion_file
        got = (0 if after is None else int(after.num_deleted_rows or 0)) - deleted_before
    if got != n:
        raise CorruptGraphError(
            f"{ds.uri} fragment {frag.fragment_id}: deleting the {n} live rows found deleted {got}; "
            "nothing was committed",
            fragment=frag.fragment_id,
        )


def quote_sql_string(v: str) -> str:
    """A SQL string literal for Lance filters: single quotes doubled, nothing else special."""
    return "'" + str(v).replace("'", "''") + "'"


def _operation(
    ds: lance.LanceDataset,
    staged: StagedTable | None,
    storage_options,
    deletions: pa.Array | None = None,
    replaced: Replaced | None = None,
):
    """The Lance operation of one table: the staged rows per mode, plus ``deletions`` (ids of
    committed rows to delete in the same commit); ``staged`` None: a table only deleted from.
    A merge uses ``replaced`` (its committed rows found before) when it was found at ``ds``'s
    version and nothing else is deleted; otherwise it reads the load's ids here."""
    dels = None if deletions is None else pa.chunked_array([deletions], pa.string())
    if staged is None or staged.mode == "delete":
        return _delete_operation(ds, dels, (), storage_options)
    if staged.mode == "append":
        if dels is not None:
            return _delete_operation(ds, dels, staged.fragments, storage_options)
        return lance.LanceOperation.Append(list(staged.fragments))
    if staged.mode == "overwrite":
        return lance.LanceOperation.Overwrite(ds.schema, list(staged.fragments))
    if replaced is not None and deletions is None:
        if replaced.version == ds.version:
            return lance.LanceOperation.Update(
                removed_fragment_ids=list(replaced.removed),
                updated_fragments=[FragmentMetadata.from_json(j) for j in replaced.updated],
                new_fragments=list(staged.fragments),
            )
        log.warning(
            "%s: the rows a merge replaces were found at version %d, the commit lands on %d: "
            "finding them again on the driver",
            staged.table_key,
            replaced.version,
            ds.version,
        )
    return _merge_operation(ds, staged, storage_options, deletions)


#: ``validate(snapshot, staged_by_key)``: raises to refuse the load; may return, per table key,
#: facts to record in that table's Lance transaction (e.g. SRC_BOUND_PROP), or a :class:`Checked`
#: that also names rows to delete in the same commit. A load with a delete needs one.
Validator = Callable[[object, Mapping[str, StagedTable]], object | None]


def commit_load(
    graph,
    branch: str,
    staged: Sequence[StagedTable],
    *,
    actor: str | None = None,
    validate: Validator | None = None,
    txn: TxnToken | None = None,
    lease_timeout_s: float = 300.0,
    max_attempts: int = 8,
) -> LoadResult:
    """Driver: commit staged tables as ONE graph commit on ``branch`` (all or nothing, I1).

    ``validate(snapshot, staged_by_key)`` runs load-wide checks against the fresh snapshot,
    inside the lease, before anything is written; raising aborts with the graph unchanged. The
    facts it returns per table travel in that table's commit (they describe exactly the new
    version, which lands at pin + 1 or not at all: I6).
    On a drift caused by another writer mid-commit it waits and retries from the already
    staged fragments (no data is rewritten). Overwrite is strict: a moved pin is a conflict.
    """
    by_key = merge_by_key(staged)
    attempts = 0
    with _lease.hold(graph.storage, graph.root, timeout_s=lease_timeout_s, owner=actor or ""):
        rec = already_applied(graph, txn) if txn is not None else None
        if rec is None:
            _heal(graph)
            # again after the heal: it may just have rolled forward a crashed run of this very
            # token (every table committed, the manifest not yet published): applied (I12)
            rec = already_applied(graph, txn) if txn is not None else None
        if rec is not None and txn is not None:
            log.info(
                "txn %s v%d already applied by operation %s: skipping", txn.app_id, txn.version, rec["operation_id"]
            )
            return LoadResult(
                rec.get("graph_commit_id"),
                rec.get("manifest_version", 0),
                branch,
                (),
                rec["operation_id"],
                skipped=True,
                attempts=0,
            )
        while True:
            attempts += 1
            try:
                return _commit_once(graph, branch, by_key, actor, validate, txn, attempts)
            except TableDriftError as e:
                if attempts >= max_attempts:
                    raise
                pending = graph.pending_sidecars()
                if pending:
                    # drift explained by a crashed write: resolve it, then retry on top
                    _heal(graph)
                log.info("commit attempt %d drifted (%s); retrying from staged fragments", attempts, e)
                time.sleep(min(0.1 * 2**attempts, 2.0))


def merge_by_key(staged: Sequence[StagedTable]) -> dict[str, StagedTable]:
    """The staged tables of a load, one per table key (the parts of a key merged, in order)."""
    by_key: dict[str, StagedTable] = {}
    for s in staged:
        by_key[s.table_key] = StagedTable.merge([by_key[s.table_key], s]) if s.table_key in by_key else s
    return by_key


def _op_marker(root: str, operation_id: str) -> str:
    return join(RootPaths(root).spark_dir, "ops", f"{operation_id}.json")


def _heal(graph) -> None:
    """Before writing (we hold the commit lease): roll forward what can be rolled forward, as
    the engine's RollForwardOnly heal does, and fully resolve sidecars of OUR crashed writes.

    Why ours may be rolled back here: an omnigraph-spark writer holds the lease from before its
    sidecar until after its delete, so a sidecar with our op marker seen under the lease belongs
    to a dead writer. A sidecar of another writer (the engine) that needs a rollback may belong
    to a live one: that blocks the write until ``recover()`` (an operator decision).
    """
    outcomes = _recovery.sweep(
        graph.root, graph.storage, mode="roll_forward_only", storage_options=graph.storage_options
    )
    for o in outcomes:
        if o.action == "Deferred" and graph.storage.exists(_op_marker(graph.root, o.operation_id)):
            log.warning("resolving sidecar %s of a crashed omnigraph-spark write", o.operation_id)
            sc = _sidecar.read(graph.storage, graph.root, RootPaths(graph.root).sidecar(o.operation_id))
            if sc is not None:
                _recovery.resolve_one(graph.root, graph.storage, sc, mode="full", storage_options=graph.storage_options)
            graph.storage.delete(_op_marker(graph.root, o.operation_id))
    ops_dir = join(RootPaths(graph.root).spark_dir, "ops")
    for name in graph.storage.list_dir(ops_dir):  # markers whose sidecar is resolved (by anyone)
        if not graph.storage.exists(RootPaths(graph.root).sidecar(name[:-5])):
            graph.storage.delete(join(ops_dir, name))
    outcomes = [o for o in outcomes if graph.storage.exists(RootPaths(graph.root).sidecar(o.operation_id))]
    deferred = [o for o in outcomes if o.action == "Deferred"]
    if deferred:
        raise RecoveryPendingError(
            f"graph '{graph.root}' has pending recovery sidecars that need a rollback or review: "
            f"{[o.operation_id for o in deferred]}; run graph.recover() (or `omnigraph-spark recover`)",
            sidecars=[o.operation_id for o in deferred],
        )


def _pinned_head(graph, t, key: str, branch: str, storage_options) -> lance.LanceDataset:
    """The dataset a commit to table ``key`` (snapshot entry ``t``) lands on: the branch's own
    fork (made now if the branch still reads the table from its parent), its HEAD checked
    against the manifest pin (I7) and free of Lance's auto-cleanup."""
    lb = None if branch == MAIN else branch
    if lb is not None and t.branch != branch:
        entry = _manifest.TableEntry(key, t.table_path, t.version, t.lance_branch, t.row_count, "")
        ds = _branches.ensure_fork(graph.root, entry, branch, storage_options)
    else:
        ds = _tables.open_dataset(t.base_path, branch=lb, storage_options=storage_options)
    _tables.check_head(ds, t.version, key)
    _tables.check_no_auto_cleanup(ds, key)
    return ds


def _commit_once(
    graph, branch: str, by_key: Mapping[str, StagedTable], actor, validate, txn, attempt: int
) -> LoadResult:
    storage_options = graph.storage_options
    _manifest.check_not_locked(graph.root, storage_options)
    snap = graph.snapshot(branch)
    # I7: pins and heads agree for every table we touch (fresh, under the lease)
    heads: dict[str, lance.LanceDataset] = {}
    for key, s in by_key.items():
        t = snap.table(key)
        if (s.mode == "overwrite" or s.strict_base) and t.version != s.base_version:
            what = "overwrite" if s.mode == "overwrite" else "statement"
            raise ExpectedVersionMismatchError(
                f"{what} of '{key}' was planned on version {s.base_version} but the manifest now pins "
                f"{t.version}; another writer changed it — re-run the {what}",
                table=key,
                expected=s.base_version,
                actual=t.version,
            )
        ds = _pinned_head(graph, t, key, branch, storage_options)
        _tables.check_fragment_fields(ds, s.fragments, key)  # I5
        heads[key] = ds
    if validate is None and any(s.mode == "delete" for s in by_key.values()):
        raise OptionError(
            "a delete is resolved by the load-wide validator; commit_load got none", option="writeMode", value="delete"
        )
    verdict = validate(snap, by_key) if validate is not None else None
    if not isinstance(verdict, Checked):
        verdict = Checked(facts=verdict or {})
    facts, deletions = verdict.facts, {k: v for k, v in verdict.deletions.items() if len(v)}
    for key in sorted(set(deletions) - set(by_key)):  # cascaded tables: pinned and checked alike (I7)
        heads[key] = _pinned_head(graph, snap.table(key), key, branch, storage_options)
    # a delete that matched nothing commits nothing for its table
    touched = sorted(
        k for k in set(by_key) | set(deletions) if k in deletions or (k in by_key and by_key[k].mode != "delete")
    )
    if not touched:
        log.info("load on %s changes nothing (delete keys missing: %s)", branch, dict(verdict.missing))
        return LoadResult(
            None,
            snap.version,
            branch,
            tuple(TableResult.unchanged(k, snap.table(k), verdict.missing.get(k, 0)) for k in sorted(by_key)),
            None,
            attempts=attempt,
        )
    ops = {
        key: _operation(heads[key], by_key.get(key), storage_options, deletions.get(key), verdict.replaced.get(key))
        for key in touched
    }

    pins = [
        _sidecar.SidecarPin(
            key,
            snap.table(key).base_path,
            snap.table(key).version,
            snap.table(key).version + 1,
            None,
            None if branch == MAIN else branch,
        )
        for key in touched
    ]
    sc = _sidecar.Sidecar.new(branch, actor, "Load", pins)
    props = {OP_PROP: sc.operation_id}
    if txn is not None:
        props.update({TXN_APP_PROP: txn.app_id, TXN_VER_PROP: str(txn.version)})
    failpoints.hit("before_sidecar")
    graph.storage.write_text(_op_marker(graph.root, sc.operation_id), json.dumps({"actor": actor, "branch": branch}))
    _sidecar.write(graph.storage, graph.root, sc)  # I2: intent is durable before any commit
    failpoints.hit("after_sidecar")
    if txn is not None:
        graph.storage.write_text(
            _txn_path(graph.root, txn.app_id),
            json.dumps(
                {
                    "app_id": txn.app_id,
                    "version": txn.version,
                    "operation_id": sc.operation_id,
                    "branch": branch,
                    "tables": {p.table_key: p.post_commit_pin for p in pins},
                }
            ),
        )
    results: list[TableResult] = []
    updates: list[_manifest.TableUpdate] = []
    committed = 0
    try:
        for i, pin in enumerate(pins, start=1):
            s = by_key.get(pin.table_key) or StagedTable(pin.table_key, "delete", "", pin.expected_version, (), 0, 0)
            res = _tables.commit_operation(
                heads[pin.table_key],
                ops[pin.table_key],
                pin.expected_version,
                pin.table_key,
                {**facts.get(pin.table_key, {}), **props},
            )  # I6, I16
            committed += 1
            t = snap.table(pin.table_key)
            loc = table_uri(graph.root, t.table_path, pin.table_branch)
            updates.append(
                _manifest.TableUpdate(
                    pin.table_key,
                    res.version,
                    pin.table_branch,
                    res.row_count,
                    _tables.version_metadata_json(loc, res.version, t.table_path, storage_options),
                )
            )
            dels = deletions.get(pin.table_key)
            results.append(
                TableResult(
                    pin.table_key,
                    pin.expected_version,
                    res.version,
                    s.rows,
                    res.row_count,
                    len(s.fragments),
                    s.bytes,
                    0 if dels is None else len(dels),
                    verdict.missing.get(pin.table_key, 0),
                )
            )
            failpoints.hit("after_table_commit", i)
    except TableDriftError:
        if committed == 0:
            # Nothing landed (Lance refused the first commit): the sidecar is ours to remove.
            _sidecar.delete(graph.storage, graph.root, sc.operation_id)
            graph.storage.delete(_op_marker(graph.root, sc.operation_id))
        else:
            _resolve_now(graph, sc)
        raise
    except CommitRebasedError:
        # A commit landed on top of another writer's: never publish it; roll back now.
        _resolve_now(graph, sc)
        raise
    failpoints.hit("after_all_commits")
    updates, results = _index_phase(graph, branch, snap, sc, updates, results, props, facts)
    results += [
        TableResult.unchanged(k, snap.table(k), verdict.missing.get(k, 0)) for k in sorted(by_key) if k not in touched
    ]
    expected = {p.table_key: p.expected_version for p in pins}
    try:
        new_state = _manifest.publish(graph.root, branch, updates, expected, storage_options)  # I3
    except ExpectedVersionMismatchError:
        fresh = _manifest.read_state(
            _manifest.open_manifest(graph.root, branch, storage_options=storage_options), branch
        )
        data_version = {p.table_key: p.post_commit_pin for p in pins}
        if all(
            fresh.entries.get(u.table_key)
            and data_version[u.table_key] <= fresh.entries[u.table_key].version <= u.version
            and fresh.entries[u.table_key].table_branch == u.table_branch
            for u in updates
        ):
            # Someone (an engine heal) rolled our sidecar forward: our write IS published (§H.5),
            # perhaps before its index commits (I23), which a fast-forward publishes now.
            log.info("publish converged: another process rolled operation %s forward", sc.operation_id)
            behind = [u for u in updates if fresh.entries[u.table_key].version < u.version]
            if behind:
                fresh = _manifest.publish(
                    graph.root,
                    branch,
                    behind,
                    {u.table_key: fresh.entries[u.table_key].version for u in behind},
                    storage_options,
                )
            _sidecar.delete(graph.storage, graph.root, sc.operation_id)
            graph.storage.delete(_op_marker(graph.root, sc.operation_id))
            return LoadResult(None, fresh.version, branch, tuple(results), sc.operation_id, attempts=attempt)
        _resolve_now(graph, sc)
        raise
    failpoints.hit("after_publish")
    c = _commits.append(graph.root, branch, new_state.version, actor, storage_options)  # I4
    failpoints.hit("after_commit_row")
    failpoints.hit("before_sidecar_delete")
    _sidecar.delete(graph.storage, graph.root, sc.operation_id)
    graph.storage.delete(_op_marker(graph.root, sc.operation_id))
    if txn is not None:
        graph.storage.write_text(
            _txn_path(graph.root, txn.app_id),
            json.dumps(
                {
                    "app_id": txn.app_id,
                    "version": txn.version,
                    "operation_id": sc.operation_id,
                    "branch": branch,
                    "tables": {p.table_key: p.post_commit_pin for p in pins},
                    "graph_commit_id": c.graph_commit_id,
                    "manifest_version": new_state.version,
                }
            ),
        )
    total_rows = sum(r.rows_written for r in results)
    log.info(
        "omnigraph commit %s on %s: manifest v%d, %d rows, %d bytes, %d fragments, tables %s",
        c.graph_commit_id,
        branch,
        new_state.version,
        total_rows,
        sum(r.bytes for r in results),
        sum(r.fragments for r in results),
        {r.table_key: (r.from_version, r.to_version) for r in results},
    )
    return LoadResult(c.graph_commit_id, new_state.version, branch, tuple(results), sc.operation_id, attempts=attempt)


def _index_phase(
    graph,
    branch: str,
    snap,
    sc: _sidecar.Sidecar,
    updates: list[_manifest.TableUpdate],
    results: list[TableResult],
    props: dict[str, str],
    facts: Mapping[str, Mapping[str, str]],
) -> tuple[list[_manifest.TableUpdate], list[TableResult]]:
    """I23: every table the load committed gets every index the engine expects, covering every
    fragment, published with the load (store/indexes.py says why).

    The segments are built first, uncommitted: the long part, while the sidecar still says
    ``Load`` and every table sits at its pin + 1, so a crash rolls the load forward and leaves
    orphan index files for ``cleanup``. Then the sidecar becomes ``EnsureIndices`` (Loose: a
    crash from here on rolls the load forward at whatever HEAD each table reached) and each
    table gets one ``CreateIndex`` commit at pin + 2 carrying the load's properties and facts
    (the version the manifest pins is the one whose transaction readers look them up in).
    Indexes are derived state: a build or a commit Lance refuses leaves the table at its data
    commit, with a warning, and the load goes on (a later load or ``optimize`` builds them).
    """
    storage_options = graph.storage_options
    lb = None if branch == MAIN else branch

    def build(u: _manifest.TableUpdate) -> tuple[list[_indexes.IndexWork], list, float]:
        start = time.monotonic()
        try:
            specs = _indexes.expected_indexes(graph.catalog.by_table_key(u.table_key))
            uri = snap.table(u.table_key).base_path
            ds = _tables.open_dataset(uri, branch=lb, version=u.version, storage_options=storage_options)
            work = _indexes.plan(ds, specs)
            job = _indexes.IndexJob(uri, lb, u.version, tuple(work), storage_options)
            return work, _indexes.segments_for(job) if work else [], time.monotonic() - start
        except Exception as e:  # the load's data is committed: its indexes never fail it (below)
            log.warning("indexes of %s not built (%s): the next load or optimize builds them", u.table_key, e)
            return [], [], time.monotonic() - start

    with ThreadPoolExecutor(max_workers=max(1, len(updates)), thread_name_prefix="index-table") as pool:
        built = dict(zip((u.table_key for u in updates), pool.map(build, updates), strict=True))
    todo = {key: b for key, b in built.items() if b[0]}
    if not todo:
        return updates, results
    _sidecar.write(graph.storage, graph.root, replace(sc, writer_kind="EnsureIndices"))
    failpoints.hit("after_index_sidecar")
    new_updates, new_results = [], []
    for i, (u, r) in enumerate(zip(updates, results, strict=True), start=1):
        if u.table_key not in todo:
            new_updates.append(u)
            new_results.append(r)
            continue
        work, segments, seconds = todo[u.table_key]
        start = time.monotonic()
        t = snap.table(u.table_key)
        ds = _tables.open_dataset(t.base_path, branch=lb, storage_options=storage_options)
        _tables.check_head(ds, u.version, u.table_key)
        op = lance.LanceOperation.CreateIndex(new_indices=segments, removed_indices=[])
        try:
            res = _tables.commit_operation(ds, op, u.version, u.table_key, {**facts.get(u.table_key, {}), **props})
        except TableDriftError as e:
            # Lance refused it, so nothing landed: the table stays at its data commit. Raising it
            # would let commit_load retry the load's data on top. Any other error leaves the
            # index commit's fate unknown: it propagates, and recovery rolls the load forward.
            log.warning("indexes of %s not committed (%s): the next load or optimize builds them", u.table_key, e)
            new_updates.append(u)
            new_results.append(r)
            continue
        loc = table_uri(graph.root, t.table_path, u.table_branch)
        new_updates.append(
            _manifest.TableUpdate(
                u.table_key,
                res.version,
                u.table_branch,
                res.row_count,
                _tables.version_metadata_json(loc, res.version, t.table_path, storage_options),
            )
        )
        names = tuple(f"{w.spec.name}:{w.action}" for w in work)
        new_results.append(
            replace(r, to_version=res.version, indexes=names, index_seconds=seconds + time.monotonic() - start)
        )
        log.info("indexes of %s at v%d: %s in %.2f s", u.table_key, res.version, names, seconds)
        failpoints.hit("after_index_commit", i)
    return new_updates, new_results


def _resolve_now(graph, sc: _sidecar.Sidecar) -> None:
    """After a partial failure, run recovery for our own sidecar so the graph is whole again."""
    try:
        _recovery.resolve_one(graph.root, graph.storage, sc, mode="full", storage_options=graph.storage_options)
    except Exception as e:  # the sidecar stays; the next open's sweep resolves it
        log.error("could not resolve sidecar %s in place (%s); it stays for the next recovery", sc.operation_id, e)
