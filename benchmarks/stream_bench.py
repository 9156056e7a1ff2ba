"""Streaming throughput and per-micro-batch commit latency (docs/streaming.md).

Each stream contender runs in a fresh process (``local[2]``), one after the other:

* ``sink`` / ``graph``: a file stream of ``--batches`` files of ``--rows`` events each (one file
  per micro-batch, ``availableNow``) through ``writeStream.format("omnigraph")`` (Person nodes)
  and through ``foreachBatch(GraphBatchWriter)`` (Person nodes + as many Knows edges, one
  commit per batch). Per micro-batch: Spark's ``addBatch`` (staging + commit) and
  ``triggerExecution`` (the whole micro-batch); sustained rows/s = rows / sum of
  ``triggerExecution``.
* ``delta`` / ``delta_events``: the same streams (the same files, filter, trigger and
  micro-batch size) through ``writeStream.format("delta")`` to a local path: ``delta`` writes the
  sink's Person rows, ``delta_events`` every event of the graph stream (nodes and edges, one
  table, one Delta commit per micro-batch). Needs ``delta-spark`` (``.venv-spark40``); ratios
  are taken against these, measured in the same run.
* ``maintenance`` (with ``sink``): after the sink's micro-batches, the graph versions, table
  versions and fragments they left, a full-scan read of the type (Spark ``noop`` write and a
  single-process pylance scan) before and after one ``optimize`` + ``cleanup``; with ``delta``
  the same counts for the Delta table (files, log versions) and its read before and after
  ``OPTIMIZE``. Growth is extrapolated per hour at the measured micro-batch rate and at a
  10-second trigger.
* ``commit``: the driver side of one micro-batch commit alone (``OmnigraphStreamWriter.commit``:
  open the graph, validate under the lease, commit, publish), the rows already staged, as the
  table grows batch by batch.

    .venv/bin/python -m benchmarks.stream_bench --rows 5000 --batches 8 --sections sink,graph,commit
    PYSPARK_PYTHON=$PWD/.venv-spark40/bin/python .venv-spark40/bin/python -m benchmarks.stream_bench \
        --rows 5000 --batches 20 --out benchmarks/out/stream.json      # with the Delta contenders
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import with_delta as add_delta

log = logging.getLogger("benchmarks.stream_bench")


def _drop(folder: Path, batches: int, rows: int, edges: bool) -> None:
    folder.mkdir(parents=True)
    t = time.time() - batches - 10
    for b in range(batches):
        recs = [{"kind": "person", "name": f"b{b:03d}-{i:06d}", "age": i % 90} for i in range(rows)]
        if edges:
            recs += [
                {"kind": "knows", "src": f"b{b:03d}-{i:06d}", "dst": f"b{b:03d}-{(i + 1) % rows:06d}"}
                for i in range(rows)
            ]
        p = folder / f"e{b:04d}.json"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        os.utime(p, (t + b, t + b))


def _split(batch_df):
    from pyspark.sql import functions as F

    return {
        "Person": batch_df.where(F.col("kind") == "person").select("name", "age"),
        "Knows": batch_df.where(F.col("kind") == "knows").select("src", "dst"),
    }


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


STREAM_APIS = ("sink", "graph", "delta", "delta_events")
EVENTS = "kind string, name string, age int, src string, dst string"


def _graph_rows_per_batch(api: str, rows: int) -> int:
    return rows * (2 if api in ("graph", "delta_events") else 1)


def run_stream(spark, api: str, work: Path, schema_text: str, batches: int, rows: int) -> dict[str, object]:
    from pyspark.sql import functions as F

    uri = str(work / f"{api}-out")
    src = work / f"{api}-in"
    _drop(src, batches, rows, edges=api in ("graph", "delta_events"))
    ev = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).json(str(src))
    if api in ("sink", "graph"):
        from omnigraph_spark import Graph

        Graph.init(uri, schema_text)
        initial = _graph_counts(uri, "node:Person")
    if api == "graph":
        from omnigraph_spark.spark.stream import GraphBatchWriter

        w = ev.writeStream.foreachBatch(GraphBatchWriter(uri, _split, engine="python"))
    elif api == "sink":
        w = (
            ev.where(F.col("kind") == "person")
            .select("name", "age")
            .writeStream.format("omnigraph")
            .option("type", "Person")
            .option("path", uri)
        )
    elif api == "delta":
        w = ev.where(F.col("kind") == "person").select("name", "age").writeStream.format("delta").option("path", uri)
    else:  # delta_events: the graph stream's events, one Delta table
        w = ev.writeStream.format("delta").option("path", uri)
    t0 = time.monotonic()
    q = w.option("checkpointLocation", str(work / f"{api}-ck")).trigger(availableNow=True).start()
    q.awaitTermination()
    wall = time.monotonic() - t0
    prog = [p for p in q.recentProgress if p["numInputRows"]]
    add = [p["durationMs"].get("addBatch", 0) / 1000 for p in prog]
    trig = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in prog]
    per_batch = _graph_rows_per_batch(api, rows)
    steady_t, steady_a = trig[1:] or trig, add[1:] or add  # the first micro-batch pays the cold start
    out: dict[str, object] = {
        "api": api,
        "micro_batches": len(prog),
        "input_rows": sum(p["numInputRows"] for p in prog),
        "rows_per_batch": per_batch,
        "wall_s": round(wall, 1),
        "rows_per_s_sustained": round(per_batch * len(steady_t) / sum(steady_t), 0),
        "trigger_s_p50": round(statistics.median(steady_t), 3),
        "trigger_s_p90": round(_pct(steady_t, 0.9), 3),
        "add_batch_s_p50": round(statistics.median(steady_a), 3),
        "add_batch_s_p90": round(_pct(steady_a, 0.9), 3),
        "add_batch_s_max": round(max(steady_a), 3),
        "first_trigger_s": round(trig[0], 2),
        "trigger_s": [round(x, 3) for x in trig],
        "add_batch_s": [round(x, 3) for x in add],
    }
    if api in ("sink", "graph"):
        from omnigraph_spark import Graph

        out["graph_commits"] = len(Graph.open(uri).log()) - 1
        out["initial_counts"] = initial
    out["path"] = uri
    return out


def _timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    xs = []
    for _ in range(repeats):
        t0 = time.monotonic()
        fn()
        xs.append(time.monotonic() - t0)
    return xs


def _graph_counts(uri: str, key: str) -> dict[str, int]:
    from omnigraph_spark import Graph

    g = Graph.open(uri)
    snap = g.snapshot()
    ds = g.open_table(key, snap)
    root = Path(uri)
    return {
        "graph_version": snap.version,
        "graph_commits": len(g.log()) - 1,
        "table_version": snap.table(key).version,
        "lance_versions": len(ds.versions()),
        "fragments": len(ds.get_fragments()),
        "rows": ds.count_rows(),
        "files": sum(1 for _ in root.rglob("*") if _.is_file()),
        "bytes": sum(f.stat().st_size for f in root.rglob("*") if f.is_file()),
    }


def _scan_reads(spark, uri: str, key: str, repeats: int) -> dict[str, float]:
    from omnigraph_spark import Graph

    spark_s = _timed(
        lambda: (
            spark.read.format("omnigraph").option("type", key).load(uri).write.format("noop").mode("overwrite").save()
        ),
        repeats,
    )
    g = Graph.open(uri)
    lance_s = _timed(lambda: g.read_table(f"node:{key}"), repeats)  # the pinned version, every column
    return {
        "spark_full_scan_s": round(statistics.median(spark_s), 3),
        "pylance_full_scan_s": round(statistics.median(lance_s), 4),
    }


def run_maintenance(spark, uri: str, batches: int, repeats: int, initial: dict[str, int]) -> dict[str, object]:
    """Counts and full-scan reads of the sink's graph after its micro-batches, then one
    optimize + cleanup, then the same again."""
    from omnigraph_spark import Graph

    key = "node:Person"
    before = _graph_counts(uri, key)
    read_before = _scan_reads(spark, uri, "Person", repeats)
    g = Graph.open(uri)
    t0 = time.monotonic()
    opt = g.optimize()
    opt_s = time.monotonic() - t0
    t0 = time.monotonic()
    cln = g.cleanup(keep_versions=1, orphan_grace_s=0)
    cln_s = time.monotonic() - t0
    after = _graph_counts(uri, key)
    read_after = _scan_reads(spark, uri, "Person", repeats)
    t = opt.table(key)
    return {
        "micro_batches": batches,
        "before": before,
        "after": after,
        "read_before": read_before,
        "read_after": read_after,
        "optimize_s": round(opt_s, 3),
        "cleanup_s": round(cln_s, 3),
        "optimize_fragments": [t.fragments_before, t.fragments_after],
        "cleanup_versions_removed": sum(x.versions_removed for x in cln.tables),
        "cleanup_bytes_removed": sum(x.bytes_removed for x in cln.tables),
        "per_micro_batch": {
            k: round((before[k] - initial[k]) / batches, 3)
            for k in ("graph_version", "graph_commits", "table_version", "fragments")
        },
    }


def run_delta_maintenance(spark, uri: str, batches: int, repeats: int) -> dict[str, object]:
    from delta.tables import DeltaTable

    def counts():
        root = Path(uri)
        return {
            "log_versions": len(list((root / "_delta_log").glob("*.json"))),
            "active_files": spark.read.format("delta").load(uri).inputFiles().__len__(),
            "parquet_files_on_disk": len(list(root.glob("*.parquet"))),
            "rows": spark.read.format("delta").load(uri).count(),
        }

    def read():
        return _timed(
            lambda: spark.read.format("delta").load(uri).write.format("noop").mode("overwrite").save(), repeats
        )

    before, rb = counts(), read()
    t0 = time.monotonic()
    DeltaTable.forPath(spark, uri).optimize().executeCompaction()
    opt_s = time.monotonic() - t0
    after, ra = counts(), read()
    return {
        "micro_batches": batches,
        "before": before,
        "after": after,
        "read_before": {"spark_full_scan_s": round(statistics.median(rb), 3)},
        "read_after": {"spark_full_scan_s": round(statistics.median(ra), 3)},
        "optimize_s": round(opt_s, 3),
    }


def session(with_delta: bool):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = (
        SparkSession.builder.master("local[2]")
        .appName("omnigraph-stream-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if with_delta:  # every contender gets the same session, Delta's jars included
        b = add_delta(b)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from omnigraph_spark.spark import register

    register(spark)
    return spark


def _delta_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("delta") is not None


def run_contender(api: str, work: Path, schema_text: str, args) -> dict[str, object]:
    """One stream contender in this process (the parent runs each in a fresh one)."""
    spark = session(_delta_available())
    try:
        res = run_stream(spark, api, work, schema_text, args.batches, args.rows)
        if args.maintenance and api == "sink":
            res["maintenance"] = run_maintenance(
                spark, res["path"], res["micro_batches"], args.read_repeats, res["initial_counts"]
            )
        if args.maintenance and api == "delta":
            res["maintenance"] = run_delta_maintenance(spark, res["path"], res["micro_batches"], args.read_repeats)
        return res
    finally:
        spark.stop()


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _machine() -> dict[str, object]:
    import platform

    import pyspark

    info: dict[str, object] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "platform": platform.platform(),
    }
    try:
        import lance

        info["pylance"] = lance.__version__
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        info["delta_spark"] = version("delta-spark")
    except Exception:  # not installed
        info["delta_spark"] = None
    try:
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
        info["ram_gib"] = round(int(mem) / 2**20, 1)
    except OSError:
        pass
    return info


def _hourly(res: dict[str, dict[str, object]]) -> dict[str, object]:
    """Growth per hour, extrapolated linearly from the maintenance section, and the cadence that
    keeps the full-scan read within 2x of a compacted table's."""
    m = res.get("sink", {}).get("maintenance")
    if not m:
        return {}
    per = m["per_micro_batch"]
    d_frag = m["before"]["fragments"] - m["after"]["fragments"]
    out: dict[str, object] = {}
    for name, read in (("spark", "spark_full_scan_s"), ("pylance", "pylance_full_scan_s")):
        slope = (m["read_before"][read] - m["read_after"][read]) / d_frag if d_frag > 0 else 0.0
        out[f"{name}_read_s_per_fragment"] = round(slope, 6)
    rates = {"measured": 3600 / res["sink"]["trigger_s_p50"], "trigger_10s": 360.0}
    for label, bph in rates.items():
        row: dict[str, object] = {"micro_batches_per_h": round(bph)}
        for k, v in per.items():
            row[f"{k}_per_h"] = round(v * bph)
        for name in ("spark", "pylance"):
            slope = out[f"{name}_read_s_per_fragment"]
            row[f"{name}_read_growth_s_per_h"] = round(slope * per["fragments"] * bph, 3)
            base = m["read_after"][f"{name}_full_scan_s"]
            # fragments after which a full scan takes twice the compacted read, and how long that takes
            if slope > 0:
                row[f"{name}_minutes_to_2x_read"] = round(60 * base / slope / (per["fragments"] * bph), 1)
        out[label] = row
    return out


def derive(res: dict[str, object]) -> None:
    """Warm figures from the recorded per-micro-batch times: the second half of the micro-batches
    (Delta's second micro-batch is as cold as its first: JIT, first log checkpoint), and the
    ratios against Delta."""
    for r in res["streams"].values():
        trig, add = r["trigger_s"], r["add_batch_s"]
        h = len(trig) // 2
        r["second_half"] = {
            "rows_per_s": round(r["rows_per_batch"] * (len(trig) - h) / sum(trig[h:]), 0),
            "trigger_s_p50": round(statistics.median(trig[h:]), 3),
            "trigger_s_p90": round(_pct(trig[h:], 0.9), 3),
            "add_batch_s_p50": round(statistics.median(add[h:]), 3),
        }
    res["ratios"] = _ratios(res["streams"])
    res["per_hour"] = _hourly(res["streams"])


def _ratios(res: dict[str, dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for mine, theirs in (("sink", "delta"), ("graph", "delta_events")):
        a, b = res.get(mine), res.get(theirs)
        if not (a and b):
            continue
        out[f"{mine}_vs_{theirs}"] = {
            "rows_per_s": round(a["rows_per_s_sustained"] / b["rows_per_s_sustained"], 2),
            "trigger_s_p50": round(a["trigger_s_p50"] / b["trigger_s_p50"], 2),
            "trigger_s_p90": round(a["trigger_s_p90"] / b["trigger_s_p90"], 2),
            "add_batch_s_p50": round(a["add_batch_s_p50"] / b["add_batch_s_p50"], 2),
            "second_half_rows_per_s": round(a["second_half"]["rows_per_s"] / b["second_half"]["rows_per_s"], 2),
            "second_half_trigger_s_p50": round(
                a["second_half"]["trigger_s_p50"] / b["second_half"]["trigger_s_p50"], 2
            ),
        }
    return out


def markdown(results: dict[str, object]) -> str:
    s = results["streams"]
    lines = [
        f"# Streaming: omnigraph vs Delta ({results['date']})",
        "",
        f"`{results['command']}`",
        "",
        (
            f"Machine: {results['machine']}; load average {results['load_start']} at start, "
            f"{results['load_end']} at end."
        ),
        "",
        (
            "| contender | rows per micro-batch | micro-batches | rows/s sustained | micro-batch p50 / p90 (s) "
            "| addBatch p50 / p90 (s) | first micro-batch (s) | second half: rows/s, micro-batch p50 (s) |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for api in STREAM_APIS:
        r = s.get(api)
        if r:
            lines.append(
                f"| {api} | {r['rows_per_batch']:,} | {r['micro_batches']} | {r['rows_per_s_sustained']:,.0f} "
                f"| {r['trigger_s_p50']} / {r['trigger_s_p90']} | {r['add_batch_s_p50']} / "
                f"{r['add_batch_s_p90']} | {r['first_trigger_s']} | {r['second_half']['rows_per_s']:,.0f}, "
                f"{r['second_half']['trigger_s_p50']} |"
            )
    if results.get("ratios"):
        lines += [
            "",
            ("Ratios (omnigraph / Delta, same run; rows/s > 1 = omnigraph faster, latency > 1 = omnigraph slower):"),
            "",
            (
                "| pair | rows/s | micro-batch p50 | micro-batch p90 | addBatch p50 "
                "| second half: rows/s, micro-batch p50 |"
            ),
            "|---|---|---|---|---|---|",
        ]
        for k, v in results["ratios"].items():
            lines.append(
                f"| {k} | {v['rows_per_s']} | {v['trigger_s_p50']} | {v['trigger_s_p90']} "
                f"| {v['add_batch_s_p50']} | {v['second_half_rows_per_s']}, "
                f"{v['second_half_trigger_s_p50']} |"
            )
    m = s.get("sink", {}).get("maintenance")
    if m:
        lines += [
            "",
            f"Maintenance after {m['micro_batches']} sink micro-batches:",
            "",
            (
                "| | graph version | commits | table version | fragments | files | full scan, Spark (s) "
                "| full scan, pylance (s) |"
            ),
            "|---|---|---|---|---|---|---|---|",
        ]
        for when in ("before", "after"):
            c, r = m[when], m[f"read_{when}"]
            lines.append(
                f"| {when} optimize + cleanup | {c['graph_version']} | {c['graph_commits']} "
                f"| {c['table_version']} | {c['fragments']} | {c['files']} | {r['spark_full_scan_s']} "
                f"| {r['pylance_full_scan_s']} |"
            )
        lines += [
            "",
            (
                f"optimize {m['optimize_s']} s, cleanup {m['cleanup_s']} s "
                f"({m['cleanup_versions_removed']} table versions removed); per micro-batch: {m['per_micro_batch']}"
            ),
        ]
    dm = s.get("delta", {}).get("maintenance")
    if dm:
        lines += [
            "",
            (
                f"Delta after {dm['micro_batches']} micro-batches: {dm['before']} -> OPTIMIZE "
                f"({dm['optimize_s']} s) -> {dm['after']}; full scan {dm['read_before']['spark_full_scan_s']} s "
                f"-> {dm['read_after']['spark_full_scan_s']} s"
            ),
        ]
    c = results.get("commit")
    if c:
        lines += [
            "",
            (
                f"Commit step alone ({c['batches']} appends of {c['rows_per_batch']:,} rows): median "
                f"{c['commit_s_p50']} s, p95 {c['commit_s_p95']} s, first {c['commit_s_first']} s, "
                f"last {c['commit_s_last']} s"
            ),
        ]
    if results.get("per_hour"):
        lines += ["", "Per hour (linear extrapolation):", "", "```", json.dumps(results["per_hour"], indent=2), "```"]
    return "\n".join(lines) + "\n"


def run_commit_latency(spark, work: Path, schema_text: str, batches: int, rows: int) -> dict[str, object]:
    import pyarrow as pa

    from omnigraph_spark import Graph
    from omnigraph_spark.spark.stream import OmnigraphStreamWriter, StreamMessage

    uri = str(work / "commit-graph")
    Graph.init(uri, schema_text)
    schema = spark.createDataFrame([], "name string, age int").schema
    opts = {"path": uri, "type": "Person"}
    lat: list[float] = []
    for b in range(batches):
        w = OmnigraphStreamWriter(opts, schema, False)  # Spark builds one per micro-batch too
        batch = pa.RecordBatch.from_pylist([{"name": f"c{b:03d}-{i:06d}", "age": i % 90} for i in range(rows)])
        msgs = [StreamMessage(w.write(iter([batch])).inner, "bench-query", b)]
        t0 = time.monotonic()
        OmnigraphStreamWriter(opts, schema, False).commit(msgs, b)  # and another for the commit
        lat.append(time.monotonic() - t0)
    return {
        "rows_per_batch": rows,
        "batches": batches,
        "commit_s": [round(x, 3) for x in lat],
        "commit_s_p50": round(statistics.median(lat), 3),
        "commit_s_p95": round(_pct(lat, 0.95), 3),
        "commit_s_first": round(lat[0], 3),
        "commit_s_last": round(lat[-1], 3),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=5000, help="events (nodes; graph: + as many edges) per micro-batch")
    p.add_argument("--batches", type=int, default=8)
    p.add_argument(
        "--sections",
        default="sink,graph,delta,delta_events,maintenance",
        help="comma-separated: sink, graph, delta, delta_events, maintenance, commit "
        "(the delta ones are skipped when delta-spark is not installed)",
    )
    p.add_argument("--read-repeats", type=int, default=5, help="timed full scans before and after maintenance")
    p.add_argument("--out", default=None, help="write the results as JSON here (and a .md beside it)")
    p.add_argument("--contender", default=None, help=argparse.SUPPRESS)  # internal: one contender, this process
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    p.add_argument("--maintenance", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    schema_text = (
        Path(__file__).resolve().parents[1].joinpath("tests", "fixtures", "omnigraph-0.7.2", "test.pg").read_text()
    )
    if args.contender:
        res = run_contender(args.contender, Path(args.work), schema_text, args)
        Path(args.work, f"{args.contender}.json").write_text(json.dumps(res))
        return 0
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    has_delta = _delta_available()
    command = " ".join(["stream_bench"] + (argv or sys.argv[1:]))
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "machine": _machine(),
        "load_start": _load(),
        "rows": args.rows,
        "batches": args.batches,
        "streams": {},
        "load_per_contender": {},
    }
    with tempfile.TemporaryDirectory(prefix="stream-bench-") as d:
        work = Path(d)
        for api in STREAM_APIS:
            if api not in sections or (api.startswith("delta") and not has_delta):
                continue
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.stream_bench",
                "--contender",
                api,
                "--work",
                d,
                "--rows",
                str(args.rows),
                "--batches",
                str(args.batches),
                "--read-repeats",
                str(args.read_repeats),
            ]
            if "maintenance" in sections:
                cmd.append("--maintenance")
            load0 = _load()
            subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parents[1])
            res = json.loads(Path(d, f"{api}.json").read_text())
            res.pop("path", None)
            results["streams"][api] = res
            results["load_per_contender"][api] = [load0, _load()]
            log.info("%s: %s rows/s, micro-batch p50 %s s", api, res["rows_per_s_sustained"], res["trigger_s_p50"])
        if "commit" in sections:
            spark = session(False)
            results["commit"] = run_commit_latency(spark, work, schema_text, args.batches, args.rows)
            spark.stop()
    derive(results)
    results["load_end"] = _load()
    text = json.dumps(results, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
