"""The omnigraph-spark benchmark harness: one command, one SparkSession, ratios side by side.

    .venv/bin/python -m benchmarks.run --rows 1000000 --out benchmarks/out

What it measures (see benchmarks/README.md and docs/benchmarks.md):

* write throughput of ``df.write.format("omnigraph")`` vs Spark's Parquet writer on the same
  cached DataFrame, and vs a single-process pylance ``write_dataset`` of the same Arrow data;
* ``write_graph`` (nodes + edges as one commit) with its phases: staging jobs, load-wide
  validation, commit + publish;
* the validation of an incremental edge append against the size of the table it appends to;
* read throughput (full scan, selective filter) vs Parquet;
* driver commit + publish latency vs number of staged fragments and vs number of tables
  (store API only, no Spark), and vs row count at a fixed number of fragments;
* a profile of one write, phase by phase (JVM -> Python Arrow transfer, RowConverter,
  Lance encoding, validation, commit);
* peak RSS of the driver, the JVM and Spark's Python workers, at two input sizes.

Every contender runs ``--repeats`` times, interleaved, in the same process; the report uses
medians of per-repeat ratios, never absolute wall-clock claims (the machine may be shared).
Outputs: ``results.json``, ``results.md`` and ``results.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from benchmarks.common import descendants, proc_table, read_text

SCHEMA = """
node Item {
    name: String @key
    qty: I64
    price: F64?
    day: Date?
    kind: enum(alpha, beta, gamma, delta)
    tags: [String]?
}

edge Link: Item -> Item @card(0..1000) {
    weight: F64?
}
"""

#: every key results.json must carry (the smoke test checks them)
REQUIRED_METRICS = (
    "machine",
    "config",
    "input",
    "write",
    "write_graph",
    "read",
    "commit_vs_fragments",
    "commit_vs_rows",
    "commit_vs_tables",
    "validation",
    "memory",
    "profile",
    "append",
    "edge_gap",
    "targets",
)


# -- small utilities -------------------------------------------------------------------------


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


@contextmanager
def timer(out: list[float]) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        out.append(time.perf_counter() - t0)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def machine_info() -> dict[str, Any]:
    import lance
    import pyarrow
    import pyspark

    mem_kb = 0
    for line in read_text("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    cpu = ""
    for line in read_text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "spark": pyspark.__version__,
        "lance": lance.__version__,
        "pyarrow": pyarrow.__version__,
        "loadavg_start": list(os.getloadavg()),
    }


def other_load(self_pids: set) -> dict[str, Any]:
    """What else is running: load average and the busiest processes that are not ours."""
    procs = []
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid,pcpu,rss,comm,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()[1:]
    except Exception:
        out = []
    for line in out:
        parts = line.split(None, 4)
        if len(parts) < 5:
            continue
        pid = int(parts[0])
        if pid in self_pids or float(parts[1]) < 5.0 or parts[3] == "ps":
            continue
        procs.append(
            {
                "pid": pid,
                "pcpu": float(parts[1]),
                "rss_mb": int(parts[2]) // 1024,
                "comm": parts[3],
                "args": parts[4][:120],
            }
        )
    return {"loadavg": list(os.getloadavg()), "busy_processes": procs[:8]}


# -- memory sampler --------------------------------------------------------------------------


class MemorySampler:
    """Samples RSS of this process (the driver), the JVM and Spark's Python workers
    (python descendants of the JVM) every ``interval`` seconds; peaks are kept per phase."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.phase: str | None = None
        self.peaks: dict[str, dict[str, float]] = {}
        self.pids_seen: set = {os.getpid()}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def start(self) -> MemorySampler:
        self._t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=5)

    @contextmanager
    def phase_of(self, name: str) -> Iterator[None]:
        self.peaks[name] = {
            "driver_rss_mb": 0.0,
            "driver_arrow_mb": 0.0,
            "jvm_rss_mb": 0.0,
            "worker_max_rss_mb": 0.0,
            "workers_total_rss_mb": 0.0,
            "workers": 0,
        }
        self.phase = name
        self._sample()
        try:
            yield
        finally:
            self._sample()
            self.phase = None

    def _sample(self) -> None:
        name = self.phase
        if name is None:
            return
        table = proc_table()
        me = os.getpid()
        desc = descendants(table, me)
        jvm = sum(table[p][1] for p in desc if table[p][2] == "java")
        workers = [table[p][1] for p in desc if "python" in table[p][2]]
        self.pids_seen.update(desc)
        pk = self.peaks.get(name)
        if pk is None:
            return
        mb = 1 / 2**20
        pk["driver_rss_mb"] = max(pk["driver_rss_mb"], table.get(me, (0, 0, ""))[1] * mb)
        import pyarrow as pa  # Arrow memory the driver holds right now (write_graph: validation)

        pk["driver_arrow_mb"] = max(pk["driver_arrow_mb"], pa.total_allocated_bytes() * mb)
        pk["jvm_rss_mb"] = max(pk["jvm_rss_mb"], jvm * mb)
        pk["worker_max_rss_mb"] = max(pk["worker_max_rss_mb"], max(workers, default=0) * mb)
        pk["workers_total_rss_mb"] = max(pk["workers_total_rss_mb"], sum(workers) * mb)
        pk["workers"] = max(pk["workers"], len(workers))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except Exception:  # a process vanished mid-read: next sample
                pass


# -- Spark and data ------------------------------------------------------------------------------


def make_spark(arrow_batch: int | None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from omnigraph_spark.demo import quiet_warnings
    from omnigraph_spark.spark.runtime import set_local_lance_threads

    master = "local[2]"
    set_local_lance_threads(master)  # as the embedded default session does (demo.local_builder)

    quiet_warnings()
    from pyspark.sql import SparkSession

    from omnigraph_spark.spark.jvm_read import shim_spark_conf

    b = (
        SparkSession.builder.master(master)
        .appName("omnigraph-spark-bench")
        .config(map=shim_spark_conf())  # the JVM read path
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.python.worker.reuse", "true")
    )
    if arrow_batch:
        b = b.config("spark.sql.execution.arrow.maxRecordsPerBatch", str(arrow_batch))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from omnigraph_spark import register

    register(spark)
    return spark


def node_frame(spark, rows: int, seed: int, partitions: int = 2, start: int = 0, index=None):
    """Seeded synthetic Item nodes: string @key, I64, F64, Date, enum, [String] (keys
    ``item-<start>`` .. ``item-<start + rows - 1>``; ``index``: a column of ``id`` that maps
    each row to its node's number instead)."""
    from pyspark.sql import functions as F

    idx = F.col("id") if index is None else index
    return spark.range(start, start + rows, 1, partitions).select(
        F.format_string("item-%010d", idx).alias("name"),
        ((idx * 7919) % 1000).alias("qty"),
        F.rand(seed).alias("price"),
        F.date_add(F.lit("2000-01-01").cast("date"), (idx % 9000).cast("int")).alias("day"),
        F.element_at(
            F.array(*[F.lit(k) for k in ("alpha", "beta", "gamma", "delta")]), (idx % 4 + 1).cast("int")
        ).alias("kind"),
        F.when(idx % 5 == 0, F.lit(None).cast("array<string>"))
        .otherwise(F.array(F.format_string("t%d", idx % 97), F.format_string("u%d", idx % 13)))
        .alias("tags"),
    )


def edge_frame(spark, rows: int, nodes: int, seed: int, partitions: int = 2):
    """Seeded synthetic Link edges (no id: the connector mints ULIDs), endpoints among the nodes,
    at most a few edges per source (well inside @card(0..1000))."""
    from pyspark.sql import functions as F

    idx = F.col("id")
    return spark.range(0, rows, 1, partitions).select(
        F.format_string("item-%010d", idx % nodes).alias("src"),
        F.format_string("item-%010d", (idx * 7919 + 13) % nodes).alias("dst"),
        F.rand(seed + 1).alias("weight"),
    )


def cached(df):
    df = df.cache()
    df.count()
    return df


def arrow_bytes(df) -> int:
    """In-memory Arrow size of a DataFrame (the MB of MB/s, the same for every writer)."""
    return int(df.toArrow().nbytes)


def dir_bytes(path: str) -> int:
    n = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                n += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return n


# -- benchmarks --------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, spark=None) -> None:
        self.args = args
        self.out = os.path.abspath(args.out)
        self.work = os.path.join(self.out, "work")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work, exist_ok=True)
        self.mem = MemorySampler().start()
        self.own_spark = spark is None
        self.spark = make_spark(args.arrow_batch) if spark is None else spark
        from benchmarks.floor import FloorSource

        self.spark.dataSource.register(FloorSource)
        self.results: dict[str, Any] = {}
        self._n = 0

    def fresh(self, name: str) -> str:
        self._n += 1
        p = os.path.join(self.work, f"{self._n:03d}-{name}")
        shutil.rmtree(p, ignore_errors=True)
        return p

    def new_graph(self, schema: str = SCHEMA):
        from omnigraph_spark import Graph

        return Graph.init(self.fresh("graph"), schema)

    # -- write ---------------------------------------------------------------------------------

    def omnigraph_write(self, nodes, edges) -> dict[str, float]:
        """df.write.format('omnigraph') of nodes then edges into a fresh graph."""
        g = self.new_graph()
        t: list[float] = []
        with timer(t):
            nodes.write.format("omnigraph").option("type", "Item").mode("append").save(g.root)
        with timer(t):
            edges.write.format("omnigraph").option("type", "Link").mode("append").save(g.root)
        self._last_graph = g.root
        return {"nodes": t[0], "edges": t[1], "total": t[0] + t[1]}

    def omnigraph_jvm_write(self, nodes, edges) -> dict[str, float]:
        """write_table(engine="jvm") of nodes then edges: the same two graph commits as
        omnigraph_write, staged by the JVM sink (jvm-shim) instead of Python workers."""
        from omnigraph_spark import write_table

        g = self.new_graph()
        t: list[float] = []
        with timer(t):
            write_table(nodes, g.root, "Item", engine="jvm")
        with timer(t):
            write_table(edges, g.root, "Link", engine="jvm")
        return {"nodes": t[0], "edges": t[1], "total": t[0] + t[1]}

    def omnigraph_jvm_graph_write(self, nodes, edges) -> dict[str, float]:
        """write_graph(engine="jvm") of nodes + edges: ONE graph commit of both types (how a graph
        load is meant to be written), staged by the JVM sink."""
        from omnigraph_spark import write_graph

        g = self.new_graph()
        t: list[float] = []
        with timer(t):
            write_graph(g.root, {"Item": nodes, "Link": edges}, engine="jvm")
        return {"total": t[0]}  # one job per type, one commit: no per-type split

    def parquet_write(self, nodes, edges) -> dict[str, float]:
        base = self.fresh("parquet")
        t: list[float] = []
        with timer(t):
            nodes.write.mode("overwrite").parquet(base + "/nodes")
        with timer(t):
            edges.write.mode("overwrite").parquet(base + "/edges")
        self._last_parquet = base
        return {"nodes": t[0], "edges": t[1], "total": t[0] + t[1]}

    def floor_write(self, nodes, edges) -> dict[str, float]:
        """The same DataFrames through a Python DataSource writer that only counts rows
        (benchmarks/floor.py): the API's own cost, paid before any connector code runs."""
        from benchmarks.floor import NAME

        t: list[float] = []
        for df in (nodes, edges):
            with timer(t):
                df.write.format(NAME).mode("append").save()
        return {"nodes": t[0], "edges": t[1], "total": t[0] + t[1]}

    @staticmethod
    def lance_baseline(tbl, uri: str) -> None:
        """Single-process pylance write_dataset as the graph's tables are written: their storage
        version and rows per file (the store's constants)."""
        import lance

        from omnigraph_spark.store import tables as T

        lance.write_dataset(
            tbl, uri, data_storage_version=T.DATA_STORAGE_VERSION, max_rows_per_file=T.DEFAULT_MAX_ROWS_PER_FILE
        )

    def lance_write(self, node_tbl, edge_tbl) -> dict[str, float]:
        """Single-process pylance write_dataset of the same Arrow data (no conversion, no
        validation, no ids): the near-limit of what Lance encoding costs."""
        base = self.fresh("lance")
        t: list[float] = []
        for name, tbl in (("nodes", node_tbl), ("edges", edge_tbl)):
            with timer(t):
                self.lance_baseline(tbl, f"{base}/{name}.lance")
        shutil.rmtree(base, ignore_errors=True)
        return {"nodes": t[0], "edges": t[1], "total": t[0] + t[1]}

    def bench_write(self, nodes, edges, node_tbl, edge_tbl, in_bytes: dict[str, int]) -> None:
        a = self.args
        from omnigraph_spark.spark.jvm_read import shim_loaded

        runs: dict[str, list[dict[str, float]]] = {
            "omnigraph": [],
            "omnigraph_jvm": [],
            "omnigraph_jvm_graph": [],
            "parquet": [],
            "python_source_floor": [],
            "lance_single_process": [],
        }
        has_jvm = shim_loaded(self.spark)
        if not has_jvm:
            log("write: jvm-shim not on the class path (make jvm-shim): no JVM write path measured")
        writers: dict[str, Callable[[], dict[str, float]]] = {"omnigraph": lambda: self.omnigraph_write(nodes, edges)}
        if has_jvm:
            writers["omnigraph_jvm"] = lambda: self.omnigraph_jvm_write(nodes, edges)
            writers["omnigraph_jvm_graph"] = lambda: self.omnigraph_jvm_graph_write(nodes, edges)
        writers["parquet"] = lambda: self.parquet_write(nodes, edges)
        writers["python_source_floor"] = lambda: self.floor_write(nodes, edges)
        if not a.no_lance_baseline:
            writers["lance_single_process"] = lambda: self.lance_write(node_tbl, edge_tbl)
        if not a.no_warm_up:
            # one untimed round at full size: the JIT compiles every writer's hot code (a cold
            # first write is several times slower than a warm one), so repeats compare warm writers
            t0 = time.perf_counter()
            for who, write in writers.items():
                if who != "lance_single_process":  # no JVM code to warm
                    write()
            log(f"write warm-up round (untimed): {time.perf_counter() - t0:.1f}s")
        with_memory = {"omnigraph", "omnigraph_jvm"}  # memory peaks recorded per repeat (results "memory" phases)
        for r in range(a.repeats):
            order = list(writers)
            if r % 2:
                order.reverse()  # alternate the order so drift in machine load hits both sides
            for who in order:
                if who in with_memory:
                    with self.mem.phase_of(f"write_{who}_r{r}"):
                        runs[who].append(writers[who]())
                else:
                    runs[who].append(writers[who]())
            log(f"write repeat {r}: " + ", ".join(f"{k} {v[-1]['total']:.2f}s" for k, v in runs.items() if v))
        rows = a.rows + a.edge_rows
        nbytes = in_bytes["nodes"] + in_bytes["edges"]
        res: dict[str, Any] = {"rows": rows, "input_arrow_bytes": nbytes, "repeats": a.repeats, "contenders": {}}
        for who, rs in runs.items():
            if not rs:
                continue
            tot = [x["total"] for x in rs]
            res["contenders"][who] = {
                "seconds_median": median(tot),
                "seconds_all": tot,
                "nodes_seconds_median": median([x["nodes"] for x in rs]) if "nodes" in rs[0] else None,
                "edges_seconds_median": median([x["edges"] for x in rs]) if "edges" in rs[0] else None,
                "rows_per_s": rows / median(tot),
                "mb_per_s": nbytes / 2**20 / median(tot),
            }
        og = [x["total"] for x in runs["omnigraph"]]
        pq = [x["total"] for x in runs["parquet"]]
        res["ratio_omnigraph_vs_parquet_throughput"] = median([p / o for p, o in zip(pq, og)])
        res["ratio_nodes_vs_parquet_throughput"] = median(
            [p["nodes"] / o["nodes"] for p, o in zip(runs["parquet"], runs["omnigraph"])]
        )
        res["ratio_edges_vs_parquet_throughput"] = median(
            [p["edges"] / o["edges"] for p, o in zip(runs["parquet"], runs["omnigraph"])]
        )
        fl = [x["total"] for x in runs["python_source_floor"]]
        res["ratio_omnigraph_vs_python_floor_throughput"] = median([f / o for f, o in zip(fl, og)])
        res["ratio_python_floor_vs_parquet_throughput"] = median([p / f for p, f in zip(pq, fl)])
        if runs["lance_single_process"]:
            ln = [x["total"] for x in runs["lance_single_process"]]
            res["ratio_omnigraph_vs_lance_single_process_throughput"] = median([x / o for x, o in zip(ln, og)])
        res["jvm_path"] = has_jvm
        if runs["omnigraph_jvm"]:
            jv = runs["omnigraph_jvm"]
            res["ratio_omnigraph_jvm_vs_parquet_throughput"] = median([p / j["total"] for p, j in zip(pq, jv)])
            res["ratio_jvm_nodes_vs_parquet_throughput"] = median(
                [p["nodes"] / j["nodes"] for p, j in zip(runs["parquet"], jv)]
            )
            res["ratio_jvm_edges_vs_parquet_throughput"] = median(
                [p["edges"] / j["edges"] for p, j in zip(runs["parquet"], jv)]
            )
            res["ratio_omnigraph_jvm_vs_python_path_throughput"] = median([o / j["total"] for o, j in zip(og, jv)])
            jg = runs["omnigraph_jvm_graph"]
            res["ratio_omnigraph_jvm_graph_vs_parquet_throughput"] = median([p / j["total"] for p, j in zip(pq, jg)])
            if runs["lance_single_process"]:
                res["ratio_omnigraph_jvm_vs_lance_single_process_throughput"] = median(
                    [x / j["total"] for x, j in zip(ln, jv)]
                )
        res["on_disk_bytes"] = {"omnigraph": dir_bytes(self._last_graph), "parquet": dir_bytes(self._last_parquet)}
        self.results["write"] = res

    # -- write_graph with phases ----------------------------------------------------------------

    @contextmanager
    def timed_phases(self) -> Iterator[dict[str, float]]:
        """Time load-wide validation and commit_load in place (both run in this driver process),
        and count the Arrow bytes validation reads from Lance tables (a peak-RSS reading cannot
        show it: the driver reuses memory it freed earlier, and Lance allocates outside pyarrow's pool)."""
        import lance

        from omnigraph_spark.spark import writer as W

        phase: dict[str, float] = {"validate": 0.0, "commit_load": 0.0, "validate_read_mb": 0.0}
        orig_mv, orig_cl, orig_tt = W.make_validator, W.commit_load, lance.LanceDataset.to_table
        validating = threading.Event()

        def to_table(ds, *a, **kw):
            t = orig_tt(ds, *a, **kw)
            if validating.is_set():
                phase["validate_read_mb"] += t.nbytes / 2**20
            return t

        def make_validator(graph, *args, **kwargs):  # whatever else the writer passes (cascade) goes through
            v = orig_mv(graph, *args, **kwargs)

            def timed(snap, staged, *args, **kwargs):
                validating.set()
                t0 = time.perf_counter()
                try:
                    return v(snap, staged, *args, **kwargs)
                finally:
                    phase["validate"] += time.perf_counter() - t0
                    validating.clear()

            return timed

        def commit_load(*a, **kw):
            t0 = time.perf_counter()
            try:
                return orig_cl(*a, **kw)
            finally:
                phase["commit_load"] += time.perf_counter() - t0

        W.make_validator, W.commit_load, lance.LanceDataset.to_table = make_validator, commit_load, to_table
        try:
            yield phase
        finally:
            W.make_validator, W.commit_load, lance.LanceDataset.to_table = orig_mv, orig_cl, orig_tt

    def bench_write_graph(self, nodes, edges) -> None:
        """write_graph of nodes + edges as ONE commit, timing validation and commit in-process
        (write_graph runs them in this driver process)."""
        from omnigraph_spark import write_graph

        runs = []
        for r in range(self.args.repeats):
            g = self.new_graph()
            with self.timed_phases() as phase:
                t0 = time.perf_counter()
                res = write_graph(g.root, {"Item": nodes, "Link": edges})
                total = time.perf_counter() - t0
            commit_only = phase["commit_load"] - phase["validate"]
            runs.append(
                {
                    "total": total,
                    "staging": total - phase["commit_load"],
                    "validate": phase["validate"],
                    "commit_publish": commit_only,
                    "fragments": sum(t.fragments for t in res.tables),
                }
            )
            log(
                f"write_graph repeat {r}: total {total:.2f}s, validate {phase['validate']:.2f}s, "
                f"commit {commit_only:.2f}s"
            )
        out = {k: median([x[k] for x in runs]) for k in runs[0]}
        from omnigraph_spark.spark.jvm_read import shim_loaded

        out["staging_engine"] = "jvm" if shim_loaded(self.spark) else "python"  # engine="auto"
        out["validate_share_of_write"] = median([x["validate"] / x["total"] for x in runs])
        out["validate_vs_staging"] = median([x["validate"] / x["staging"] for x in runs])
        out["runs"] = runs
        self.results["write_graph"] = out

    def bench_append(self, nodes) -> None:
        """Validation of an incremental edge append (edge_rows/10 edges) onto an edge table that
        grows by edge_rows per step: with the @card bound the previous commit recorded (I16), and
        counted as on a version without one (the engine's, a compaction: the driver reads every
        committed src). The two alternate on the same graph; write_table(engine="auto")."""
        from omnigraph_spark import write_table
        from omnigraph_spark.store import tables as T

        a = self.args
        small_rows = max(1000, a.edge_rows // 10)
        small = cached(edge_frame(self.spark, small_rows, a.rows, a.seed + 7, a.partitions))
        base = cached(edge_frame(self.spark, a.edge_rows, a.rows, a.seed + 3, a.partitions))
        g = self.new_graph()
        write_table(nodes, g.root, "Item")
        steps = []
        existing = 0
        orig_prop = T.transaction_property
        for _ in range(a.append_steps):
            write_table(base, g.root, "Link")
            existing += a.edge_rows
            runs: dict[str, list[dict[str, float]]] = {"recorded": [], "counted": []}
            for r in range(a.repeats):
                for how in ("recorded", "counted") if r % 2 == 0 else ("counted", "recorded"):
                    if how == "counted":  # the pinned version offers no bound
                        T.transaction_property = lambda *_a, **_k: None
                    try:
                        with self.timed_phases() as phase:
                            t0 = time.perf_counter()
                            write_table(small, g.root, "Link")
                            total = time.perf_counter() - t0
                    finally:
                        T.transaction_property = orig_prop
                    runs[how].append(
                        {
                            "existing_edges": existing,
                            "total": total,
                            "validate": phase["validate"],
                            "validate_read_mb": phase["validate_read_mb"],
                        }
                    )
                    existing += small_rows
            row: dict[str, Any] = {
                "existing_edges_before": runs["recorded"][0]["existing_edges"],
                "append_rows": small_rows,
            }
            for how, rs in runs.items():
                row[how] = {
                    "validate_seconds": median([x["validate"] for x in rs]),
                    "write_seconds": median([x["total"] for x in rs]),
                    "validate_share_of_write": median([x["validate"] / x["total"] for x in rs]),
                    "validate_read_mb": median([x["validate_read_mb"] for x in rs]),
                    "runs": rs,
                }
            steps.append(row)
            log(
                f"append {small_rows} edges onto ~{row['existing_edges_before']:,}: validate "
                f"{row['recorded']['validate_seconds']:.3f}s with the recorded bound, "
                f"{row['counted']['validate_seconds']:.3f}s counted "
                f"(read {row['recorded']['validate_read_mb']:.0f} vs "
                f"{row['counted']['validate_read_mb']:.0f} MB)"
            )
        small.unpersist(), base.unpersist()
        self.results["append"] = {
            "steps": steps,
            "note": "write_table of edge_rows/10 Link edges (@card(0..1000)) "
            "onto a Link table grown by edge_rows per step; 'counted': the bound lookup "
            "returns nothing, as on a version the engine wrote",
        }

    def bench_strict_append(self) -> dict[str, Any]:
        """The cost of append being a strict insert (I17): write_table (engine "auto": the JVM
        sink) of N fresh keyed Item nodes onto a graph holding N committed ones, both read from
        Parquet files, with the check as shipped (the staging tasks probe the staged ids against
        an id index of the committed table built in the executor; the driver trusts a clean
        probe of the version it commits on) and without it (probe and driver anti-join switched
        off: the load without the strict-append check). Each run appends onto a fresh copy of one committed
        graph (a copy has other paths, so every "with" run builds its index: the cost of a
        first append; later appends onto the same rows reuse it). Alternated; ratio = with /
        without (> 1: the check costs)."""
        from omnigraph_spark import write_table
        from omnigraph_spark.spark import jvm_write, writer

        a = self.args
        out: dict[str, Any] = {}
        for n in a.strict_append_rows:
            base_pq, new_pq = (os.path.join(self.work, f"strict-{n}-{w}.parquet") for w in ("base", "new"))
            node_frame(self.spark, n, a.seed, a.partitions).write.mode("overwrite").parquet(base_pq)
            node_frame(self.spark, n, a.seed + 1, a.partitions, start=n).write.mode("overwrite").parquet(new_pq)
            template = self.new_graph()
            write_table(self.spark.read.parquet(base_pq), template.root, "Item")
            runs: dict[str, list[float]] = {"with": [], "without": []}
            saved = (jvm_write.fresh_source, writer._fresh_of)
            for r in range(a.repeats):
                for how in ("with", "without") if r % 2 == 0 else ("without", "with"):
                    root = self.fresh("strict")
                    shutil.copytree(template.root, root)
                    if how == "without":
                        jvm_write.fresh_source = lambda *_a, **_k: None
                        writer._fresh_of = lambda *_a, **_k: None
                    try:
                        t0 = time.perf_counter()
                        write_table(self.spark.read.parquet(new_pq), root, "Item")
                        runs[how].append(time.perf_counter() - t0)
                    finally:
                        jvm_write.fresh_source, writer._fresh_of = saved
                    shutil.rmtree(root, ignore_errors=True)
            w, wo = median(runs["with"]), median(runs["without"])
            out[str(n)] = {
                "committed_rows": n,
                "append_rows": n,
                "with_seconds": w,
                "without_seconds": wo,
                "ratio": w / wo,
                "runs": runs,
            }
            log(f"strict append of {n:,} onto {n:,}: {w:.2f}s with the check, {wo:.2f}s without (ratio {w / wo:.3f})")
        self.results["strict_append"] = out
        return out

    def bench_edge_gap(self, nodes, edges, edge_tbl) -> None:
        """An edge-only load taken apart, side by side: Spark iterating the edge DataFrame into
        the noop sink (what every writer pays), Spark's Parquet write, ``write_table`` of the
        edges onto committed nodes, and the encoders alone on Arrow data (single process, no
        Spark): Lance on the edge table the format stores (a ULID ``id`` per edge, read back
        from an omnigraph load) and on the DataFrame's own columns, pyarrow's Parquet on the
        DataFrame's. Why: the format makes an edge load encode an id column Parquet never
        writes; this shows what that costs before any connector code."""
        import pyarrow.parquet as papq

        from omnigraph_spark import Graph, write_table
        from omnigraph_spark.store.tables import open_dataset

        a = self.args
        base = self.new_graph()
        write_table(nodes, base.root, "Item")

        def onto_nodes() -> str:
            p = self.fresh("graph-edges")
            shutil.copytree(base.root, p)
            return p

        first = onto_nodes()
        write_table(edges, first, "Link")
        t = Graph.open(first).snapshot("main").table("edge:Link")
        stored = open_dataset(t.base_path, branch=t.lance_branch, version=t.version).to_table()
        shutil.rmtree(first, ignore_errors=True)

        def spark_job(run: Callable[[], None]) -> dict[str, float]:
            t: list[float] = []
            with timer(t):
                run()
            return {"wall": t[0]}

        def encode(write: Callable[[str], None]) -> dict[str, float]:
            p = self.fresh("encode")
            c0, t0 = time.process_time(), time.perf_counter()
            write(p)
            out = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
            shutil.rmtree(p, ignore_errors=True)
            return out

        def omnigraph() -> dict[str, float]:
            p = onto_nodes()
            out = spark_job(lambda: write_table(edges, p, "Link"))
            shutil.rmtree(p, ignore_errors=True)
            return out

        cases: dict[str, Callable[[], dict[str, float]]] = {
            "spark_noop": lambda: spark_job(lambda: edges.write.format("noop").mode("overwrite").save()),
            "spark_parquet": lambda: spark_job(lambda: edges.write.mode("overwrite").parquet(self.fresh("pq"))),
            "omnigraph_write_table": omnigraph,
            "lance_encode_format_table": lambda: encode(lambda p: self.lance_baseline(stored, p)),
            "lance_encode_dataframe": lambda: encode(lambda p: self.lance_baseline(edge_tbl, p)),
            "parquet_encode_dataframe": lambda: encode(lambda p: papq.write_table(edge_tbl, p)),
        }
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in cases}
        for r in range(a.repeats):
            for k in list(cases) if r % 2 == 0 else list(reversed(cases)):
                runs[k].append(cases[k]())
        res: dict[str, Any] = {
            "edge_rows": a.edge_rows,
            "format_columns": stored.column_names,
            "dataframe_columns": edge_tbl.column_names,
            "repeats": a.repeats,
        }
        for k, rs in runs.items():
            res[k] = {"wall_seconds": median([x["wall"] for x in rs]), "runs": rs}
            if "cpu" in rs[0]:
                res[k]["cpu_seconds"] = median([x["cpu"] for x in rs])

        def ratio(num: str, den: str, field: str = "wall") -> float:
            return median([x[field] / y[field] for x, y in zip(runs[num], runs[den])])

        res["ratio_omnigraph_vs_parquet_throughput"] = ratio("spark_parquet", "omnigraph_write_table")
        res["ratio_lance_format_vs_dataframe_cpu"] = ratio("lance_encode_format_table", "lance_encode_dataframe", "cpu")
        res["ratio_parquet_vs_lance_format_encode_cpu"] = ratio(
            "parquet_encode_dataframe", "lance_encode_format_table", "cpu"
        )
        cores = min(a.partitions, os.cpu_count() or 1)
        # the best any writer could do that pays Spark's iteration and Lance's encoding of the
        # format's table, perfectly parallel, and nothing else (no row -> Arrow copy, no ids, no checks)
        res["ceiling_vs_parquet_throughput"] = median(
            [
                pq["wall"] / (noop["wall"] + enc["cpu"] / cores)
                for pq, noop, enc in zip(runs["spark_parquet"], runs["spark_noop"], runs["lance_encode_format_table"])
            ]
        )
        res["cores_assumed"] = cores
        log(
            f"edge gap: omnigraph {res['ratio_omnigraph_vs_parquet_throughput']:.2f}x Parquet; Lance encodes the "
            f"format's table in {res['ratio_lance_format_vs_dataframe_cpu']:.2f}x the CPU of the DataFrame's columns; "
            f"ceiling {res['ceiling_vs_parquet_throughput']:.2f}x"
        )
        self.results["edge_gap"] = res

    # -- read -----------------------------------------------------------------------------------

    def bench_read(self) -> None:
        from pyspark.sql import functions as F

        a = self.args
        root, pq = self._last_graph, self._last_parquet + "/nodes"
        sel = F.col("qty") < 10  # 1% of rows

        def scan(df, filtered: bool) -> float:
            """Seconds to read every column of ``df`` (filtered to 1 % or not) into a noop sink."""
            if filtered:
                df = df.filter(sel)
            t: list[float] = []
            with timer(t):
                df.write.format("noop").mode("overwrite").save()
            return t[0]

        def og(filtered: bool) -> float:
            r = self.spark.read.format("omnigraph").option("type", "Item")
            return scan((r.option("pushdown", "true") if filtered else r).load(root), filtered)

        def parquet(filtered: bool) -> float:
            return scan(self.spark.read.parquet(pq), filtered)

        from benchmarks.floor import NAME
        from omnigraph_spark import Graph

        g = Graph.open(root)
        table_uri = g.snapshot().table("node:Item").base_path
        item_schema = self.spark.read.format("omnigraph").option("type", "Item").load(root).schema

        def floor(filtered: bool) -> float:
            """A bare pylance Python source over the same fragments (benchmarks/floor.py)."""
            return scan(self.spark.read.format(NAME).schema(item_schema).load(table_uri), filtered)

        from omnigraph_spark.spark.jvm_read import read_table, shim_loaded

        def jvm(filtered: bool) -> float:
            """The JVM read path (jvm-shim): read_table plans in Python, the scan runs in the JVM."""
            return scan(read_table(self.spark, root, "Item", engine="jvm"), filtered)

        has_jvm = shim_loaded(self.spark)
        if not has_jvm:
            log("read: jvm-shim not on the class path (make jvm-shim): no JVM read path measured")
        for _ in range(2):  # warm the OS cache, the Python workers and the JIT for all
            og(False), parquet(False), floor(False)
            if has_jvm:
                jvm(False)
        res: dict[str, Any] = {"rows": a.rows, "jvm_path": has_jvm}
        for kind, filtered in (("full_scan", False), ("selective_filter", True)):
            o, p, f, j = [], [], [], []
            for r in range(a.read_repeats):
                order = [(o, og), (p, parquet), (f, floor)] + ([(j, jvm)] if has_jvm else [])
                for acc, fn in reversed(order) if r % 2 else order:
                    acc.append(fn(filtered))
            res[kind] = {
                "omnigraph_seconds_median": median(o),
                "parquet_seconds_median": median(p),
                "python_floor_seconds_median": median(f),
                "omnigraph_rows_per_s": a.rows / median(o),
                "parquet_rows_per_s": a.rows / median(p),
                "ratio_omnigraph_vs_parquet_throughput": median([pp / oo for pp, oo in zip(p, o)]),
                "ratio_omnigraph_vs_python_floor_throughput": median([ff / oo for ff, oo in zip(f, o)]),
                "ratio_python_floor_vs_parquet_throughput": median([pp / ff for pp, ff in zip(p, f)]),
                "omnigraph_all": o,
                "parquet_all": p,
                "python_floor_all": f,
            }
            if j:
                res[kind].update(
                    {
                        "omnigraph_jvm_seconds_median": median(j),
                        "omnigraph_jvm_rows_per_s": a.rows / median(j),
                        "ratio_omnigraph_jvm_vs_parquet_throughput": median([pp / jj for pp, jj in zip(p, j)]),
                        "ratio_omnigraph_jvm_vs_python_source_throughput": median([oo / jj for oo, jj in zip(o, j)]),
                        "omnigraph_jvm_all": j,
                    }
                )
            log(
                f"read {kind}: omnigraph {median(o):.2f}s parquet {median(p):.2f}s python floor {median(f):.2f}s"
                + (f" omnigraph JVM path {median(j):.2f}s" if j else "")
            )
        self.results["read"] = res

    # -- commit latency (store API, no Spark) ----------------------------------------------------

    def _stage_fragments(self, g, n_frags: int, rows_per_frag: int):
        import numpy as np
        import pyarrow as pa

        from omnigraph_spark.store import writes

        target = writes.prepare_target(g, "main", "node:Item", "append", max_rows_per_file=rows_per_frag)
        n = n_frags * rows_per_frag
        chunk = max(rows_per_frag, 65536 // rows_per_frag * rows_per_frag)

        def batches():
            for s in range(0, n, chunk):
                k = min(chunk, n - s)
                names = pa.array(np.char.add("item-", np.arange(s, s + k).astype(str)))
                cols = {
                    "id": names,
                    "name": names,
                    "qty": pa.array(np.arange(k), pa.int64()),
                    "price": pa.nulls(k, pa.float64()),
                    "day": pa.nulls(k, pa.date32()),
                    "kind": pa.array(["alpha"] * k),
                    "tags": pa.nulls(k, target.schema.field("tags").type),
                }
                yield pa.RecordBatch.from_arrays([cols[f.name] for f in target.schema], schema=target.schema)

        return writes.stage(target, batches())

    def _commit_timed(self, template_root: str, staged, validated: bool) -> float:
        """Copy the staged graph, point the StagedTable at the copy, time commit_load."""
        import dataclasses

        from omnigraph_spark import Graph
        from omnigraph_spark.spark.validate import make_validator
        from omnigraph_spark.store import writes

        dst = self.fresh("commit")
        shutil.copytree(template_root, dst)
        g = Graph.open(dst)
        st = [dataclasses.replace(s, stage_uri=s.stage_uri.replace(template_root, dst, 1)) for s in staged]
        t0 = time.perf_counter()
        writes.commit_load(g, "main", st, validate=make_validator(g) if validated else None)
        dt_ = time.perf_counter() - t0
        shutil.rmtree(dst, ignore_errors=True)
        return dt_

    def bench_commit(self) -> None:
        a = self.args
        rows_out = []
        for n in a.fragments:
            g = self.new_graph()
            t0 = time.perf_counter()
            st = self._stage_fragments(g, n, a.rows_per_fragment)
            stage_s = time.perf_counter() - t0
            plain = [self._commit_timed(g.root, [st], False) for _ in range(a.repeats)]
            val = [self._commit_timed(g.root, [st], True) for _ in range(max(1, a.repeats - 1))]
            rows_out.append(
                {
                    "fragments": n,
                    "rows": n * a.rows_per_fragment,
                    "stage_seconds": stage_s,
                    "commit_publish_seconds_median": median(plain),
                    "commit_publish_all": plain,
                    "commit_with_validation_seconds_median": median(val),
                }
            )
            log(f"commit {n} fragments: {median(plain):.3f}s (with validation {median(val):.3f}s)")
            shutil.rmtree(g.root, ignore_errors=True)
        self.results["commit_vs_fragments"] = rows_out

        # the row counts alternate within each repeat: tens of milliseconds move with whatever the
        # machine did just before, so running each size's repeats in a block would bias the ratio
        graphs = {}
        for rpf in a.commit_rows_per_fragment:
            g = self.new_graph()
            graphs[rpf] = (g, self._stage_fragments(g, a.commit_rows_fragments, rpf))
        times: dict[int, list[float]] = {rpf: [] for rpf in graphs}
        for r in range(a.repeats):
            for rpf in list(graphs) if r % 2 == 0 else list(reversed(graphs)):
                g, st = graphs[rpf]
                times[rpf].append(self._commit_timed(g.root, [st], False))
        by_rows = []
        for rpf, (g, _) in graphs.items():
            plain = times[rpf]
            by_rows.append(
                {
                    "fragments": a.commit_rows_fragments,
                    "rows": a.commit_rows_fragments * rpf,
                    "commit_publish_seconds_median": median(plain),
                    "commit_publish_all": plain,
                }
            )
            log(f"commit {a.commit_rows_fragments} fragments x {rpf} rows: {median(plain):.3f}s")
            shutil.rmtree(g.root, ignore_errors=True)
        self.results["commit_vs_rows"] = by_rows

        by_tables = []
        for nt in a.tables:
            schema = "\n".join(f"node T{i} {{ name: String @key\n qty: I64? }}" for i in range(nt))
            g = self.new_graph(schema)
            import pyarrow as pa

            from omnigraph_spark.store import writes

            staged = []
            for i in range(nt):
                tg = writes.prepare_target(g, "main", f"node:T{i}", "append")
                names = pa.array([f"k{j}" for j in range(10)])
                cols = {"id": names, "name": names, "qty": pa.nulls(10, pa.int64())}
                staged.append(
                    writes.stage(tg, [pa.RecordBatch.from_arrays([cols[f.name] for f in tg.schema], schema=tg.schema)])
                )
            plain = [self._commit_timed(g.root, staged, False) for _ in range(a.repeats)]
            by_tables.append(
                {"tables": nt, "commit_publish_seconds_median": median(plain), "commit_publish_all": plain}
            )
            log(f"commit {nt} tables: {median(plain):.3f}s")
            shutil.rmtree(g.root, ignore_errors=True)
        self.results["commit_vs_tables"] = by_tables

    # -- profile: where the time of a write goes ---------------------------------------------------

    def bench_profile(self, nodes, edges, node_tbl, edge_tbl) -> None:
        """Phase by phase, same batches: Spark -> Python Arrow transfer (a mapInArrow that only
        counts, minus a Spark-only noop write), RowConverter, Lance encoding, validation, commit
        (the last four single-process on this driver)."""
        import pyarrow as pa

        from omnigraph_spark.ingest import RowConverter
        from omnigraph_spark.spark.validate import make_validator
        from omnigraph_spark.store import writes

        a = self.args
        batch = int(self.spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000"))
        prof: dict[str, Any] = {"arrow_batch_rows": batch}

        def count_batches(it):
            n = 0
            for b in it:
                n += b.num_rows
            yield pa.record_batch([pa.array([n], pa.int64())], names=["n"])

        hop: dict[str, list[float]] = {"spark_noop": [], "spark_to_python_count": []}
        for _ in range(a.repeats):
            t: list[float] = []
            with timer(t):
                nodes.write.format("noop").mode("overwrite").save()
                edges.write.format("noop").mode("overwrite").save()
            hop["spark_noop"].append(t[0])
            t = []
            with timer(t):
                nodes.mapInArrow(count_batches, "n long").collect()
                edges.mapInArrow(count_batches, "n long").collect()
            hop["spark_to_python_count"].append(t[0])
        prof["spark_noop_seconds"] = median(hop["spark_noop"])
        prof["spark_to_python_seconds"] = median(hop["spark_to_python_count"])
        prof["jvm_to_python_hop_seconds"] = max(0.0, prof["spark_to_python_seconds"] - prof["spark_noop_seconds"])

        phases: dict[str, list[float]] = {"convert": [], "lance_encode": [], "validate": [], "commit_publish": []}
        cprof_text = ""
        for r in range(a.repeats):
            g = self.new_graph()
            staged = []
            conv_t = enc_t = 0.0
            for key, tbl in (("node:Item", node_tbl), ("edge:Link", edge_tbl)):
                target = writes.prepare_target(g, "main", key, "append")
                td = g.catalog.by_table_key(key)
                conv = RowConverter(td, target.schema)
                pr = cProfile.Profile() if (a.profile and r == 0) else None
                t0 = time.perf_counter()
                if pr:
                    pr.enable()
                out = [conv.convert(b, row_offset=0, where="bench") for b in tbl.to_batches(max_chunksize=batch)]
                if pr:
                    pr.disable()
                    s = io.StringIO()
                    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(15)
                    cprof_text += f"== RowConverter.convert, {key} ==\n{s.getvalue()}\n"
                conv_t += time.perf_counter() - t0
                t0 = time.perf_counter()
                staged.append(writes.stage(target, out))
                enc_t += time.perf_counter() - t0
            phases["convert"].append(conv_t)
            phases["lance_encode"].append(enc_t)
            snap = g.snapshot("main")
            by_key = {s.table_key: s for s in staged}
            t0 = time.perf_counter()
            make_validator(g)(snap, by_key)
            phases["validate"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            writes.commit_load(g, "main", staged)
            phases["commit_publish"].append(time.perf_counter() - t0)
            shutil.rmtree(g.root, ignore_errors=True)
        for k, v in phases.items():
            prof[f"{k}_seconds"] = median(v)
        parts = {
            "jvm_to_python_hop (2 tasks, wall)": prof["jvm_to_python_hop_seconds"],
            "row_converter (1 process)": prof["convert_seconds"],
            "lance_encode (1 process)": prof["lance_encode_seconds"],
            "driver_validation": prof["validate_seconds"],
            "commit_publish": prof["commit_publish_seconds"],
        }
        tot = sum(parts.values())
        prof["breakdown_share"] = {k: v / tot for k, v in parts.items()}
        prof["breakdown_seconds"] = parts
        if cprof_text:
            prof["cprofile_top"] = cprof_text
            with open(os.path.join(self.out, "profile.txt"), "w") as f:
                f.write(cprof_text)
        self.results["profile"] = prof
        self.results["validation"] = {
            "validate_seconds_single_process": prof["validate_seconds"],
            "stage_seconds_single_process": prof["convert_seconds"] + prof["lance_encode_seconds"],
            "ratio_validate_vs_single_process_stage": prof["validate_seconds"]
            / (prof["convert_seconds"] + prof["lance_encode_seconds"]),
            "ratio_validate_vs_spark_write_graph": self.results.get("write_graph", {}).get("validate_share_of_write"),
        }
        log("profile: " + ", ".join(f"{k} {v:.2f}s" for k, v in parts.items()))

    # -- memory flat in input size ----------------------------------------------------------------

    def bench_memory(self) -> None:
        """Peak memory of write_graph (nodes + edges, one commit) at two input sizes.

        write_graph stages in Spark's Python workers and validates in this driver process, so
        the two are told apart: the largest worker's RSS is the per-task staging memory (should
        be flat: batches stream into Lance, whose writer holds at most one file's state), and
        the driver's Arrow allocation is the load-wide validation (key, id and endpoint columns
        of the whole load plus hash tables: linear in rows by nature, reported per row)."""
        from omnigraph_spark import write_graph
        from omnigraph_spark.spark.jvm_read import shim_loaded

        a = self.args
        sizes = a.memory_sizes
        out = []
        for n in sizes:  # small first: reused workers keep what a larger run allocated
            nodes = cached(node_frame(self.spark, n, a.seed))
            edges = cached(edge_frame(self.spark, n, n, a.seed))
            name = f"memory_{n}"
            g = self.new_graph()
            t: list[float] = []
            with self.mem.phase_of(name), timer(t):
                write_graph(g.root, {"Item": nodes, "Link": edges}, engine="python")
            pk = dict(self.mem.peaks[name])
            pk.update(
                {
                    "rows_per_type": n,
                    "write_seconds": t[0],
                    "validation_arrow_bytes_per_row": pk["driver_arrow_mb"] * 2**20 / (2 * n),
                }
            )
            if shim_loaded(self.spark):  # the JVM path stages in the JVM: its RSS is the staging memory
                g = self.new_graph()
                with self.mem.phase_of(name + "_jvm"):
                    write_graph(g.root, {"Item": nodes, "Link": edges}, engine="jvm")
                pk["jvm_path_jvm_rss_mb"] = self.mem.peaks[name + "_jvm"]["jvm_rss_mb"]
            out.append(pk)
            nodes.unpersist(), edges.unpersist()
            log(
                f"memory at {n} rows/type: staging worker max {pk['worker_max_rss_mb']:.0f} MB, driver "
                f"{pk['driver_rss_mb']:.0f} MB (validation Arrow peak {pk['driver_arrow_mb']:.0f} MB), "
                f"JVM {pk['jvm_rss_mb']:.0f} MB"
            )
        ratio = (out[-1]["worker_max_rss_mb"] / out[0]["worker_max_rss_mb"]) if out[0]["worker_max_rss_mb"] else None
        self.results["memory"] = {
            "sizes": out,
            "input_ratio": sizes[-1] / sizes[0],
            "ratio_worker_peak_large_vs_small": ratio,
            "ratio_validation_arrow_large_vs_small": (out[-1]["driver_arrow_mb"] / out[0]["driver_arrow_mb"])
            if out[0]["driver_arrow_mb"]
            else None,
            "ratio_jvm_path_jvm_rss_large_vs_small": (out[-1]["jvm_path_jvm_rss_mb"] / out[0]["jvm_path_jvm_rss_mb"])
            if out[0].get("jvm_path_jvm_rss_mb")
            else None,
            "note": "write_graph(engine='python'); peak RSS sampled from /proc every 0.1 s; workers = python "
            "processes under the JVM (spark.python.worker.reuse=true), i.e. staging; "
            "driver Arrow = pyarrow's allocation in this process, i.e. validation",
        }

    def warm_up(self) -> None:
        """One tiny write, read and Parquet round trip: starts Spark's Python workers (each one
        imports pyspark and lance once) so the measured runs see reused, warm workers."""
        n = self.fresh("warm")
        small_n = cached(node_frame(self.spark, 1000, 1))
        small_e = cached(edge_frame(self.spark, 1000, 1000, 1))
        from omnigraph_spark.spark.jvm_read import shim_loaded

        for _ in range(2):
            self.omnigraph_write(small_n, small_e)
            if shim_loaded(self.spark):
                self.omnigraph_jvm_write(small_n, small_e)
            self.spark.read.format("omnigraph").option("type", "Item").load(self._last_graph).write.format("noop").mode(
                "overwrite"
            ).save()
            self.spark.read.format("omnigraph").option("type", "Item").option("pushdown", "true").load(
                self._last_graph
            ).filter("qty < 10").write.format("noop").mode("overwrite").save()
        small_n.write.mode("overwrite").parquet(n)
        small_n.unpersist(), small_e.unpersist()

    # -- driver ---------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        a = self.args
        import lance  # noqa: F401  (import before forking anything: lance warns on fork)

        self.results["machine"] = machine_info()
        self.results["config"] = {k: v for k, v in vars(a).items()}
        t_start = time.perf_counter()
        log(f"generating {a.rows} nodes and {a.edge_rows} edges (seed {a.seed})")
        nodes = cached(node_frame(self.spark, a.rows, a.seed, a.partitions))
        edges = cached(edge_frame(self.spark, a.edge_rows, a.rows, a.seed, a.partitions))
        node_tbl, edge_tbl = nodes.toArrow(), edges.toArrow()
        in_bytes = {"nodes": int(node_tbl.nbytes), "edges": int(edge_tbl.nbytes)}
        self.results["input"] = {
            "node_rows": a.rows,
            "edge_rows": a.edge_rows,
            "arrow_bytes": in_bytes,
            "partitions": a.partitions,
            "node_schema": str(node_tbl.schema),
            "edge_schema": str(edge_tbl.schema),
        }
        t0 = time.perf_counter()
        if not a.no_warm_up:
            log("warm-up (Python worker start-up and imports are per-process, not per-row)")
            self.warm_up()
        self.results["input"]["warm_up_seconds"] = time.perf_counter() - t0
        steps: list[tuple] = [
            ("write", lambda: self.bench_write(nodes, edges, node_tbl, edge_tbl, in_bytes)),
            ("write_graph", lambda: self.bench_write_graph(nodes, edges)),
            ("read", self.bench_read),
            ("profile", lambda: self.bench_profile(nodes, edges, node_tbl, edge_tbl)),
            ("append", lambda: self.bench_append(nodes)),
            ("edge_gap", lambda: self.bench_edge_gap(nodes, edges, edge_tbl)),
            ("commit", self.bench_commit),
        ]
        for name, fn in steps:
            if name in a.skip:
                continue
            log(f"== {name}")
            fn()
        node_tbl = edge_tbl = None  # the steps are done: free the Arrow copies
        nodes.unpersist(), edges.unpersist()
        if "memory" not in a.skip:
            log("== memory")
            self.bench_memory()
        self.results["elapsed_seconds"] = time.perf_counter() - t_start
        self.results["other_load"] = other_load(self.mem.pids_seen)
        self.results["targets"] = targets(self.results)
        return self.results

    def close(self) -> None:
        self.mem.stop()
        if self.own_spark:
            self.spark.stop()
        if not self.args.keep_work:
            shutil.rmtree(self.work, ignore_errors=True)


# -- targets, report, plot ----------------------------------------------------------------------


def targets(r: dict[str, Any]) -> dict[str, Any]:
    def get(*path, default=None):
        cur: Any = r
        for p in path:
            if not isinstance(cur, dict) or p not in cur:
                return default
            cur = cur[p]
        return cur

    out: dict[str, Any] = {}
    w = get("write", "ratio_omnigraph_vs_parquet_throughput")
    wj = get("write", "ratio_omnigraph_jvm_vs_parquet_throughput")
    wg = get("write", "ratio_omnigraph_jvm_graph_vs_parquet_throughput")
    best_w = max(x for x in (w, wj, wg) if x is not None) if w is not None else None
    per_type = [get("write", f"ratio_jvm_{t}_vs_parquet_throughput") for t in ("nodes", "edges")]
    # met when the connector has a write path at least as fast as Parquet (write_table/write_graph
    # through the JVM sink; df.write.format("omnigraph") is bound to the Python API's hop) AND
    # that path is at least as fast for each type alone (an edge-only load counts too)
    met_w = None if best_w is None else (best_w >= 1.0 and all(x is None or x >= 1.0 for x in per_type))
    out["write_ge_parquet"] = {
        "ratio": w,
        "jvm_ratio": wj,
        "jvm_write_graph_ratio": wg,
        "met": met_w,
        "jvm_nodes_ratio": get("write", "ratio_jvm_nodes_vs_parquet_throughput"),
        "jvm_edges_ratio": get("write", "ratio_jvm_edges_vs_parquet_throughput"),
        "python_floor_vs_parquet": get("write", "ratio_python_floor_vs_parquet_throughput"),
        "omnigraph_vs_python_floor": get("write", "ratio_omnigraph_vs_python_floor_throughput"),
    }
    rd = get("read", "full_scan", "ratio_omnigraph_vs_parquet_throughput")
    rf = get("read", "selective_filter", "ratio_omnigraph_vs_parquet_throughput")
    jd = get("read", "full_scan", "ratio_omnigraph_jvm_vs_parquet_throughput")
    jf = get("read", "selective_filter", "ratio_omnigraph_jvm_vs_parquet_throughput")
    # met when the connector has a path at least as fast as Parquet for each shape of read: a full
    # scan (read_table: JVM) and a selective filter (format("omnigraph") with pushdown, or JVM)
    best_d = max(x for x in (rd, jd) if x is not None) if rd is not None else None
    best_f = max(x for x in (rf, jf) if x is not None) if rf is not None else None
    out["read_ge_parquet"] = {
        "full_scan_ratio": rd,
        "filter_ratio": rf,
        "jvm_full_scan_ratio": jd,
        "jvm_filter_ratio": jf,
        "met": None if best_d is None else (best_d >= 1.0 and (best_f is None or best_f >= 1.0)),
        "python_floor_vs_parquet": get("read", "full_scan", "ratio_python_floor_vs_parquet_throughput"),
        "omnigraph_vs_python_floor": get("read", "full_scan", "ratio_omnigraph_vs_python_floor_throughput"),
    }
    frag = {x["fragments"]: x["commit_publish_seconds_median"] for x in get("commit_vs_fragments", default=[])}
    c1k = frag.get(1000)
    out["commit_lt_1s_at_1000_fragments"] = {"seconds": c1k, "met": None if c1k is None else c1k < 1.0}
    rows = get("commit_vs_rows", default=[])
    if len(rows) >= 2:
        ratio = rows[-1]["commit_publish_seconds_median"] / rows[0]["commit_publish_seconds_median"]
        out["commit_independent_of_rows"] = {
            "row_ratio": rows[-1]["rows"] / rows[0]["rows"],
            "latency_ratio": ratio,
            "met": ratio < 1.5,
        }
    v = get("write_graph", "validate_share_of_write")
    # an incremental append onto a grown table counts too (the largest share over the sizes)
    ap = [x["recorded"]["validate_share_of_write"] for x in get("append", "steps", default=[])]
    va = max(ap) if ap else None
    out["validation_lt_half_write"] = {
        "validate_share_of_write": v,
        "append_validate_share_of_write": va,
        "met": None if v is None else (v < 0.5 and (va is None or va < 0.5)),
    }
    m = get("memory", "ratio_worker_peak_large_vs_small")
    out["memory_flat"] = {
        "input_ratio": get("memory", "input_ratio"),
        "worker_peak_ratio": m,
        "validation_arrow_ratio": get("memory", "ratio_validation_arrow_large_vs_small"),
        "met": None if m is None else m < 1.5,
    }
    return out


def fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def markdown(r: dict[str, Any]) -> str:
    L: list[str] = []
    m = r["machine"]
    L.append(f"# omnigraph-spark benchmark ({r['input']['node_rows']:,} nodes + {r['input']['edge_rows']:,} edges)\n")
    L.append(
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, Python {m['python']}, "
        f"Spark {m['spark']}, Lance {m['lance']}, pyarrow {m['pyarrow']}. Load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['loadavg_start'])}; at end "
        f"{', '.join(f'{x:.1f}' for x in r['other_load']['loadavg'])}.\n"
    )
    L.append(
        "All ratios are medians of per-repeat ratios measured side by side in one SparkSession "
        f"({r['config']['repeats']} repeats); > 1 means omnigraph is faster.\n"
    )
    L.append("## Targets\n")
    L.append("| target | measured | met |\n|---|---|---|")
    t = r["targets"]
    tw, tr = t["write_ge_parquet"], t["read_ge_parquet"]
    L.append(
        f"| write >= Parquet | JVM path: write_graph (one commit) {fmt(tw.get('jvm_write_graph_ratio'))}x; "
        f"write_table per type {fmt(tw.get('jvm_ratio'))}x (nodes "
        f"{fmt(tw.get('jvm_nodes_ratio'))}x, edges {fmt(tw.get('jvm_edges_ratio'))}x); df.write (Python API): "
        f"{fmt(tw['ratio'])}x (Python API floor: {fmt(tw.get('python_floor_vs_parquet'))}x "
        f"of Parquet; omnigraph at {fmt(tw.get('omnigraph_vs_python_floor'))}x of the floor) | {tw['met']} |"
    )
    L.append(
        f"| read >= Parquet | JVM path (read_table): full scan {fmt(tr.get('jvm_full_scan_ratio'))}x, filter "
        f"{fmt(tr.get('jvm_filter_ratio'))}x; Python source: full scan {fmt(tr['full_scan_ratio'])}x, filter "
        f"(pushdown) {fmt(tr['filter_ratio'])}x (Python API floor: {fmt(tr.get('python_floor_vs_parquet'))}x "
        f"of Parquet; the Python source at {fmt(tr.get('omnigraph_vs_python_floor'))}x of the floor) | {tr['met']} |"
    )
    L.append(
        f"| commit < 1 s at 1,000 fragments | {fmt(t['commit_lt_1s_at_1000_fragments']['seconds'], 3)} s | "
        f"{t['commit_lt_1s_at_1000_fragments']['met']} |"
    )
    if "commit_independent_of_rows" in t:
        c = t["commit_independent_of_rows"]
        L.append(
            f"| commit independent of rows | {fmt(c['row_ratio'], 0)}x rows -> {fmt(c['latency_ratio'])}x "
            f"latency | {c['met']} |"
        )
    L.append(
        f"| validation < half the write | {fmt(t['validation_lt_half_write']['validate_share_of_write'])} "
        f"of write_graph; {fmt(t['validation_lt_half_write'].get('append_validate_share_of_write'))} of an "
        f"incremental edge append (largest, recorded bound) | {t['validation_lt_half_write']['met']} |"
    )
    L.append(
        f"| memory flat in input size | {fmt(t['memory_flat']['input_ratio'], 0)}x input -> "
        f"{fmt(t['memory_flat']['worker_peak_ratio'])}x staging worker peak RSS (driver validation Arrow: "
        f"{fmt(t['memory_flat'].get('validation_arrow_ratio'))}x, linear by design) | {t['memory_flat']['met']} |"
    )
    if "write" in r:
        w = r["write"]
        L.append("\n## Write (nodes then edges, same cached DataFrames)\n")
        L.append("| writer | median s | rows/s | MB/s (Arrow input) | throughput vs omnigraph |\n|---|---|---|---|---|")
        og = w["contenders"]["omnigraph"]["seconds_median"]
        for who, c in w["contenders"].items():
            L.append(
                f"| {who} | {fmt(c['seconds_median'])} | {fmt(c['rows_per_s'], 0)} | {fmt(c['mb_per_s'], 1)} | "
                f"{fmt(og / c['seconds_median'])}x |"
            )
        L.append(
            f"\nomnigraph / Parquet throughput: total {fmt(w['ratio_omnigraph_vs_parquet_throughput'])}x, "
            f"nodes {fmt(w['ratio_nodes_vs_parquet_throughput'])}x, edges "
            f"{fmt(w['ratio_edges_vs_parquet_throughput'])}x; JVM path (write_table) / Parquet: total "
            f"{fmt(w.get('ratio_omnigraph_jvm_vs_parquet_throughput'))}x, nodes "
            f"{fmt(w.get('ratio_jvm_nodes_vs_parquet_throughput'))}x, edges "
            f"{fmt(w.get('ratio_jvm_edges_vs_parquet_throughput'))}x. On disk: omnigraph "
            f"{w['on_disk_bytes']['omnigraph'] / 2**20:,.1f} MiB, Parquet "
            f"{w['on_disk_bytes']['parquet'] / 2**20:,.1f} MiB."
        )
    if "write_graph" in r:
        g = r["write_graph"]
        L.append("\n## write_graph (one commit) phases\n")
        L.append(
            "| total s | staging jobs s | validation s | commit+publish s | validation share |\n|---|---|---|---|---|"
        )
        L.append(
            f"| {fmt(g['total'])} | {fmt(g['staging'])} | {fmt(g['validate'])} | {fmt(g['commit_publish'])} | "
            f"{fmt(g['validate_share_of_write'])} |"
        )
    if "append" in r:
        L.append("\n## Validation of an incremental edge append\n")
        L.append(
            "| existing edges | appended | validation s (recorded bound) | share of the write | committed MB read | "
            "validation s (counted) | share of the write | committed MB read |\n|---|---|---|---|---|---|---|---|"
        )
        for x in r["append"]["steps"]:
            rec, cnt = x["recorded"], x["counted"]
            L.append(
                f"| {fmt(x['existing_edges_before'])} | {fmt(x['append_rows'])} | {fmt(rec['validate_seconds'], 3)} | "
                f"{fmt(rec['validate_share_of_write'])} | {fmt(rec['validate_read_mb'], 0)} | "
                f"{fmt(cnt['validate_seconds'], 3)} | {fmt(cnt['validate_share_of_write'])} | "
                f"{fmt(cnt['validate_read_mb'], 0)} |"
            )
        L.append(
            "\n'Counted': as on a table version without a recorded @card bound (written by the engine, "
            "compacted): the driver reads and counts every committed src (invariant I16)."
        )
    if "edge_gap" in r:
        e = r["edge_gap"]
        L.append(f"\n## An edge-only load taken apart ({e['edge_rows']:,} edges onto committed nodes)\n")
        L.append("| step | wall s | CPU s (one process) |\n|---|---|---|")
        for k in (
            "spark_noop",
            "spark_parquet",
            "omnigraph_write_table",
            "lance_encode_format_table",
            "lance_encode_dataframe",
            "parquet_encode_dataframe",
        ):
            L.append(f"| {k} | {fmt(e[k]['wall_seconds'], 3)} | {fmt(e[k].get('cpu_seconds'), 3)} |")
        L.append(
            f"\nomnigraph `write_table` {fmt(e['ratio_omnigraph_vs_parquet_throughput'])}x Spark's Parquet. "
            f"Lance spends {fmt(e['ratio_lance_format_vs_dataframe_cpu'])}x the CPU on the table the format "
            f"stores ({', '.join(e['format_columns'])}) as on the DataFrame's columns "
            f"({', '.join(e['dataframe_columns'])}); pyarrow's Parquet encodes the DataFrame in "
            f"{fmt(e['ratio_parquet_vs_lance_format_encode_cpu'])}x Lance's CPU for the format's table. "
            f"Ceiling: Spark's iteration plus Lance's encoding of the format's table on "
            f"{e['cores_assumed']} cores, and nothing else, would reach "
            f"{fmt(e['ceiling_vs_parquet_throughput'])}x Parquet."
        )
    if "read" in r:
        L.append("\n## Read (Item nodes)\n")
        L.append(
            "| scan | omnigraph JVM path s | omnigraph Python source s | Parquet s | Python floor s | "
            "JVM path vs Parquet | Python source vs Parquet | Python source vs floor |\n"
            "|---|---|---|---|---|---|---|---|"
        )
        for kind in ("full_scan", "selective_filter"):
            x = r["read"][kind]
            L.append(
                f"| {kind} | {fmt(x.get('omnigraph_jvm_seconds_median'))} | {fmt(x['omnigraph_seconds_median'])} | "
                f"{fmt(x['parquet_seconds_median'])} | {fmt(x.get('python_floor_seconds_median'))} | "
                f"{fmt(x.get('ratio_omnigraph_jvm_vs_parquet_throughput'))}x | "
                f"{fmt(x['ratio_omnigraph_vs_parquet_throughput'])}x | "
                f"{fmt(x.get('ratio_omnigraph_vs_python_floor_throughput'))}x |"
            )
        L.append(
            "\nBoth omnigraph paths push the filter down to Lance, "
            "which reads the other columns only for the rows that pass."
        )
    if "commit_vs_fragments" in r:
        L.append("\n## Driver commit + publish latency (store API, no Spark)\n")
        L.append("| fragments | rows | commit+publish s | with validation s |\n|---|---|---|---|")
        for x in r["commit_vs_fragments"]:
            L.append(
                f"| {x['fragments']:,} | {x['rows']:,} | {fmt(x['commit_publish_seconds_median'], 3)} | "
                f"{fmt(x['commit_with_validation_seconds_median'], 3)} |"
            )
        L.append("\n| fragments | rows | commit+publish s |\n|---|---|---|")
        for x in r["commit_vs_rows"]:
            L.append(f"| {x['fragments']:,} | {x['rows']:,} | {fmt(x['commit_publish_seconds_median'], 3)} |")
        L.append("\n| tables | commit+publish s |\n|---|---|")
        for x in r["commit_vs_tables"]:
            L.append(f"| {x['tables']} | {fmt(x['commit_publish_seconds_median'], 3)} |")
    if "profile" in r:
        p = r["profile"]
        L.append(f"\n## Profile of one write (nodes + edges, Arrow batches of {p['arrow_batch_rows']:,} rows)\n")
        L.append("| phase | seconds | share |\n|---|---|---|")
        for k, v in p["breakdown_seconds"].items():
            L.append(f"| {k} | {fmt(v)} | {p['breakdown_share'][k]:.0%} |")
        L.append(
            f"\nSpark-only noop write {fmt(p['spark_noop_seconds'])} s; the same rows handed to a Python "
            f"mapInArrow that only counts {fmt(p['spark_to_python_seconds'])} s."
        )
    if "memory" in r:
        L.append("\n## Peak memory of one write_graph (nodes + edges, one commit)\n")
        L.append(
            "| rows per type | largest staging worker RSS MB | all workers MB | driver RSS MB | "
            "validation Arrow peak MB (bytes/row) | JVM MB |\n|---|---|---|---|---|---|"
        )
        for x in r["memory"]["sizes"]:
            L.append(
                f"| {x['rows_per_type']:,} | {fmt(x['worker_max_rss_mb'], 0)} | {fmt(x['workers_total_rss_mb'], 0)} | "
                f"{fmt(x['driver_rss_mb'], 0)} | {fmt(x.get('driver_arrow_mb'), 0)} "
                f"({fmt(x.get('validation_arrow_bytes_per_row'), 0)}) | {fmt(x['jvm_rss_mb'], 0)} |"
            )
    ol = r["other_load"]["busy_processes"]
    if ol:
        L.append("\n## Other processes busy during the run (at its end)\n")
        for p in ol:
            L.append(f"- {p['comm']} {p['pcpu']:.0f}% CPU, {p['rss_mb']} MB: `{p['args']}`")
    return "\n".join(L) + "\n"


def plot(r: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(20, 5), gridspec_kw={"width_ratios": [2.2, 1, 1]})
    labels, vals = [], []
    if "write" in r:
        for key, label in (
            ("ratio_omnigraph_jvm_graph_vs_parquet_throughput", "write_graph\n(JVM) vs Pq"),
            ("ratio_jvm_nodes_vs_parquet_throughput", "nodes (JVM)\nvs Parquet"),
            ("ratio_jvm_edges_vs_parquet_throughput", "edges (JVM)\nvs Parquet"),
        ):
            if key in r["write"]:
                labels.append(label)
                vals.append(r["write"][key])
        labels.append("df.write (Py)\nvs Parquet")
        vals.append(r["write"]["ratio_omnigraph_vs_parquet_throughput"])
        if "ratio_omnigraph_vs_lance_single_process_throughput" in r["write"]:
            labels.append("write vs\n1-proc Lance")
            vals.append(r["write"]["ratio_omnigraph_vs_lance_single_process_throughput"])
    if "read" in r:
        if "ratio_omnigraph_jvm_vs_parquet_throughput" in r["read"]["full_scan"]:
            labels.append("scan (JVM)\nvs Parquet")
            vals.append(r["read"]["full_scan"]["ratio_omnigraph_jvm_vs_parquet_throughput"])
            labels.append("filter (JVM)\nvs Parquet")
            vals.append(r["read"]["selective_filter"]["ratio_omnigraph_jvm_vs_parquet_throughput"])
        labels.append("scan (Py)\nvs Parquet")
        vals.append(r["read"]["full_scan"]["ratio_omnigraph_vs_parquet_throughput"])
        labels.append("filter (Py)\nvs Parquet")
        vals.append(r["read"]["selective_filter"]["ratio_omnigraph_vs_parquet_throughput"])
    ax[0].bar(labels, vals, color=["tab:green" if v >= 1 else "tab:orange" for v in vals])
    ax[0].axhline(1.0, color="k", lw=0.8, ls="--")
    ax[0].tick_params(axis="x", labelsize=8)
    ax[0].set_title("omnigraph throughput ratio (>1 = faster)")
    for i, v in enumerate(vals):
        ax[0].text(i, v, f"{v:.2f}x", ha="center", va="bottom")
    if "commit_vs_fragments" in r:
        xs = [x["fragments"] for x in r["commit_vs_fragments"]]
        ax[1].plot(
            xs, [x["commit_publish_seconds_median"] for x in r["commit_vs_fragments"]], "o-", label="commit + publish"
        )
        ax[1].plot(
            xs,
            [x["commit_with_validation_seconds_median"] for x in r["commit_vs_fragments"]],
            "s--",
            label="with load-wide validation",
        )
        ax[1].axhline(1.0, color="k", lw=0.8, ls=":")
        ax[1].set_xscale("log")
        ax[1].set_yscale("log")
        ax[1].set_xlabel("staged fragments")
        ax[1].set_ylabel("seconds")
        ax[1].legend()
        ax[1].set_title("driver commit latency")
    if "profile" in r:
        p = r["profile"]["breakdown_seconds"]
        ax[2].barh(list(p.keys()), list(p.values()), color="tab:blue")
        ax[2].set_xlabel("seconds")
        ax[2].set_title("where a df.write's time goes (Python path)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None = None):
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=300_000, help="node rows (default 300,000; 1M-10M are options)")
    p.add_argument("--edge-rows", type=int, default=None, help="edge rows (default: = --rows)")
    p.add_argument("--out", default="benchmarks/out")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--read-repeats",
        type=int,
        default=7,
        help="repeats of each read (reads take under a second: more repeats, steadier medians)",
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--partitions", type=int, default=2, help="partitions of the input DataFrames")
    p.add_argument(
        "--arrow-batch",
        type=int,
        default=None,
        help="spark.sql.execution.arrow.maxRecordsPerBatch (default: Spark's, 10,000)",
    )
    p.add_argument("--fragments", type=ints, default=[10, 100, 1000, 10000])
    p.add_argument("--rows-per-fragment", type=int, default=10)
    p.add_argument("--commit-rows-fragments", type=int, default=100, help="fragments of the commit-vs-rows sweep")
    p.add_argument("--commit-rows-per-fragment", type=ints, default=[10, 10000])
    p.add_argument("--tables", type=ints, default=[1, 2, 4, 8, 16])
    p.add_argument(
        "--memory-sizes", type=ints, default=None, help="rows per type of the memory runs (default: rows/4,rows)"
    )
    p.add_argument(
        "--skip",
        type=lambda s: set(s.split(",")),
        default=set(),
        help="comma list of write,write_graph,read,profile,append,edge_gap,commit,memory",
    )
    p.add_argument(
        "--append-steps",
        type=int,
        default=3,
        help="edge table sizes (x edge rows) the incremental-append validation is measured at",
    )
    p.add_argument("--no-lance-baseline", action="store_true")
    p.add_argument("--no-warm-up", action="store_true", help="skip the warm-up round (smoke tests)")
    p.add_argument("--profile", action="store_true", help="also cProfile RowConverter (profile.txt)")
    p.add_argument("--keep-work", action="store_true", help="keep the graphs under <out>/work")
    p.add_argument(
        "--strict-append",
        type=ints,
        default=None,
        dest="strict_append_rows",
        help="run ONLY the strict-append cost section at these row counts (e.g. 1000000,10000000)",
    )
    a = p.parse_args(argv)
    if a.edge_rows is None:
        a.edge_rows = a.rows
    if a.memory_sizes is None:
        a.memory_sizes = [max(1000, a.rows // 4), a.rows]
    return a


def main(argv: Sequence[str] | None = None, spark=None) -> dict[str, Any]:
    """Run the harness; ``spark`` reuses an existing session (left running), else one is made."""
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.strict_append_rows:
        return strict_append_main(a, spark)
    b = Bench(a, spark)
    try:
        res = b.run()
    finally:
        b.close()
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=2, default=str)
    md = markdown(res)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    try:
        plot(res, os.path.join(a.out, "results.png"))
    except ImportError as e:  # matplotlib is in the test extras
        log(f"no plot: {e}")
    print(md)
    return res


def strict_append_main(a, spark=None) -> dict[str, Any]:
    """``--strict-append N,...``: only :meth:`Bench.bench_strict_append`; strict_append.json/.md."""
    b = Bench(a, spark)
    try:
        b.results["machine"] = machine_info()
        res = b.bench_strict_append()
        b.results["other_load"] = other_load(b.mem.pids_seen)
    finally:
        b.close()
    with open(os.path.join(a.out, "strict_append.json"), "w") as f:
        json.dump(b.results, f, indent=2, default=str)
    L = ["| committed + appended rows | with the check (s) | without (s) | ratio |", "|---|---|---|---|"]
    L += [
        f"| {int(k):,} + {int(k):,} | {v['with_seconds']:.2f} | {v['without_seconds']:.2f} | {v['ratio']:.3f} |"
        for k, v in res.items()
    ]
    md = "\n".join(L) + "\n"
    with open(os.path.join(a.out, "strict_append.md"), "w") as f:
        f.write(md)
    print(md)
    return b.results


if __name__ == "__main__":
    main()
