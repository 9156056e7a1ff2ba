"""The indexes the Omnigraph 0.7 engine expects on each table, kept current by every load.

The engine gives every node table a BTree on ``id`` and, for each single-column ``@key`` or
``@index`` property, an index chosen by the property's type; every edge table a BTree on
``id``, ``src`` and ``dst`` (docs/format.md §4, "Indexes"). Before each of its writes it builds
the ones a table lacks (by column and index type, whatever their names). Lance 7.0's INVERTED
build deadlocks when Lance's CPU pool has a single thread (a posting-list producer blocks on a
one-slot queue while holding the only thread its consumer needs); the pool has one thread by
default on machines with three CPUs or fewer, and the build then never finishes above a few
hundred thousand distinct tokens. A graph we loaded without indexes is one the engine then
cannot write again (docs/interop.md, D6).

So every load leaves each table it touched with every expected index, covering every
fragment (invariant I23): ``plan`` finds what is missing or stale, ``segments_for`` builds it
as uncommitted segments (a missing index from scratch, a stale one extended by a delta over the
unindexed fragments, never merging deltas), and ``store/writes.py`` runs both between the
load's data commits and its one manifest publish, under the load's sidecar, and commits the
segments. ``consolidation`` makes each index one segment again, for ``optimize``.

Each BTree segment is built in parts (:func:`build_segments`): runs of whole fragments of at
most ``PART_ROWS`` rows, each a fragment-level build under the segment's one uuid, several at
once and beside the table's other indexes, then one ``merge_index_metadata``: the same segment
a whole build makes (its name, fields, ``index_version`` and ``index_details``), its memory
bounded by the parts in flight rather than by the table. An INVERTED segment is one part: its
parts would be partitions of the index, and the 0.7.2 engine's optimize panics on a
multi-partition INVERTED index once rows are deleted from it (Lance 7.0's
``InnerBuilder::merge_from``). Since concurrent INVERTED builds (two text indexes of one table)
reach the same deadlock when they hold every thread of the pool, the pools are sized by
:class:`BuildPool`. Large builds, and INVERTED builds that could reach the deadlock, run in a
child process whose Lance CPU pool has a thread more than its part builds
(:func:`needs_child`, :func:`child_pool`); small ones run in the calling process
(:func:`inline_pool`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lance.dataset import Index

from ..errors import StorageError
from ..schema.catalog import PropType, TypeDef
from .fs import RootStorage
from .layout import table_uri
from .tables import open_dataset

log = logging.getLogger(__name__)

BTREE = "BTREE"
INVERTED = "INVERTED"
VECTOR = "IVF_FLAT"

#: the Lance index detail type each kind is recognised by (the engine checks the same)
_TYPE_URL_SUFFIX = {BTREE: "BTreeIndexDetails", INVERTED: "InvertedIndexDetails", VECTOR: "VectorIndexDetails"}

#: an INVERTED build over at most this many bytes of text stays far below the deadlock's reach
#: (it needs hundreds of thousands of distinct tokens) and runs in the calling process
INLINE_TEXT_BYTES = 256 * 1024
#: past this many rows the text is not measured: the build goes to the child process
INLINE_MEASURE_ROWS = 50_000
#: index work over this many rows in all runs in a child process whatever its kind
CHILD_ROWS = 1_000_000
#: the most rows of one part of a BTree build (a run of whole fragments; a larger fragment is a
#: part of its own): a part's working set is what a build holds in memory
PART_ROWS = 1 << 20
#: part builds a process runs at once, at most (one per CPU below that)
MAX_PART_BUILDS = 4


@dataclass(frozen=True)
class IndexSpec:
    """One index the engine expects: a column and the kind of index on it."""

    column: str
    kind: str  # BTREE | INVERTED | VECTOR

    @property
    def name(self) -> str:
        """Lance's default name for an index on ``column`` (the one the engine's builds get)."""
        return f"{self.column}_idx"


@dataclass(frozen=True)
class IndexWork:
    """What one index of a table needs: ``create`` it over every fragment, or ``extend`` it by a
    delta over ``fragments`` (the ones no delta of it covers yet)."""

    spec: IndexSpec
    action: str  # "create" | "extend"
    fragments: tuple[int, ...]
    rows: int

    def to_json(self) -> dict:
        return {
            "column": self.spec.column,
            "kind": self.spec.kind,
            "action": self.action,
            "fragments": list(self.fragments),
            "rows": self.rows,
        }

    @classmethod
    def from_json(cls, o: dict) -> IndexWork:
        return cls(IndexSpec(o["column"], o["kind"]), o["action"], tuple(o["fragments"]), int(o["rows"]))


@dataclass(frozen=True)
class IndexJob:
    """The index work of one table: ``work`` on the table at ``uri`` (its Lance ``branch``, at
    ``version``). A value: the child process receives it as JSON. ``split`` off builds each
    index whole, in one part with Lance's default build parameters (what benchmarks compare
    the parts against)."""

    uri: str
    branch: str | None
    version: int
    work: tuple[IndexWork, ...]
    storage_options: dict[str, str] | None = field(default=None, repr=False)  # credentials
    split: bool = True
    #: the most rows of a BTree part (``PART_ROWS`` where None), fixed by the parent for its child
    part_rows: int | None = None
    #: an INVERTED build's workers, fixed by the parent for its child (``BuildPool.text_workers``)
    text_workers: int | None = None

    def open(self) -> lance.LanceDataset:
        return open_dataset(self.uri, branch=self.branch, version=self.version, storage_options=self.storage_options)

    @property
    def home(self) -> str:
        """Where the table's own files on its Lance branch live (``<uri>/tree/<branch>`` on a
        branch): a segment's files land under its ``_indices``."""
        return table_uri(self.uri, "", self.branch).rstrip("/")

    def to_json(self) -> dict:
        return {
            "uri": self.uri,
            "branch": self.branch,
            "version": self.version,
            "work": [w.to_json() for w in self.work],
            "storage_options": self.storage_options,
            "split": self.split,
            "part_rows": self.part_rows,
            "text_workers": self.text_workers,
        }

    @classmethod
    def from_json(cls, o: dict) -> IndexJob:
        return cls(
            o["uri"],
            o["branch"],
            int(o["version"]),
            tuple(IndexWork.from_json(w) for w in o["work"]),
            o["storage_options"],
            bool(o.get("split", True)),
            o.get("part_rows"),
            o.get("text_workers"),
        )


def _prop_kind(t: PropType) -> str | None:
    """The index a one-column ``@key``/``@index`` on a property of type ``t`` gets: free text an
    INVERTED index, a vector IVF_FLAT, enums and orderable scalars a BTree, lists and blobs none."""
    if t.list or t.scalar == "Blob":
        return None
    if t.scalar == "Vector":
        return VECTOR
    if t.scalar == "String" and not t.is_enum:
        return INVERTED
    return BTREE


def expected_indexes(typedef: TypeDef) -> tuple[IndexSpec, ...]:
    """Every index the engine expects on ``typedef``'s table, in the order it builds them."""
    if typedef.is_edge:
        return (IndexSpec("id", BTREE), IndexSpec("src", BTREE), IndexSpec("dst", BTREE))
    specs = [IndexSpec("id", BTREE)]
    for cols in (*typedef.keys, *typedef.indexes):
        prop = typedef.prop(cols[0]) if len(cols) == 1 else None
        kind = _prop_kind(prop.type) if prop is not None else None
        if kind is not None and all(s.column != cols[0] for s in specs):
            specs.append(IndexSpec(cols[0], kind))
    return tuple(specs)


def _matches(desc, spec: IndexSpec) -> bool:
    return list(desc.field_names) == [spec.column] and desc.type_url.endswith(_TYPE_URL_SUFFIX[spec.kind])


def _has_vectors(ds: lance.LanceDataset, column: str) -> bool:
    """Whether ``column`` holds a non-null vector (IVF training needs one; the engine defers
    the index otherwise, and so do we)."""
    return ds.count_rows(filter=f"`{column}` IS NOT NULL") > 0


def plan(ds: lance.LanceDataset, specs: tuple[IndexSpec, ...]) -> list[IndexWork]:
    """What ``ds`` (at the version to index) needs so that every spec has an index covering
    every fragment. An empty table needs nothing (the engine indexes tables with rows only)."""
    frags = {f.fragment_id: f for f in ds.get_fragments()}
    if not frags or ds.count_rows() == 0:
        return []
    described = ds.describe_indices()
    work = []
    for spec in specs:
        mine = [d for d in described if _matches(d, spec)]
        if spec.kind == VECTOR and not mine and not _has_vectors(ds, spec.column):
            log.info("index on %s deferred: the column has no vector to train on yet", spec.column)
            continue
        covered = {f for d in mine for seg in d.segments for f in seg.fragment_ids}
        todo = tuple(sorted(set(frags) - covered)) if mine else tuple(sorted(frags))
        if todo:
            rows = sum(frags[f].count_rows() for f in todo)
            work.append(IndexWork(spec, "extend" if mine else "create", todo, rows))
    return work


def consolidation(ds: lance.LanceDataset, specs: tuple[IndexSpec, ...]) -> tuple[list[IndexWork], list[Index]]:
    """What makes every index of ``specs`` on ``ds`` one segment over every fragment, and the
    segments that replaces. Lance compacts only fragments one segment covers together, so
    ``optimize`` runs this before compacting a table whose loads added deltas."""
    frags = tuple(sorted(f.fragment_id for f in ds.get_fragments()))
    if not frags or ds.count_rows() == 0:
        return [], []
    described = ds.describe_indices()
    work: list[IndexWork] = []
    removed: list[Index] = []
    for spec in specs:
        mine = [d for d in described if _matches(d, spec)]
        segs = [(d, seg) for d in mine for seg in d.segments]
        if len(segs) == 1 and set(segs[0][1].fragment_ids) >= set(frags):
            continue
        if spec.kind == VECTOR and not segs and not _has_vectors(ds, spec.column):
            continue
        work.append(IndexWork(spec, "create", frags, ds.count_rows()))
        removed += [
            Index(
                uuid=seg.uuid,
                name=d.name,
                fields=list(d.fields),
                dataset_version=seg.dataset_version_at_last_update,
                fragment_ids=set(seg.fragment_ids),
                index_version=seg.index_version,
            )
            for d, seg in segs
        ]
    return work, removed


def lance_cpu_threads() -> int:
    """The size of Lance's CPU pool in this process, as Lance sizes it from the environment."""
    explicit = os.environ.get("LANCE_CPU_THREADS")
    if explicit and explicit.isdigit():
        return int(explicit)
    reserved = os.environ.get("LANCE_IO_CORE_RESERVATION", "2")
    return max(1, (os.cpu_count() or 1) - (int(reserved) if reserved.isdigit() else 2))


def needs_child(ds: lance.LanceDataset, work: list[IndexWork]) -> bool:
    """Whether ``work`` runs in a child process: a build over ``CHILD_ROWS`` rows or more (its
    memory, gigabytes at tens of millions of rows, is then the child's and goes back to the
    system when it ends, so the driver's stays bounded), or an INVERTED build that could reach
    Lance 7.0's single-thread deadlock in a process whose CPU pool has one thread."""
    if sum(w.rows for w in work) >= CHILD_ROWS:
        return True
    fts = [w for w in work if w.spec.kind == INVERTED]
    if not fts or lance_cpu_threads() >= 2:
        return False
    for w in fts:
        if w.rows > INLINE_MEASURE_ROWS:
            return True
        frags = [f for f in ds.get_fragments() if f.fragment_id in set(w.fragments)]
        col = ds.scanner(columns=[w.spec.column], fragments=frags).to_table()
        if (pc.sum(pc.binary_length(col.column(0))).as_py() or 0) > INLINE_TEXT_BYTES:
            return True
    return False


def _scalar(kind: str) -> Literal["BTREE", "INVERTED"]:
    assert kind in (BTREE, INVERTED), kind
    return cast(Literal["BTREE", "INVERTED"], kind)


@dataclass(frozen=True)
class BuildPool:
    """How a process builds index parts: ``workers`` part builds at once, at most ``inverted``
    of them INVERTED, on a Lance CPU pool of ``lance_threads`` threads.

    Lance 7.0's INVERTED build holds a CPU-pool thread in its posting-list producer while it
    blocks on a one-slot queue that a task on the same pool drains: with as many concurrent
    INVERTED builds as pool threads, every thread can be held and no build finishes. So
    ``inverted`` stays below ``lance_threads``, except where the pool has a single thread (one
    INVERTED build at a time, safe only for the small builds :func:`needs_child` keeps in the
    calling process)."""

    workers: int
    inverted: int
    lance_threads: int
    #: tokenizing workers of an INVERTED build: Lance's default (one per pool thread) of the pool
    #: the caller would have had, not of a pool made larger for the parts (more workers only
    #: cost CPU and memory here)
    text_workers: int


def child_pool(cpus: int, lance_threads: int) -> BuildPool:
    """The pool of the child process on a machine of ``cpus`` CPUs whose parent's Lance pool
    has ``lance_threads`` threads: a part build per CPU, up to ``MAX_PART_BUILDS`` (each holds
    its part's working set in memory), every one of them free to be INVERTED, on a Lance pool
    at least one thread larger than that."""
    workers = max(1, min(cpus, MAX_PART_BUILDS))
    return BuildPool(workers, workers, max(lance_threads, workers + 1), max(2, lance_threads))


def inline_pool(cpus: int, lance_threads: int) -> BuildPool:
    """The pool of a build in the calling process, whose Lance pool is what it is: a part build
    per CPU up to ``MAX_PART_BUILDS``, of which INVERTED at most one fewer than the pool's
    threads (one where it has a single thread)."""
    workers = max(1, min(cpus, MAX_PART_BUILDS))
    return BuildPool(workers, max(1, min(workers, lance_threads - 1)), lance_threads, lance_threads)


def split_fragments(rows: list[tuple[int, int]], part_rows: int, at_least: int) -> list[tuple[int, ...]]:
    """``rows`` ((fragment id, rows) in fragment order) as runs of consecutive whole fragments,
    the parts of one index build: ``at_least`` runs (or one per fragment where there are
    fewer) of about equal rows, more where that keeps each run within ``part_rows`` rows (a
    larger fragment is a run of its own)."""
    total = sum(n for _, n in rows)
    want = min(len(rows), max(1, at_least, -(-total // max(1, part_rows))))
    groups: list[list[int]] = []
    run = done = 0
    for f, n in rows:
        # each fragment joins the run its middle row falls in, or a new one past part_rows
        slot = min(want - 1, int((done + n / 2) * want / total)) if total else 0
        if not groups or slot >= len(groups) or run + n > part_rows:
            groups.append([])
            run = 0
        groups[-1].append(f)
        run += n
        done += n
    return [tuple(g) for g in groups]


@dataclass(frozen=True)
class _Template:
    """What Lance writes for an index of one kind with the default parameters (the engine's):
    the ``index_version`` and ``index_details`` a segment is committed with, and the
    ``metadata.lance`` of an INVERTED index over no token (what a segment whose rows hold no
    token is made of: Lance's fragment-level build writes nothing for them)."""

    index_version: int
    index_details: tuple[str, bytes]
    empty_metadata: bytes | None


def _template(kind: str) -> _Template:
    """Read from the commit of a one-row build in a scratch dataset (the row a stop word, so
    the INVERTED index holds no token)."""
    with tempfile.TemporaryDirectory(prefix="omnigraph-index-") as d:
        ds = lance.write_dataset(pa.table({"c": ["a"]}), d)
        ds.create_scalar_index("c", _scalar(kind), name="c_idx")
        tx = ds.read_transaction(ds.version)
        assert tx is not None and isinstance(tx.operation, lance.LanceOperation.CreateIndex)
        made = tx.operation.new_indices[0]
        assert made.index_details is not None
        empty = None
        if kind == INVERTED:
            with open(os.path.join(d, "_indices", made.uuid, "metadata.lance"), "rb") as f:
                empty = f.read()
        return _Template(made.index_version, made.index_details, empty)


def _field_id(ds: lance.LanceDataset, column: str) -> int:
    for f in ds.lance_schema.fields():
        if f.name() == column:
            return f.id()
    raise StorageError(f"table '{ds.uri}' has no column '{column}' to index", path=ds.uri)


@dataclass(frozen=True)
class _Part:
    """One part of an index build: item ``item`` of the job over ``fragments``."""

    item: int
    fragments: tuple[int, ...]
    rows: int


def _parts(job: IndexJob, ds: lance.LanceDataset, pool: BuildPool) -> list[_Part]:
    """The parts of every item of ``job``, INVERTED ones first (the longest builds start
    first), then the largest. Only a BTree is split; with ``job.split`` off it is one part too."""
    physical = {f.fragment_id: f.metadata.physical_rows for f in ds.get_fragments()}
    parts = []
    for i, w in enumerate(job.work):
        rows = [(f, physical.get(f, 0)) for f in w.fragments]
        if w.spec.kind != BTREE or not job.split:
            # An INVERTED index is one part: its parts would be partitions of the segment, and
            # the 0.7.2 engine's optimize (Lance 7.0's InnerBuilder::merge_from) panics on a
            # multi-partition index once rows are deleted from it
            groups = [w.fragments]
        else:
            groups = split_fragments(rows, job.part_rows or PART_ROWS, 1)
        parts += [_Part(i, g, sum(physical.get(f, 0) for f in g)) for g in groups]
    return sorted(parts, key=lambda p: (job.work[p.item].spec.kind != INVERTED, -p.rows, p.item, p.fragments))


def build_segments(job: IndexJob, pool: BuildPool) -> list[Index]:
    """Build every item of ``job`` as an uncommitted index segment over its fragments (nothing
    lands: the caller commits them together, or leaves orphan files that ``cleanup`` removes).

    Each BTree item is built as parts (:func:`split_fragments`: runs of whole fragments of at
    most ``PART_ROWS`` rows) that share the segment's uuid, each INVERTED or vector item as one
    part, ``pool.workers`` parts at once on one dataset handle each; then each BTree or
    INVERTED item's files are merged into one segment (``merge_index_metadata``), so a created
    index is one segment and a delta one segment over its fragments, as a whole build makes
    them. Each segment is named
    as the engine names its index, so a created one is the index and an extending one a delta
    of it."""
    work = job.work
    if not work:
        return []
    templates = {k: _template(k) for k in sorted({w.spec.kind for w in work} - {VECTOR})}
    storage = RootStorage(job.home, job.storage_options)
    uids = [str(uuid.uuid4()) for _ in work]
    parts = _parts(job, job.open(), pool)
    gate = threading.BoundedSemaphore(pool.inverted)  # BuildPool says why
    vectors: dict[int, Index] = {}

    def build(p: _Part) -> None:
        w = work[p.item]
        ds = job.open()
        if w.spec.kind == VECTOR:
            vectors[p.item] = _vector_segment(ds, w)
            return
        # num_workers is a build-time parameter: Lance persists nothing of it
        text: dict[str, Any] = {"num_workers": pool.text_workers} if w.spec.kind == INVERTED and job.split else {}
        with gate if w.spec.kind == INVERTED else contextlib.nullcontext():
            ds.create_scalar_index(
                w.spec.column,
                _scalar(w.spec.kind),
                name=w.spec.name,
                fragment_ids=list(p.fragments),
                index_uuid=uids[p.item],
                **text,
            )

    def finish(i: int) -> Index:
        w = work[i]
        if w.spec.kind == VECTOR:
            return vectors[i]
        tmpl = templates[w.spec.kind]
        ds = job.open()
        index_dir = f"{job.home}/_indices/{uids[i]}"  # a branch's own tree: ds.uri names the base
        if tmpl.empty_metadata is not None and not storage.list_dir(index_dir):
            storage.write_bytes(f"{index_dir}/metadata.lance", tmpl.empty_metadata)  # no token in these rows
        else:
            ds.merge_index_metadata(uids[i], _scalar(w.spec.kind))
        return Index(
            uuid=uids[i],
            name=w.spec.name,
            fields=[_field_id(ds, w.spec.column)],
            dataset_version=ds.version,
            fragment_ids=set(w.fragments),
            index_version=tmpl.index_version,
            index_details=tmpl.index_details,
        )

    log.info(
        "building %s on %s: %d parts, %d at once (Lance CPU pool of %d threads)",
        [w.spec.name for w in work],
        job.uri,
        len(parts),
        pool.workers,
        pool.lance_threads,
    )
    with ThreadPoolExecutor(max_workers=min(len(parts), pool.workers), thread_name_prefix="index") as ex:
        list(ex.map(build, parts))
        return list(ex.map(finish, range(len(work))))


def _vector_segment(ds: lance.LanceDataset, w: IndexWork) -> Index:
    dim = ds.schema.field(w.spec.column).type.list_size
    # one partition (the engine's IVF_FLAT(1, L2)): its centroid is never compared
    return ds.create_index_uncommitted(
        w.spec.column,
        "IVF_FLAT",
        name=w.spec.name,
        metric="L2",
        num_partitions=1,
        fragment_ids=list(w.fragments),
        ivf_centroids=np.zeros((1, dim), dtype=np.float32),
    )


def _segment_to_json(s: Index) -> dict:
    return {
        "uuid": s.uuid,
        "name": s.name,
        "fields": list(s.fields),
        "dataset_version": s.dataset_version,
        "fragment_ids": sorted(s.fragment_ids),
        "index_version": s.index_version,
        "index_details": None
        if s.index_details is None
        else [s.index_details[0], base64.b64encode(s.index_details[1]).decode("ascii")],
    }


def _segment_from_json(o: dict) -> Index:
    d = o["index_details"]
    return Index(
        uuid=o["uuid"],
        name=o["name"],
        fields=o["fields"],
        dataset_version=o["dataset_version"],
        fragment_ids=set(o["fragment_ids"]),
        index_version=o["index_version"],
        index_details=None if d is None else (d[0], base64.b64decode(d[1])),
    )


@dataclass(frozen=True)
class IndexBuild:
    """What building one job gave: its segments, and where it ran in a child process, that
    process's peak resident memory (``VmHWM``, MB) and wall seconds."""

    segments: list[Index]
    child_peak_mb: float | None = None
    child_seconds: float | None = None


def segments_for(job: IndexJob) -> list[Index]:
    """Build ``job`` (:func:`build`) and give its segments."""
    return build(job).segments


def build(job: IndexJob) -> IndexBuild:
    """Build ``job`` in this process, or in a child process whose Lance CPU pool is sized by
    :func:`child_pool` where the work is large or an INVERTED build could otherwise deadlock
    (:func:`needs_child`)."""
    cpus = os.cpu_count() or 1
    if not needs_child(job.open(), list(job.work)):
        return IndexBuild(build_segments(job, inline_pool(cpus, lance_cpu_threads())))
    pool = child_pool(cpus, lance_cpu_threads())
    if not job.split:
        return _in_child(job, pool)
    try:
        return _in_child(job, pool)
    except StorageError as e:
        # Lance can refuse a part that a whole build of the same rows sorts (its external sort
        # may run out of its memory pool): the indexes are built whole rather than not at all
        log.warning("building %s in parts failed (%s); building each index whole", job.uri, str(e)[-300:])
        return _in_child(replace(job, split=False), pool)


def _in_child(job: IndexJob, pool: BuildPool) -> IndexBuild:
    """Build ``job`` in a child process (``python -m omnigraph_spark.store.indexes``)."""
    # a whole build (split off) keeps Lance's own sizing: the default pool, at least two threads
    threads = pool.lance_threads if job.split else max(2, lance_cpu_threads())
    env = dict(os.environ, LANCE_CPU_THREADS=str(threads))
    sized = replace(job, part_rows=job.part_rows or PART_ROWS, text_workers=pool.text_workers)
    start = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", __name__],
        input=json.dumps(sized.to_json()),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if p.returncode != 0:
        raise StorageError(
            f"building the indexes of '{job.uri}' failed in its child process "
            f"(exit {p.returncode}): {p.stderr.strip()[-2000:]}",
            path=job.uri,
        )
    out = json.loads(p.stdout)
    seconds = time.monotonic() - start
    log.info(
        "built %s on %s in a child process (Lance CPU pool of %s threads): %s parts, %.1f s, peak %s MB",
        [w.spec.name for w in job.work],
        job.uri,
        threads,
        out["parts"],
        seconds,
        out["peak_mb"],
    )
    return IndexBuild([_segment_from_json(o) for o in out["segments"]], out["peak_mb"], seconds)


def _peak_mb() -> float | None:
    """This process's peak resident memory (``VmHWM``) in MB, where /proc has it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _main() -> None:
    """The child process: a job as JSON on stdin, the built segments and the process's peak
    memory as JSON on stdout."""
    job = IndexJob.from_json(json.loads(sys.stdin.read()))
    pool = child_pool(os.cpu_count() or 1, lance_cpu_threads())
    pool = replace(pool, text_workers=job.text_workers or pool.text_workers)
    segments = build_segments(job, pool)
    parts = len(_parts(job, job.open(), pool))
    out = {"segments": [_segment_to_json(s) for s in segments], "parts": parts, "peak_mb": _peak_mb()}
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    _main()
