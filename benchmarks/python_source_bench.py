"""``df.write.format("omnigraph")`` through the Python source against its own API floor and Parquet.

The session has no JVM shim on its class path (the case the Python DataSource writer serves), so
``format("omnigraph")`` is this package's Python source; ``engine=python`` is passed as well. The
input is generated once as Parquet files (``<work>/input/nodes`` and ``<work>/input/edges``):
``--rows`` in all, a quarter ``Item`` nodes and the rest ``Link`` edges between them, the rows
and schema of ``benchmarks/run.py`` (``node_frame``, ``edge_frame``, ``SCHEMA``; a ``String
@key``, an enum, a date and a list per node, a minted ULID id per edge), in files of
``--rows-per-file`` rows. Three contenders, each writing the nodes, then the edges, in its own
fresh process, reading the input files:

* ``parquet``: ``df.write.parquet`` (the baseline);
* ``floor``: ``df.write.format("omnigraph_bench_floor")``, a Python writer that only counts its
  rows (``benchmarks/floor.py``): the API's own cost, paid before any connector code runs;
* ``omnigraph``: ``df.write.format("omnigraph").option("type", "Item" / "Link")
  .option("engine", "python").mode("append")`` into a fresh graph (``Graph.init`` untimed): two
  graph commits, the edges' checked against the nodes'.

Each reports ``write_s`` (both tables), ``tables_s`` (each) and its peak memory: VmHWM of its
driver Python, its JVM and Spark's Python workers (the largest one and their sum), read from
/proc before its session stops, and the RSS of the same processes sampled every 0.5 s from this
process (``memory_rss_sampled``: it also sees the child process a commit builds the engine's
indexes in, gone by the time the contender reads its peaks). ``omnigraph`` also reports
``index_s``, the seconds each table's commit spent building the engine's indexes (invariant I23:
from the data commit's timestamp to the index commit's), and the ratios
``omnigraph_less_indexes_vs_floor`` (the floor's seconds over the write's less those) and
``omnigraph_index_s``.

With ``--phases``, every repeat also runs the connector's own work without Spark, in a fresh
process per version (``phases``, and ``phases_base`` on ``--base-code``): for the nodes, then the
edges, the Python writer's ``write`` over the input's Arrow batches (10,000 rows each) as two
tasks, one after the other, then its driver-side ``commit`` (the load-wide checks, the commit);
timed apart (``tasks_s``, ``commit_s``, and ``tables`` per table). Spark's own share (the JVM ->
Python hop) is what the floor measures.

With ``--small``, every repeat also runs two cold jobs of ``SMALL_ROWS`` node rows (the first
rows of the input): ``small_parquet`` writes them as Parquet and reads them back,
``small_omnigraph`` creates a graph, writes them through the Python source and reads them back;
each is timed as a whole process, from its start to its exit (``job_s``), so the ratio
``small_omnigraph_vs_parquet`` shows the fixed costs a small job pays.

Every repeat runs the contenders in turn (the order reversed every other repeat); ratios are per
repeat (seconds of the baseline over the contender's; > 1 = faster), reported as medians with the
load average before and after each contender, for both tables and for each (``_nodes``,
``_edges``). ``--code DIR`` runs the contenders on the package in ``DIR`` (e.g. ``git archive
<commit> omnigraph_spark | tar -x -C DIR``) instead of this checkout's; ``--base-code DIR`` adds
a fourth contender, ``omnigraph_base``: the same ``omnigraph`` write on the package in ``DIR``,
in the same repeats, so two versions are compared under the same (shared machine's) load.

    .venv/bin/python -m benchmarks.python_source_bench --rows 2000000 --repeats 3 \\
        --out benchmarks/out/python-source-2m.json
    git archive <commit> omnigraph_spark | tar -x -C /tmp/base   # then, against that commit:
    .venv/bin/python -m benchmarks.python_source_bench --rows 2000000 --repeats 3 --base-code /tmp/base
    # the issue's sizes (a quiet machine; ~20 GB of free memory):
    .venv/bin/python -m benchmarks.python_source_bench --rows 48000000 --repeats 2 --driver-memory 8g
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import python_source_session
from benchmarks.run import SCHEMA
from benchmarks.scale_bench import input_files, spawn_step, split_rows, tree_hwm

ROOT = Path(__file__).resolve().parents[1]
CONTENDERS = ("parquet", "floor", "omnigraph")
SMALL = ("small_parquet", "small_omnigraph")
#: rows of the cold small jobs (``--small``)
SMALL_ROWS = 1000
#: the graph's types, in load order, per input directory
TYPES = {"nodes": "Item", "edges": "Link"}


def session(driver_memory: str = "4g"):
    """local[2] with the embedded default's settings and no shim on the class path, the floor's
    source registered beside the connector's."""
    spark = python_source_session("omnigraph-python-source-bench", driver_memory)
    from benchmarks.floor import FloorSource

    spark.dataSource.register(FloorSource)
    return spark


def phases(work: Path) -> dict[str, Any]:
    """The Python writer's tasks and commit in this process (no Spark), on the input files: the
    nodes, then the edges."""
    import pyarrow.parquet as pq

    import omnigraph_spark
    from omnigraph_spark import Graph
    from omnigraph_spark.spark.writer import OmnigraphWriter

    target = str(work / "out-phases")
    shutil.rmtree(target, ignore_errors=True)
    Graph.init(target, SCHEMA)
    res: dict[str, Any] = {"package": omnigraph_spark.__file__, "tables": {}}
    for kind, type_name in TYPES.items():
        table = pq.read_table(str(work / "input" / kind))
        w = OmnigraphWriter({"path": target, "type": type_name, "engine": "python"}, None, False)
        half = table.num_rows // 2
        t0 = time.perf_counter()
        msgs = [
            w.write(iter(part.to_batches(max_chunksize=10_000))) for part in (table.slice(0, half), table.slice(half))
        ]
        t1 = time.perf_counter()
        w.commit(msgs)
        t2 = time.perf_counter()
        del table
        res["tables"][kind] = {"tasks_s": round(t1 - t0, 3), "commit_s": round(t2 - t1, 3)}
        if kind == "nodes":
            res["key_hashes"] = all(m.staged[0].key_hashes is not None for m in msgs)
    shutil.rmtree(target, ignore_errors=True)
    for what in ("tasks_s", "commit_s"):
        res[what] = round(sum(t[what] for t in res["tables"].values()), 3)
    res["write_s"] = round(res["tasks_s"] + res["commit_s"], 3)
    return res


def step(name: str, work: Path, out: Path, driver_memory: str = "4g") -> dict[str, Any]:
    """One contender's write of the nodes, then the edges, in this (fresh) process."""
    if name in ("phases", "phases_base"):
        res = {"contender": name, **phases(work)}
        out.write_text(json.dumps(res))
        return res
    if name in SMALL:
        return small_job(name, work, out, driver_memory)
    name = "omnigraph" if name == "omnigraph_base" else name  # the same write, on other code
    import omnigraph_spark
    from omnigraph_spark import Graph

    spark = session(driver_memory)
    target = str(work / f"out-{name}")
    shutil.rmtree(target, ignore_errors=True)
    res: dict[str, Any] = {"contender": name, "package": omnigraph_spark.__file__, "tables_s": {}}
    if name == "omnigraph":
        Graph.init(target, SCHEMA)
    for kind, type_name in TYPES.items():
        src = spark.read.parquet(str(work / "input" / kind))
        t0 = time.perf_counter()
        if name == "parquet":
            src.write.parquet(f"{target}/{kind}")
        elif name == "floor":
            from benchmarks.floor import NAME

            src.write.format(NAME).mode("append").save()
        else:
            src.write.format("omnigraph").option("type", type_name).option("engine", "python").mode("append").save(
                target
            )
        res["tables_s"][kind] = round(time.perf_counter() - t0, 3)
    res["write_s"] = round(sum(res["tables_s"].values()), 3)
    res["memory"] = tree_hwm(os.getpid())
    if name == "omnigraph":
        g = Graph.open(target)
        snap = g.snapshot()
        tables = {k: g.open_table(f"{k[:-1]}:{t}", snap) for k, t in TYPES.items()}
        res["rows"] = {k: ds.count_rows() for k, ds in tables.items()}
        res["index_s"] = {k: index_seconds(ds.versions(), ds.version) for k, ds in tables.items()}
    spark.stop()
    shutil.rmtree(target, ignore_errors=True)
    out.write_text(json.dumps(res))
    return res


def small_job(name: str, work: Path, out: Path, driver_memory: str) -> dict[str, Any]:
    """A cold small job in this (fresh) process: SMALL_ROWS node rows written, then read back."""
    from omnigraph_spark import Graph

    spark = session(driver_memory)
    target = str(work / f"out-{name}")
    shutil.rmtree(target, ignore_errors=True)
    t0 = time.perf_counter()
    src = spark.read.parquet(str(work / "input" / "nodes")).limit(SMALL_ROWS)
    if name == "small_parquet":
        src.write.parquet(target)
        back = spark.read.parquet(target).count()
    else:
        Graph.init(target, SCHEMA)
        src.write.format("omnigraph").option("type", "Item").option("engine", "python").mode("append").save(target)
        back = spark.read.format("omnigraph").option("type", "Item").option("engine", "python").load(target).count()
    res = {"contender": name, "rows": back, "write_s": round(time.perf_counter() - t0, 3)}
    spark.stop()
    shutil.rmtree(target, ignore_errors=True)
    out.write_text(json.dumps(res))
    return res


def index_seconds(versions: Sequence[dict[str, Any]], pinned: int) -> float:
    """Seconds a load spent building the engine's indexes (I23) of a table it wrote once into an
    empty one: from its data commit (the version before ``pinned``) to its index commit
    (``pinned``), read from the Lance versions' timestamps."""
    at = {v["version"]: v["timestamp"] for v in versions}
    if pinned - 1 not in at:
        return 0.0
    return round((at[pinned] - at[pinned - 1]).total_seconds(), 3)


def generate(work: Path, rows: int, seed: int, rows_per_file: int) -> dict[str, Any]:
    """The input Parquet files: ``rows`` split as :func:`benchmarks.scale_bench.split_rows` does
    (a quarter nodes), seeded and deterministic."""
    from benchmarks.run import edge_frame, node_frame

    n = split_rows(rows)
    spark = session()
    t0 = time.perf_counter()
    inp = work / "input"
    node_frame(spark, n["nodes"], seed, input_files(n["nodes"], rows_per_file)).write.mode("overwrite").parquet(
        str(inp / "nodes")
    )
    edge_frame(spark, n["edges"], n["nodes"], seed, input_files(n["edges"], rows_per_file)).write.mode(
        "overwrite"
    ).parquet(str(inp / "edges"))
    spark.stop()
    return {"nodes": n["nodes"], "edges": n["edges"], "generate_s": round(time.perf_counter() - t0, 1)}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spawn(args, work: Path, name: str) -> dict[str, Any]:
    code = args.base_code if name.endswith("_base") else args.code
    res, peaks, load, seconds = spawn_step(
        "benchmarks.python_source_bench", ["--driver-memory", args.driver_memory], work, name, code
    )
    res["job_s"] = round(seconds, 3)  # the whole process: start-up included
    res["memory_rss_sampled"] = peaks
    res["load"] = load
    return res


def ratios(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, float]:
    """Medians over repeats of per-repeat ratios: the baseline's seconds over the contender's
    (> 1: the contender is faster); for both tables, then for each (``_nodes``, ``_edges``)."""

    def med(base: str, who: str, kind: str | None = None) -> float:
        def s(r: dict[str, Any]) -> float:
            return r["write_s"] if kind is None else r["tables_s"][kind]

        return round(statistics.median(s(r[base]) / s(r[who]) for r in runs), 3)

    pairs = [("omnigraph_vs_parquet", "parquet", "omnigraph"), ("omnigraph_vs_floor", "floor", "omnigraph")]
    pairs.append(("floor_vs_parquet", "parquet", "floor"))
    if "omnigraph_base" in runs[0]:
        pairs += [
            ("omnigraph_base_vs_parquet", "parquet", "omnigraph_base"),
            ("omnigraph_base_vs_floor", "floor", "omnigraph_base"),
            ("omnigraph_vs_omnigraph_base", "omnigraph_base", "omnigraph"),
        ]
    out: dict[str, float] = {}
    for kind in (None, *TYPES):
        for label, base, who in pairs:
            out[label + ("" if kind is None else f"_{kind}")] = med(base, who, kind)
    for who in ("omnigraph", "omnigraph_base"):
        if who in runs[0] and "index_s" in runs[0][who]:
            # the write less its index builds (I23): the part a floor can be compared with
            out[f"{who}_less_indexes_vs_floor"] = round(
                statistics.median(
                    r["floor"]["write_s"] / (r[who]["write_s"] - sum(r[who]["index_s"].values())) for r in runs
                ),
                3,
            )
            out[f"{who}_index_s"] = round(statistics.median(sum(r[who]["index_s"].values()) for r in runs), 3)
    if "small_omnigraph" in runs[0]:
        out["small_omnigraph_vs_parquet"] = round(
            statistics.median(r["small_parquet"]["job_s"] / r["small_omnigraph"]["job_s"] for r in runs), 3
        )
    if "phases" in runs[0]:
        for what in ("tasks_s", "commit_s"):
            for p in ("phases", "phases_base"):
                if p in runs[0]:
                    out[f"{p}_{what}"] = round(statistics.median(r[p][what] for r in runs), 3)
    return out


def memory(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, int]]:
    """Per contender, the largest of each peak over the repeats (MB): the VmHWM the contender
    read, and the RSS sampled from outside (the index builds' child process included)."""
    out: dict[str, dict[str, int]] = {}
    for r in runs:
        for name, res in r.items():
            for k, v in {**(res.get("memory") or {}), **(res.get("memory_rss_sampled") or {})}.items():
                if isinstance(v, int) and k.endswith("_mb"):
                    out.setdefault(name, {})[k] = max(out.get(name, {}).get(k, 0), v)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rows-per-file", type=int, default=2_000_000, help="rows per generated Parquet file")
    p.add_argument("--driver-memory", default="4g", help="spark.driver.memory of every contender's session")
    p.add_argument("--work", default=None, help="input and outputs (default: benchmarks/out/python-source-graph-ROWS)")
    p.add_argument("--code", default=None, help="run the contenders on the omnigraph_spark package in this directory")
    p.add_argument(
        "--base-code",
        default=None,
        help="add contender omnigraph_base: the omnigraph write on the omnigraph_spark package in this directory",
    )
    p.add_argument("--phases", action="store_true", help="also time the writer's tasks and commit without Spark")
    p.add_argument("--small", action="store_true", help="also run the cold small jobs (SMALL_ROWS rows, write + read)")
    p.add_argument("--out", default=None, help="results JSON")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one contender in this process
    args = p.parse_args(argv)
    work = Path(args.work or ROOT / "benchmarks" / "out" / f"python-source-graph-{args.rows}").resolve()
    if args.step:
        step(args.step, work, work / f"{args.step}.json", args.driver_memory)
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
    if not (work / "input" / "edges").exists():
        result["input"] = generate(work, args.rows, args.seed, args.rows_per_file)
    names = list(CONTENDERS) + (["omnigraph_base"] if args.base_code else [])
    if args.small:
        names += list(SMALL)
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
    result.update(runs=runs, ratios=ratios(runs), memory_mb=memory(runs), load_end=_load())
    print(json.dumps(result["ratios"]), flush=True)
    print(json.dumps(result["memory_mb"]), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
