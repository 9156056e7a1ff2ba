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
segments. ``consolidation`` makes each index one segment again, for ``optimize``. Large builds, and INVERTED builds that
could reach the deadlock, run in a child process whose Lance CPU pool has at least two threads
(:func:`needs_child`); small ones run in the calling process.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, cast

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
    ``version``). A value: the child process receives it as JSON."""

    uri: str
    branch: str | None
    version: int
    work: tuple[IndexWork, ...]
    storage_options: dict[str, str] | None = field(default=None, repr=False)  # credentials

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
        }

    @classmethod
    def from_json(cls, o: dict) -> IndexJob:
        return cls(
            o["uri"],
            o["branch"],
            int(o["version"]),
            tuple(IndexWork.from_json(w) for w in o["work"]),
            o["storage_options"],
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


def build_segments(job: IndexJob) -> list[Index]:
    """Build every item of ``job`` as an uncommitted index segment over its fragments
    (nothing lands: the caller commits them together, or leaves orphan files that ``cleanup``
    removes), one thread and one dataset handle per item, up to the CPU count. Each segment is
    named as the engine names its index, so a created one is the index and an extending one a
    delta of it."""
    work = job.work
    templates = {k: _template(k) for k in sorted({w.spec.kind for w in work} - {VECTOR})}

    def one(w: IndexWork) -> Index:
        ds = job.open()
        return _build_one(ds, w, templates.get(w.spec.kind), RootStorage(job.home, job.storage_options), job.home)

    if len(work) < 2:
        return [one(w) for w in work]
    with ThreadPoolExecutor(max_workers=min(len(work), os.cpu_count() or 1), thread_name_prefix="index") as pool:
        return list(pool.map(one, work))


def _build_one(ds: lance.LanceDataset, w: IndexWork, tmpl: _Template | None, storage: RootStorage, home: str) -> Index:
    frags = list(w.fragments)
    if w.spec.kind == VECTOR:
        dim = ds.schema.field(w.spec.column).type.list_size
        # one partition (the engine's IVF_FLAT(1, L2)): its centroid is never compared
        return ds.create_index_uncommitted(
            w.spec.column,
            "IVF_FLAT",
            name=w.spec.name,
            metric="L2",
            num_partitions=1,
            fragment_ids=frags,
            ivf_centroids=np.zeros((1, dim), dtype=np.float32),
        )
    assert tmpl is not None
    uid = str(uuid.uuid4())
    kind = _scalar(w.spec.kind)
    ds.create_scalar_index(w.spec.column, kind, name=w.spec.name, fragment_ids=frags, index_uuid=uid)
    index_dir = f"{home}/_indices/{uid}"  # a branch's own tree: ds.uri names the base
    if tmpl.empty_metadata is not None and not storage.list_dir(index_dir):
        storage.write_bytes(f"{index_dir}/metadata.lance", tmpl.empty_metadata)  # no token in these rows
    else:
        ds.merge_index_metadata(uid, kind)
    return Index(
        uuid=uid,
        name=w.spec.name,
        fields=[_field_id(ds, w.spec.column)],
        dataset_version=ds.version,
        fragment_ids=set(frags),
        index_version=tmpl.index_version,
        index_details=tmpl.index_details,
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


def segments_for(job: IndexJob) -> list[Index]:
    """Build ``job`` in this process, or in a child process with a Lance CPU pool of two
    threads or more where the work is large or an INVERTED build could otherwise deadlock
    (:func:`needs_child`)."""
    if not needs_child(job.open(), list(job.work)):
        return build_segments(job)
    env = dict(os.environ, LANCE_CPU_THREADS=str(max(2, lance_cpu_threads())))
    log.info(
        "building %s on %s in a child process (Lance CPU pool of %s threads)",
        [w.spec.name for w in job.work],
        job.uri,
        env["LANCE_CPU_THREADS"],
    )
    p = subprocess.run(
        [sys.executable, "-m", __name__],
        input=json.dumps(job.to_json()),
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
    return [_segment_from_json(o) for o in json.loads(p.stdout)]


def _main() -> None:
    """The child process: a job as JSON on stdin, the built segments as JSON on stdout."""
    segments = build_segments(IndexJob.from_json(json.loads(sys.stdin.read())))
    sys.stdout.write(json.dumps([_segment_to_json(s) for s in segments]))


if __name__ == "__main__":
    _main()
