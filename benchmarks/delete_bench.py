"""A node delete's driver memory: invariant I18's checks in the driver's memory vs as Spark jobs.

The graph is seeded ONCE (``<work>/graph``: ``--nodes`` ``Item`` nodes and three times as many
``Link`` edges, :func:`benchmarks.run.node_frame` / ``edge_frame``, seeded and deterministic).
Then each contender runs in its own fresh process (``local[2]``), alternating, ``--repeats``
times, and deletes ``--deletes`` nodes by ``@key`` through ``write_table(mode="delete")`` (each
run a disjoint range of keys, so every run cascades into about six edges per node):

* ``memory``: ``distributedCheckRows=0``, the committed ids and edges read into the driver;
* ``spark``: ``distributedCheckRows=1``, every part of I18 as Spark jobs.

Per run: seconds of the delete (resolve, cascade, @card, commit), the seconds it held the
graph's commit lease (``lease_s``: every other writer waits that long; read by wrapping
:func:`omnigraph_spark.store.lease.hold` in the run's process), and the driver's Python
process's peak RSS during it over its RSS just before (``/proc/self/clear_refs`` resets the
peak first). The commit reads each committed fragment's ``id`` column to write the deletion
files (store/writes.py ``_delete_operation``), on both paths.

    .venv/bin/python -m benchmarks.delete_bench --nodes 1000000 --out benchmarks/out/delete-1m.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONTENDERS = {"memory": "0", "spark": "1"}


def _status_kb() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def _session():
    from omnigraph_spark.demo import local_builder

    spark = local_builder("omnigraph-delete-bench", "local[2]", conf={"spark.driver.memory": "4g"}).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed_lease(held: list[float]) -> None:
    """Record in ``held`` how long each commit lease of this process is held."""
    from omnigraph_spark.store import lease

    real = lease.hold

    @contextlib.contextmanager
    def hold(*a, **kw):
        with real(*a, **kw) as token:
            t0 = time.perf_counter()
            try:
                yield token
            finally:
                held.append(time.perf_counter() - t0)

    lease.hold = hold


def step(work: Path, name: str, nodes: int, first: int, deletes: int) -> dict[str, Any]:
    """One step in this process: ``seed``, or a contender deleting keys ``first ..``."""
    from benchmarks.run import SCHEMA, edge_frame, node_frame
    from omnigraph_spark import Graph, write_graph, write_table

    spark = _session()
    uri = str(work / "graph")
    try:
        if name == "seed":
            Graph.init(uri, SCHEMA)
            t0 = time.perf_counter()
            write_graph(
                uri, {"Item": node_frame(spark, nodes, 7, 4), "Link": edge_frame(spark, 3 * nodes, nodes, 7, 4)}
            )
            return {"step": name, "s": round(time.perf_counter() - t0, 1)}
        keys = spark.createDataFrame([(f"item-{i:010d}",) for i in range(first, first + deletes)], "name string")
        keys.count()
        Graph.open(uri).snapshot()  # imports and opens done before the peak is reset
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS: the peak below is the delete's
        held: list[float] = []
        _timed_lease(held)
        before = _status_kb()["VmRSS"]
        t0 = time.perf_counter()
        r = write_table(keys, uri, "Item", mode="delete", options={"distributedCheckRows": CONTENDERS[name]})
        seconds = time.perf_counter() - t0
        peak = _status_kb()["VmHWM"]
        return {
            "step": name,
            "s": round(seconds, 1),
            "lease_s": round(sum(held), 1),
            "rss_before_mb": before // 1024,
            "peak_over_before_mb": (peak - before) // 1024,
            "rows_deleted": {t.table_key: t.rows_deleted for t in r.tables},
        }
    finally:
        spark.stop()


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spawn(work: Path, name: str, nodes: int, first: int, deletes: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.delete_bench",
        "--step",
        name,
        "--work",
        str(work),
        "--nodes",
        str(nodes),
        "--first",
        str(first),
        "--deletes",
        str(deletes),
    ]
    path = os.pathsep.join([str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=path)
    load0 = _load()
    with open(work / f"{name}-{first}.stderr", "w") as err:
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=err, stderr=subprocess.STDOUT, check=True)
    res = json.loads((work / f"{name}-{first}.json").read_text())
    res["load"] = [load0, _load()]
    return res


def plan(nodes: int, deletes: int, repeats: int) -> list[tuple[str, int]]:
    """(contender, first key) per run: the contenders alternate, first one then the other, and
    every run deletes its own range of keys ``first .. first + deletes``, disjoint and inside
    ``0 .. nodes``."""
    spacing = nodes // (2 * repeats + 1)
    if spacing < deletes:
        raise ValueError(f"{nodes} nodes hold no {2 * repeats} disjoint ranges of {deletes} keys")
    order = [n for i in range(repeats) for n in (("memory", "spark") if i % 2 == 0 else ("spark", "memory"))]
    return [(name, (i + 1) * spacing) for i, name in enumerate(order)]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1_000_000, help="Item nodes (edges: three times as many)")
    p.add_argument("--deletes", type=int, default=1000, help="nodes each run deletes")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--work", default=None, help="where the graph goes (default: a fresh temporary directory)")
    p.add_argument("--out", default=None, help="results JSON")
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.step:
        work = Path(args.work)
        res = step(work, args.step, args.nodes, args.first, args.deletes)
        (work / f"{args.step}-{args.first}.json").write_text(json.dumps(res))
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="omnigraph-delete-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    runs = [_spawn(work, "seed", args.nodes, 0, 0)]
    for name, first in plan(args.nodes, args.deletes, args.repeats):
        runs.append(_spawn(work, name, args.nodes, first, args.deletes))
        print(json.dumps(runs[-1]), flush=True)
    out = {"nodes": args.nodes, "edges": 3 * args.nodes, "deletes": args.deletes, "cores": os.cpu_count(), "runs": runs}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
