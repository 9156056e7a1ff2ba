"""format("omnigraph") against Parquet on a Spark standalone cluster: writes and reads from Parquet files.

A master and two workers on this machine (``tests/standalone_cluster.py``: each a JVM of its own,
bound to 127.0.0.1, ``--cores 1`` each, ``--worker-memory``), started once for the run and
stopped at its end, also on failure. The input is generated ONCE as Parquet files
(``<work>/input``, before the cluster starts) by ``format_bench``'s generator: ``--rows`` ``Item``
rows, seeded. Every contender then runs as its own application: a fresh driver process (what a
``spark-submit`` of a Python job is) whose session is built with
``omnigraph_spark.configure_spark(builder)`` on the ``spark://`` master, with
``spark.executor.memory`` (``--executor-memory``), one core per executor, so each application
gets one executor on each worker. The Parquet contenders' sessions leave out the shim's driver
plugin (``spark.plugins`` empty), as ``format_bench``'s baselines do. The contenders are
``format_bench``'s (the same code, :func:`benchmarks.format_bench.run_contender`):

* ``write_parquet``: Parquet files -> ``df.write.parquet`` (the baseline of the write ratio);
* ``write_omnigraph``: Parquet files -> ``df.write.format("omnigraph").option("type", "Item")
  .option("engine", "jvm").mode("append")`` into a fresh graph (``Graph.init`` untimed);
* ``read_parquet`` / ``read_omnigraph``: what those two wrote, a full scan aggregate and a 1 %
  filter (``qty < 10``), ``--read-repeats`` times each in the application (median; the first is cold).

Ratios: Parquet's seconds over the contender's, same run (> 1 = faster than Parquet). With
``--rounds N`` every contender runs N times on the same cluster, odd rounds in reverse order on
each side (omnigraph's writer before Parquet's, its reader before Parquet's), each round into
fresh outputs; the ratio reported is the median of the rounds' ratios.

Memory: the driver's VmHWM (its Python, its JVM, the Python processes under that JVM: the
provider's bridge, Spark's driver-side Python workers) read from ``/proc`` by the driver before its
session stops; each executor's VmHWM (the executor JVM a worker started for the application, the
Python workers under it), sampled from ``/proc`` by this parent every 0.5 s while the application
runs (the executors exit with it). The load average is recorded before and after each contender.

    .venv/bin/python -m benchmarks.cluster_bench --rows 1000000 \\
        --out benchmarks/out/cluster-1m.json --log benchmarks/out/cluster-1m.log
    .venv/bin/python -m benchmarks.cluster_bench --rows 1000000 --rounds 3 --out benchmarks/out/cluster-1m-r3.json
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

from benchmarks.common import descendants, proc_table, read_text, setup_logging
from benchmarks.format_bench import (
    BASELINE,
    Sampler,
    fmt_ratio,
    freeze_shim,
    generate,
    kind,
    parse_contenders,
    ratios,
    run_contender,
    shim_jar_state,
)
from benchmarks.scale_bench import _machine, status_kb
from tests.standalone_cluster import cluster

log = logging.getLogger("benchmarks.cluster_bench")

ROOT = Path(__file__).resolve().parents[1]
MODE = "cluster"
DEFAULT_CONTENDERS = "write_parquet,write_omnigraph,read_parquet,read_omnigraph"
WORKERS = 2
WORKER_CORES = 1


# -- pure parts ------------------------------------------------------------------------------------


def executor_peaks(hwm_kb: Mapping[int, int], roles: Mapping[int, str]) -> dict[str, Any]:
    """One worker's executors from the last VmHWM (kB) seen of each process under it and its
    role (``executor_jvm``, ``python``): the executor JVMs' largest peak and the Python workers'
    largest and summed peaks (MB), with their counts."""
    jvm = [hwm_kb[p] for p, r in roles.items() if r == "executor_jvm"]
    py = [hwm_kb[p] for p, r in roles.items() if r == "python"]
    return {
        "executor_jvm_hwm_mb": round(max(jvm, default=0) / 1024),
        "executor_jvms": len(jvm),
        "python_max_hwm_mb": round(max(py, default=0) / 1024),
        "python_sum_hwm_mb": round(sum(py) / 1024),
        "pythons": len(py),
    }


def round_order(names: Sequence[str], k: int) -> list[str]:
    """The contenders' order in round ``k`` (0-based): as listed in even rounds; in odd rounds the
    writers in reverse among themselves, then the readers in reverse (every reader still after
    every writer), so neither side of a ratio always runs first."""
    writers = [n for n in names if kind(n) == "write"]
    readers = [n for n in names if kind(n) == "read"]
    if k % 2 == 0:
        return writers + readers
    return writers[::-1] + readers[::-1]


def median_ratios(per_round: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Per ratio key: the median over the rounds that have it (None when none has)."""
    keys = sorted({k for r in per_round for k in r})
    out: dict[str, float | None] = {}
    for k in keys:
        xs = [r[k] for r in per_round if r.get(k) is not None]
        out[k] = round(statistics.median(xs), 3) if xs else None
    return out


def executor_role(comm: str) -> str | None:
    """What a process under a worker's JVM is: its executor JVM or a Python worker, else None."""
    if comm == "java":
        return "executor_jvm"
    if comm.startswith("python"):
        return "python"
    return None


# -- the contenders (each in its own process) -------------------------------------------------------


def cluster_session(master: str, driver_memory: str, executor_memory: str, baseline: bool):
    """The application's session, built as a user's job on a standalone cluster is (docs/api.md):
    ``configure_spark(builder)`` on the ``spark://`` master; a ``baseline`` without the driver plugin."""
    from pyspark.sql import SparkSession

    import omnigraph_spark
    from omnigraph_spark.demo import embedded_settings

    settings = {
        **embedded_settings(),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": driver_memory,
        "spark.executor.memory": executor_memory,
        "spark.executor.cores": str(WORKER_CORES),
    }
    b = SparkSession.builder.master(master).appName("omnigraph-cluster-bench")
    for k, v in settings.items():
        b = b.config(k, v)
    b = omnigraph_spark.configure_spark(b)
    if baseline:
        b = b.config("spark.plugins", "")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def contender(name: str, work: Path, args) -> dict[str, Any]:
    """One contender as an application on ``--master``: format_bench's contender with this session."""
    return run_contender(
        name,
        MODE,
        work,
        args,
        session=lambda baseline: cluster_session(args.master, args.driver_memory, args.executor_memory, baseline),
    )


# -- the parent ------------------------------------------------------------------------------------


class ExecutorSampler:
    """The VmHWM of every process under each worker JVM (``name -> pid``), every ``interval`` s:
    a process's peak is the last value read while it lived."""

    def __init__(self, workers: Mapping[str, int], interval: float = 0.5) -> None:
        self.workers, self.interval = dict(workers), interval
        self.hwm: dict[str, dict[int, int]] = {w: {} for w in self.workers}
        self.roles: dict[str, dict[int, str]] = {w: {} for w in self.workers}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _sample(self) -> None:
        t = proc_table()
        for w, root in self.workers.items():
            for p in descendants(t, root):
                r = executor_role(t[p][2])
                kb = status_kb(read_text(f"/proc/{p}/status"), "VmHWM") if r else 0
                if kb:
                    self.roles[w][p] = r
                    self.hwm[w][p] = max(self.hwm[w].get(p, 0), kb)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> dict[str, dict[str, Any]]:
        self._stop.set()
        self._t.join(timeout=10)
        return {w: executor_peaks(self.hwm[w], self.roles[w]) for w in self.workers}


def copy_logs(cluster_dir: Path, dest: Path) -> None:
    """The cluster's logs (``<name>.log``, each executor's ``stdout``/``stderr`` under
    ``<worker>/<app>/<executor>``) into ``dest``, same relative paths."""
    for f in cluster_dir.rglob("*"):
        if f.is_file() and (f.suffix == ".log" or f.name in ("stdout", "stderr")):
            to = dest / f.relative_to(cluster_dir)
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, to)


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spawn(args, work: Path, step: str, master: str | None, workers: Mapping[str, int]) -> dict[str, Any]:
    """``step`` (a contender, or ``generate``) as a fresh process of this module."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.cluster_bench",
        "--step",
        step,
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
        "--executor-memory",
        args.executor_memory,
        "--read-repeats",
        str(args.read_repeats),
    ]
    if master:
        cmd += ["--master", master]
    path = os.pathsep.join([str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(
        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=path, SPARK_LOCAL_IP="127.0.0.1"
    )
    load0, t0 = _load(), time.monotonic()
    with open(work / f"{step}.stderr", "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=err, stderr=subprocess.STDOUT)
        driver = Sampler({"driver": proc.pid})
        executors = ExecutorSampler(workers)
        try:
            rc = proc.wait(timeout=args.contender_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = "timeout"
        except BaseException:  # the run is stopped (SIGTERM, ^C): the application goes with it
            proc.kill()
            proc.wait()
            raise
        finally:
            peaks, execs = driver.stop(), executors.stop()
    if rc != 0:
        tail = (work / f"{step}.stderr").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"{step} exited {rc}:\n{tail}")
    res = json.loads((work / f"{step}.json").read_text())
    res["memory_rss_sampled"] = peaks
    if workers:
        res["executors"] = execs
    res["load"] = [load0, _load()]
    res["subprocess_s"] = round(time.monotonic() - t0, 1)
    return res


def _exec_cell(c: Mapping[str, Any], key: str) -> str:
    return " / ".join(f"{e[key]:,}" for e in c.get("executors", {}).values())


def markdown(r: Mapping[str, Any]) -> str:
    m, inp, cl = r["machine"], r["input"], r["cluster"]
    lines = [
        (
            f'# format("omnigraph") vs Parquet on a standalone cluster, {r["rows"]:,} rows from Parquet files '
            f"({r['date']})"
        ),
        "",
        f"`{r['command']}`",
        "",
        (
            f"Machine: {m['cores']} cores (shared), {m.get('ram_gib')} GiB RAM, Python {m['python']}, "
            f"pyspark {m['pyspark']}, pylance {m.get('pylance')}; commit {str(m.get('commit'))[:10]}; "
            f"load average {r['load_start']} at start, {r.get('load_end')} at end."
        ),
        "",
        (
            f"Cluster: one master and {cl['workers']} workers on 127.0.0.1 (each a JVM of its own, "
            f"{cl['cores']} core, {cl['worker_memory']}), up in {cl['start_s']} s; each contender a fresh "
            f"application (driver process) with spark.driver.memory {r['driver_memory']}, spark.executor.memory "
            f"{r['executor_memory']}, one executor per worker. Shim jar sha256 "
            f"{str(r.get('shim_start', {}).get('sha256'))[:12]} at start, "
            f"{str(r.get('shim_end', {}).get('sha256'))[:12]} at end."
        ),
        "",
        (
            f"Input: {r['rows']:,} Item rows in {inp['files']} Parquet files ({inp['bytes'] / 2**20:,.0f} MB), "
            f"generated in {r['generate_s']} s (local[2], before the cluster started). Reads: "
            f"{r['read_repeats']} repeats per query in the application, median (cold = the first). "
            f"Rounds: {len(r['rounds'])} (each contender once per round; odd rounds run each side's "
            "contenders in reverse order)."
        ),
        "",
    ]
    rounds = r["rounds"]
    if len(rounds) > 1:
        med = r["ratios"]
        lines += [
            "Median ratio over the rounds (each round's in brackets): "
            + "; ".join(
                f"{k} {fmt_ratio(v)} ({', '.join(fmt_ratio(rd['ratios'].get(k)) for rd in rounds)})"
                for k, v in med.items()
            )
            + ".",
            "",
        ]
    for i, rd in enumerate(rounds):
        lines += _round_table(rd, f"Round {i + 1}: " + ", ".join(rd["order"]) if len(rounds) > 1 else "")
    lines += [
        (
            "Ratios: Parquet's seconds over the contender's, same run (> 1 = faster than Parquet). Driver "
            "peaks: VmHWM from /proc read by the driver before its session stopped (the driver's Python "
            "children: the provider's bridge process and Spark's driver-side Python workers). Executor peaks: "
            "VmHWM of the executor JVM each worker started for the application and of the largest Python "
            "worker under it, sampled from /proc by the parent every 0.5 s. Load: the 1-minute load average "
            "when the application started and when it ended. 1-row write: a one-row write through the same "
            "path into a fresh target after the timed one (the fixed cost per write); plan: `load()` and "
            "its schema."
        )
    ]
    return "\n".join(lines) + "\n"


def _round_table(rd: Mapping[str, Any], title: str) -> list[str]:
    lines = ([f"## {title}", ""] if title else []) + [
        (
            "| contender | rows | seconds | vs Parquet | 1-row write / plan (s) | driver Python / JVM peak (MB) "
            "| driver's Python children max (MB) | executor JVM peak, worker1 / worker2 (MB) "
            "| executor Python workers max, worker1 / worker2 (MB) | load before -> after |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rat = rd["ratios"]
    for name, c in rd["results"].items():
        h = c["memory_hwm"]
        mem = [
            f"{h['driver_python_hwm_mb']:,} / {h['driver_jvm_hwm_mb']:,}",
            f"{h['worker_max_hwm_mb']:,}",
            _exec_cell(c, "executor_jvm_hwm_mb"),
            _exec_cell(c, "python_max_hwm_mb"),
        ]
        load = f"{c['load'][0][0]} -> {c['load'][1][0]}"
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
    replaced = [
        f"{name} on {w} ({e['executor_jvms']})"
        for name, c in rd["results"].items()
        for w, e in c.get("executors", {}).items()
        if e["executor_jvms"] != 1
    ]
    if replaced:
        lines += [
            "",
            "Executor JVMs other than one per worker and application (a lost executor is replaced): "
            + ", ".join(replaced)
            + ".",
        ]
    return lines + [""]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="Item rows of the input")
    p.add_argument(
        "--contenders",
        default=DEFAULT_CONTENDERS,
        help=f"comma-separated, in run order (a reader after its writer); default {DEFAULT_CONTENDERS}",
    )
    p.add_argument("--read-repeats", type=int, default=3, help="runs of each read query per contender (median)")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="every contender once per round, on the same cluster; "
        "odd rounds reverse each side's order; the ratio reported is the median over rounds",
    )
    p.add_argument("--driver-memory", default="2g", help="spark.driver.memory of each application")
    p.add_argument("--executor-memory", default="2g", help="spark.executor.memory of each application")
    p.add_argument("--worker-memory", default="3g", help="memory each worker offers (at least --executor-memory)")
    p.add_argument("--rows-per-file", type=int, default=2_000_000, help="rows per generated Parquet file")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--contender-timeout", type=int, default=3600, help="seconds before a contender is killed")
    p.add_argument(
        "--work",
        default=None,
        help="input, outputs, the cluster's logs (default: "
        "benchmarks/out/cluster-work-<rows>); deleted at the end unless --keep-work",
    )
    p.add_argument("--keep-work", action="store_true")
    p.add_argument(
        "--logs",
        default=None,
        help="copy the master's, the workers' and the executors' logs "
        "(stdout, stderr) here before the work directory is deleted",
    )
    p.add_argument("--out", default=None, help="results JSON (and a .md beside it)")
    p.add_argument("--log", default=None, help="progress log file (also on stderr)")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one contender in this process
    p.add_argument("--master", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rows < 100 or args.read_repeats < 1 or args.rounds < 1:
        p.error("--rows must be at least 100, --read-repeats and --rounds at least 1")
    setup_logging(log, args.log)
    if args.step:
        work = Path(args.work)
        if args.step == "generate":
            res = generate(work, args.rows, args.seed, args.rows_per_file, args.driver_memory)
        else:
            res = contender(args.step, work, args)
        (work / f"{args.step}.json").write_text(json.dumps(res))
        return 0

    names = parse_contenders(args.contenders)
    signal.signal(signal.SIGTERM, _terminate)  # a killed run still stops its master and workers
    work = Path(args.work) if args.work else ROOT / "benchmarks" / "out" / f"cluster-work-{args.rows}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    freeze_shim(work / "shim")
    command = " ".join(["cluster_bench"] + list(argv if argv is not None else sys.argv[1:]))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "machine": _machine(),
        "rows": args.rows,
        "driver_memory": args.driver_memory,
        "executor_memory": args.executor_memory,
        "contenders": names,
        "read_repeats": args.read_repeats,
        "load_start": _load(),
        "rounds": [],
        "ratios": {},
        "shim_start": shim_jar_state(),
    }

    def save() -> None:
        results["load_end"] = _load()
        if (work / "shim").exists():
            results["shim_end"] = shim_jar_state()
        if args.out:  # after every contender: a run cut short keeps what it measured
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(results, indent=2))

    try:
        log.info("generating %s rows of Parquet input under %s", f"{args.rows:,}", work)
        gen = _spawn(args, work, "generate", None, {})
        results["input"], results["generate_s"] = gen["input"], gen["write_s"]
        t0 = time.monotonic()
        with cluster(work / "standalone", workers=WORKERS, cores=WORKER_CORES, memory=args.worker_memory) as c:
            results["cluster"] = {
                "url": c.url,
                "workers": WORKERS,
                "cores": WORKER_CORES,
                "worker_memory": args.worker_memory,
                "start_s": round(time.monotonic() - t0, 1),
            }
            log.info("cluster %s up in %s s", c.url, results["cluster"]["start_s"])
            for i in range(args.rounds):
                rd: dict[str, Any] = {"order": round_order(names, i), "results": {}, "ratios": {}}
                results["rounds"].append(rd)
                (work / MODE).mkdir()  # this round's outputs
                for name in rd["order"]:
                    log.info("round %d %s: start (load %s)", i + 1, name, _load())
                    res = _spawn(args, work, name, c.url, {w: proc.pid for w, proc in c.workers.items()})
                    rd["results"][name] = res
                    rd["ratios"] = ratios(rd["results"])
                    results["ratios"] = median_ratios([x["ratios"] for x in results["rounds"]])
                    log.info(
                        "%s: %s; executors %s",
                        name,
                        {k: v for k, v in res.items() if k.endswith("_s")},
                        res.get("executors"),
                    )
                    save()
                shutil.rmtree(work / MODE)
        log.info("cluster stopped")
    finally:
        if args.logs:
            copy_logs(work / "standalone", Path(args.logs))
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
