"""Loads from Parquet files at scale: wall time and peak memory of the driver and the executors.

The input is generated ONCE as Parquet files (``<work>/input``): ``--rows`` rows in all, a
quarter ``Item`` nodes (``name`` @key) and three quarters ``Link`` edges between them (three per
source on average, inside ``@card(0..1000)``), plus an append file of ``Link`` edges (a tenth of
the edges, endpoints among the committed nodes). Deterministic: the same ``--rows`` and ``--seed``
give the same files. Before each contender the page cache's dirty pages are written back
(``os.sync``), so that no contender pays for flushing an earlier step's files. Every contender
then runs in its own fresh process (``local[2]``, the
embedded default session of :func:`omnigraph_spark.demo.local_builder`, which puts the JVM shim
on through :func:`omnigraph_spark.configure_spark`, with ``spark.driver.memory`` set to
``--driver-memory``) and reads its input from those files, as a lakehouse pipeline does:

* ``parquet``: Parquet -> Parquet, nodes then edges (the baseline of every ratio);
* ``delta``: Parquet -> Delta, nodes then edges (needs ``delta-spark``: ``.venv-spark40``);
* ``write_graph``: ``write_graph`` of nodes + edges as ONE graph commit (``engine="auto"``);
* ``append``: ``write_table`` of the append file onto the graph ``write_graph`` committed,
  against ``parquet_append`` (the same file appended to the Parquet baseline's edges);
* ``merge``: ``write_table(mode="merge")`` of the merge file (a tenth as many ``Item`` rows as
  there are nodes: every twentieth committed node with new values, spread over every fragment,
  and as many new nodes) onto that graph, against ``parquet_merge`` (the Parquet upsert: the
  baseline's nodes without the merged keys, plus the merge file, written as a new table);
  ``merge_in_memory`` is the same merge with ``distributedCheckRows`` 0 (the commit finds the
  replaced rows in the driver's memory), for its memory;
* ``format``: ``df.write.format("omnigraph")`` of nodes, then edges (two commits).

Per contender: wall seconds of the write (the session start and ``Graph.init`` excluded, and
the whole process too), rows, rows/s, the ratio to Parquet on the same input, output files
(Lance fragments, Parquet files), output bytes, and peak memory: the driver's Python process
(VmHWM), the driver's JVM (VmHWM; in local mode the executors' JVM side lives in it) and Spark's
Python workers (the executors' Python side: the largest one's VmHWM and the sum), read from
``/proc`` by the contender before its session stops and cross-checked by the parent's 0.5 s
RSS samples of the contender's process tree. Each output is deleted once measured (the graph of
``write_graph`` after ``append``), so the disk holds the input plus one or two outputs: about
80 bytes per input row at the peak (input Parquet ~20, Parquet output ~20, the graph ~36,
measured at 10M and 30M rows: ~4 GB at 50M rows).

    .venv/bin/python -m benchmarks.scale_bench --rows 1000000 --out benchmarks/out/scale-1m.json
    PYSPARK_PYTHON=$PWD/.venv-spark40/bin/python .venv-spark40/bin/python -m benchmarks.scale_bench \\
        --rows 10000000 --out benchmarks/out/scale-10m.json --log benchmarks/out/scale-10m.log

Progress goes to ``--log`` (and stderr). The results go to ``--out`` as JSON and a ``.md``
beside it. ``--contenders`` picks and orders the contenders (``append`` needs ``write_graph``
and ``parquet_append`` needs ``parquet`` earlier in the same run). ``--rounds N`` runs them N
times over the same input, mirroring the order every other round (:func:`round_order`), and
reports each round's ratios and their median (:func:`ratio_summary`).
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
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import compile_package, descendants, proc_table, read_text, setup_logging
from benchmarks.common import with_delta as add_delta

log = logging.getLogger("benchmarks.scale_bench")

CONTENDERS = (
    "parquet",
    "delta",
    "write_graph",
    "append",
    "merge",
    "merge_in_memory",
    "parquet_append",
    "parquet_merge",
    "format",
)
DEFAULT_CONTENDERS = "parquet,delta,write_graph,append,merge,parquet_append,parquet_merge,format"
#: what a contender needs from an earlier one in the same run
NEEDS = {
    "append": "write_graph",
    "merge": "write_graph",
    "merge_in_memory": "write_graph",
    "parquet_append": "parquet",
    "parquet_merge": "parquet",
}
#: the baseline each contender's ratio is taken against
BASELINE = {
    "parquet": "parquet",
    "delta": "parquet",
    "write_graph": "parquet",
    "format": "parquet",
    "append": "parquet_append",
    "parquet_append": "parquet_append",
    "merge": "parquet_merge",
    "merge_in_memory": "parquet_merge",
    "parquet_merge": "parquet_merge",
}
ROOT = Path(__file__).resolve().parents[1]


# -- pure parts (tests/benchmarks/test_scale_bench.py) ----------------------------------------


def split_rows(rows: int) -> dict[str, int]:
    """``rows`` in all -> node rows (a quarter), edge rows (the rest), append edge rows (a
    tenth of the edges, at least 1) and merge node rows (a tenth of the nodes, at least 2)."""
    if rows < 8:
        raise ValueError(f"--rows must be at least 8, got {rows}")
    nodes = rows // 4
    edges = rows - nodes
    return {"nodes": nodes, "edges": edges, "append_edges": max(1, edges // 10), "merge_nodes": max(2, nodes // 10)}


def merge_index(i: int, nodes: int) -> int:
    """The node index of merge row ``i``: even rows update committed node ``10 * i`` (spread
    over the whole table), odd rows add node ``nodes + i``."""
    return 10 * i if i % 2 == 0 else nodes + i


def input_files(rows: int, rows_per_file: int) -> int:
    """Parquet files per input table: one per ``rows_per_file`` rows, at least 2 (one per core)."""
    return max(2, -(-rows // rows_per_file))


def parse_contenders(text: str) -> list[str]:
    """``--contenders`` -> names in run order; unknown names and a contender without the one it
    needs earlier in the list are errors."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    for i, n in enumerate(names):
        if n not in CONTENDERS:
            raise ValueError(f"unknown contender {n!r}; known: {', '.join(CONTENDERS)}")
        need = NEEDS.get(n)
        if need and need not in names[:i]:
            raise ValueError(f"contender {n!r} needs {need!r} earlier in --contenders")
    if len(set(names)) != len(names):
        raise ValueError(f"a contender is listed twice: {text!r}")
    return names


def status_kb(text: str, field: str) -> int:
    """A ``/proc/<pid>/status`` field in kB (``VmHWM``, ``VmRSS``), 0 when absent."""
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def ratios(results: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """Each contender's throughput over its baseline's (rows/s; > 1 = faster than the baseline),
    both measured in the same run; None when the baseline did not run."""
    out: dict[str, float | None] = {}
    for name, r in results.items():
        base = results.get(BASELINE[name])
        if name == BASELINE[name]:
            continue
        out[f"{name}_vs_{BASELINE[name]}"] = (
            round(base["write_s"] / r["write_s"], 3) if base and r.get("write_s") else None
        )
    return out


def round_order(names: Sequence[str], i: int) -> list[str]:
    """The contenders' order in round ``i`` (0-based): as given in even rounds, mirrored in odd
    ones, so that each contender runs both before and after its baseline. A mirrored list is
    repaired to keep what a contender needs (``NEEDS``) ahead of it: a contender whose need has
    not run yet waits and runs right after it."""
    if i % 2 == 0:
        return list(names)
    out: list[str] = []
    waiting: list[str] = []
    for n in reversed(names):
        need = NEEDS.get(n)
        if need and need in names and need not in out:
            waiting.append(n)
            continue
        out.append(n)
        for w in [w for w in waiting if NEEDS[w] == n]:
            waiting.remove(w)
            out.append(w)
    return out + waiting


def ratio_summary(rounds: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ratio (``write_graph_vs_parquet`` ...): every round's value, their median, min and max."""
    out: dict[str, dict[str, Any]] = {}
    for r in rounds:
        for k, v in r["ratios"].items():
            if v is not None:
                out.setdefault(k, {"runs": []})["runs"].append(v)
    for v in out.values():
        v.update(median=round(statistics.median(v["runs"]), 3), min=min(v["runs"]), max=max(v["runs"]))
    return out


# -- /proc -------------------------------------------------------------------------------------


def _is_python(comm: str) -> bool:
    return comm.startswith("python")


def tree_hwm(root: int) -> dict[str, Any]:
    """VmHWM (peak RSS) of a driver process, its JVM and the JVM's Python workers, now."""
    table = proc_table()
    mb = 1 / 1024
    under = descendants(table, root)
    jvms = [p for p in under if table[p][2] == "java"]
    workers = [p for p in under if _is_python(table[p][2])]
    hwm = {p: status_kb(read_text(f"/proc/{p}/status"), "VmHWM") for p in [root] + under}
    top = max(workers, key=lambda p: hwm[p], default=None)
    return {
        "driver_python_hwm_mb": round(hwm[root] * mb),
        "driver_jvm_hwm_mb": round(sum(hwm[p] for p in jvms) * mb),
        "worker_max_hwm_mb": round(max((hwm[p] for p in workers), default=0) * mb),
        "workers_sum_hwm_mb": round(sum(hwm[p] for p in workers) * mb),
        "workers": len(workers),
        # which worker: e.g. "pyspark.daemon pyspark.sql.worker.commit_data_source_write" (the driver's
        # DataSource commit) vs the executors' task workers
        "worker_max_cmd": " ".join(read_text(f"/proc/{top}/cmdline").split("\0")[1:4]).strip() if top else None,
    }


#: Python processes of a job told apart by a marker in their command line: the Python source's
#: commit worker (the load-wide checks and the commit) and the child process it builds the
#: engine's indexes in (I23)
ROLES = {"commit_worker": "commit_data_source_write", "index_child": "omnigraph_spark.store.indexes"}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class TreeSampler:
    """RSS of a contender's process tree every ``interval`` s, from the parent: the contender
    (driver Python), its java child (driver JVM) and the Python processes under the JVM."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid, self.interval = pid, interval
        self.peak = {
            "driver_python_rss_mb": 0.0,
            "driver_jvm_rss_mb": 0.0,
            "worker_max_rss_mb": 0.0,
            "workers_sum_rss_mb": 0.0,
            **{f"{role}_rss_mb": 0.0 for role in ROLES},
        }
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                t = proc_table()
                under = descendants(t, self.pid)
                mb = 1 / 2**20
                py = [t[p][1] for p in under if _is_python(t[p][2])]
                now = {
                    "driver_python_rss_mb": t.get(self.pid, (0, 0))[1] * mb,
                    "driver_jvm_rss_mb": sum(t[p][1] for p in under if t[p][2] == "java") * mb,
                    "worker_max_rss_mb": max(py, default=0) * mb,
                    "workers_sum_rss_mb": sum(py) * mb,
                }
                cmd = {p: _cmdline(p) for p in under if _is_python(t[p][2])}  # one read per process
                for role, marker in ROLES.items():
                    now[f"{role}_rss_mb"] = max((t[p][1] for p, c in cmd.items() if marker in c), default=0) * mb
                for k, v in now.items():
                    self.peak[k] = max(self.peak[k], v)
            except (OSError, KeyError):  # a process ended between two reads: next sample
                continue

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._t.join(timeout=5)
        return {k: round(v) for k, v in self.peak.items()}


def dir_stats(path: str, suffix: str) -> dict[str, int]:
    files = [p for p in Path(path).rglob("*") if p.is_file()]
    return {"files": sum(1 for p in files if p.name.endswith(suffix)), "bytes": sum(p.stat().st_size for p in files)}


# -- the contenders (each in its own process) ---------------------------------------------------


def session(driver_memory: str, with_delta: bool, baseline: bool = False):
    """The contender's session; a ``baseline`` (Parquet, Delta) without the shim's driver plugin,
    which would start ``format("omnigraph")``'s planner beside a job that never uses it."""
    from omnigraph_spark.demo import local_builder

    b = local_builder("omnigraph-scale-bench", "local[2]", conf={"spark.driver.memory": driver_memory})
    if baseline:
        b = b.config("spark.plugins", "")
    if with_delta:
        b = add_delta(b)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not baseline:  # the shim's own INFO lines (node-id index built or read, kept files) in <step>.stderr
        jvm = spark.sparkContext._jvm
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "io.omnigraph", jvm.org.apache.logging.log4j.Level.INFO
        )
    from omnigraph_spark import register

    register(spark)
    return spark


def generate(spark, work: Path, rows: int, seed: int, rows_per_file: int) -> dict[str, Any]:
    """The input Parquet files (run.node_frame / run.edge_frame: seeded, deterministic)."""
    from pyspark.sql import functions as F

    from benchmarks.run import edge_frame, node_frame

    n = split_rows(rows)
    inp = work / "input"
    node_frame(spark, n["nodes"], seed, input_files(n["nodes"], rows_per_file)).write.parquet(str(inp / "nodes"))
    edge_frame(spark, n["edges"], n["nodes"], seed, input_files(n["edges"], rows_per_file)).write.parquet(
        str(inp / "edges")
    )
    app = edge_frame(spark, n["append_edges"], n["nodes"], seed + 7, input_files(n["append_edges"], rows_per_file))
    app.select(F.col("dst").alias("src"), F.col("src").alias("dst"), "weight").write.parquet(str(inp / "append"))
    i = F.col("id")  # merge_index as a column
    node_frame(
        spark,
        n["merge_nodes"],
        seed + 3,
        input_files(n["merge_nodes"], rows_per_file),
        index=F.when(i % 2 == 0, i * 10).otherwise(i + n["nodes"]),
    ).write.parquet(str(inp / "merge"))
    return {**n, **{f"{k}_input": dir_stats(str(inp / k), ".parquet") for k in ("nodes", "edges", "append", "merge")}}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _timed_tables(res: dict[str, Any], nodes, edges) -> None:
    """Writes the nodes, then the edges, each timed: ``write_s`` is their sum, ``tables_s`` each
    part (where a load spends beyond its baseline: the node job or the edge job)."""
    t = {"nodes": _timed(nodes), "edges": _timed(edges)}
    res["write_s"] = sum(t.values())
    res["tables_s"] = {k: round(v, 2) for k, v in t.items()}


def _index_seconds(result) -> dict[str, Any]:
    """Per table, the seconds the load spent on the engine's indexes (I23) and what it built:
    part of ``write_s``, shown beside it."""
    return {
        t.table_key: {"s": round(t.index_seconds, 2), "indexes": list(t.indexes)} for t in result.tables if t.indexes
    }


def _kept_indexes(uri: str) -> int:
    """Node-id index files the JVM shim keeps under the graph (``_omnigraph_spark/id_indexes``)."""
    from omnigraph_spark.store.layout import RootPaths

    d = Path(RootPaths(uri).id_indexes)
    return len(list(d.glob("*.ids"))) if d.is_dir() else 0


def _graph_stats(uri: str) -> dict[str, Any]:
    from omnigraph_spark import Graph

    g = Graph.open(uri)
    snap = g.snapshot()
    out: dict[str, Any] = {"graph_version": snap.version, "tables": {}}
    for key in ("node:Item", "edge:Link"):
        ds = g.open_table(key, snap)
        out["tables"][key] = {"rows": ds.count_rows(), "fragments": len(ds.get_fragments())}
    out["rows"] = sum(t["rows"] for t in out["tables"].values())
    out["files"] = sum(t["fragments"] for t in out["tables"].values())
    from omnigraph_spark.store.layout import RootPaths

    # the kept node-id indexes (a cache beside the graph; one may still be being written) apart
    out["kept_index_bytes"] = dir_stats(RootPaths(uri).id_indexes, ".ids")["bytes"]
    out["bytes"] = dir_stats(uri, ".lance")["bytes"] - out["kept_index_bytes"]
    return out


def run_contender(name: str, work: Path, args) -> dict[str, Any]:
    from benchmarks.run import SCHEMA

    t_proc = time.perf_counter()
    spark = session(
        args.driver_memory,
        with_delta=name == "delta",
        baseline=name in ("parquet", "delta", "parquet_append", "parquet_merge"),
    )
    inp = work / "input"

    def read(kind: str):
        return spark.read.parquet(str(inp / kind))

    res: dict[str, Any] = {"contender": name}
    if name == "parquet":
        out = str(work / "out-parquet")
        _timed_tables(
            res,
            lambda: read("nodes").write.parquet(out + "/nodes"),
            lambda: read("edges").write.parquet(out + "/edges"),
        )
        st = dir_stats(out, ".parquet")
        res.update(rows=spark.read.parquet(out + "/nodes").count() + spark.read.parquet(out + "/edges").count(), **st)
    elif name == "parquet_append":
        out = str(work / "out-parquet")
        res["write_s"] = _timed(lambda: read("append").write.mode("append").parquet(out + "/edges"))
        res["rows"] = spark.read.parquet(str(inp / "append")).count()
        res.update(dir_stats(out, ".parquet"))
    elif name == "parquet_merge":
        out = str(work / "out-parquet")
        new = read("merge")
        res["write_s"] = _timed(
            lambda: (
                spark.read.parquet(out + "/nodes")
                .join(new.select("name"), "name", "left_anti")
                .unionByName(new)
                .write.parquet(out + "/nodes-merged")
            )
        )
        res["rows"] = new.count()
        res.update(dir_stats(out + "/nodes-merged", ".parquet"))
    elif name == "delta":
        out = str(work / "out-delta")
        _timed_tables(
            res,
            lambda: read("nodes").write.format("delta").save(out + "/nodes"),
            lambda: read("edges").write.format("delta").save(out + "/edges"),
        )
        st = dir_stats(out, ".parquet")
        res.update(rows=sum(spark.read.format("delta").load(out + f"/{k}").count() for k in ("nodes", "edges")), **st)
    elif name in ("write_graph", "format"):
        from omnigraph_spark import Graph, write_graph

        uri = str(work / f"out-{name}")
        Graph.init(uri, SCHEMA)
        if name == "write_graph":
            done = []
            res["write_s"] = _timed(
                lambda: done.append(write_graph(uri, {"Item": read("nodes"), "Link": read("edges")}))
            )
            res["index_s"] = _index_seconds(done[0])
        else:
            _timed_tables(
                res,
                lambda: read("nodes").write.format("omnigraph").option("type", "Item").mode("append").save(uri),
                lambda: read("edges").write.format("omnigraph").option("type", "Link").mode("append").save(uri),
            )
        res.update(_graph_stats(uri))
    elif name == "append":
        from omnigraph_spark import write_table

        uri = str(work / "out-write_graph")
        before = _graph_stats(uri)
        res["kept_id_indexes"] = _kept_indexes(uri)  # what write_graph's executors kept for this load to read
        done = []
        res["write_s"] = _timed(lambda: done.append(write_table(read("append"), uri, "Link")))
        res["index_s"] = _index_seconds(done[0])
        after = _graph_stats(uri)
        res.update(
            committed_rows_before=before["rows"],
            rows=after["rows"] - before["rows"],
            fragments_added=after["files"] - before["files"],
            files=after["files"],
            bytes=after["bytes"],
        )
    elif name in ("merge", "merge_in_memory"):
        from omnigraph_spark import write_table

        uri = str(work / "out-write_graph")
        before = _graph_stats(uri)
        opts = {"distributedCheckRows": "0"} if name == "merge_in_memory" else {}
        res["write_s"] = _timed(lambda: write_table(read("merge"), uri, "Item", mode="merge", options=opts))
        after = _graph_stats(uri)
        res.update(
            committed_rows_before=before["rows"],
            rows=read("merge").count(),
            rows_added=after["rows"] - before["rows"],
            fragments_after=after["files"],
            files=after["files"],
            bytes=after["bytes"],
        )
    else:
        raise ValueError(name)
    res["rows_per_s"] = round(res["rows"] / res["write_s"]) if res["write_s"] else None
    res["memory_hwm"] = tree_hwm(os.getpid())  # before the session stops: the JVM and workers still run
    conf = spark.sparkContext.getConf()
    res["spark_driver_memory"] = conf.get("spark.driver.memory")
    from omnigraph_spark.spark.jvm_read import shim_loaded

    res["shim_loaded"] = shim_loaded(spark)  # engine="auto" stages in the JVM when it is
    spark.stop()
    res["process_s"] = round(time.perf_counter() - t_proc, 1)
    res["write_s"] = round(res["write_s"], 2)
    return res


# -- the parent -------------------------------------------------------------------------------


def _machine() -> dict[str, Any]:
    import platform

    import pyspark

    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "interpreter": sys.executable,
        "pyspark": pyspark.__version__,
        "platform": platform.platform(),
        "ram_gib": round(status_kb(read_text("/proc/meminfo"), "MemTotal") / 2**20, 1),
    }
    from importlib.metadata import version

    for dist in ("pylance", "delta-spark"):
        try:
            info[dist] = version(dist)
        except Exception:  # not installed
            info[dist] = None
    info["lance_cpu_threads_env"] = os.environ.get("LANCE_CPU_THREADS")
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    info["commit"] = git.stdout.strip() or None
    info["tracked_files_changed"] = len(dirty.stdout.splitlines())
    return info


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _delta_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("delta") is not None


def spawn_step(
    module: str, argv: Sequence[str], work: Path, step: str, code: str | None = None
) -> tuple[dict[str, Any], dict[str, float], list[list[float]], float]:
    """Run one step of a benchmark as users run a job, in a fresh process:
    ``python -m <module> --step <step> --work <work> <argv>``, from ``code`` (a tree of the
    package to measure) or this checkout, which also comes first on its ``PYTHONPATH`` so the
    driver and Spark's Python workers import that tree. Its process tree's memory is sampled
    while it runs. Returns its JSON result (``<work>/<step>.json``), the sampled peaks, the load
    averages before and after, and its seconds, start-up included."""
    out = work / f"{step}.json"
    out.unlink(missing_ok=True)
    path = [p for p in [code, str(ROOT)] if p] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(path),
    )
    cmd = [sys.executable, "-m", module, "--step", step, "--work", str(work), *argv]
    load0, t0 = _load(), time.perf_counter()
    with open(work / f"{step}.stderr", "w") as err:
        proc = subprocess.Popen(cmd, cwd=code or ROOT, env=env, stdout=err, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)  # also sees processes gone before the step reads its peaks
        rc = proc.wait()
        peaks = sampler.stop()
    if rc != 0:
        raise RuntimeError(f"{step} exited {rc}:\n" + (work / f"{step}.stderr").read_text(errors="replace")[-4000:])
    return json.loads(out.read_text()), peaks, [load0, _load()], time.perf_counter() - t0


def _spawn(args, work: Path, step: str) -> dict[str, Any]:
    argv = ["--rows", str(args.rows), "--seed", str(args.seed), "--rows-per-file", str(args.rows_per_file)]
    res, peaks, load, seconds = spawn_step(
        "benchmarks.scale_bench", [*argv, "--driver-memory", args.driver_memory], work, step
    )
    res["memory_rss_sampled"] = peaks
    res["load"] = load
    res["subprocess_s"] = round(seconds, 1)
    return res


def _settle() -> None:
    """Writes the page cache's dirty pages back before a contender starts, so that none pays for
    flushing what an earlier step wrote (the generated input, the last contender's output), which
    would slow whichever contender runs first."""
    t0 = time.monotonic()
    os.sync()
    log.info("synced the page cache in %.1f s", time.monotonic() - t0)


def _drop_outputs(work: Path, done: str, remaining: Sequence[str]) -> None:
    """Delete outputs nothing later in the run reads (the disk holds one or two at a time)."""
    keep = {NEEDS[r] for r in remaining if r in NEEDS}
    for name in ("parquet", "delta", "write_graph", "format"):
        p = work / f"out-{name}"
        if p.exists() and name not in keep:
            log.info("after %s: deleting %s", done, p)
            shutil.rmtree(p, ignore_errors=True)


def markdown(r: Mapping[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"# Scale: loads from Parquet files, {r['rows']:,} rows ({r['date']})",
        "",
        f"`{r['command']}`",
        "",
        (
            f"Machine: {m['cores']} cores (shared), {m.get('ram_gib')} GiB RAM, Python {m['python']}, "
            f"pyspark {m['pyspark']}, pylance {m.get('pylance')}, delta-spark {m.get('delta-spark')}; "
            f"spark.driver.memory {r['driver_memory']}, local[2]; load average {r['load_start']} at start, "
            f"{r['load_end']} at end."
        ),
        "",
        (
            f"Input: {r['input']['nodes']:,} Item nodes + {r['input']['edges']:,} Link edges "
            f"({r['input']['nodes_input']['files']} + {r['input']['edges_input']['files']} Parquet files, "
            f"{(r['input']['nodes_input']['bytes'] + r['input']['edges_input']['bytes']) / 2**20:,.0f} MB); "
            f"append: {r['input']['append_edges']:,} Link edges. Generated in {r['generate_s']} s."
        ),
        "",
        (
            "| contender | rows | write (s) | rows/s | vs baseline | driver Python peak (MB) | driver JVM peak (MB) "
            "| largest Python worker peak (MB) | Python workers, sum (MB) | output files | output MB |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in r["contenders"].items():
        h = c["memory_hwm"]
        ratio = r["ratios"].get(f"{name}_vs_{BASELINE[name]}")
        vs = "baseline" if name == BASELINE[name] else (f"{ratio}x {BASELINE[name]}" if ratio else "")
        lines.append(
            f"| {name} | {c['rows']:,} | {c['write_s']} | {c['rows_per_s']:,} | {vs} "
            f"| {h['driver_python_hwm_mb']:,} | {h['driver_jvm_hwm_mb']:,} | {h['worker_max_hwm_mb']:,} "
            f"| {h['workers_sum_hwm_mb']:,} | {c.get('files', '')} | {c.get('bytes', 0) / 2**20:,.0f} |"
        )
    lines += [
        "",
        (
            "Peaks are VmHWM read from /proc by each contender before its session stops; the parent's "
            "0.5 s RSS samples of the same processes are in the JSON (`memory_rss_sampled`). In local mode "
            "the executors' JVM side runs inside the driver JVM. Ratios: the contender's rows/s over its "
            "baseline's (parquet; append: parquet_append), same run, > 1 = faster."
        ),
    ]
    shim = {c.get("shim_loaded") for n, c in r["contenders"].items() if n in ("write_graph", "append", "format")}
    if shim:
        lines.append(
            f"- JVM shim loaded in the omnigraph contenders' sessions: {sorted(shim)} (write_graph and "
            'append use engine="auto": the JVM sink when it is loaded)'
        )
    for name, c in r["contenders"].items():
        if c.get("index_s"):
            lines.append(
                f"- {name}: of which the engine's indexes (I23): "
                + ", ".join(f"{k} {v['s']} s ({', '.join(v['indexes'])})" for k, v in c["index_s"].items())
            )
        if c.get("tables_s"):
            lines.append(
                f"- {name}: nodes {c['tables_s']['nodes']} s, then edges {c['tables_s']['edges']} s "
                "(each save timed; write_graph's one call logs its node and edge jobs instead)"
            )
    for name, c in r["contenders"].items():
        if c["memory_hwm"].get("worker_max_cmd"):
            lines.append(f"- {name}: the largest Python worker ran `{c['memory_hwm']['worker_max_cmd']}`")
    a = r["contenders"].get("append")
    if a and "kept_id_indexes" in a:
        lines.append(
            f"- append: {a['kept_id_indexes']} kept node-id index file(s) under the graph when it started "
            "(written by write_graph's executors; the append reads one instead of building it)"
        )
    if a:
        lines.append(
            f"- append: {a['rows']:,} edges onto a graph of {a['committed_rows_before']:,} rows, "
            f"{a['fragments_added']} fragments added"
        )
    for name in ("merge", "merge_in_memory"):
        c = r["contenders"].get(name)
        if c:
            lines.append(
                f"- {name}: {c['rows']:,} Item rows merged onto a graph of {c['committed_rows_before']:,} "
                f"rows ({c['rows_added']:,} new)"
            )
    lines += rounds_markdown(r)
    return "\n".join(lines) + "\n"


def rounds_markdown(r: Mapping[str, Any]) -> list[str]:
    """A run of several rounds: each round's order, write seconds and ratios, then every ratio's
    median, min and max (the table above is the first round's)."""
    rounds = r.get("rounds") or []
    if len(rounds) < 2:
        return []
    names = list(rounds[0]["contenders"])
    keys = list(r["ratio_summary"])
    lines = [
        "",
        f"## {len(rounds)} rounds over the same input",
        "",
        (
            "The table above is round 1. Each round runs every contender again, each in a fresh process: "
            "rounds 1, 3, ... in the order given, rounds 2, 4, ... mirrored (each contender runs before and after its "
            "baseline)."
        ),
        "",
        "| round | order | " + " | ".join(f"{n} (s)" for n in names) + " | " + " | ".join(keys) + " |",
        "|---|---|" + "---|" * (len(names) + len(keys)),
    ]
    for i, rd in enumerate(rounds):
        secs = [str(rd["contenders"][n]["write_s"]) if n in rd["contenders"] else "" for n in names]
        rats = [f"{rd['ratios'][k]}x" if rd["ratios"].get(k) else "" for k in keys]
        lines.append(f"| {i + 1} | {', '.join(rd['order'])} | " + " | ".join(secs) + " | " + " | ".join(rats) + " |")
    lines.append(
        "| **median (min-max)** | | "
        + " | ".join("" for _ in names)
        + " | "
        + " | ".join(f"**{v['median']}x** ({v['min']}-{v['max']})" for v in r["ratio_summary"].values())
        + " |"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="input rows in all (a quarter nodes, the rest edges)")
    p.add_argument(
        "--contenders",
        default=DEFAULT_CONTENDERS,
        help=f"comma-separated, in run order, of: {', '.join(CONTENDERS)} (delta is skipped without delta-spark)",
    )
    p.add_argument("--driver-memory", default="8g", help="spark.driver.memory of every contender's session")
    p.add_argument("--rows-per-file", type=int, default=2_000_000, help="rows per generated Parquet file")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the contenders this many times over the same input, in the given order and "
        "mirrored in turn; the report gives each round's ratios and their median",
    )
    p.add_argument(
        "--work",
        default=None,
        help="where the input and outputs go (default: a fresh directory "
        "under benchmarks/out/); deleted at the end unless --keep-work",
    )
    p.add_argument("--keep-work", action="store_true")
    p.add_argument("--out", default=None, help="results JSON (and a .md beside it)")
    p.add_argument("--log", default=None, help="progress log file (also on stderr)")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one step in this process
    args = p.parse_args(argv)
    setup_logging(log, args.log)
    if args.step:
        logging.getLogger("omnigraph_spark").setLevel(logging.INFO)  # the load's phases, in <step>.stderr
        work = Path(args.work)
        if args.step == "generate":
            spark = session(args.driver_memory, with_delta=False)
            t0 = time.perf_counter()
            res = generate(spark, work, args.rows, args.seed, args.rows_per_file)
            res["write_s"] = round(time.perf_counter() - t0, 1)
            res["memory_hwm"] = tree_hwm(os.getpid())
            spark.stop()
        else:
            res = run_contender(args.step, work, args)
        (work / f"{args.step}.json").write_text(json.dumps(res))
        return 0

    names = parse_contenders(args.contenders)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    compile_package()
    if "delta" in names and not _delta_available():
        log.warning("delta-spark is not importable in %s: the delta contender is skipped", sys.executable)
        names.remove("delta")
    split_rows(args.rows)
    work = Path(args.work) if args.work else ROOT / "benchmarks" / "out" / f"scale-work-{args.rows}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    command = " ".join(["scale_bench"] + list(argv if argv is not None else sys.argv[1:]))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "machine": _machine(),
        "rows": args.rows,
        "driver_memory": args.driver_memory,
        "load_start": _load(),
        "contenders": {},
        "ratios": {},
        "ratio_summary": {},
    }
    try:
        log.info("generating %s rows of Parquet input under %s", f"{args.rows:,}", work)
        gen = _spawn(args, work, "generate")
        results["input"] = {
            k: v
            for k, v in gen.items()
            if k
            in (
                "nodes",
                "edges",
                "append_edges",
                "merge_nodes",
                "nodes_input",
                "edges_input",
                "append_input",
                "merge_input",
            )
        }
        results["generate_s"] = gen["write_s"]
        log.info("input: %s (%s s)", results["input"], gen["write_s"])
        results["rounds"] = []
        for rnd in range(args.rounds):
            order = round_order(names, rnd)
            this: dict[str, Any] = {"order": order, "contenders": {}, "ratios": {}}
            results["rounds"].append(this)
            if rnd == 0:  # the first round's are the run's headline figures
                results["contenders"] = this["contenders"]
            for i, name in enumerate(order):
                _settle()
                log.info("round %d, contender %s: start (load %s)", rnd + 1, name, _load())
                res = _spawn(args, work, name)
                this["contenders"][name] = res
                log.info(
                    "contender %s: %s rows in %s s (%s rows/s), peaks %s",
                    name,
                    f"{res['rows']:,}",
                    res["write_s"],
                    f"{res['rows_per_s']:,}",
                    res["memory_hwm"],
                )
                _drop_outputs(work, name, order[i + 1 :])
                this["ratios"] = ratios(this["contenders"])
                results["ratios"] = results["rounds"][0]["ratios"]
                results["ratio_summary"] = ratio_summary(results["rounds"])
                results["load_end"] = _load()
                if args.out:  # after every contender: a run cut short keeps what it measured
                    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                    Path(args.out).write_text(json.dumps(results, indent=2))
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    results["load_end"] = _load()
    text = markdown(results)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
        Path(args.out).with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
