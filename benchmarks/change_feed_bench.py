"""The change feed of a 1% merge as users read it: omnigraph's ``readChangeFeed`` against Delta's
Change Data Feed for the same change, each read in a fresh process.

The inputs are made once (step ``prepare``, in its own process; reused when ``--work`` already
holds them for the same ``--rows``): ``--rows`` synthetic ``Item`` rows
(:func:`benchmarks.run.node_frame`) written as Parquet, and a merge file of ``--rows``/100
existing keys with a new ``qty``, spread over the whole key range (so the merge touches every data
file of both tables). The graph is loaded from the Parquet rows once and the Delta table (Change
Data Feed on) once; the merge file is applied to both. Then every contender runs in its own fresh
process (``local[2]``, the embedded session of :func:`benchmarks.scale_bench.session`; Delta's
without the shim's driver plugin) and reads the feed of that one version:

* ``omnigraph_count`` / ``delta_count``: ``spark.read.format(...).option("readChangeFeed",
  "true")`` of the merge's version only, then ``count()``;
* ``omnigraph_parquet`` / ``delta_parquet``: the same read written to Parquet (then read back,
  untimed, to check its rows: 2 x rows/100, a pre- and a postimage per key);
* ``omnigraph_plan``: the driver's planning alone (``store.changes.plan_changes``, no Spark).

Per contender: the seconds from the read to the action's end (the session start is excluded and
reported apart), the rows, and peak memory (VmHWM read from ``/proc`` before the session stops:
the driver's Python, its JVM and Spark's Python workers, the largest and their sum; the parent's
0.5 s samples cross-check them). ``--rounds`` runs every contender again, mirrored every other
round; the report gives medians and the ratios omnigraph / Delta of the same action in the same
run (the machine may be shared: compare ratios, never seconds across runs).

    PYSPARK_PYTHON=$PWD/.venv-spark40/bin/python .venv-spark40/bin/python -m benchmarks.change_feed_bench \\
        --rows 12000000 --work benchmarks/out/cdf-12m --rounds 3 --out benchmarks/out/cdf-12m.json \\
        --record benchmarks/results/2026-12-04-change-feed.json --run-name 2026-12-05-change-feed-cold-12m

``--record FILE --run-name NAME`` adds the result under ``runs`` of a results file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import setup_logging
from benchmarks.scale_bench import session, spawn_step, tree_hwm

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("change_feed_bench")

CONTENDERS = ("omnigraph_count", "delta_count", "omnigraph_parquet", "delta_parquet", "omnigraph_plan")
#: each omnigraph contender's baseline: the same action on Delta's feed
AGAINST = {"omnigraph_count": "delta_count", "omnigraph_parquet": "delta_parquet"}
KEY = "node:Item"


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# -- the steps (each in its own process) ----------------------------------------------------------


def prepare(work: Path, rows: int, driver_memory: str) -> dict[str, Any]:
    """The Parquet inputs, the graph and the Delta table, each merged once; their versions."""
    from delta.tables import DeltaTable  # the 'delta' extra (imported where used)
    from pyspark.sql import functions as F

    from benchmarks.run import SCHEMA, node_frame
    from omnigraph_spark import Graph, write_table

    spark = session(driver_memory, with_delta=True)
    inp, graph_uri, delta_path = work / "input", str(work / "graph"), str(work / "delta")
    changed = rows // 100
    step = rows // changed
    secs: dict[str, float] = {}
    secs["parquet"] = _timed(lambda: node_frame(spark, rows, seed=7).write.parquet(str(inp / "base")))
    merge = node_frame(spark, changed, seed=8, index=F.col("id") * step).withColumn("qty", F.lit(-1).cast("long"))
    secs["parquet_merge"] = _timed(lambda: merge.write.parquet(str(inp / "merge")))
    base, upd = spark.read.parquet(str(inp / "base")), spark.read.parquet(str(inp / "merge"))
    Graph.init(graph_uri, SCHEMA)
    secs["graph_load"] = _timed(lambda: write_table(base, graph_uri, "Item"))
    secs["delta_load"] = _timed(
        lambda: base.write.format("delta").option("delta.enableChangeDataFeed", "true").save(delta_path)
    )
    secs["graph_merge"] = _timed(lambda: write_table(upd, graph_uri, "Item", mode="merge"))

    def delta_merge():
        t = DeltaTable.forPath(spark, delta_path).alias("t")
        t.merge(upd.alias("s"), "t.name = s.name").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    secs["delta_merge"] = _timed(delta_merge)
    out = {
        "rows": rows,
        "changed_keys": changed,
        "graph_uri": graph_uri,
        "delta_path": delta_path,
        "graph_version": Graph.open(graph_uri).snapshot().version,
        "delta_version": DeltaTable.forPath(spark, delta_path).history(1).select("version").first()["version"],
        "graph_fragments": len(Graph.open(graph_uri).open_table(KEY).get_fragments()),
        "seconds": {k: round(v, 2) for k, v in secs.items()},
    }
    spark.stop()
    return out


def _feed(spark, name: str, p: dict[str, Any]):
    if name.startswith("omnigraph"):
        r = spark.read.format("omnigraph").option("type", "Item")
        version, path = p["graph_version"], p["graph_uri"]
    else:
        r = spark.read.format("delta")
        version, path = p["delta_version"], p["delta_path"]
    return (
        r.option("readChangeFeed", "true")
        .option("startingVersion", version)
        .option("endingVersion", version)
        .load(path)
    )


def run_contender(name: str, work: Path, driver_memory: str) -> dict[str, Any]:
    p = json.loads((work / "prepare.json").read_text())
    res: dict[str, Any] = {"name": name}
    if name == "omnigraph_plan":
        from omnigraph_spark.store import changes

        rng = changes.FeedRange("main", p["graph_version"], p["graph_version"])
        plan: list = []
        res["seconds"] = _timed(lambda: plan.extend(changes.plan_changes(p["graph_uri"], KEY, rng)))
        res["rows"] = sum(c.rows for c in plan)
        res["pieces"] = sum(len(c.pieces) for c in plan)
        res["memory_hwm"] = tree_hwm(os.getpid())
        return res
    t0 = time.perf_counter()
    delta = name.startswith("delta")
    spark = session(driver_memory, with_delta=delta, baseline=delta)
    res["session_s"] = round(time.perf_counter() - t0, 2)
    if name.endswith("_count"):
        n: list[int] = []
        res["seconds"] = _timed(lambda: n.append(_feed(spark, name, p).count()))
        res["rows"] = n[0]
    else:
        out = str(work / f"out-{name}")
        shutil.rmtree(out, ignore_errors=True)
        res["seconds"] = _timed(lambda: _feed(spark, name, p).write.parquet(out))
        res["memory_hwm"] = tree_hwm(os.getpid())
        written = spark.read.parquet(out)
        res["rows"] = written.count()
        res["change_types"] = {r["_change_type"]: r["count"] for r in written.groupBy("_change_type").count().collect()}
        shutil.rmtree(out, ignore_errors=True)
    res.setdefault("memory_hwm", tree_hwm(os.getpid()))
    spark.stop()
    return res


# -- the parent -----------------------------------------------------------------------------------


def _spawn(args, work: Path, step: str) -> dict[str, Any]:
    argv = ["--rows", str(args.rows), "--driver-memory", args.driver_memory]
    res, peaks, load, seconds = spawn_step("benchmarks.change_feed_bench", argv, work, step)
    res["memory_rss_sampled"] = {k: round(v) for k, v in peaks.items()}
    res["load"] = load
    res["process_s"] = round(seconds, 1)
    return res


def summarize(rounds: list[dict[str, dict[str, Any]]], prepared: dict[str, Any]) -> dict[str, Any]:
    """Medians, peak memory (the largest over the rounds) and the omnigraph / Delta ratios."""
    names = list(rounds[0])
    med = {n: round(statistics.median(r[n]["seconds"] for r in rounds), 3) for n in names}
    peaks = {
        n: {
            k: max(r[n]["memory_hwm"][k] for r in rounds)
            for k, v in rounds[0][n]["memory_hwm"].items()
            if isinstance(v, (int, float))
        }
        for n in names
    }
    per_round = [
        {f"{o}_over_{d}": round(r[o]["seconds"] / r[d]["seconds"], 2) for o, d in AGAINST.items() if o in r and d in r}
        for r in rounds
    ]
    ratio = {k: round(statistics.median(pr[k] for pr in per_round), 2) for k in per_round[0]}
    return {
        "median_seconds": med,
        "rows": {n: rounds[0][n]["rows"] for n in names},
        "peak_memory_mb": peaks,
        "ratios_per_round": per_round,
        "ratios": ratio,
        "expected_feed_rows": 2 * prepared["changed_keys"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma-separated, of: {', '.join(CONTENDERS)}")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--work", default=None, help="inputs and scratch (kept when given; reused for the same --rows)")
    p.add_argument("--out", default=None, help="write the result as JSON here")
    p.add_argument("--record", default=None, help="a results file: add the result under its 'runs'")
    p.add_argument("--run-name", default=None, help="the result's name in --record's runs")
    p.add_argument("--log", default=None)
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one step in this process
    args = p.parse_args(argv)
    setup_logging(log, args.log)
    if args.step:
        work = Path(args.work)
        if args.step == "prepare":
            res = prepare(work, args.rows, args.driver_memory)
            res["memory_hwm"] = tree_hwm(os.getpid())
        else:
            res = run_contender(args.step, work, args.driver_memory)
        (work / f"{args.step}.json").write_text(json.dumps(res))
        return 0
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    bad = [n for n in names if n not in CONTENDERS]
    if bad or args.rounds < 1 or (args.record and not args.run_name):
        p.error(f"unknown contenders {bad}, --rounds {args.rounds}, or --record without --run-name")
    work = Path(args.work or tempfile.mkdtemp(prefix="cdf-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        prep_file = work / "prepare.json"
        if prep_file.exists() and json.loads(prep_file.read_text()).get("rows") == args.rows:
            prepared = json.loads(prep_file.read_text())
            log.info("reusing the inputs in %s", work)
        else:
            for d in ("input", "graph", "delta"):
                shutil.rmtree(work / d, ignore_errors=True)
            log.info("preparing %d rows in %s", args.rows, work)
            prepared = _spawn(args, work, "prepare")
        rounds: list[dict[str, dict[str, Any]]] = []
        for i in range(args.rounds):
            order = names if i % 2 == 0 else list(reversed(names))
            rd: dict[str, dict[str, Any]] = {}
            for n in order:
                os.sync()  # no contender pays for flushing what an earlier one wrote
                rd[n] = _spawn(args, work, n)
                log.info("round %d %s: %.2f s, %s rows", i + 1, n, rd[n]["seconds"], rd[n]["rows"])
            rounds.append(rd)
        import platform

        result = {
            "machine": {
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "interpreter": sys.executable,
                "commit": subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
                ).stdout.strip(),
            },
            "mode": "cold: each contender a fresh process, inputs from files made once",
            "rows": args.rows,
            "prepared": {k: v for k, v in prepared.items() if k not in ("graph_uri", "delta_path")},
            **summarize(rounds, prepared),
            "rounds": rounds,
        }
        text = json.dumps(result, indent=2)
        print(text)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(text)
        if args.record:
            rec = json.loads(Path(args.record).read_text())
            rec["runs"][args.run_name] = result
            Path(args.record).write_text(json.dumps(rec, indent=1) + "\n")
        want = 2 * prepared["changed_keys"]
        for rd in rounds:
            for n, r in rd.items():
                assert r["rows"] == want, f"{n}: {r['rows']} rows, expected {want}"
                if "change_types" in r:
                    half = prepared["changed_keys"]
                    assert r["change_types"] == {"update_preimage": half, "update_postimage": half}, r
        return 0
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
