"""format("omnigraph") against Parquet: writes and reads from Parquet files, classic and through Spark Connect.

The input is generated ONCE as Parquet files (``<work>/input``): ``--rows`` ``Item`` rows
(``name: String @key``, ``qty: I64`` in 0..999, ``price: F64?``, ``label: String?``,
``seq: I64``), seeded and deterministic. Every contender then runs in its own fresh process and
reads its input from those files (never a cached frame):

* ``write_parquet``: Parquet files -> ``df.write.parquet`` (the baseline of the write ratios);
* ``write_omnigraph``: Parquet files -> ``df.write.format("omnigraph").option("type", "Item")
  .option("engine", "jvm").mode("append")`` into a fresh graph (``Graph.init`` untimed);
  ``engine=jvm`` fails unless the shim's provider takes the write, so a result proves the JVM path;
* ``write_omnigraph_python``: the same with ``engine=python`` (the Python source), for reference,
  only up to ``--python-max-rows`` rows (it is slow);
* ``read_parquet`` / ``read_omnigraph``: the rows the two writes above committed, read back with
  ``spark.read.parquet`` and ``spark.read.format("omnigraph").option("engine", "jvm")``: a full
  scan aggregate (``count(*)``, ``sum(qty)``) and a 1 % filter (``qty < 10``: ``count(*)``,
  ``sum(price)``), each ``--read-repeats`` times in the contender's process (the first is cold);
  the ratio takes the median.

Two modes, each contender once per mode: ``classic`` (the contender's own ``local[2]`` session,
the embedded default of :func:`omnigraph_spark.demo.local_builder`, which puts the shim on) and
``connect`` (a fresh Spark Connect client process against ONE local Spark Connect server, its
own process on 127.0.0.1, ``local[2]``, the shim on its driver class path, the same session
settings and ``spark.driver.memory``, ``LANCE_CPU_THREADS`` as the embedded session sets it;
stopped at the end of the run, also on failure). Ratios are Parquet's time over the
contender's, same mode, same run (> 1 = faster than Parquet).

Memory: VmHWM of the contender's driver Python, its JVM and Spark's Python workers (classic),
read from ``/proc`` before the session stops, and the parent's 0.5 s RSS samples of the
contender's tree and, in Connect mode, of the server's tree (its JVM, its Python workers and the
provider's bridge process, ``omnigraph_spark.spark.bridge``, reported apart).

The built shim (``jvm-shim/target``) is copied into the work directory first and every JVM of
the run loads the copy (``OMNIGRAPH_SPARK_SHIM_DIR``), so a rebuild during the run changes nothing.

Each write is followed by a ONE-row write through the same path into a fresh target
(``probe_write_s``): the fixed cost per write (the bridge's start, planning, the commit), as
against Parquet's. Each read contender also times the read's planning alone (``plan_s``:
``load()`` and its schema). The provider's bridge process is also timed alone, from start to
exit (median of 3): with no request (``bridge_start_s``: the interpreter and its imports) and
with the ``plan_read`` of the graph just read (``bridge_plan_read_s``: what a read plan waits for).

    .venv/bin/python -m benchmarks.format_bench --rows 1000000 --out benchmarks/out/format-1m.json
    .venv/bin/python -m benchmarks.format_bench --rows 10000000 --modes classic,connect \\
        --out benchmarks/out/format-10m.json --log benchmarks/out/format-10m.log
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import descendants, free_port, listening, proc_table, read_text, setup_logging, tree_cpu_s
from benchmarks.scale_bench import _machine, dir_stats, input_files, status_kb, tree_hwm

log = logging.getLogger("benchmarks.format_bench")

ROOT = Path(__file__).resolve().parents[1]
MODES = ("classic", "connect")
CONTENDERS = ("write_parquet", "write_omnigraph", "write_omnigraph_python", "read_parquet", "read_omnigraph")
DEFAULT_CONTENDERS = ",".join(CONTENDERS)
#: what a contender reads from an earlier one of the same mode
NEEDS = {"read_parquet": "write_parquet", "read_omnigraph": "write_omnigraph"}
#: the baseline each contender's ratio is taken against (same mode)
BASELINE = {
    "write_parquet": "write_parquet",
    "write_omnigraph": "write_parquet",
    "write_omnigraph_python": "write_parquet",
    "read_parquet": "read_parquet",
    "read_omnigraph": "read_parquet",
}
#: the timed measurements of each kind of contender (seconds; a read's are medians of repeats)
METRICS = {"write": ("write_s",), "read": ("full_s", "filter_s")}
SCHEMA = """
node Item {
    name: String @key
    qty: I64
    price: F64?
    label: String?
    seq: I64
}
"""
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
BRIDGE_MODULE = "omnigraph_spark.spark.bridge"


# -- pure parts (tests/benchmarks/test_format_bench.py) -----------------------------------------


def parse_list(text: str, known: Sequence[str], what: str) -> list[str]:
    """A comma-separated option -> names in order; unknown and repeated names are errors."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise ValueError(f"--{what}: nothing listed; known: {', '.join(known)}")
    for n in names:
        if n not in known:
            raise ValueError(f"--{what}: unknown {n!r}; known: {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--{what}: a name is listed twice: {text!r}")
    return names


def parse_contenders(text: str) -> list[str]:
    """``--contenders`` -> names in run order; a reader without its writer earlier is an error."""
    names = parse_list(text, CONTENDERS, "contenders")
    for i, n in enumerate(names):
        need = NEEDS.get(n)
        if need and need not in names[:i]:
            raise ValueError(f"contender {n!r} reads what {need!r} writes: list {need!r} earlier")
    return names


def plan(contenders: Sequence[str], rows: int, python_max_rows: int) -> list[str]:
    """The contenders that run at ``rows``: the Python-source write only up to ``python_max_rows``."""
    return [c for c in contenders if c != "write_omnigraph_python" or rows <= python_max_rows]


def kind(name: str) -> str:
    return "read" if name.startswith("read_") else "write"


def ratios(results: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """Per contender and metric: the baseline's seconds over the contender's (> 1 = faster than
    Parquet), both from ``results`` (one mode of one run); None when either is missing."""
    out: dict[str, float | None] = {}
    for name, r in results.items():
        base_name = BASELINE[name]
        if name == base_name:
            continue
        base = results.get(base_name) or {}
        for m in METRICS[kind(name)]:
            b, c = base.get(m), r.get(m)
            out[f"{name}.{m}"] = round(b / c, 3) if b and c else None
    return out


def same_answers(answers: Sequence[Sequence[Any]], rel_tol: float = 1e-9) -> bool:
    """Whether repeats of one query returned the same row: equal values, floats within
    ``rel_tol`` (a sum of doubles depends on the order its partial sums meet, which varies
    between runs when several executors aggregate)."""
    import math

    first = answers[0]
    for a in answers[1:]:
        if len(a) != len(first):
            return False
        for x, y in zip(first, a):
            if isinstance(x, float) or isinstance(y, float):
                if x is None or y is None or not math.isclose(x, y, rel_tol=rel_tol):
                    return False
            elif x != y:
                return False
    return True


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("no timings")
    return statistics.median(xs)


def role(comm: str, cmdline: str) -> str | None:
    """What a process under a contender or the server is: ``jvm``, ``bridge`` (the provider's
    Python process), ``worker`` (Spark's Python workers, the Python driver of a root), else None."""
    if comm == "java":
        return "jvm"
    if comm.startswith("python"):
        return "bridge" if BRIDGE_MODULE in cmdline else "worker"
    return None


def classify(table: Mapping[int, tuple], root: int, cmdlines: Mapping[int, str]) -> dict[str, list[int]]:
    """pids under ``root`` (a ``pid -> (ppid, rss, comm)`` table) by :func:`role`; ``root``
    itself apart (``root``: the contender's Python driver or the server's JVM)."""
    out: dict[str, list[int]] = {"root": [root], "jvm": [], "bridge": [], "worker": []}
    for p in descendants(table, root):
        r = role(table[p][2], cmdlines.get(p, ""))
        if r:
            out[r].append(p)
    return out


def tree_rss_mb(table: Mapping[int, tuple], root: int, cmdlines: Mapping[int, str]) -> dict[str, float]:
    """RSS now (MB) of a tree by role: the root, the JVMs under it (sum), the bridge (largest),
    the Python workers (largest and sum)."""
    groups = classify(table, root, cmdlines)
    mb = 1 / 2**20
    rss = {p: table[p][1] * mb for p in table}
    w = [rss[p] for p in groups["worker"]]
    return {
        "root_mb": rss.get(root, 0.0),
        "jvm_mb": sum(rss[p] for p in groups["jvm"]),
        "bridge_max_mb": max((rss[p] for p in groups["bridge"]), default=0.0),
        "worker_max_mb": max(w, default=0.0),
        "workers_sum_mb": sum(w),
    }


def fmt_ratio(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "n/a"


# -- /proc sampling ------------------------------------------------------------------------------


class Sampler:
    """Peak RSS by role of process trees (``label -> root pid``), every ``interval`` s."""

    def __init__(self, roots: Mapping[str, int], interval: float = 0.5) -> None:
        self.roots, self.interval = dict(roots), interval
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            t = proc_table()
            for label, root in self.roots.items():
                under = descendants(t, root)
                cmd = {
                    p: read_text(f"/proc/{p}/cmdline").replace("\0", " ") for p in under if t[p][2].startswith("python")
                }
                for k, v in tree_rss_mb(t, root, cmd).items():
                    key = f"{label}_{k}"
                    self.peak[key] = max(self.peak.get(key, 0.0), v)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._t.join(timeout=5)
        return {k: round(v) for k, v in sorted(self.peak.items())}


# -- input -----------------------------------------------------------------------------------------


def item_frame(spark, rows: int, seed: int, partitions: int):
    """Seeded ``Item`` rows: keys ``item-0000000000`` ..; qty = id * 7919 % 1000 (so qty < 10 is 1 %)."""
    from pyspark.sql import functions as F

    idx = F.col("id")
    return spark.range(0, rows, 1, partitions).select(
        F.format_string("item-%010d", idx).alias("name"),
        ((idx * 7919) % 1000).alias("qty"),
        F.when(idx % 50 == 0, F.lit(None)).otherwise(F.rand(seed)).alias("price"),
        F.concat(F.lit("label-"), (idx % 97).cast("string")).alias("label"),
        idx.alias("seq"),
    )


# -- the contenders (each in its own process) ------------------------------------------------------


def classic_session(driver_memory: str, baseline: bool = False):
    """A contender's classic session; a ``baseline`` (Parquet) without the shim's driver plugin,
    which would start ``format("omnigraph")``'s planner beside a job that never uses it."""
    from omnigraph_spark.demo import local_builder

    b = local_builder("omnigraph-format-bench", "local[2]", conf={"spark.driver.memory": driver_memory})
    if baseline:
        b = b.config("spark.plugins", "")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def connect_session(url: str):
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _target(work: Path, mode: str, name: str) -> str:
    return str(work / mode / f"out-{name}")


def run_contender(name: str, mode: str, work: Path, args, session=None) -> dict[str, Any]:
    """One contender in this process: its outputs under ``<work>/<mode>``. ``session``: a
    function of ``baseline`` (a Parquet contender) that returns the session, for another master
    (benchmarks/cluster_bench.py: a standalone cluster); else the mode's own."""
    from pyspark.sql import functions as F

    from omnigraph_spark import Graph, register

    t_proc = time.perf_counter()
    baseline = name.endswith("_parquet")
    if session is not None:
        spark = session(baseline)
    elif mode == "classic":
        spark = classic_session(args.driver_memory, baseline=baseline)
    else:
        spark = connect_session(args.url)
    register(spark)  # the Python source under the same name (engine=python, and what the provider hands over)
    res: dict[str, Any] = {"contender": name, "mode": mode}

    def omnigraph_write(df, uri: str, engine: str) -> None:
        df.write.format("omnigraph").option("type", "Item").option("engine", engine).mode("append").save(uri)

    if kind(name) == "write":
        local_tree = mode == "classic" and session is None  # the write's processes are all under this one
        src = spark.read.parquet(str(work / "input"))
        out = _target(work, mode, "write_omnigraph" if name == "write_omnigraph" else name)
        probe_out = out + "-probe"
        one = spark.read.parquet(str(work / "input")).limit(1)
        if name == "write_parquet":
            cpu0 = tree_cpu_s(os.getpid())
            res["write_s"] = _timed(lambda: src.write.parquet(out))
            res["write_cpu_s"] = round(tree_cpu_s(os.getpid()) - cpu0, 2) if local_tree else None
            res["probe_write_s"] = _timed(lambda: one.write.parquet(probe_out))
            res["rows"] = spark.read.parquet(out).count()
            res.update(dir_stats(out, ".parquet"))
        else:
            engine = "jvm" if name == "write_omnigraph" else "python"
            Graph.init(out, SCHEMA)
            Graph.init(probe_out, SCHEMA)
            res["engine"] = engine
            cpu0 = tree_cpu_s(os.getpid())
            res["write_s"] = _timed(lambda: omnigraph_write(src, out, engine))
            res["write_cpu_s"] = round(tree_cpu_s(os.getpid()) - cpu0, 2) if local_tree else None
            res["probe_write_s"] = _timed(lambda: omnigraph_write(one, probe_out, engine))
            g = Graph.open(out)
            ds = g.open_table("node:Item", g.snapshot())
            res["rows"] = ds.count_rows()
            res["graph_version"] = g.snapshot().version
            res["files"] = len(ds.get_fragments())
            res["bytes"] = dir_stats(out, ".lance")["bytes"]
            res["bridge_start_s"] = bridge_seconds("")
        shutil.rmtree(probe_out, ignore_errors=True)
    else:
        path = _target(work, mode, NEEDS[name])

        def load():
            if name == "read_parquet":
                return spark.read.parquet(path)
            return spark.read.format("omnigraph").option("type", "Item").option("engine", "jvm").load(path)

        res["plan_s"] = round(_timed(lambda: load().schema), 3)
        queries = {
            "full": lambda: load().agg(F.count(F.lit(1)), F.sum("qty")).collect()[0],
            "filter": lambda: load().where(F.col("qty") < 10).agg(F.count(F.lit(1)), F.sum("price")).collect()[0],
        }
        for q, fn in queries.items():
            times, answers = [], []
            for _ in range(args.read_repeats):
                t0 = time.perf_counter()
                answers.append(tuple(fn()))
                times.append(time.perf_counter() - t0)
            if not same_answers(answers):
                raise RuntimeError(f"{name} {q}: the repeats disagree: {answers}")
            res[f"{q}_s"] = round(median(times), 3)
            res[f"{q}_cold_s"] = round(times[0], 3)
            res[f"{q}_all_s"] = [round(t, 3) for t in times]
            res[f"{q}_answer"] = list(answers[0])
        res["rows"] = res["full_answer"][0]
        if name == "read_omnigraph":
            request = {"op": "plan_read", "options": {"path": path, "type": "Item", "engine": "jvm"}, "parallelism": 2}
            res["bridge_plan_read_s"] = bridge_seconds(json.dumps(request) + "\n")
    if mode != "connect":  # the driver runs here: its Python, its JVM, the Python processes under it
        res["memory_hwm"] = tree_hwm(os.getpid())
    else:
        res["memory_hwm"] = {"client_python_hwm_mb": round(status_kb(read_text("/proc/self/status"), "VmHWM") / 1024)}
    spark.stop()
    res["process_s"] = round(time.perf_counter() - t_proc, 1)
    for k in ("write_s", "probe_write_s"):
        if k in res:
            res[k] = round(res[k], 3)
    return res


def bridge_seconds(requests: str, repeats: int = 3) -> float:
    """Median seconds of the provider's bridge process (``python -m omnigraph_spark.spark.bridge``,
    this interpreter) from its start to its exit, given ``requests`` on stdin ("": start-up and
    imports alone; a ``plan_read``: what the provider waits for per read plan)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", BRIDGE_MODULE], input=requests, capture_output=True, text=True, timeout=300
        )
        times.append(time.perf_counter() - t0)
        if p.returncode != 0 or (requests and '"ok"' not in p.stdout):
            raise RuntimeError(f"the bridge failed ({p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
    return round(median(times), 3)


def generate(work: Path, rows: int, seed: int, rows_per_file: int, driver_memory: str) -> dict[str, Any]:
    spark = classic_session(driver_memory)
    t0 = time.perf_counter()
    item_frame(spark, rows, seed, input_files(rows, rows_per_file)).write.parquet(str(work / "input"))
    res = {"write_s": round(time.perf_counter() - t0, 1), "input": dir_stats(str(work / "input"), ".parquet")}
    res["memory_hwm"] = tree_hwm(os.getpid())
    spark.stop()
    return res


# -- the Spark Connect server ----------------------------------------------------------------------


def server_settings(port: int, class_path: Sequence[str]) -> dict[str, str]:
    """The Connect server's session settings: the embedded session's (demo.local_builder) plus the
    gRPC binding and the shim on the driver class path."""
    from omnigraph_spark.demo import embedded_settings

    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        **embedded_settings(),
    }
    if class_path:
        settings["spark.driver.extraClassPath"] = os.pathsep.join(class_path)
        settings["spark.executor.extraClassPath"] = os.pathsep.join(class_path)
    return settings


class ConnectServer:
    """A local Spark Connect server (spark-submit of pyspark's SPARK_HOME, local[2]) as its own
    process group; :meth:`stop` ends the group (SIGTERM, then SIGKILL after 30 s)."""

    def __init__(self, workdir: Path, driver_memory: str, timeout_s: float = 300) -> None:
        import pyspark

        from omnigraph_spark.spark.runtime import LANCE_CPU_THREADS, lance_cpu_threads
        from omnigraph_spark.spark.shim_conf import shim_jars

        jars = shim_jars()
        if not jars:
            raise RuntimeError("no JVM shim jar (make jvm-shim): the Connect server would not have the provider")
        spark_home = os.path.dirname(pyspark.__file__)
        port = free_port()
        self.url = f"sc://127.0.0.1:{port}"
        cmd = [
            os.path.join(spark_home, "bin", "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--master",
            "local[2]",
            "--driver-memory",
            driver_memory,
            "--name",
            "omnigraph-format-bench-connect",
        ]
        for k, v in server_settings(port, jars).items():
            cmd += ["--conf", f"{k}={v}"]
        path = os.pathsep.join([str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")}
        env.update(
            SPARK_HOME=spark_home, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=path
        )
        env.setdefault(LANCE_CPU_THREADS, str(lance_cpu_threads(2)))
        self.lance_cpu_threads = env[LANCE_CPU_THREADS]
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "connect-server.log"
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        t0 = time.monotonic()
        try:
            while not listening(port):
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"the Spark Connect server exited ({self.proc.returncode}): "
                        f"{self.log_path.read_text(errors='replace')[-3000:]}"
                    )
                if time.monotonic() - t0 > timeout_s:
                    raise RuntimeError(f"the Spark Connect server did not listen on {port} in {timeout_s} s")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        self.start_s = round(time.monotonic() - t0, 1)
        log.info("Spark Connect server %s (pid %d) up in %s s", self.url, self.proc.pid, self.start_s)

    def hwm(self) -> dict[str, int]:
        """VmHWM (MB) of the server's JVM and of its live Python workers, now."""
        t = proc_table()
        under = descendants(t, self.proc.pid)
        hw = {p: status_kb(read_text(f"/proc/{p}/status"), "VmHWM") for p in [self.proc.pid] + under}
        py = [p for p in under if t[p][2].startswith("python")]
        jvm = [p for p in [self.proc.pid] + under if t.get(p, (0, 0, ""))[2] == "java"]
        return {
            "server_jvm_hwm_mb": round(sum(hw[p] for p in jvm) / 1024),
            "server_workers_live_max_hwm_mb": round(max((hw[p] for p in py), default=0) / 1024),
            "server_workers_live": len(py),
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        log.info("Spark Connect server stopped (%s)", self.proc.returncode)


# -- the parent ------------------------------------------------------------------------------------


def freeze_shim(dest: Path) -> None:
    """Copy the built shim (jar and libraries) to ``dest`` and point this process and every child
    (contenders, the Connect server) at the copy: a rebuild of jvm-shim/target during the run
    then changes nothing the run loads."""
    from omnigraph_spark.spark.shim_conf import SHIM_DIR_ENV, built_shim_jars

    jars = built_shim_jars()
    if not jars:
        return  # a wheel install: its packaged jar does not change under the run
    (dest / "lib").mkdir(parents=True)
    shutil.copy2(jars[0], dest / os.path.basename(jars[0]))
    for j in jars[1:]:
        shutil.copy2(j, dest / "lib" / os.path.basename(j))
    os.environ[SHIM_DIR_ENV] = str(dest)


def shim_jar_state() -> dict[str, Any]:
    """The shim jar this run's JVMs load: path, sha256 and mtime (a rebuild mid-run shows as a change)."""
    import hashlib

    from omnigraph_spark.spark.shim_conf import shim_jars

    jars = shim_jars()
    if not jars:
        return {"jar": None}
    with open(jars[0], "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        "jar": jars[0],
        "sha256": digest,
        "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(jars[0]))),
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spawn(args, work: Path, step: str, mode: str, server: ConnectServer | None) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.format_bench",
        "--step",
        step,
        "--mode",
        mode,
        "--work",
        str(work),
        "--rows",
        str(args.rows),
        "--seed",
        str(args.seed),
        "--rows-per-file",
        str(args.rows_per_file),
        "--driver-memory",
        args.driver_memory,
        "--read-repeats",
        str(args.read_repeats),
    ]
    if server:
        cmd += ["--url", server.url]
    path = os.pathsep.join([str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=path)
    tag = f"{mode}-{step}"
    load0, t0 = _load(), time.monotonic()
    with open(work / f"{tag}.stderr", "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=err, stderr=subprocess.STDOUT)
        roots = {"contender": proc.pid}
        if server:
            roots["server"] = server.proc.pid
        sampler = Sampler(roots)
        try:
            rc = proc.wait(timeout=args.contender_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = "timeout"
        peaks = sampler.stop()
    if rc != 0:
        tail = (work / f"{tag}.stderr").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"{tag} exited {rc}:\n{tail}")
    res = json.loads((work / f"{tag}.json").read_text())
    res["memory_rss_sampled"] = peaks
    if server:
        res["server_hwm_after"] = server.hwm()
    res["load"] = [load0, _load()]
    res["subprocess_s"] = round(time.monotonic() - t0, 1)
    return res


def _mem_cells(c: Mapping[str, Any], mode: str) -> list[str]:
    s = c.get("memory_rss_sampled", {})
    if mode == "classic":
        h = c["memory_hwm"]
        return [
            f"{h['driver_python_hwm_mb']:,}",
            f"{h['driver_jvm_hwm_mb']:,}",
            f"{h['worker_max_hwm_mb']:,} / {h['workers_sum_hwm_mb']:,}",
            f"{s.get('contender_bridge_max_mb', 0):,}",
        ]
    server_jvm = s.get("server_root_mb", 0) + s.get("server_jvm_mb", 0)  # spark-submit execs the JVM
    return [
        f"{c['memory_hwm']['client_python_hwm_mb']:,} (client)",
        f"{server_jvm:,} (server)",
        f"{s.get('server_worker_max_mb', 0):,} / {s.get('server_workers_sum_mb', 0):,}",
        f"{s.get('server_bridge_max_mb', 0):,}",
    ]


def markdown(r: Mapping[str, Any]) -> str:
    m = r["machine"]
    inp = r["input"]
    lines = [
        f'# format("omnigraph") vs Parquet, {r["rows"]:,} rows from Parquet files ({r["date"]})',
        "",
        f"`{r['command']}`",
        "",
        (
            f"Machine: {m['cores']} cores (shared), {m.get('ram_gib')} GiB RAM, Python {m['python']}, "
            f"pyspark {m['pyspark']}, pylance {m.get('pylance')}; commit {str(m.get('commit'))[:10]}; "
            f"spark.driver.memory {r['driver_memory']}, local[2]; load average {r['load_start']} at start, "
            f"{r['load_end']} at end."
        ),
        "",
        (
            f"Shim jar sha256 {str(r.get('shim_start', {}).get('sha256'))[:12]} at start, "
            f"{str(r.get('shim_end', {}).get('sha256'))[:12]} at end."
        ),
        "",
        (
            f"Input: {r['rows']:,} Item rows in {inp['files']} Parquet files ({inp['bytes'] / 2**20:,.0f} MB), "
            f"generated in {r['generate_s']} s. Reads: {r['read_repeats']} repeats per query in the contender's "
            "process, median (cold = the first)."
        ),
        "",
    ]
    for mode in r["modes"]:
        cs = r["results"].get(mode, {})
        if not cs:
            continue
        rat = r["ratios"].get(mode, {})
        extra = (
            f"; server up in {r['connect']['start_s']} s, LANCE_CPU_THREADS={r['connect']['lance_cpu_threads']}"
            if mode == "connect" and r.get("connect")
            else ""
        )
        lines += [
            f"## {mode}{extra}",
            "",
            (
                "| contender | rows | seconds | vs Parquet | 1-row write / plan (s) | driver Python peak (MB) "
                "| JVM peak (MB) | Python workers max / sum (MB) | bridge peak (MB) | load |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, c in cs.items():
            mem = _mem_cells(c, mode)
            load = c["load"][0][0]
            if kind(name) == "write":
                ratio = "baseline" if name == BASELINE[name] else fmt_ratio(rat.get(f"{name}.write_s"))
                lines.append(
                    f"| {name} | {c['rows']:,} | {c['write_s']} | {ratio} | {c['probe_write_s']} "
                    f"| {' | '.join(mem)} | {load} |"
                )
            else:
                for q in ("full", "filter"):
                    ratio = "baseline" if name == BASELINE[name] else fmt_ratio(rat.get(f"{name}.{q}_s"))
                    lines.append(
                        f"| {name} ({q}) | {c[q + '_answer'][0]:,} | {c[q + '_s']} (cold {c[q + '_cold_s']}) "
                        f"| {ratio} | {c['plan_s']} | {' | '.join(mem)} | {load} |"
                    )
        cpu = [f"{n} {c['write_cpu_s']} s" for n, c in cs.items() if c.get("write_cpu_s") is not None]
        if cpu:
            lines.append(
                "\nCPU seconds of the timed write (the contender's process tree: driver Python, JVM, "
                "bridge, Python workers): " + ", ".join(cpu) + "."
            )
        w, rd = cs.get("write_omnigraph", {}), cs.get("read_omnigraph", {})
        if w.get("bridge_start_s") or rd.get("bridge_plan_read_s"):
            lines.append(
                f"\nThe provider's bridge process alone (median of 3, from start to exit): start-up and "
                f"imports {w.get('bridge_start_s', 'n/a')} s; a `plan_read` of this graph "
                f"{rd.get('bridge_plan_read_s', 'n/a')} s (paid per read query)."
            )
        lines.append("")
    lines += [
        (
            "Ratios: Parquet's seconds over the contender's, same mode, same run (> 1 = faster than Parquet). "
            "Classic peaks are VmHWM from /proc (the contender's driver Python, its JVM: in local mode the "
            "executors run in it, Spark's Python workers); Connect peaks are the parent's 0.5 s RSS samples of "
            "the client process and of the server's process tree while the contender ran (the server's Python "
            "workers are reused across clients, so its workers' columns include idle workers of earlier "
            "contenders). The bridge is the provider's driver-side Python process (sampled RSS). 1-row write: "
            "a one-row write through the same path into a fresh target after the timed one (the fixed cost per "
            "write); plan: `load()` and its schema."
        )
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="Item rows of the input")
    p.add_argument("--modes", default="classic,connect", help="comma-separated, in run order: classic, connect")
    p.add_argument(
        "--contenders",
        default=DEFAULT_CONTENDERS,
        help=f"comma-separated, in run order, of: {DEFAULT_CONTENDERS} (a reader after its writer)",
    )
    p.add_argument(
        "--python-max-rows", type=int, default=1_000_000, help="write_omnigraph_python runs only up to this many rows"
    )
    p.add_argument("--read-repeats", type=int, default=3, help="runs of each read query per contender (median)")
    p.add_argument("--driver-memory", default="8g", help="spark.driver.memory of the classic sessions and the server")
    p.add_argument("--rows-per-file", type=int, default=2_000_000, help="rows per generated Parquet file")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--contender-timeout", type=int, default=3600, help="seconds before a contender is killed")
    p.add_argument(
        "--work",
        default=None,
        help="input and outputs (default: benchmarks/out/format-work-<rows>); deleted at the end unless --keep-work",
    )
    p.add_argument("--keep-work", action="store_true")
    p.add_argument("--out", default=None, help="results JSON (and a .md beside it)")
    p.add_argument("--log", default=None, help="progress log file (also on stderr)")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one contender in this process
    p.add_argument("--mode", default="classic", help=argparse.SUPPRESS)
    p.add_argument("--url", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rows < 100 or args.read_repeats < 1:
        p.error("--rows must be at least 100 and --read-repeats at least 1")
    setup_logging(log, args.log)
    if args.step:
        work = Path(args.work)
        if args.step == "generate":
            res = generate(work, args.rows, args.seed, args.rows_per_file, args.driver_memory)
        else:
            res = run_contender(args.step, args.mode, work, args)
        (work / f"{args.mode}-{args.step}.json").write_text(json.dumps(res))
        return 0

    modes = parse_list(args.modes, MODES, "modes")
    names = plan(parse_contenders(args.contenders), args.rows, args.python_max_rows)
    work = Path(args.work) if args.work else ROOT / "benchmarks" / "out" / f"format-work-{args.rows}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    freeze_shim(work / "shim")
    command = " ".join(["format_bench"] + list(argv if argv is not None else sys.argv[1:]))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "machine": _machine(),
        "rows": args.rows,
        "driver_memory": args.driver_memory,
        "modes": modes,
        "contenders": names,
        "read_repeats": args.read_repeats,
        "load_start": _load(),
        "results": {},
        "ratios": {},
        "shim_start": shim_jar_state(),
    }

    def save() -> None:
        results["load_end"] = _load()
        if (work / "shim").exists():  # the copy this run loads (gone once the work directory is deleted)
            results["shim_end"] = shim_jar_state()
        if args.out:  # after every contender: a run cut short keeps what it measured
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(results, indent=2))

    server: ConnectServer | None = None
    try:
        log.info("generating %s rows of Parquet input under %s", f"{args.rows:,}", work)
        gen = _spawn(args, work, "generate", "classic", None)
        results["input"], results["generate_s"] = gen["input"], gen["write_s"]
        for mode in modes:
            (work / mode).mkdir()
            if mode == "connect":
                server = ConnectServer(work / "connect", args.driver_memory)
                results["connect"] = {
                    "url": server.url,
                    "start_s": server.start_s,
                    "lance_cpu_threads": server.lance_cpu_threads,
                }
            results["results"][mode] = {}
            for name in names:
                log.info("%s %s: start (load %s)", mode, name, _load())
                res = _spawn(args, work, name, mode, server)
                results["results"][mode][name] = res
                results["ratios"][mode] = ratios(results["results"][mode])
                log.info("%s %s: %s", mode, name, {k: v for k, v in res.items() if k.endswith("_s")})
                save()
            if server:
                results["connect"]["server_hwm_end"] = server.hwm()
                server.stop()
                server = None
            shutil.rmtree(work / mode, ignore_errors=True)
    finally:
        if server:
            server.stop()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    save()
    text = markdown(results)
    if args.out:
        Path(args.out).with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
