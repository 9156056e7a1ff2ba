"""Driver memory and wall time of one write_graph with the load-wide checks in the driver's
memory vs as Spark jobs (option distributedCheckRows), each in a fresh process.

    python scripts/dist_checks_measure.py gen  DIR --nodes 3000000 --edges 10000000
    python scripts/dist_checks_measure.py all  DIR [--engine python|auto] [--threshold 1000000]

``gen`` writes Parquet files (Person names, Knows src/dst onto them). ``all`` runs ``one`` in a
fresh process per contender (threshold 0: in memory; the given threshold: distributed) on a
fresh graph and prints one JSON line each: wall time of write_graph, peak RSS (VmHWM) of the
driver's Python process and of the driver JVM (local mode: the executors' tasks run in that JVM
too; the Python workers are separate processes, not counted), load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

SCHEMA = """
node Person {
    name: String @key
}
edge Knows: Person -> Person @card(0..1000)
"""


def vm_hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def gen(d: str, nodes: int, edges: int, files: int = 8) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(f"{d}/nodes", exist_ok=True)
    os.makedirs(f"{d}/edges", exist_ok=True)
    rng = np.random.default_rng(7)
    per = -(-nodes // files)
    for i in range(files):
        lo, hi = i * per, min(nodes, (i + 1) * per)
        names = pa.array([f"person-{j:09d}" for j in range(lo, hi)], pa.string())
        pq.write_table(pa.table({"name": names}), f"{d}/nodes/part-{i}.parquet")
    per = -(-edges // files)
    for i in range(files):
        n = min(edges, (i + 1) * per) - i * per
        src = rng.integers(0, nodes, n)
        dst = rng.integers(0, nodes, n)
        pq.write_table(
            pa.table(
                {
                    "src": pa.array([f"person-{j:09d}" for j in src], pa.string()),
                    "dst": pa.array([f"person-{j:09d}" for j in dst], pa.string()),
                }
            ),
            f"{d}/edges/part-{i}.parquet",
        )


def one(d: str, threshold: int, engine: str) -> dict:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("omnigraph_spark.spark.dist_checks").setLevel(logging.INFO)  # each check's time
    from omnigraph_spark import Graph, write_graph
    from omnigraph_spark.demo import local_builder

    spark = local_builder("dist-checks-measure", conf={"spark.driver.memory": "6g"}).getOrCreate()
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    root = f"{d}/graph-{threshold}-{engine}"
    shutil.rmtree(root, ignore_errors=True)
    Graph.init(root, SCHEMA)
    frames = {"Person": spark.read.parquet(f"{d}/nodes"), "Knows": spark.read.parquet(f"{d}/edges")}
    t0 = time.perf_counter()
    res = write_graph(root, frames, engine=engine, options={"distributedCheckRows": str(threshold)})
    wall = time.perf_counter() - t0
    out = {
        "threshold": threshold,
        "engine": engine,
        "wall_s": round(wall, 1),
        "rows": sum(t.rows_written for t in res.tables),
        "driver_python_hwm_mb": vm_hwm_kb(os.getpid()) // 1024,
        "driver_jvm_hwm_mb": vm_hwm_kb(jvm_pid) // 1024,
        "loadavg": os.getloadavg(),
    }
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["gen", "one", "all"])
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=3_000_000)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--threshold", type=int, default=1_000_000)
    ap.add_argument("--engine", default="python")
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a.dir, a.nodes, a.edges)
    elif a.cmd == "one":
        print(json.dumps(one(a.dir, a.threshold, a.engine)), flush=True)
    else:
        for t in (0, a.threshold):  # a fresh process each
            subprocess.run(
                [sys.executable, __file__, "one", a.dir, "--threshold", str(t), "--engine", a.engine], check=True
            )


if __name__ == "__main__":
    main()
