"""``df.write.format("omnigraph")`` through the Python source against its own API floor and Parquet.

The session has no JVM shim on its class path (the case the Python DataSource writer serves), so
``format("omnigraph")`` is this package's Python source; ``engine=python`` is passed as well. The
input is generated once as Parquet files (``<work>/input``: ``--rows`` ``Item`` rows with a
``String @key``, the rows of :func:`benchmarks.format_bench.item_frame`). Three contenders, each
write in its own fresh process, reading the input files:

* ``parquet``: ``df.write.parquet`` (the baseline);
* ``floor``: ``df.write.format("omnigraph_bench_floor")``, a Python writer that only counts its
  rows (``benchmarks/floor.py``): the API's own cost, paid before any connector code runs;
* ``omnigraph``: ``df.write.format("omnigraph").option("type", "Item").option("engine", "python")
  .mode("append")`` into a fresh graph (``Graph.init`` untimed).

With ``--phases``, every repeat also runs the connector's own work without Spark, in a fresh
process per version (``phases``, and ``phases_base`` on ``--base-code``): the Python writer's
``write`` over the input's Arrow batches (10,000 rows each) as two tasks, one after the other,
then its driver-side ``commit`` (the load-wide checks, the commit); timed apart (``tasks_s``,
``commit_s``). Spark's own share (the JVM -> Python hop) is what the floor measures.

Every repeat runs the three in turn (the order reversed every other repeat); ratios are per
repeat (seconds of the baseline over the contender's; > 1 = faster), reported as medians with the
load average before and after each contender. ``--code DIR`` runs the contenders on the package
in ``DIR`` (e.g. ``git archive <commit> omnigraph_spark | tar -x -C DIR``) instead of this
checkout's; ``--base-code DIR`` adds a fourth contender, ``omnigraph_base``: the same
``omnigraph`` write on the package in ``DIR``, in the same repeats, so two versions are compared
under the same (shared machine's) load.

    .venv/bin/python -m benchmarks.python_source_bench --rows 1000000 --repeats 3 \\
        --out benchmarks/out/python-source-1m.json
    git archive <commit> omnigraph_spark | tar -x -C /tmp/base   # then, against that commit:
    .venv/bin/python -m benchmarks.python_source_bench --rows 1000000 --repeats 3 --base-code /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.format_bench import SCHEMA

ROOT = Path(__file__).resolve().parents[1]
CONTENDERS = ("parquet", "floor", "omnigraph")


def session():
    """local[2] with the embedded default's settings and no shim on the class path."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from omnigraph_spark import register
    from omnigraph_spark.demo import embedded_settings, quiet_warnings
    from omnigraph_spark.spark.runtime import set_local_lance_threads

    set_local_lance_threads("local[2]")
    quiet_warnings()
    b = SparkSession.builder.master("local[2]").appName("omnigraph-python-source-bench")
    for k, v in {**embedded_settings(), "spark.driver.memory": "4g"}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    from benchmarks.floor import FloorSource

    spark.dataSource.register(FloorSource)
    return spark


def phases(work: Path) -> dict[str, Any]:
    """The Python writer's tasks and commit in this process (no Spark), on the input files."""
    import pyarrow.parquet as pq

    import omnigraph_spark
    from omnigraph_spark import Graph
    from omnigraph_spark.spark.writer import OmnigraphWriter

    table = pq.read_table(str(work / "input"))
    target = str(work / "out-phases")
    shutil.rmtree(target, ignore_errors=True)
    Graph.init(target, SCHEMA)
    w = OmnigraphWriter({"path": target, "type": "Item", "engine": "python"}, None, False)
    half = table.num_rows // 2
    t0 = time.perf_counter()
    msgs = [w.write(iter(part.to_batches(max_chunksize=10_000))) for part in (table.slice(0, half), table.slice(half))]
    t1 = time.perf_counter()
    w.commit(msgs)
    t2 = time.perf_counter()
    shutil.rmtree(target, ignore_errors=True)
    return {
        "package": omnigraph_spark.__file__,
        "tasks_s": round(t1 - t0, 3),
        "commit_s": round(t2 - t1, 3),
        "write_s": round(t2 - t0, 3),
        "key_hashes": all(m.staged[0].key_hashes is not None for m in msgs),
    }


def step(name: str, work: Path, out: Path) -> dict[str, Any]:
    """One contender's write, in this (fresh) process."""
    if name in ("phases", "phases_base"):
        res = {"contender": name, **phases(work)}
        out.write_text(json.dumps(res))
        return res
    name = "omnigraph" if name == "omnigraph_base" else name  # the same write, on other code
    import omnigraph_spark
    from omnigraph_spark import Graph

    spark = session()
    src = spark.read.parquet(str(work / "input"))
    target = str(work / f"out-{name}")
    shutil.rmtree(target, ignore_errors=True)
    res: dict[str, Any] = {"contender": name, "package": omnigraph_spark.__file__}
    t0 = time.perf_counter()
    if name == "parquet":
        src.write.parquet(target)
    elif name == "floor":
        from benchmarks.floor import NAME

        src.write.format(NAME).mode("append").save()
    else:
        Graph.init(target, SCHEMA)
        t0 = time.perf_counter()
        src.write.format("omnigraph").option("type", "Item").option("engine", "python").mode("append").save(target)
    res["write_s"] = round(time.perf_counter() - t0, 3)
    if name == "omnigraph":
        g = Graph.open(target)
        res["rows"] = g.open_table("node:Item", g.snapshot()).count_rows()
    spark.stop()
    shutil.rmtree(target, ignore_errors=True)
    out.write_text(json.dumps(res))
    return res


def generate(work: Path, rows: int, seed: int) -> float:
    from benchmarks.format_bench import item_frame

    spark = session()
    t0 = time.perf_counter()
    item_frame(spark, rows, seed, 2).write.mode("overwrite").parquet(str(work / "input"))
    spark.stop()
    return round(time.perf_counter() - t0, 1)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spawn(args, work: Path, name: str) -> dict[str, Any]:
    code = args.base_code if name.endswith("_base") else args.code
    out = work / f"{name}.json"
    out.unlink(missing_ok=True)
    path = [p for p in [code, str(ROOT)] if p] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(path),
    )
    # -m puts the working directory first on sys.path: the code's directory, or the checkout
    cmd = [sys.executable, "-m", "benchmarks.python_source_bench", "--step", name, "--work", str(work)]
    load0 = _load()
    with open(work / f"{name}.stderr", "w") as err:
        rc = subprocess.call(cmd, cwd=code or ROOT, env=env, stdout=err, stderr=subprocess.STDOUT)
    if rc != 0:
        raise RuntimeError(f"{name} exited {rc}:\n" + (work / f"{name}.stderr").read_text(errors="replace")[-4000:])
    res = json.loads(out.read_text())
    res["load"] = [load0, _load()]
    return res


def ratios(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, float]:
    """Medians over repeats of per-repeat ratios: the baseline's seconds over the contender's
    (> 1: the contender is faster)."""

    def med(base: str, who: str) -> float:
        return round(statistics.median(r[base]["write_s"] / r[who]["write_s"] for r in runs), 3)

    out = {
        "omnigraph_vs_parquet": med("parquet", "omnigraph"),
        "omnigraph_vs_floor": med("floor", "omnigraph"),
        "floor_vs_parquet": med("parquet", "floor"),
    }
    if "phases" in runs[0]:
        for what in ("tasks_s", "commit_s"):
            out[f"phases_{what}"] = round(statistics.median(r["phases"][what] for r in runs), 3)
            if "phases_base" in runs[0]:
                out[f"phases_base_{what}"] = round(statistics.median(r["phases_base"][what] for r in runs), 3)
    if "omnigraph_base" in runs[0]:
        out.update(
            omnigraph_base_vs_parquet=med("parquet", "omnigraph_base"),
            omnigraph_base_vs_floor=med("floor", "omnigraph_base"),
            omnigraph_vs_omnigraph_base=med("omnigraph_base", "omnigraph"),
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work", default=None, help="input and outputs (default: benchmarks/out/python-source-work-<rows>)")
    p.add_argument("--code", default=None, help="run the contenders on the omnigraph_spark package in this directory")
    p.add_argument(
        "--base-code",
        default=None,
        help="add contender omnigraph_base: the omnigraph write on the omnigraph_spark package in this directory",
    )
    p.add_argument("--phases", action="store_true", help="also time the writer's tasks and commit without Spark")
    p.add_argument("--out", default=None, help="results JSON")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one contender in this process
    args = p.parse_args(argv)
    work = Path(args.work or ROOT / "benchmarks" / "out" / f"python-source-work-{args.rows}").resolve()
    if args.step:
        step(args.step, work, work / f"{args.step}.json")
        return 0
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "rows": args.rows,
        "repeats": args.repeats,
        "cores": os.cpu_count(),
        "code": args.code or str(ROOT),
        "base_code": args.base_code,
        "load_start": _load(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    if not (work / "input").exists():
        result["generate_s"] = generate(work, args.rows, args.seed)
    names = list(CONTENDERS) + (["omnigraph_base"] if args.base_code else [])
    if args.phases:
        names += ["phases"] + (["phases_base"] if args.base_code else [])
    runs: list[dict[str, dict[str, Any]]] = []
    for r in range(args.repeats):
        order = names if r % 2 == 0 else names[::-1]
        runs.append({name: _spawn(args, work, name) for name in order})
        print(
            f"repeat {r}: "
            + ", ".join(f"{n} {runs[-1][n]['write_s']:.2f}s (load {runs[-1][n]['load'][0][0]})" for n in names),
            flush=True,
        )
    result.update(runs=runs, ratios=ratios(runs), load_end=_load())
    print(json.dumps(result["ratios"]), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
