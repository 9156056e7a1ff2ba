"""Spark work as a value: views plus Spark SQL, run by whichever side holds the session.

Driver. The load-wide checks (:mod:`.dist_checks`, :mod:`.dist_integrity`) never hold a
SparkSession. Each asks for what it needs as a :class:`SparkWork`: a few temp views, each a read
of the connector's own Python data source through the reserved option :data:`SCAN_OPTION`
(staged Lance data files, committed fragments pinned at ``(base path, Lance branch, version)``,
the ids of committed fragments, or a small inline Arrow table; :mod:`.scans`), and Spark SQL
queries over them whose result columns are strings, longs or booleans. The side holding the
session runs it and answers with the rows:

* :class:`SessionRunner`: a pyspark session (classic or Spark Connect) in this process, for
  ``write_table``, ``write_graph`` and the Python source's commit;
* the JVM provider (``SparkWork.java`` in the shim), for its planner process (:mod:`.bridge`),
  which hands the work back as the answer of the pending request and gets the rows as the
  next request (``run`` / ``ran``, spec/bridge_protocol.json). The planner never calls into
  the JVM.

Both register the views under the names given (unique per work), run ``CACHE TABLE`` for
each cached view, run the queries in order, and drop what they registered. A work may instead
name the shim's ``MergeReplace`` (a merge's replaced rows found by the executors' index of the
staged ids), which only a session with the shim jar runs.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructType

from .jvm_read import default_parallelism, is_connect, shim_loaded
from .scans import SCAN_OPTION, SCAN_SOURCE, SECRETS_OPTION, ScanSource

log = logging.getLogger(__name__)

#: the job tag of every Spark job a check runs (Spark's UI lists them under it;
#: ``SparkContext.cancelJobsWithTag`` cancels them)
JOB_TAG = "omnigraph-load-check"
#: the result column types a query may declare, as Arrow types
COLUMN_TYPES = {"string": pa.string(), "long": pa.int64(), "boolean": pa.bool_()}
_KIND_CHECKS = {
    pa.string(): lambda v: isinstance(v, str),
    pa.int64(): lambda v: isinstance(v, int) and not isinstance(v, bool),
    pa.bool_(): lambda v: isinstance(v, bool),
}


class WorkUnavailable(RuntimeError):
    """The session cannot run this work (e.g. ``MergeReplace`` without the shim jar)."""


class WorkFailed(RuntimeError):
    """The side holding the session ran the work and it failed; the message is its error's."""


@dataclass(frozen=True)
class View:
    """A temp view: ``scan`` (JSON-able, read by :mod:`.scans`) with the Spark schema ``schema``
    (Spark's JSON form); ``secrets``: Lance storage options its reads need (redacted option)."""

    name: str
    scan: Mapping[str, Any]
    schema: str
    secrets: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "scan": dict(self.scan), "schema": json.loads(self.schema)}
        if self.secrets:
            out["secrets"] = dict(self.secrets)
        return out

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> View:
        return View(d["name"], d["scan"], json.dumps(d["schema"]), d.get("secrets"))


@dataclass(frozen=True)
class Query:
    """One Spark SQL query and its result columns ``(name, kind)``, kind in :data:`COLUMN_TYPES`."""

    sql: str
    columns: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        for name, kind in self.columns:
            if kind not in COLUMN_TYPES:
                raise ValueError(f"result column {name!r}: kind {kind!r} is not one of {sorted(COLUMN_TYPES)}")

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(n, COLUMN_TYPES[k]) for n, k in self.columns])


@dataclass(frozen=True)
class SparkWork:
    """Views, cached views (``name``, SQL) and queries; or ``merge_replace``: the shim's
    ``MergeReplace`` spec, whose answer is one table of one string column ``json``."""

    views: tuple[View, ...] = ()
    cache: tuple[tuple[str, str], ...] = ()
    queries: tuple[Query, ...] = ()
    merge_replace: Mapping[str, Any] | None = None
    tag: str = JOB_TAG

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tag": self.tag}
        if self.merge_replace is not None:
            out["merge_replace"] = dict(self.merge_replace)
            return out
        out["views"] = [v.to_json() for v in self.views]
        out["cache"] = [{"name": n, "sql": s} for n, s in self.cache]
        out["queries"] = [{"sql": q.sql, "columns": [list(c) for c in q.columns]} for q in self.queries]
        return out

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> SparkWork:
        if "merge_replace" in d:
            return SparkWork(merge_replace=d["merge_replace"], tag=d.get("tag", JOB_TAG))
        return SparkWork(
            tuple(View.from_json(v) for v in d.get("views", ())),
            tuple((c["name"], c["sql"]) for c in d.get("cache", ())),
            tuple(Query(q["sql"], tuple((n, k) for n, k in q["columns"])) for q in d.get("queries", ())),
            tag=d.get("tag", JOB_TAG),
        )

    @property
    def schemas(self) -> list[pa.Schema]:
        """The Arrow schema of each table of the answer."""
        if self.merge_replace is not None:
            return [pa.schema([pa.field("json", pa.string())])]
        return [q.schema for q in self.queries]

    def tables_from_rows(self, tables: Sequence[Sequence[Sequence[Any]]]) -> list[pa.Table]:
        """The answer from its JSON form (per table, rows of values in column order): strings,
        integers, booleans and nulls, each checked against its column's declared kind."""
        schemas = self.schemas
        if len(tables) != len(schemas):
            raise WorkFailed(f"the answer has {len(tables)} tables for {len(schemas)} queries")
        out = []
        for rows, schema in zip(tables, schemas):
            for row in rows:
                if len(row) != len(schema):
                    raise WorkFailed(f"a row of the answer has {len(row)} values for columns {schema.names}")
                for v, f in zip(row, schema):
                    if v is not None and not _KIND_CHECKS[f.type](v):
                        raise WorkFailed(f"column {f.name!r} of the answer: {v!r} is no {f.type}")
            cols = list(zip(*rows)) if rows else [() for _ in schema]
            out.append(pa.table([pa.array(list(c), f.type) for c, f in zip(cols, schema)], schema=schema))
        return out

    @staticmethod
    def tables_to_rows(tables: Sequence[pa.Table]) -> list[list[list[Any]]]:
        """The JSON form of an answer (:meth:`tables_from_rows`' input)."""
        return [[list(r.values()) for r in t.to_pylist()] for t in tables]


Runner = Callable[[SparkWork], list[pa.Table]]


class Builder:
    """Names views uniquely for one work and collects its queries."""

    def __init__(self) -> None:
        self._prefix = f"omnigraph_{uuid.uuid4().hex[:12]}"
        self.views: list[View] = []
        self.cache: list[tuple[str, str]] = []
        self.queries: list[Query] = []

    def _name(self, hint: str) -> str:
        return f"{self._prefix}_{len(self.views) + len(self.cache)}_{hint}"

    def view(self, hint: str, scan: Mapping[str, Any], schema: str, secrets: Mapping[str, str] | None) -> str:
        name = self._name(hint)
        self.views.append(View(name, scan, schema, secrets or None))
        return name

    def cached(self, hint: str, sql: str) -> str:
        name = self._name(hint)
        self.cache.append((name, sql))
        return name

    def query(self, sql: str, *columns: tuple[str, str]) -> int:
        self.queries.append(Query(sql, tuple(columns)))
        return len(self.queries) - 1

    def build(self) -> SparkWork:
        return SparkWork(tuple(self.views), tuple(self.cache), tuple(self.queries))


def inline_scan(table: pa.Table) -> dict[str, Any]:
    """The scan of a small table the driver holds (delete keys, deleted ids): its Arrow IPC
    stream in base64, read by one task."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return {"kind": "inline", "arrow": base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")}


def quote(name: str) -> str:
    """A Spark SQL identifier for a column name."""
    return "`" + name.replace("`", "``") + "`"


class SessionRunner:
    """Runs :class:`SparkWork` on a pyspark session of this process (classic or Spark Connect).
    Driver only; thread-safe (each work has its own view names; job tags are per thread)."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self._registered = False

    def _register(self) -> None:
        """The views' source (:class:`~.scans.ScanSource`) registered on this session, once."""
        if not self._registered:
            try:
                self.spark.dataSource.register(ScanSource)
            except Exception as e:  # pyspark's AnalysisException; its class moved between releases
                if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
                    raise
            self._registered = True

    def __call__(self, work: SparkWork) -> list[pa.Table]:
        connect = is_connect(self.spark)
        if connect:
            self.spark.addTag(work.tag)
        else:
            self.spark.sparkContext.addJobTag(work.tag)
        try:
            if work.merge_replace is not None:
                return [pa.table({"json": pa.array([self._merge_replace(work.merge_replace)], pa.string())})]
            return self._run(work)
        finally:
            if connect:
                self.spark.removeTag(work.tag)
            else:
                self.spark.sparkContext.removeJobTag(work.tag)

    def _merge_replace(self, spec: Mapping[str, Any]) -> str:
        if is_connect(self.spark) or not shim_loaded(self.spark):
            raise WorkUnavailable("MergeReplace needs the shim jar on a classic session")
        jvm = self.spark.sparkContext._jvm
        return str(jvm.io.omnigraph.spark.MergeReplace.run(self.spark._jsparkSession, json.dumps(spec)))

    def _run(self, work: SparkWork) -> list[pa.Table]:

        self._register()
        spark = self.spark
        made: list[str] = []
        cached: list[str] = []
        try:
            tasks = 4 * default_parallelism(spark)
            for v in work.views:
                scan = dict(v.scan)
                if scan.get("kind") != "inline":
                    scan.setdefault("tasks", tasks)
                reader = spark.read.format(SCAN_SOURCE).schema(StructType.fromJson(json.loads(v.schema)))
                reader = reader.option(SCAN_OPTION, json.dumps(scan, sort_keys=True))
                if v.secrets:
                    reader = reader.option(SECRETS_OPTION, json.dumps(dict(v.secrets)))
                reader.load().createOrReplaceTempView(v.name)
                made.append(v.name)
            for name, sql in work.cache:
                made.append(name)
                spark.sql(f"CACHE TABLE {name} AS {sql}")
                cached.append(name)
            out = []
            for q in work.queries:
                got = spark.sql(q.sql).toArrow()
                out.append(pa.table([got.column(i).cast(f.type) for i, f in enumerate(q.schema)], schema=q.schema))
            return out
        finally:
            for name in cached:
                spark.sql(f"UNCACHE TABLE IF EXISTS {name}")
            for name in made:
                spark.catalog.dropTempView(name)


__all__ = [
    "JOB_TAG",
    "SCAN_OPTION",
    "SECRETS_OPTION",
    "Builder",
    "Query",
    "Runner",
    "SessionRunner",
    "SparkWork",
    "View",
    "WorkFailed",
    "WorkUnavailable",
    "inline_scan",
    "quote",
]
