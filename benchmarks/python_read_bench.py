"""Filtered and full reads through the Python source (no JVM shim) against Spark's Parquet reader.

The input is generated once as Parquet files (``<work>/input``): ``--rows`` ``Pay`` edges
between ``Acct`` nodes (a node per eight edges), ten columns: the edge's ``id``, ``src``,
``dst``, ``amount: I64`` (``idx * 7919 % 500``, so ``amount < 5`` selects 1 %, spread evenly),
``fee: F64?``, ``memo: String?``, ``day: Date?``, ``channel: enum?`` and ``tags: [String]?``
(each optional column null on a fixed share of rows). The graph (``<work>/graph``) is built from
those files through the store layer (``writes.stage`` + ``commit_load``, untimed, the engine's
indexes included), so both sides read the same rows.

Contenders, each query in its own fresh process (a ``local[2]`` session with the embedded
default's settings and no shim on the class path), ``--read-repeats`` times in that process:

* ``parquet``: ``spark.read.parquet(<input>/edges)``, the baseline;
* ``omnigraph``: ``format("omnigraph").option("type", "Pay").option("pushdown", "true")``;
* ``omnigraph_columns``: the same with ``.option("columns", "amount,fee")`` (the columns the
  aggregate uses);
* ``omnigraph_default``: ``format("omnigraph")`` without the ``pushdown`` option: what a read
  gets on a pyspark whose Python DataSource API keeps the planned read on the loaded
  DataFrame (no ``DataSourceReader.pushLimit``): Spark applies the filter to every row read.

Queries (``--queries``):

* ``filter_rows``: ``amount < 5``, every column of the matching rows into Spark's ``noop`` sink;
* ``filter_agg``: ``amount < 5``, then ``count(*)`` and ``sum(fee)`` (Parquet reads two columns);
* ``full``: every column of every row into the ``noop`` sink.

The first run of a query in its process is ``cold_s`` (Spark's and the Python workers' start,
the first Lance open); the median of the others is ``warm_s``. Every round runs every
(contender, query) pair, the order reversed every other round. Ratios are Parquet's seconds
over the contender's for the same query in the same round (> 1: faster), medians over rounds,
warm and cold, and the same for the warm runs' CPU seconds of the contender's whole process tree
(driver, JVM, Python workers), which a shared machine's load disturbs less than wall time.

    .venv/bin/python -m benchmarks.python_read_bench --rows 4000000 --rounds 2 \\
        --out benchmarks/out/python-read-4m.json
    .venv/bin/python -m benchmarks.python_read_bench --rows 48000000 --rounds 2 --driver-memory 8g \\
        --out benchmarks/out/python-read-48m.json
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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import python_source_session, tree_cpu_s

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("benchmarks.python_read_bench")

SCHEMA = """node Acct {
    name: String @key
}

edge Pay: Acct -> Acct {
    amount: I64
    fee: F64?
    memo: String?
    day: Date?
    channel: enum(app, branch, web)?
    tags: [String]?
}
"""
#: 1 % of the edges: amount = idx * 7919 % 500, and 7919 is prime to 500
SELECTIVE = 5
AGG_COLUMNS = "amount,fee"
QUERIES = ("filter_rows", "filter_agg", "full")
#: which queries each contender runs (the columns option only fits the aggregate)
CONTENDERS = {
    "parquet": QUERIES,
    "omnigraph": QUERIES,
    "omnigraph_columns": ("filter_agg",),
    "omnigraph_default": ("filter_rows", "filter_agg"),
}


def session(driver_memory: str):
    """local[2] with the embedded default's settings (filter pushdown conf on) and no shim."""
    return python_source_session("omnigraph-python-read-bench", driver_memory)


def generate(work: Path, rows: int, seed: int, driver_memory: str) -> float:
    """Parquet input: ``<work>/input/nodes`` and ``<work>/input/edges``."""
    from pyspark.sql import functions as F

    spark = session(driver_memory)
    t0 = time.perf_counter()
    nodes = max(1, rows // 8)
    spark.range(0, nodes, 1, 2).select(F.format_string("acct-%09d", F.col("id")).alias("name")).write.mode(
        "overwrite"
    ).parquet(str(work / "input" / "nodes"))
    idx = F.col("id")
    spark.range(0, rows, 1, max(2, rows // 4_000_000)).select(
        F.format_string("pay-%012d", idx).alias("id"),
        F.format_string("acct-%09d", (idx * 7) % nodes).alias("src"),
        F.format_string("acct-%09d", (idx * 13 + 1) % nodes).alias("dst"),
        ((idx * 7919) % 500).alias("amount"),
        F.when(idx % 10 == 0, F.lit(None)).otherwise(F.rand(seed)).alias("fee"),
        F.when(idx % 4 == 0, F.lit(None)).otherwise(F.format_string("invoice %d", idx)).alias("memo"),
        F.when(idx % 7 == 0, F.lit(None))
        .otherwise(F.date_add(F.lit("2024-01-01").cast("date"), (idx % 365).cast("int")))
        .alias("day"),
        F.element_at(
            F.array(F.lit("app"), F.lit("branch"), F.lit("web"), F.lit(None)), (idx % 4 + 1).cast("int")
        ).alias("channel"),
        F.when(idx % 3 == 0, F.lit(None))
        .otherwise(F.array(F.lit("a"), F.concat(F.lit("t"), (idx % 17).cast("string"))))
        .alias("tags"),
    ).write.mode("overwrite").parquet(str(work / "input" / "edges"))
    spark.stop()
    return round(time.perf_counter() - t0, 1)


def build_graph(work: Path) -> float:
    """The graph from the input files, through the store layer (one commit, indexes included)."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    from omnigraph_spark import Graph
    from omnigraph_spark.store import writes

    target = work / "graph"
    shutil.rmtree(target, ignore_errors=True)
    g = Graph.init(str(target), SCHEMA)
    t0 = time.perf_counter()
    staged = []
    for key, files in (("node:Acct", "nodes"), ("edge:Pay", "edges")):
        t = writes.prepare_target(g, "main", key, "append")

        def batches(t=t, key=key, files=files):
            for b in pads.dataset(str(work / "input" / files), format="parquet").to_batches(batch_size=65_536):
                if key == "node:Acct":
                    b = pa.RecordBatch.from_arrays([b.column("name"), b.column("name")], names=["id", "name"])
                yield pa.RecordBatch.from_arrays([b.column(f.name).cast(f.type) for f in t.schema], schema=t.schema)

        staged.append(writes.stage(t, batches()))
    writes.commit_load(g, "main", staged)
    return round(time.perf_counter() - t0, 1)


def step(contender: str, query: str, work: Path, repeats: int, driver_memory: str) -> dict[str, Any]:
    """One contender's query, ``repeats`` times, in this (fresh) process."""
    from pyspark.sql import functions as F

    import omnigraph_spark

    spark = session(driver_memory)

    def frame():
        if contender == "parquet":
            return spark.read.parquet(str(work / "input" / "edges"))
        r = spark.read.format("omnigraph").option("type", "Pay")
        if contender != "omnigraph_default":
            r = r.option("pushdown", "true")  # one filtered query per load(): see spark/reader.py
        if contender == "omnigraph_columns":
            r = r.option("columns", AGG_COLUMNS)
        return r.load(str(work / "graph"))

    def run() -> Any:
        df = frame()  # a fresh load() per query, as the pushdown option asks
        if query == "full":
            df.write.format("noop").mode("overwrite").save()
            return None
        df = df.where(F.col("amount") < SELECTIVE)
        if query == "filter_rows":
            df.write.format("noop").mode("overwrite").save()
            return None
        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum("fee").alias("fee")).collect()[0]
        return [row["n"], row["fee"]]

    wall, cpu, answers = [], [], []
    me = os.getpid()
    for _ in range(repeats):
        c0, t0 = tree_cpu_s(me), time.perf_counter()
        answers.append(run())
        wall.append(round(time.perf_counter() - t0, 3))
        cpu.append(round(tree_cpu_s(me) - c0, 2))
    spark.stop()
    return {
        "contender": contender,
        "query": query,
        "package": omnigraph_spark.__file__,
        "wall_s": wall,
        "cpu_s": cpu,
        "cold_s": wall[0],
        "warm_s": statistics.median(wall[1:]) if len(wall) > 1 else wall[0],
        "warm_cpu_s": statistics.median(cpu[1:]) if len(cpu) > 1 else cpu[0],
        "answer": answers[-1],
    }


def check_answers(runs: dict[str, dict[str, Any]]) -> None:
    """Every contender's aggregate is the same count and (up to summation order) the same sum."""
    first: dict[str, list] = {}
    for k, v in runs.items():
        if v["answer"] is None:
            continue
        want = first.setdefault(k.split(":")[1], v["answer"])
        n, fee = v["answer"]
        if n != want[0] or abs(fee - want[1]) > 1e-9 * max(1.0, abs(want[1])):
            raise RuntimeError(f"{k} answered {v['answer']}, another contender {want}")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spawn(args, work: Path, contender: str, query: str) -> dict[str, Any]:
    out = work / f"{contender}-{query}.json"
    out.unlink(missing_ok=True)
    path = [str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(path),
    )
    cmd = [sys.executable, "-m", "benchmarks.python_read_bench", "--work", str(work), "--step", f"{contender}:{query}"]
    cmd += ["--read-repeats", str(args.read_repeats), "--driver-memory", args.driver_memory]
    load0 = _load()
    with open(work / f"{contender}-{query}.stderr", "w") as err:
        rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=err, stderr=subprocess.STDOUT)
    if rc != 0:
        raise RuntimeError(
            f"{contender}:{query} exited {rc}:\n"
            + (work / f"{contender}-{query}.stderr").read_text(errors="replace")[-4000:]
        )
    res = json.loads(out.read_text())
    res["load"] = [load0, _load()]
    return res


def ratios(rounds: Sequence[dict[str, dict[str, Any]]]) -> dict[str, float]:
    """Per query and contender: medians over rounds of Parquet's seconds over the contender's,
    warm, cold and the warm runs' CPU seconds (> 1: the contender is faster or uses less)."""
    out: dict[str, float] = {}
    for name, queries in CONTENDERS.items():
        if name == "parquet":
            continue
        for q in queries:
            for what in ("warm_s", "cold_s", "warm_cpu_s"):
                vals = [
                    r[f"parquet:{q}"][what] / r[f"{name}:{q}"][what]
                    for r in rounds
                    if f"{name}:{q}" in r and what in r[f"{name}:{q}"]
                ]
                if vals:
                    out[f"{name}_vs_parquet.{q}.{what[:-2]}"] = round(statistics.median(vals), 3)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=4_000_000, help="Pay edges (and a node per eight edges)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--read-repeats", type=int, default=3, help="runs of a query in its process (first = cold)")
    p.add_argument("--queries", default=",".join(QUERIES))
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument(
        "--work", default=None, help="input, graph, outputs (default benchmarks/out/python-read-work-<rows>)"
    )
    p.add_argument("--out", default=None, help="results JSON")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: contender:query in this process
    args = p.parse_args(argv)
    work = Path(args.work or ROOT / "benchmarks" / "out" / f"python-read-work-{args.rows}").resolve()
    if args.step:
        contender, query = args.step.split(":")
        res = step(contender, query, work, args.read_repeats, args.driver_memory)
        (work / f"{contender}-{query}.json").write_text(json.dumps(res))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "rows": args.rows,
        "rounds": args.rounds,
        "read_repeats": args.read_repeats,
        "cores": os.cpu_count(),
        "load_start": _load(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    if not (work / "input" / "edges").exists():
        result["generate_s"] = generate(work, args.rows, args.seed, args.driver_memory)
        log.info("input generated in %s s", result["generate_s"])
    if not (work / "graph").exists():
        result["build_s"] = build_graph(work)
        log.info("graph built in %s s", result["build_s"])
    queries = args.queries.split(",")
    pairs = [(c, q) for c in args.contenders.split(",") for q in CONTENDERS[c] if q in queries]
    rounds: list[dict[str, dict[str, Any]]] = []
    for r in range(args.rounds):
        runs = {}
        for c, q in pairs if r % 2 == 0 else pairs[::-1]:
            runs[f"{c}:{q}"] = res = _spawn(args, work, c, q)
            log.info(
                "round %d %s %s: warm %.2f s (cpu %.1f s), cold %.2f s, load %s, answer %s",
                r,
                c,
                q,
                res["warm_s"],
                res["warm_cpu_s"],
                res["cold_s"],
                res["load"][0][0],
                res["answer"],
            )
        rounds.append(runs)
        check_answers(runs)
    result.update(runs=rounds, ratios=ratios(rounds), load_end=_load())
    print(json.dumps(result["ratios"], indent=1), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
