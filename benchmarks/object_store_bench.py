"""The JVM paths against the Python paths on an object store and on a local disk.

Does a graph on S3 keep the speed ratio the JVM paths have on a local disk? Four write
contenders and four read contenders, each in a fresh ``local[2]`` process, one after the
other, ``--repeats`` rounds in alternating order:

* ``write``: ``write_table(df, root, "Item", engine=...)`` of the same input (Parquet files
  generated once, read and cached before the clock starts) into a fresh graph, ``python`` or
  ``jvm``, on a local root or on S3 (moto's server, a process of its own on loopback, started
  here with ``python -m moto.server``);
* ``read``: a full scan of that table (``read_table(..., engine=...)`` written to Spark's
  ``noop`` sink) right after.

Reported: seconds per contender (median of the repeats) and, per store, the Python path's time
over the JVM path's (the speed-up), for writes and for reads; the same ratio on S3 and on the
local disk is the claim. moto keeps objects in its process's memory and answers over loopback
HTTP: it measures the request count and the client-side cost of an object store, not a cloud's
latency or bandwidth.

    .venv/bin/python -m benchmarks.object_store_bench --rows 200000 --repeats 2 --out benchmarks/out/object_store.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Dict, List

SCHEMA = """
node Item {
    name: String @key
    qty: I64
    kind: String
    score: F64?
}
"""
CREDS = {"aws_access_key_id": "bench-key-id", "aws_secret_access_key": "bench-secret", "aws_region": "us-east-1",
         "allow_http": "true"}


def _input(folder: Path, rows: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"items-{rows}.parquet"
    if not path.exists():
        t = pa.table({"name": [f"item-{i:09d}" for i in range(rows)], "qty": pa.array(range(rows), pa.int64()),
                      "kind": [("alpha", "beta", "gamma")[i % 3] for i in range(rows)],
                      "score": pa.array([i / 7 for i in range(rows)], pa.float64())})
        pq.write_table(t, path, row_group_size=65536)
    return str(path)


def _child(args) -> None:
    """One contender: write then read, in this fresh process; prints one JSON line."""
    from pyspark.sql import SparkSession

    from omnigraph_spark import read_table, write_table
    from omnigraph_spark.spark.jvm_read import shim_spark_conf
    from omnigraph_spark.spark.runtime import set_local_lance_threads

    so = json.loads(args.storage) if args.storage else None
    set_local_lance_threads("local[2]")
    spark = (SparkSession.builder.master("local[2]").appName("object-store-bench")
             .config("spark.ui.enabled", "false").config("spark.default.parallelism", "2")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
             .config(map=shim_spark_conf()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(args.input).repartition(2).cache()
    df.count()
    opts = {f"storage.{k}": v for k, v in (so or {}).items()}
    t0 = time.perf_counter()
    write_table(df, args.root, "Item", options=opts, engine=args.engine)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    read_table(spark, args.root, "Item", storage_options=so, engine=args.engine).write.format("noop").mode(
        "overwrite").save()
    read_s = time.perf_counter() - t0
    spark.stop()
    print(json.dumps({"write_s": write_s, "read_s": read_s}))


def _moto():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto's server did not start")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--work", default=None, help="input and local graphs (default: a temp dir)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--storage", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args)
        return 0

    import boto3

    from omnigraph_spark import Graph

    work = Path(args.work or tempfile.mkdtemp(prefix="og-s3-bench-"))
    inp = _input(work / "input", args.rows)
    proc, url = _moto()
    so = dict(CREDS, aws_endpoint=url)
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=CREDS["aws_access_key_id"],
                          aws_secret_access_key=CREDS["aws_secret_access_key"])
    load0 = list(os.getloadavg())
    contenders = [(store, engine) for store in ("local", "s3") for engine in ("python", "jvm")]
    times: Dict[str, List[Dict[str, float]]] = {f"{s}/{e}": [] for s, e in contenders}
    try:
        for r in range(args.repeats):
            for store, engine in (contenders if r % 2 == 0 else contenders[::-1]):
                if store == "s3":
                    bucket = f"bench-{uuid.uuid4().hex[:10]}"
                    client.create_bucket(Bucket=bucket)
                    root, storage = f"s3://{bucket}/graph", so
                else:
                    root, storage = str(work / f"graph-{uuid.uuid4().hex[:10]}"), None
                Graph.init(root, SCHEMA, storage)
                p = subprocess.run([sys.executable, "-m", "benchmarks.object_store_bench", "--child", "--root", root,
                                    "--engine", engine, "--input", inp, "--storage", json.dumps(storage) if storage else ""],
                                   capture_output=True, text=True, timeout=3600)
                if p.returncode != 0:
                    raise RuntimeError(f"{store}/{engine} failed: {p.stderr[-3000:]}")
                got = json.loads(p.stdout.strip().splitlines()[-1])
                times[f"{store}/{engine}"].append(got)
                print(f"round {r + 1} {store}/{engine}: write {got['write_s']:.2f} s, read {got['read_s']:.2f} s",
                      flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("write_s", "read_s")} for k, v in times.items()}
    speedup = {store: {m: med[f"{store}/python"][m] / med[f"{store}/jvm"][m] for m in ("write_s", "read_s")}
               for store in ("local", "s3")}
    result = {"rows": args.rows, "repeats": args.repeats, "cores": os.cpu_count(), "loadavg_start": load0,
              "loadavg_end": list(os.getloadavg()), "seconds": times, "median_s": med,
              "python_over_jvm": speedup}
    print(json.dumps({"median_s": med, "python_over_jvm": speedup}, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
