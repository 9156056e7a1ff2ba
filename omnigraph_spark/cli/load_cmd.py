"""``omnigraph-spark load``: bulk-load JSONL or Parquet files through local Spark as ONE graph
commit, with a progress bar (tqdm, on stderr) fed by Spark's status tracker."""

from __future__ import annotations

import argparse
import glob
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm

from ..graph import Graph
from .codes import CliError, UsageError
from .output import Output, table

JOB_GROUP = "omnigraph-spark-load"
FORMATS = ("jsonl", "parquet")


def add_parser(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "load",
        parents=[common],
        help="bulk-load JSONL or Parquet files through Spark (one graph commit)",
        description="Load files through a local Spark session as ONE graph commit. JSONL files use the engine's "
        'envelope ({"type": T, "data": {...}} / {"edge": E, "from": s, "to": d, ...}) and may '
        "hold every type; a Parquet load writes one type (--type).",
    )
    p.add_argument("uri", metavar="URI", help="graph root")
    p.add_argument("files", metavar="FILE", nargs="+", help="input files, directories or globs")
    p.add_argument(
        "--format", choices=FORMATS, default=None, help="input format (default: from the first file's extension)"
    )
    p.add_argument("--type", dest="type_name", metavar="T", help="node or edge type of a Parquet load")
    p.add_argument(
        "--mode",
        choices=("append", "merge", "overwrite"),
        default="append",
        help="append (default), merge (upsert on id) or overwrite (replace the types loaded)",
    )
    p.add_argument("--branch", default="main")
    p.add_argument("--actor", default=None, help="actor recorded on the graph commit")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra write option (docs/options.md), e.g. maxRowsPerFile=100000; repeatable",
    )
    sp = p.add_argument_group("spark")
    sp.add_argument(
        "--master",
        default=os.environ.get("OMNIGRAPH_SPARK_MASTER", "local[2]"),
        help="Spark master when no session is active (default: local[2])",
    )
    sp.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark config; repeatable")
    pg = p.add_mutually_exclusive_group()
    pg.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="always show the progress bar (default: only when stderr is a terminal)",
    )
    pg.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(func=cmd_load)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"{what} expects KEY=VALUE, got {it!r}")
        out[k.strip()] = v
    return out


def _check_inputs(files: list[str]) -> None:
    for f in files:
        if "://" in f or glob.has_magic(f):
            if glob.has_magic(f) and "://" not in f and not glob.glob(f):
                raise CliError("FILE_NOT_FOUND", f"no file matches {f!r}")
            continue
        if not os.path.exists(f):
            raise CliError("FILE_NOT_FOUND", f"input file not found: {f}")


def _infer_format(files: list[str]) -> str:
    first = files[0].rstrip("/").lower()
    if first.endswith((".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz")):
        return "jsonl"
    if first.endswith(".parquet") or os.path.isdir(first):
        return "parquet"
    raise UsageError(f"cannot tell the format of {files[0]!r}: pass --format jsonl|parquet")


def get_spark(master: str, conf: dict[str, str]):
    """The active SparkSession if there is one (notebooks, tests), else a new local one (the
    demo's embedded default). Returns ``(spark, created)``; the caller stops only a session it
    created."""
    from pyspark.sql import SparkSession  # lazy: only `load` starts Spark; the other commands skip pyspark

    from ..demo import local_spark, quiet_warnings  # lazy: only `load` starts Spark; the other commands skip pyspark

    quiet_warnings()
    active = SparkSession.getActiveSession()
    if active is not None:
        from ..spark import register  # lazy: only `load` starts Spark; the other commands skip pyspark

        register(active)
        return active, False
    return local_spark("omnigraph-spark load", master, conf), True


class SparkProgress:
    """A tqdm bar over the tasks of every Spark job in :data:`JOB_GROUP`, polled from a thread."""

    def __init__(self, spark, enabled: bool | None, stream, interval: float = 0.3):
        self.sc = spark.sparkContext
        self.interval = interval
        self.bar = tqdm(
            total=0,
            unit="task",
            desc="load",
            file=stream,
            disable=(None if enabled is None else not enabled),
            dynamic_ncols=True,
            leave=True,
        )
        self._last: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="omnigraph-spark-progress", daemon=True)

    def _poll(self) -> None:
        tracker = self.sc.statusTracker()
        total = done = 0
        jobs = tracker.getJobIdsForGroup(JOB_GROUP)
        for jid in jobs:
            info = tracker.getJobInfo(jid)
            if info is None:
                continue
            for sid in info.stageIds:
                st = tracker.getStageInfo(sid)
                if st is not None:
                    total += st.numTasks
                    done += st.numCompletedTasks
        state = (total, done, len(jobs))
        if state == self._last:
            return
        self._last = state
        self.bar.total = total
        self.bar.n = done
        self.bar.set_postfix_str(f"{len(jobs)} spark job(s)", refresh=False)
        self.bar.refresh()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._poll()
            except Exception:  # the tracker can race a stopping context: progress is best effort
                pass

    def phase(self, text: str) -> None:
        self.bar.set_description_str(text)

    @contextmanager
    def running(self) -> Iterator[SparkProgress]:
        self.sc.setJobGroup(JOB_GROUP, "omnigraph-spark load", interruptOnCancel=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=5)
            try:
                self._poll()
            except Exception:
                pass
            self.bar.close()
            try:
                self.sc.setLocalProperty("spark.jobGroup.id", None)
            except Exception:
                pass


def cmd_load(args, out: Output) -> int:
    fmt = args.format or _infer_format(args.files)
    if fmt == "parquet" and not args.type_name:
        raise UsageError("a Parquet load needs --type T (the node or edge type the files hold)")
    if fmt == "jsonl" and args.type_name:
        raise UsageError("--type applies to Parquet loads; JSONL records name their own type")
    options = _pairs(args.option, "--option")
    conf = _pairs(args.conf, "--conf")
    _check_inputs(args.files)

    Graph.open(args.uri)  # fail fast (GRAPH_NOT_FOUND...) before starting Spark
    t0 = time.monotonic()
    out.info(f"starting Spark ({args.master}) ...")
    spark, created = get_spark(args.master, conf)
    try:
        from .. import load_jsonl, write_graph  # lazy: only `load` starts Spark; the other commands skip pyspark

        progress = SparkProgress(spark, args.progress, out.stderr)
        with progress.running():
            if fmt == "jsonl":
                progress.phase(f"load {len(args.files)} JSONL input(s)")
                res = load_jsonl(
                    spark,
                    args.uri,
                    list(args.files),
                    mode=args.mode,
                    branch=args.branch,
                    actor=args.actor,
                    options=options,
                )
            else:
                progress.phase(f"load {args.type_name} from Parquet")
                df = spark.read.parquet(*args.files)
                res = write_graph(
                    args.uri,
                    {args.type_name: df},
                    mode=args.mode,
                    branch=args.branch,
                    actor=args.actor,
                    options=options,
                )
    finally:
        if created:
            spark.stop()
    seconds = time.monotonic() - t0
    data = {
        "graph_commit_id": res.graph_commit_id,
        "version": res.manifest_version,
        "branch": res.branch,
        "skipped": res.skipped,
        "seconds": round(seconds, 3),
        "tables": [
            {
                "table": t.table_key,
                "rows_written": t.rows_written,
                "row_count": t.row_count,
                "from_version": t.from_version,
                "to_version": t.to_version,
            }
            for t in res.tables
        ],
    }

    def human(d) -> list[str]:
        if d["skipped"]:
            return ["already applied (idempotency token matched): nothing written"]
        lines = table(
            [
                (t["table"], t["rows_written"], t["row_count"], f"v{t['from_version']} -> v{t['to_version']}")
                for t in d["tables"]
            ],
            ["TABLE", "WRITTEN", "ROWS NOW", "VERSION"],
            "lrrl",
        )
        lines.append(
            f"committed {d['graph_commit_id']} on {d['branch']} (graph v{d['version']}) in {d['seconds']:.1f}s"
        )
        return lines

    out.emit(data, human)
    return 0
