"""Load-wide checks as Spark jobs: the driver's memory stays bounded by tables and files, not rows.

Driver. For a load above the option ``distributedCheckRows`` (the staged plus committed rows a
check reads), :func:`~.validate.make_validator` hands each load-wide check here instead of reading
the columns into the driver:

* each check is Spark SQL over views (a :class:`~.work.SparkWork`), run by whichever side holds
  the session: this process's SparkSession, or the JVM provider for its planner (:mod:`.bridge`);
  this module holds no session;
* the views' executors read only the columns a check needs (:mod:`.scans`): the staged Lance
  data files and the committed fragments at the snapshot's pinned version; every row carries
  its load-wide position (file ordinal and offset turned into a global row number by prefix
  sums of the files' row counts, in the order the driver concatenates them:
  :func:`~..store.tables.data_file_uris`);
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
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from lance.file import LanceFileReader
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from ..ingest.checks import KEY_CONFLICT_SAMPLE, card_violation, dangling_error, raise_key_conflict, unique_violation
from ..schema.catalog import TypeDef
from ..store import tables as _tables
from ..store.writes import IdSource, Replaced, StagedTable, quote_sql_string
from .memo import Once
from .parallel import run_checks
from .scans import FRAG, POS
from .work import JOB_TAG, Builder, Runner, SessionRunner, SparkWork, inline_scan, quote

log = logging.getLogger(__name__)

#: the schema of an ``ids_by_fragment`` view (:mod:`.scans`)
_IDS_BY_FRAGMENT = pa.schema([pa.field("id", pa.string()), pa.field(FRAG, pa.int64(), nullable=False)])


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


class _Unsupported(Exception):
    """A column type Spark cannot carry: the check stays on the driver."""


class DistChecks:
    """The distributed form of every load-wide check, memoised by the inputs it read.

    Driver only. It holds no SparkSession: each check is Spark SQL over views
    (:class:`~.work.SparkWork`) handed to ``runner``, which runs it where the session is (this
    process: :class:`~.work.SessionRunner`; the JVM provider, for its planner: :mod:`.bridge`)
    and returns the rows. ``threshold``: the rows a check reads at which it runs here instead of
    in the driver's memory (option ``distributedCheckRows``)."""

    def __init__(self, runner: Runner, threshold: int, storage_options: dict[str, str] | None = None) -> None:
        self.runner = runner
        self.threshold = threshold
        self.storage_options = storage_options
        self._memo = Once()
        self.runs: list[tuple] = []  # keys of the checks actually run (tests: proofs reused or not)

    @classmethod
    def for_load(cls, threshold: int | None, storage_options, runner: Runner | None = None) -> DistChecks | None:
        """The checks of a load on this driver: run by ``runner``, else by the active
        SparkSession of this process; None when the option is 0 (never distributed) or there
        is neither: the checks then run in memory."""
        if not threshold:
            return None
        if runner is None:
            active = SparkSession.getActiveSession()
            if active is None:
                log.info("no active SparkSession on this driver process: load-wide checks run in memory")
                return None
            runner = SessionRunner(active)
        return cls(runner, threshold, storage_options)

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
            log.info("distributed %s check of %s: %s in %.1f s", key[0], key[1], outcome, time.monotonic() - t0)

    def run(self, work: Builder) -> list[pa.Table]:
        """The tables ``work``'s queries answer, run by the side holding the session."""
        return self.runner(work.build())

    # -- views ------------------------------------------------------------------------------

    def _spark_schema(self, schema: pa.Schema, columns: Sequence[str]) -> str:
        fields = [schema.field(c) for c in columns] + [pa.field(POS, pa.int64(), nullable=False)]
        try:
            return from_arrow_schema(pa.schema(fields)).json()
        except Exception as e:  # e.g. unsigned integers
            raise _Unsupported(f"columns {list(columns)}: {e}") from e

    def staged(self, w: Builder, s: StagedFiles, schema: pa.Schema, columns: Sequence[str]) -> str:
        """A view of the staged rows' ``columns`` plus POS (the load-wide row number)."""
        scan = {"kind": "staged", "files": [[u, b] for u, b in zip(s.uris, s.bases())], "columns": list(columns)}
        return w.view("staged", scan, self._spark_schema(schema, columns), self.storage_options)

    def committed(self, w: Builder, pinned: Pinned, schema: pa.Schema, columns: Sequence[str]) -> str:
        """A view of the committed table's live rows at the pinned version, with POS (the row
        number in the table's fragment order)."""
        ds = _tables.open_dataset(pinned[0], branch=pinned[1], version=pinned[2], storage_options=self.storage_options)
        frags, acc = [], 0
        for frag in ds.get_fragments():  # metadata only: one entry per fragment
            frags.append([int(frag.fragment_id), acc])
            acc += int(frag.metadata.num_rows)
        scan = {"kind": "committed", "table": list(pinned), "fragments": frags, "columns": list(columns)}
        return w.view("committed", scan, self._spark_schema(schema, columns), self.storage_options)

    def local(self, w: Builder, table: pa.Table) -> str:
        """A view of a small table the driver holds (delete keys, deleted ids)."""
        return w.view("local", inline_scan(table), from_arrow_schema(table.schema).json(), None)

    def _ids(self, w: Builder, src: IdSource, schema: pa.Schema) -> str:
        """SQL of the ids a node type offers an endpoint check (committed unless overwritten +
        staged), one column ``id``."""
        parts = []
        if src.files:
            staged = StagedFiles(tuple(src.files), tuple(0 for _ in src.files))
            parts.append(f"SELECT id FROM {self.staged(w, staged, schema, ['id'])}")
        if src.table is not None:
            parts.append(f"SELECT id FROM {self.committed(w, src.table, schema, ['id'])}")
        if not parts:
            return "SELECT CAST(NULL AS STRING) AS id WHERE false"
        return " UNION ALL ".join(parts)

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
        keys = ", ".join(quote(c) for c in cols)

        def rows(w: Builder) -> str:
            view = self.staged(w, files, schema, cols)
            return f"SELECT {keys}, {POS} FROM {view} WHERE " + " AND ".join(f"{quote(c)} IS NOT NULL" for c in cols)

        w = Builder()
        groups = f"SELECT {keys}, count(1) AS n, min({POS}) AS p1 FROM ({rows(w)}) GROUP BY {keys} HAVING count(1) > 1"
        if conflict:  # the repeated ids in order of first appearance (value_counts' order)
            w.query(
                f"SELECT CAST({quote(cols[0])} AS STRING) AS v FROM ({groups}) ORDER BY p1 LIMIT {KEY_CONFLICT_SAMPLE}",
                ("v", "string"),
            )
            w.query(f"SELECT count(1) AS total FROM ({groups})", ("total", "long"))
            first, total = self.run(w)
            if not first.num_rows:
                return
            raise_key_conflict(
                td,
                first.column("v").combine_chunks(),
                "given more than once in this load",
                total=total["total"][0].as_py(),
            )
        w.query(f"SELECT count(1) AS dups, min(p1) AS p1 FROM ({groups})", ("dups", "long"), ("p1", "long"))
        got = self.run(w)[0]
        dups = got["dups"][0].as_py()
        if not dups:
            return
        p1 = got["p1"][0].as_py()
        w = Builder()
        d = rows(w)
        same = " AND ".join(f"d.{quote(c)} = k.{quote(c)}" for c in cols)
        w.query(
            f"SELECT min(d.{POS}) AS p2 FROM ({d}) d JOIN (SELECT {keys} FROM ({d}) WHERE {POS} = {p1}) k "
            f"ON {same} WHERE d.{POS} > {p1}",
            ("p2", "long"),
        )
        p2 = self.run(w)[0]["p2"][0].as_py()
        uri, offset = files.locate(p1)  # the value as Arrow has it (one row read on the driver)

        row = LanceFileReader(uri, storage_options=self.storage_options, columns=cols).take_rows([offset]).to_table()
        values = [row.column(c)[0].as_py() for c in cols]
        raise unique_violation(td, cols, values, [p1, p2], dups, what=what)

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
        w = Builder()
        new = self.staged(w, files, schema, ["id"])
        old = self.committed(w, pinned, schema, ["id"])
        # the ids in order of first appearance on the probed side (as check_fresh_ids finds them)
        probed, other = (old, new) if files.total <= committed_rows else (new, old)
        found = (
            f"SELECT /*+ SHUFFLE_HASH(o) */ p.id, min(p.{POS}) AS p1 FROM {probed} p "
            f"LEFT SEMI JOIN (SELECT id FROM {other}) o ON p.id = o.id GROUP BY p.id"
        )
        w.query(
            f"SELECT CAST(id AS STRING) AS id FROM ({found}) ORDER BY p1 LIMIT {KEY_CONFLICT_SAMPLE}", ("id", "string")
        )
        w.query(f"SELECT count(1) AS total FROM ({found})", ("total", "long"))
        first, total = self.run(w)
        if not first.num_rows:
            return
        raise_key_conflict(
            td,
            first.column("id").combine_chunks(),
            f"already committed on branch '{branch}'",
            total=total["total"][0].as_py(),
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

        # one scan of the edges: each row's two ends as (row, side, value), and one anti-join
        # against the ids (tagged with the side they serve unless both ends have the same id
        # source). Only those three columns are shuffled; the ids are the hash join's build side
        # (a shuffled hash join: no sort of the ends, about half a sort-merge join's time).
        def bad(w: Builder) -> tuple[str, str]:
            edges = self.staged(w, files, edge_schema, ["src", "dst"])
            ends = f"SELECT {POS}, stack(2, 0, src, 1, dst) AS (side, v) FROM {edges}"
            if to_src == from_src:
                ids = f"SELECT id AS v FROM ({self._ids(w, from_src, from_schema)})"
                on = "e.v = i.v"
            else:
                ids = (
                    f"SELECT 0 AS side, id AS v FROM ({self._ids(w, from_src, from_schema)}) UNION ALL "
                    f"SELECT 1 AS side, id AS v FROM ({self._ids(w, to_src, to_schema)})"
                )
                on = "e.side = i.side AND e.v = i.v"
            return (
                edges,
                f"SELECT /*+ SHUFFLE_HASH(i) */ e.{POS}, e.side FROM ({ends}) e LEFT ANTI JOIN ({ids}) i ON {on}",
            )

        w = Builder()
        _, found = bad(w)
        w.query(
            "SELECT CAST(sum(CASE WHEN side = 0 THEN 1 ELSE 0 END) AS BIGINT) AS s, "
            f"CAST(sum(CASE WHEN side = 1 THEN 1 ELSE 0 END) AS BIGINT) AS d FROM ({found})",
            ("s", "long"),
            ("d", "long"),
        )
        counts = self.run(w)[0]
        n_src, n_dst = int(counts["s"][0].as_py() or 0), int(counts["d"][0].as_py() or 0)
        if not n_src and not n_dst:
            return
        w = Builder()
        edges, found = bad(w)
        per_row = (
            f"SELECT {POS}, max(CASE WHEN side = 0 THEN 1 ELSE 0 END) AS s, "
            "max(CASE WHEN side = 1 THEN 1 ELSE 0 END) AS d "
            f"FROM ({found}) GROUP BY {POS} ORDER BY {POS} LIMIT {int(limit)}"
        )
        w.query(
            f"SELECT p.{POS} AS pos, CAST(p.s AS BIGINT) AS s, CAST(p.d AS BIGINT) AS d, CAST(e.src AS STRING) AS src, "
            f"CAST(e.dst AS STRING) AS dst FROM ({per_row}) p JOIN {edges} e ON e.{POS} = p.{POS} ORDER BY p.{POS}",
            ("pos", "long"),
            ("s", "long"),
            ("d", "long"),
            ("src", "string"),
            ("dst", "string"),
        )
        first = self.run(w)[0].to_pylist()
        raise dangling_error(
            td, [(r["pos"], r["src"], r["dst"], bool(r["s"]), bool(r["d"])) for r in first], n_src, n_dst
        )

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

        def totals(w: Builder) -> str:
            pending = self.staged(w, files, schema, ["id", "src"] if merge else ["src"])
            if merge:  # pending rows sharing an id collapse to the last; null ids all count
                kept = (
                    f"SELECT src FROM {pending} WHERE id IS NULL UNION ALL "
                    f"SELECT p.src FROM {pending} p LEFT SEMI JOIN "
                    f"(SELECT max({POS}) AS pos FROM {pending} WHERE id IS NOT NULL GROUP BY id) l ON p.{POS} = l.pos"
                )
            else:
                kept = f"SELECT src FROM {pending}"
            parts = [f"SELECT src, count(1) AS n FROM ({kept}) WHERE src IS NOT NULL GROUP BY src"]
            if mode != "overwrite" and pinned is not None:
                old = self.committed(w, pinned, schema, ["id", "src"] if merge else ["src"])
                parts.append(f"SELECT src, count(1) AS n FROM {old} WHERE src IS NOT NULL GROUP BY src")
                if merge:
                    parts.append(
                        f"SELECT o.src, -count(1) AS n FROM {old} o LEFT SEMI JOIN "
                        f"(SELECT DISTINCT id FROM {pending} WHERE id IS NOT NULL) p ON o.id = p.id "
                        "WHERE o.src IS NOT NULL GROUP BY o.src"
                    )
            return f"SELECT src, sum(n) AS n FROM ({' UNION ALL '.join(parts)}) GROUP BY src"

        return self.card_verdict(td, totals, limit)

    def card_verdict(self, td: TypeDef, totals: Callable[[Builder], str], limit: int = 5) -> int:
        """@card over ``totals`` (SQL of edges per source, ``src, n``, over the views it adds to
        the work; sources with none are skipped): the most edges any source has, or the error,
        worded by :func:`~..ingest.checks.card_violation` as :func:`~..ingest.checks.check_cardinality`
        words it."""
        card = td.cardinality
        bad = f"n < {int(card.min)}" + (f" OR n > {int(card.max)}" if card.max is not None else "")
        w = Builder()
        w.query(
            f"SELECT CAST(max(n) AS BIGINT) AS most, CAST(sum(CASE WHEN {bad} THEN 1 ELSE 0 END) AS BIGINT) AS bad "
            f"FROM ({totals(w)}) WHERE n >= 1",
            ("most", "long"),
            ("bad", "long"),
        )
        summary = self.run(w)[0]
        violations = int(summary["bad"][0].as_py() or 0)
        if not violations:
            return int(summary["most"][0].as_py() or 0)
        w = Builder()
        w.query(
            f"SELECT CAST(src AS STRING) AS src, CAST(n AS BIGINT) AS n FROM ({totals(w)}) WHERE n >= 1 AND ({bad}) "
            f"ORDER BY src LIMIT {int(limit)}",
            ("src", "string"),
            ("n", "long"),
        )
        first = self.run(w)[0].to_pylist()
        raise card_violation(td, [(r["src"], int(r["n"])) for r in first], violations)

    # -- a merge's commit -------------------------------------------------------------------

    def replaced(self, key: str, s: StagedTable, schema: pa.Schema, pinned: Pinned) -> Replaced:
        """The committed rows of ``key`` at ``pinned`` whose ids the merge ``s`` stages, given a
        deletion file per fragment: what the merge's commit removes
        (:func:`~..store.writes._merge_operation` finds them by reading every id instead)."""
        files = StagedFiles.of(s)
        return self.once(("replaced", key, files.uris, pinned), lambda: self._replaced(files, schema, pinned))

    def _replaced(self, files: StagedFiles, schema: pa.Schema, pinned: Pinned) -> Replaced:
        if not files.total:
            return Replaced(pinned[2])
        ds = _tables.open_dataset(pinned[0], branch=pinned[1], version=pinned[2], storage_options=self.storage_options)
        fragments = ds.get_fragments()  # metadata only: one entry per fragment
        if not fragments:
            return Replaced(pinned[2])
        try:
            return self._replaced_in_jvm(fragments, files, pinned)
        except Exception as e:  # no shim jar, or more staged ids than a quarter of an executor's heap holds
            log.info(
                "the executors' index could not find a merge's replaced rows (%s): a Spark join finds them",
                str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__,
            )
        # the rows by a Spark join; their ids come to the driver, which writes each touched
        # fragment's deletion file (the predicate its own merge writes, one fragment at a time)
        w = Builder()
        scan = {"kind": "ids_by_fragment", "table": list(pinned), "fragments": [int(f.fragment_id) for f in fragments]}
        old = w.view("ids", scan, from_arrow_schema(_IDS_BY_FRAGMENT).json(), self.storage_options)
        new = self.staged(w, files, schema, ["id"])
        w.query(
            f"SELECT /*+ SHUFFLE_HASH(n) */ o.{FRAG} AS fragment, o.id FROM {old} o "
            f"LEFT SEMI JOIN (SELECT id FROM {new}) n ON o.id = n.id",
            ("fragment", "long"),
            ("id", "string"),
        )
        hits = self.run(w)[0]
        by_fragment: dict[int, list[str]] = {}
        for fid, rid in zip(hits.column("fragment").to_pylist(), hits.column("id").to_pylist()):
            by_fragment.setdefault(int(fid), []).append(rid)

        def delete(fid: int) -> str | None:
            meta = ds.get_fragment(fid).delete("id IN (" + ", ".join(map(quote_sql_string, by_fragment[fid])) + ")")  # type: ignore[union-attr]  # ids from the pinned version's own fragments
            return None if meta is None else json.dumps(meta.to_json())

        with ThreadPoolExecutor(
            max_workers=min(8, max(1, len(by_fragment))), thread_name_prefix="omnigraph-merge"
        ) as pool:
            metas = dict(zip(sorted(by_fragment), pool.map(delete, sorted(by_fragment))))
        updated = [m for m in metas.values() if m is not None]
        removed = sorted(fid for fid, m in metas.items() if m is None)
        log.info(
            "a merge replaces %d committed rows in %d fragments of %s (%d emptied)",
            hits.num_rows,
            len(metas),
            pinned[0],
            len(removed),
        )
        return Replaced(pinned[2], tuple(updated), tuple(removed), hits.num_rows)

    def _replaced_in_jvm(self, fragments, files: StagedFiles, pinned: Pinned) -> Replaced:
        """:meth:`_replaced` by the JVM shim's tasks (``MergeReplace``, a work only a session with
        the shim jar runs): each probes its fragments' ids against its executor's index of the
        staged ids and writes their deletion files; the driver puts each new deletion file into
        the fragment's committed metadata."""
        metas = {f.fragment_id: f.metadata for f in fragments}
        spec = {
            "load": uuid.uuid4().hex,
            "table": {"path": pinned[0], "branch": pinned[1], "version": pinned[2]},
            "staged": {"table": None, "files": list(files.uris)},
            "fragments": sorted(metas),
            "storage": dict(self.storage_options or {}),
        }
        got = json.loads(self.runner(SparkWork(merge_replace=spec))[0]["json"][0].as_py())
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


__all__ = ["JOB_TAG", "POS", "DistChecks", "StagedFiles", "committed_pin"]
