"""Load-wide checks as Spark jobs: the driver's memory stays bounded by tables and files, not rows.

Driver. For a load above the option ``distributedCheckRows`` (the staged plus committed rows a
check reads), :func:`~.validate.make_validator` hands each load-wide check here instead of reading
the columns into the driver:

* executors read only the columns a check needs: the staged Lance data files (one task per group
  of files, :class:`lance.file.LanceFileReader`) and the committed fragments at the snapshot's
  pinned version; every row carries its load-wide position (file ordinal and offset turned into
  a global row number by prefix sums of the files' row counts, in the order the driver
  concatenates them: :func:`~..store.tables.data_file_uris`);
* Spark SQL groups and joins them (its planner picks broadcast or shuffle), and the driver
  collects only counts and the first few offenders;
* the error is worded by the same functions the in-memory checks use (``unique_violation``,
  ``dangling_error``, ``raise_key_conflict``, ``card_violation`` in :mod:`..ingest.checks`), so
  both paths raise the same error, row for row (invariant I21).

Each outcome (pass, the bound it found, or the error) is memoised under the exact inputs it
read: the staged files and the committed ``(base path, Lance branch, version)`` of every table.
The writer runs the checks before it takes the commit lease (:meth:`DistChecks.prove`); inside
the lease the validator asks again with the fresh snapshot's inputs and gets the memoised outcome
only if nothing moved, else the check runs again there. A stale outcome is never used.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from lance.file import LanceFileReader
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from ..ingest.checks import KEY_CONFLICT_SAMPLE, card_violation, dangling_error, raise_key_conflict, unique_violation
from ..schema.catalog import TypeDef
from ..store import tables as _tables
from ..store.writes import IdSource, Replaced, StagedTable, quote_sql_string
from .jvm_read import default_parallelism, is_connect, shim_loaded
from .memo import Once
from .parallel import run_checks

log = logging.getLogger(__name__)

POS = "__omnigraph_pos"
FRAG = "__omnigraph_fragment"
_DELETED = pa.schema(
    [
        pa.field(FRAG, pa.int64(), nullable=False),
        pa.field("meta", pa.string()),
        pa.field("rows", pa.int64(), nullable=False),
    ]
)
#: files (or committed fragments) one read task takes at most
FILES_PER_TASK = 8


@dataclass(frozen=True)
class StagedFiles:
    """A staged table's data files in the driver's concatenation order, with their row counts."""

    uris: tuple[str, ...]
    rows: tuple[int, ...]

    @staticmethod
    def of(s: StagedTable) -> StagedFiles:
        uris, rows = [], []
        for frag in s.fragments:
            for df in frag.files:
                uris.append(f"{s.stage_uri.rstrip('/')}/data/{df.path}")
                rows.append(int(frag.physical_rows))
        return StagedFiles(tuple(uris), tuple(rows))

    @property
    def total(self) -> int:
        return sum(self.rows)

    def bases(self) -> list[int]:
        out, acc = [], 0
        for n in self.rows:
            out.append(acc)
            acc += n
        return out

    def locate(self, pos: int) -> tuple[str, int]:
        """The file and offset of load-wide row ``pos``."""
        bases = self.bases()
        i = bisect.bisect_right(bases, pos) - 1
        return self.uris[i], pos - bases[i]


Pinned = tuple[str, str | None, int]  # (base_path, lance_branch, version) of a committed table


def _read_staged(storage_options, columns: Sequence[str], schema: pa.Schema):
    """Executor: the rows of ``(uri, base)`` pairs' files, ``columns`` plus their position."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for uri, base in zip(b.column("uri").to_pylist(), b.column("base").to_pylist()):
                reader = LanceFileReader(uri, storage_options=storage_options, columns=list(columns))
                offset = base
                for part in reader.read_all(batch_size=65536).to_batches():
                    yield _with_pos(part, columns, schema, offset)
                    offset += part.num_rows

    return run


def _read_committed(pinned: Pinned, storage_options, columns: Sequence[str], schema: pa.Schema):
    """Executor: the live rows of ``(fragment id, base)`` pairs of the pinned committed table."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ds = None
        for b in batches:
            for fid, base in zip(b.column("uri").to_pylist(), b.column("base").to_pylist()):
                if ds is None:
                    ds = _tables.open_dataset(
                        pinned[0], branch=pinned[1], version=pinned[2], storage_options=storage_options
                    )
                offset = base
                for part in ds.get_fragment(int(fid)).to_batches(columns=list(columns), batch_size=65536):  # type: ignore[union-attr]  # ids from the pinned version's own fragments
                    yield _with_pos(part, columns, schema, offset)
                    offset += part.num_rows

    return run


def _ids_by_fragment(pinned: Pinned, storage_options):
    """Executor: the ``id`` of every live row of the listed fragments of the pinned table, with
    its fragment's id (column :data:`FRAG`)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ds = None
        for b in batches:
            for fid in b.column("uri").to_pylist():
                if ds is None:
                    ds = _tables.open_dataset(
                        pinned[0], branch=pinned[1], version=pinned[2], storage_options=storage_options
                    )
                for part in ds.get_fragment(int(fid)).to_batches(columns=["id"], batch_size=65536):  # type: ignore[union-attr]  # ids from the pinned version's own fragments
                    yield pa.RecordBatch.from_arrays(
                        [part.column("id").cast(pa.string()), pa.array(np.full(part.num_rows, int(fid), np.int64))],
                        names=["id", FRAG],
                    )

    return run


def _delete_in_fragments(pinned: Pinned, storage_options):
    """Executor: per fragment of the pinned table and the ids it holds that a merge replaces,
    a deletion file for those rows (the predicate the driver's own merge writes, one fragment at
    a time); yields the fragment's new metadata as JSON, or null for a fragment left empty."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ds = None
        for b in batches:
            for fid, ids in zip(b.column(FRAG).to_pylist(), b.column("ids").to_pylist()):
                if ds is None:
                    ds = _tables.open_dataset(
                        pinned[0], branch=pinned[1], version=pinned[2], storage_options=storage_options
                    )
                meta = ds.get_fragment(int(fid)).delete("id IN (" + ", ".join(map(quote_sql_string, ids)) + ")")  # type: ignore[union-attr]  # ids from the pinned version's own fragments
                yield pa.RecordBatch.from_pydict(
                    {
                        FRAG: [int(fid)],
                        "meta": [None if meta is None else json.dumps(meta.to_json())],
                        "rows": [len(ids)],
                    },
                    schema=_DELETED,
                )

    return run


def _with_pos(part: pa.RecordBatch, columns: Sequence[str], schema: pa.Schema, offset: int) -> pa.RecordBatch:
    arrays = [part.column(c).cast(schema.field(c).type) for c in columns]
    arrays.append(pa.array(np.arange(offset, offset + part.num_rows, dtype=np.int64)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _Unsupported(Exception):
    """A column type Spark cannot carry: the check stays on the driver."""


#: the job tag of every Spark job a check runs (Spark's UI lists them under it;
#: ``SparkContext.cancelJobsWithTag`` cancels them; through Spark Connect, ``spark.interruptTag``)
JOB_TAG = "omnigraph-load-check"


def _tag(session, on: bool) -> None:
    """Tag (``on``) or stop tagging the calling thread's jobs on ``session`` with JOB_TAG: the
    SparkContext's job tags on a classic session; through Spark Connect, which has no
    SparkContext, the session's operation tags, which the server puts on those jobs."""
    if is_connect(session):
        (session.addTag if on else session.removeTag)(JOB_TAG)
    else:
        sc = session.sparkContext
        (sc.addJobTag if on else sc.removeJobTag)(JOB_TAG)


class DistChecks:
    """The distributed form of every load-wide check, memoised by the inputs it read.

    Driver only (it launches Spark jobs). ``spark``: a SparkSession, or a function returning
    one, called when the first check needs it (the JVM provider's planner attaches to the
    driver's session only then). ``threshold``: the rows a check reads at which it runs here
    instead of in the driver's memory (option ``distributedCheckRows``)."""

    def __init__(self, spark, threshold: int, storage_options: dict[str, str] | None = None) -> None:
        self._session = spark if not callable(spark) else None
        self._lend = spark if callable(spark) else None
        self.threshold = threshold
        self.storage_options = storage_options
        self._memo = Once()
        self._tagged = threading.local()  # whether this thread's jobs carry JOB_TAG now
        self.runs: list[tuple] = []  # keys of the checks actually run (tests: proofs reused or not)

    @classmethod
    def for_load(
        cls, threshold: int | None, storage_options, spark: Callable[[], object] | None = None
    ) -> DistChecks | None:
        """The runner of a load on this driver, or None when the option is 0 (never
        distributed) or no SparkSession is active here and ``spark`` (returns one) is not
        given: the checks then run in memory."""
        if not threshold:
            return None

        active = SparkSession.getActiveSession()
        if active is None and spark is None:
            log.info("no active SparkSession on this driver process: load-wide checks run in memory")
            return None
        return cls(active if active is not None else spark, threshold, storage_options)

    @property
    def spark(self):
        """The session the checks run on; the calling thread's jobs are tagged :data:`JOB_TAG`
        until its check ends (:meth:`timed`)."""
        session = self._resolved()
        if not getattr(self._tagged, "on", False):
            _tag(session, on=True)
            self._tagged.on = True
        return session

    def _resolved(self):
        return self._session if self._session is not None else self._memo(("spark",), self._lend)  # type: ignore[arg-type]  # _lend is set where _session is not

    def wants(self, rows: int) -> bool:
        return rows >= self.threshold

    def supports(self, schema: pa.Schema, columns: Sequence[str]) -> bool:
        try:
            self._spark_schema(schema, columns)
        except _Unsupported:
            return False
        return True

    # -- memo -------------------------------------------------------------------------------

    def once(self, key: tuple, compute: Callable[[], object]):
        """The outcome of ``compute`` (a check keyed ``(kind, table, ...)`` by every input it
        reads), computed once per key: a later call with the same key gets the same result or
        raises the same error."""
        return self._memo(key, lambda: self.timed(key, compute))

    def timed(self, key: tuple, compute: Callable[[], object]):
        """Run ``compute`` (a check keyed ``(kind, table, ...)``), recorded in :attr:`runs` and
        logged, not memoised: the memoised checks go through :meth:`once`."""
        self.runs.append(key)
        t0 = time.monotonic()
        outcome = "failed"
        try:
            result = compute()
            outcome = "passed"
            return result
        finally:
            if getattr(self._tagged, "on", False):
                self._tagged.on = False
                _tag(self._resolved(), on=False)
            log.info("distributed %s check of %s: %s in %.1f s", key[0], key[1], outcome, time.monotonic() - t0)

    # -- frames -----------------------------------------------------------------------------

    def _spark_schema(self, schema: pa.Schema, columns: Sequence[str]):
        fields = [schema.field(c) for c in columns] + [pa.field(POS, pa.int64(), nullable=False)]
        try:
            return pa.schema(fields), from_arrow_schema(pa.schema(fields))
        except Exception as e:  # e.g. unsigned integers
            raise _Unsupported(f"columns {list(columns)}: {e}") from e

    def _frame(self, rows: list[tuple[str, int]], reader, schema: pa.Schema, columns: Sequence[str]):
        arrow, spark_schema = self._spark_schema(schema, columns)
        tasks = max(1, min(-(-len(rows) // FILES_PER_TASK), 4 * self._parallelism())) if rows else 1
        meta = StructType([StructField("uri", StringType()), StructField("base", LongType())])
        return self._listed(rows, meta, tasks).mapInArrow(reader(arrow), spark_schema)

    def _parallelism(self) -> int:
        """The session's default parallelism, asked once (through Spark Connect it is a plan)."""
        return self._memo(("parallelism",), lambda: default_parallelism(self.spark))

    def _listed(self, rows: list[tuple[str, int]], schema, tasks: int):
        """A DataFrame of ``rows`` (a list on the driver) in ``tasks`` partitions: on a classic
        session slices of the list, no shuffle; through Spark Connect, which has no
        SparkContext, the list goes with the plan and a round-robin repartition spreads it."""
        if is_connect(self.spark):
            return self.spark.createDataFrame(rows, schema).repartition(tasks)
        return self.spark.createDataFrame(self.spark.sparkContext.parallelize(rows, tasks), schema)

    def staged(self, s: StagedFiles, schema: pa.Schema, columns: Sequence[str]):
        """A DataFrame of the staged rows' ``columns`` plus POS (the load-wide row number)."""
        rows = list(zip(s.uris, s.bases()))
        return self._frame(rows, lambda arrow: _read_staged(self.storage_options, columns, arrow), schema, columns)

    def committed(self, pinned: Pinned, schema: pa.Schema, columns: Sequence[str]):
        """A DataFrame of the committed table's live rows at the pinned version, with POS (the
        row number in the table's fragment order)."""
        ds = _tables.open_dataset(pinned[0], branch=pinned[1], version=pinned[2], storage_options=self.storage_options)
        rows, acc = [], 0
        for frag in ds.get_fragments():  # metadata only: one entry per fragment
            rows.append((str(frag.fragment_id), acc))
            acc += int(frag.metadata.num_rows)
        return self._frame(
            rows, lambda arrow: _read_committed(pinned, self.storage_options, columns, arrow), schema, columns
        )

    def _ids(self, src: IdSource, schema: pa.Schema):
        """The ids a node type offers an endpoint check (committed unless overwritten + staged)."""
        parts = []
        if src.files:
            rows = [(u, 0) for u in src.files]
            parts.append(
                self._frame(rows, lambda arrow: _read_staged(self.storage_options, ["id"], arrow), schema, ["id"])
            )
        if src.table is not None:
            parts.append(self.committed(src.table, schema, ["id"]))
        if not parts:
            return self.spark.createDataFrame([], "id string")
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
        return out.select(F.col("id"))

    # -- the checks -------------------------------------------------------------------------

    def unique(
        self, td: TypeDef, s: StagedTable, schema: pa.Schema, cols: Sequence[str], what: str, conflict: bool = False
    ) -> None:
        """UNIQUE_VIOLATION (or, for an append's ids, KEY_CONFLICT) over the staged rows,
        exactly as :func:`~..ingest.checks.check_unique` words it."""
        files = StagedFiles.of(s)
        key = ("unique", td.table_key, tuple(cols), what, conflict, files.uris)
        self.once(key, lambda: self._unique(td, files, schema, list(cols), what, conflict))

    def _unique(
        self, td: TypeDef, files: StagedFiles, schema: pa.Schema, cols: list[str], what: str, conflict: bool
    ) -> None:
        if files.total < 2:
            return
        df = self.staged(files, schema, cols)
        for c in cols:
            df = df.where(F.col(c).isNotNull())
        groups = df.groupBy(*cols).agg(F.count(F.lit(1)).alias("n"), F.min(POS).alias("p1")).where(F.col("n") > 1)
        if conflict:  # the repeated ids in order of first appearance (value_counts' order)
            first = groups.orderBy("p1").limit(KEY_CONFLICT_SAMPLE).select(cols[0]).collect()
            if not first:
                return
            total = groups.count()
            raise_key_conflict(
                td, pa.array([str(r[0]) for r in first], pa.string()), "given more than once in this load", total=total
            )
        got = groups.agg(
            F.count(F.lit(1)).alias("dups"), F.min("p1").alias("p1"), F.min_by(F.struct(*cols), F.col("p1")).alias("v")
        ).collect()[0]
        if not got["dups"]:
            return
        p1, v = got["p1"], got["v"]
        match = F.lit(True)
        for c in cols:
            match = match & (F.col(c) == F.lit(v[c]))
        p2 = df.where(match & (F.col(POS) > p1)).agg(F.min(POS)).collect()[0][0]
        uri, offset = files.locate(p1)  # the value as Arrow has it (one row read on the driver)

        row = LanceFileReader(uri, storage_options=self.storage_options, columns=cols).take_rows([offset]).to_table()
        values = [row.column(c)[0].as_py() for c in cols]
        raise unique_violation(td, cols, values, [p1, p2], got["dups"], what=what)

    def fresh(
        self, td: TypeDef, s: StagedTable, schema: pa.Schema, pinned: Pinned, committed_rows: int, branch: str
    ) -> None:
        """KEY_CONFLICT for an append's ids already committed, as :func:`~..ingest.checks.check_fresh_ids`."""
        files = StagedFiles.of(s)
        key = ("fresh", td.table_key, files.uris, pinned)
        self.once(key, lambda: self._fresh(td, files, schema, pinned, committed_rows, branch))

    def _fresh(
        self, td: TypeDef, files: StagedFiles, schema: pa.Schema, pinned: Pinned, committed_rows: int, branch: str
    ) -> None:
        if not files.total or not committed_rows:
            return
        new = self.staged(files, schema, ["id"])
        old = self.committed(pinned, schema, ["id"])
        # the ids in order of first appearance on the probed side (as check_fresh_ids finds them)
        probed, other = (old, new) if files.total <= committed_rows else (new, old)
        found = (
            probed.join(other.select("id").hint("shuffle_hash"), on="id", how="left_semi")
            .groupBy("id")
            .agg(F.min(POS).alias("p1"))
        )
        first = found.orderBy("p1").limit(KEY_CONFLICT_SAMPLE).select("id").collect()
        if not first:
            return
        raise_key_conflict(
            td,
            pa.array([r[0] for r in first], pa.string()),
            f"already committed on branch '{branch}'",
            total=found.count(),
        )

    def endpoints(
        self,
        td: TypeDef,
        s: StagedTable,
        edge_schema: pa.Schema,
        from_src: IdSource,
        to_src: IdSource,
        from_schema: pa.Schema,
        to_schema: pa.Schema,
        limit: int = 5,
    ) -> None:
        """DANGLING_EDGE for staged edges whose src/dst is not an id of its node type, as
        :func:`~..ingest.checks.check_endpoints`."""
        files = StagedFiles.of(s)
        key = ("endpoints", td.table_key, files.uris, from_src, to_src)
        self.once(key, lambda: self._endpoints(td, files, edge_schema, from_src, to_src, from_schema, to_schema, limit))

    def _endpoints(
        self, td, files: StagedFiles, edge_schema, from_src, to_src, from_schema, to_schema, limit: int
    ) -> None:
        if not files.total:
            return
        edges = self.staged(files, edge_schema, ["src", "dst"])
        # one scan of the edges: each row's two ends as (row, side, value), and one anti-join
        # against the ids (tagged with the side they serve unless both ends have the same id
        # source). Only those three columns are shuffled; the ids are the hash join's build side
        # (a shuffled hash join: no sort of the ends, about half a sort-merge join's time).
        same = to_src == from_src
        ends = edges.select(
            F.col(POS),
            F.explode(
                F.array(
                    F.struct(F.lit(0).alias("side"), F.col("src").alias("v")),
                    F.struct(F.lit(1).alias("side"), F.col("dst").alias("v")),
                )
            ).alias("e"),
        ).select(POS, F.col("e.side").alias("side"), F.col("e.v").alias("v"))
        if same:
            ids = self._ids(from_src, from_schema).withColumnRenamed("id", "v")
            bad = ends.join(ids.hint("shuffle_hash"), on="v", how="left_anti")
        else:
            ids = (
                self._ids(from_src, from_schema)
                .select(F.lit(0).alias("side"), F.col("id").alias("v"))
                .unionByName(self._ids(to_src, to_schema).select(F.lit(1).alias("side"), F.col("id").alias("v")))
            )
            bad = ends.join(ids.hint("shuffle_hash"), on=["side", "v"], how="left_anti")
        counts = bad.agg(F.sum((F.col("side") == 0).cast("long")), F.sum((F.col("side") == 1).cast("long"))).collect()[
            0
        ]
        n_src, n_dst = int(counts[0] or 0), int(counts[1] or 0)
        if not n_src and not n_dst:
            return
        per_row = bad.groupBy(POS).agg(
            F.max((F.col("side") == 0).cast("int")).alias("s"), F.max((F.col("side") == 1).cast("int")).alias("d")
        )
        first = per_row.orderBy(POS).limit(limit).collect()
        flags = {r[POS]: (bool(r["s"]), bool(r["d"])) for r in first}
        rows = {r[POS]: (r["src"], r["dst"]) for r in edges.where(F.col(POS).isin(list(flags))).collect()}
        raise dangling_error(td, [(p, *rows[p], *flags[p]) for p in sorted(flags)], n_src, n_dst)

    def card(
        self, td: TypeDef, mode: str, s: StagedTable, schema: pa.Schema, pinned: Pinned | None, limit: int = 5
    ) -> int | None:
        """@card over committed + pending edges per source, as :func:`~..ingest.checks.check_cardinality`
        (merge collapses pending rows sharing an id to the last and shadows committed rows whose id
        is pending; overwrite counts pending only): the most edges any source has, or the error."""
        files = StagedFiles.of(s)
        key = ("card", td.table_key, mode, files.uris, None if mode == "overwrite" else pinned)
        return self.once(key, lambda: self._card(td, mode, files, schema, pinned, limit))

    def _card(self, td: TypeDef, mode: str, files: StagedFiles, schema, pinned, limit: int) -> int | None:
        card = td.cardinality
        if card.min == 0 and card.max is None:
            return None
        merge = mode == "merge"
        pending = self.staged(files, schema, ["id", "src"] if merge else ["src"])
        if merge:  # pending rows sharing an id collapse to the last; null ids all count
            last = pending.where(F.col("id").isNotNull()).groupBy("id").agg(F.max(POS).alias(POS)).select(POS)
            kept = pending.where(F.col("id").isNull()).unionByName(pending.join(last, on=POS, how="left_semi"))
        else:
            kept = pending
        parts = [kept.where(F.col("src").isNotNull()).groupBy("src").agg(F.count(F.lit(1)).alias("n"))]
        if mode != "overwrite" and pinned is not None:
            old = self.committed(pinned, schema, ["id", "src"] if merge else ["src"])
            parts.append(old.where(F.col("src").isNotNull()).groupBy("src").agg(F.count(F.lit(1)).alias("n")))
            if merge:
                shadow = old.join(
                    pending.select("id").where(F.col("id").isNotNull()).distinct(), on="id", how="left_semi"
                )
                parts.append(shadow.where(F.col("src").isNotNull()).groupBy("src").agg((-F.count(F.lit(1))).alias("n")))
        totals = parts[0]
        for p in parts[1:]:
            totals = totals.unionByName(p)
        return self.card_verdict(td, totals.groupBy("src").agg(F.sum("n").alias("n")), limit)

    def card_verdict(self, td: TypeDef, totals, limit: int = 5) -> int:
        """@card over ``totals`` (a DataFrame of edges per source, ``src, n``; sources with
        none are skipped): the most edges any source has, or the error, worded by
        :func:`~..ingest.checks.card_violation` as :func:`~..ingest.checks.check_cardinality`
        words it."""
        card = td.cardinality
        totals = totals.where(F.col("n") >= 1)
        bad = F.col("n") < card.min
        if card.max is not None:
            bad = bad | (F.col("n") > card.max)
        summary = totals.agg(F.max("n").alias("most"), F.sum(bad.cast("long")).alias("bad")).collect()[0]
        violations = int(summary["bad"] or 0)
        if not violations:
            return int(summary["most"] or 0)
        first = totals.where(bad).orderBy("src").limit(limit).collect()
        raise card_violation(td, [(r["src"], int(r["n"])) for r in first], violations)

    # -- a merge's commit -------------------------------------------------------------------

    def replaced(self, key: str, s: StagedTable, schema: pa.Schema, pinned: Pinned) -> Replaced:
        """The committed rows of ``key`` at ``pinned`` whose ids the merge ``s`` stages, given a
        deletion file per fragment by the executors: what the merge's commit removes, without
        the driver reading an id (:func:`~..store.writes._merge_operation` reads them all)."""
        files = StagedFiles.of(s)
        return self.once(("replaced", key, files.uris, pinned), lambda: self._replaced(files, schema, pinned))

    def _replaced(self, files: StagedFiles, schema: pa.Schema, pinned: Pinned) -> Replaced:
        if not files.total:
            return Replaced(pinned[2])
        ds = _tables.open_dataset(pinned[0], branch=pinned[1], version=pinned[2], storage_options=self.storage_options)
        fragments = ds.get_fragments()  # metadata only: one entry per fragment
        if not fragments:
            return Replaced(pinned[2])

        if not is_connect(self.spark) and shim_loaded(self.spark):  # the executors' index is reached through py4j
            try:
                return self._replaced_in_jvm(fragments, files, pinned)
            except Exception as e:  # e.g. more staged ids than a quarter of an executor's heap holds
                log.info(
                    "the executors' index could not find a merge's replaced rows (%s): a Spark join finds them",
                    str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__,
                )
        frags = [(str(f.fragment_id), 0) for f in fragments]
        tasks = max(1, min(len(frags), 4 * self._parallelism()))
        meta = "uri string, base long"
        old = self._listed(frags, meta, tasks).mapInArrow(
            _ids_by_fragment(pinned, self.storage_options), f"id string, {FRAG} long"
        )
        new = self.staged(files, schema, ["id"]).select("id")
        hits = old.join(new.hint("shuffle_hash"), on="id", how="left_semi")
        per_fragment = hits.groupBy(FRAG).agg(F.collect_list("id").alias("ids"))
        done = per_fragment.mapInArrow(
            _delete_in_fragments(pinned, self.storage_options), from_arrow_schema(_DELETED)
        ).toArrow()
        updated, removed = [], []
        for fid, m in zip(done.column(FRAG).to_pylist(), done.column("meta").to_pylist()):
            if m is None:
                removed.append(int(fid))
            else:
                updated.append(m)
        rows = sum(done.column("rows").to_pylist())
        log.info(
            "a merge replaces %d committed rows in %d fragments of %s (%d emptied)",
            rows,
            len(updated) + len(removed),
            pinned[0],
            len(removed),
        )
        return Replaced(pinned[2], tuple(updated), tuple(sorted(removed)), rows)

    def _replaced_in_jvm(self, fragments, files: StagedFiles, pinned: Pinned) -> Replaced:
        """:meth:`_replaced` by the JVM shim's tasks (``MergeReplace``): each probes its fragments'
        ids against its executor's index of the staged ids and writes their deletion files; the
        driver puts each new deletion file into the fragment's committed metadata."""
        metas = {f.fragment_id: f.metadata for f in fragments}
        spec = {
            "load": uuid.uuid4().hex,
            "table": {"path": pinned[0], "branch": pinned[1], "version": pinned[2]},
            "staged": {"table": None, "files": list(files.uris)},
            "fragments": sorted(metas),
            "storage": dict(self.storage_options or {}),
        }
        session = self.spark
        got = json.loads(
            session.sparkContext._jvm.io.omnigraph.spark.MergeReplace.run(session._jsparkSession, json.dumps(spec))
        )
        updated, removed = [], []
        for g in sorted(got, key=lambda g: g["fragment"]):
            if g["deletion"] is None:
                removed.append(int(g["fragment"]))
            else:
                meta = metas[int(g["fragment"])].to_json()
                meta["deletion_file"] = g["deletion"]
                updated.append(json.dumps(meta))
        rows = sum(int(g["rows"]) for g in got)
        log.info(
            "a merge replaces %d committed rows in %d fragments of %s (%d emptied; found by the executors' index)",
            rows,
            len(got),
            pinned[0],
            len(removed),
        )
        return Replaced(pinned[2], tuple(updated), tuple(removed), rows)

    # -- before the lease -------------------------------------------------------------------

    def prove(self, checks: Sequence[Callable[[], object]]) -> bool:
        """Run ``checks`` (distributed ones, bound to a snapshot) so that their outcomes are
        memoised before the commit lease is taken; their errors are kept for the validator,
        which raises them in its own order (inside the lease, if the inputs did not move).
        Returns whether every check passed."""
        failed: list[bool] = []

        def quiet(check: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                try:
                    check()
                except Exception as e:  # memoised: the validator raises it in its order
                    failed.append(True)
                    log.info("distributed check failed before the lease: %s", str(e).splitlines()[0][:300])

            return run

        run_checks([quiet(c) for c in checks])
        return not failed


def committed_pin(snap, key: str) -> Pinned:
    t = snap.table(key)
    return (t.base_path, t.lance_branch, t.version)


__all__ = ["DistChecks", "StagedFiles", "committed_pin", "POS"]
