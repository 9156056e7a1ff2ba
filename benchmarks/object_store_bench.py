"""The JVM paths against the Python paths and Spark's Parquet, on an object store and on a local disk.

``--mode compare`` (the default): does a graph on S3 keep the speed the JVM paths have on a local
disk, beside Spark's own Parquet on the same store? Six write contenders and six read
contenders, each in a fresh ``local[2]`` process, one after the other, ``--repeats`` rounds in
alternating order:

* ``write``: ``write_table(df, root, "Item", engine=...)`` of the same input (Parquet files
  generated once, read and cached before the clock starts) into a fresh graph, ``python`` or
  ``jvm``, on a local root or on S3 (moto's server, a process of its own on loopback, started
  here with ``python -m moto.server``); and ``parquet``: ``df.write.parquet(path)`` of the same
  cached input, to a local folder or to ``s3a://bucket/...`` on the same moto server;
* ``read``: a full scan of that table (``read_table(..., engine=...)``, or
  ``spark.read.parquet(path)``) written to Spark's ``noop`` sink, right after.

The Parquet contender's process gets ``org.apache.hadoop:hadoop-aws:3.5.0`` through
``spark.jars.packages`` (the version of pyspark's hadoop-client jars; it brings the AWS SDK v2
``bundle`` 2.35.4 and ``analyticsaccelerator-s3`` 1.3.1 from Maven Central into Ivy's cache on
first use) and these s3a settings: ``fs.s3a.endpoint`` (moto's URL), ``fs.s3a.endpoint.region``
(us-east-1), ``fs.s3a.path.style.access=true``, ``fs.s3a.connection.ssl.enabled=false`` and the
access and secret keys. Against moto 5.1 nothing else was needed: the SDK's default checksums,
the ETag change detection and the bucket probe all work as they are. The write goes through
Spark's default committer (FileOutputCommitter v1: each task's files are renamed into place,
which s3a does as a COPY and a DELETE per file), not the S3A committers: that is what a plain
``df.write.parquet("s3a://...")`` does. The other contenders do not load hadoop-aws.

Reported: seconds per contender (median of the repeats) and, per store, the Python path's time
over the JVM path's, and each omnigraph path's time over Parquet's, for writes and for reads; the
same ratios on S3 and on the local disk are the claim. moto keeps objects in its process's
memory and answers over loopback HTTP: it measures the request count and the client-side cost
of an object store, not a cloud's latency or bandwidth (``--mode latency`` adds a latency).

``--mode latency``: the JVM write (``write_graph`` of ``--tables`` node types, the input split
among them, ``engine="jvm"``) and a full read of each table, on S3 through
``benchmarks/latency_proxy.py`` (a loopback proxy in front of moto, a process of its own, fresh
per run) that holds every HTTP exchange ``--delays-ms`` longer and counts them. Each cell is one
fresh process: tables x ``--max-rows-per-file`` (few or many fragments) x delay. Reported per
cell: the write's seconds, its commit's (``commit_staged``: the load-wide checks and the graph
commit, timed in place) and the staging's (the rest), the read's seconds, and the proxy's counts
for each (the staging's, the commit's, the read's): HTTP requests by method and round trips (the
requests plus the bodies of ``Expect: 100-continue`` uploads), which the delay multiplies where
they run one after another.

    .venv/bin/python -m benchmarks.object_store_bench --rows 1000000 --repeats 2 --out benchmarks/out/object_store.json
    .venv/bin/python -m benchmarks.object_store_bench --mode latency --rows 200000 --out benchmarks/out/latency.json
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

SCHEMA = """
node Item {
    name: String @key
    qty: I64
    kind: String
    score: F64?
}
"""
CREDS = {
    "aws_access_key_id": "bench-key-id",
    "aws_secret_access_key": "bench-secret",
    "aws_region": "us-east-1",
    "allow_http": "true",
}


def _input(folder: Path, rows: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"items-{rows}.parquet"
    if not path.exists():
        t = pa.table(
            {
                "name": [f"item-{i:09d}" for i in range(rows)],
                "qty": pa.array(range(rows), pa.int64()),
                "kind": [("alpha", "beta", "gamma")[i % 3] for i in range(rows)],
                "score": pa.array([i / 7 for i in range(rows)], pa.float64()),
            }
        )
        pq.write_table(t, path, row_group_size=65536)
    return str(path)


HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.5.0"  # the version of pyspark 4.3's hadoop-client jars
ENGINES = ("python", "jvm", "parquet")
STORES = ("local", "s3")


def _int_list(text: str, minimum: int) -> list[int]:
    out = [int(x) for x in text.split(",") if x.strip()]
    if not out or min(out) < minimum:
        raise argparse.ArgumentTypeError(f"a comma-separated list of integers >= {minimum}, got {text!r}")
    return out


def _delays(text: str) -> list[float]:
    out = [float(x) for x in text.split(",") if x.strip()]
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"a comma-separated list of delays >= 0 ms, got {text!r}")
    return out


def _engines(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out or set(out) - set(ENGINES):
        raise argparse.ArgumentTypeError(f"a comma-separated list of {', '.join(ENGINES)}, got {text!r}")
    return out


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return n


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("compare", "latency"), default="compare")
    ap.add_argument("--rows", type=_positive, default=200_000)
    ap.add_argument("--repeats", type=_positive, default=2)
    ap.add_argument("--engines", type=_engines, default=list(ENGINES), help="compare: which contenders (default all)")
    ap.add_argument("--delays-ms", type=_delays, default=[0.0, 10.0, 30.0], help="latency: added per HTTP exchange")
    ap.add_argument("--tables", type=lambda t: _int_list(t, 1), default=[1, 4], help="latency: node types loaded")
    ap.add_argument(
        "--max-rows-per-file",
        type=lambda t: _int_list(t, 1),
        default=[1024 * 1024, 2000],
        help="latency: maxRowsPerFile, few and many fragments",
    )
    ap.add_argument("--work", default=None, help="input and local graphs (default: a temp dir)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--storage", default="", help=argparse.SUPPRESS)
    ap.add_argument("--stats-port", type=int, default=0, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def _session(extra: dict[str, str]):
    from pyspark.sql import SparkSession

    from omnigraph_spark.spark.runtime import set_local_lance_threads

    set_local_lance_threads("local[2]")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("object-store-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config(map=extra)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def s3a_conf(storage: dict[str, str]) -> dict[str, str]:
    """The session settings for Spark's s3a against the S3 server of ``storage`` (this bench's
    storage options): see the module doc."""
    return {
        "spark.jars.packages": HADOOP_AWS,
        "spark.hadoop.fs.s3a.endpoint": storage["aws_endpoint"],
        "spark.hadoop.fs.s3a.endpoint.region": storage["aws_region"],
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": storage["aws_access_key_id"],
        "spark.hadoop.fs.s3a.secret.key": storage["aws_secret_access_key"],
    }


def _cached_input(spark, path: str):
    df = spark.read.parquet(path).repartition(2).cache()
    df.count()
    return df


def _child(args) -> None:
    """One contender: write then read, in this fresh process; prints one JSON line."""
    so = json.loads(args.storage) if args.storage else None
    if args.engine == "parquet":
        spark = _session(s3a_conf(so) if so else {})
        df = _cached_input(spark, args.input)
        t0 = time.perf_counter()
        df.write.mode("overwrite").parquet(args.root)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        spark.read.parquet(args.root).write.format("noop").mode("overwrite").save()
        read_s = time.perf_counter() - t0
        spark.stop()
        print(json.dumps({"write_s": write_s, "read_s": read_s}))
        return

    from omnigraph_spark import read_table, write_table
    from omnigraph_spark.spark.jvm_read import shim_spark_conf

    spark = _session(shim_spark_conf())
    df = _cached_input(spark, args.input)
    opts = {f"storage.{k}": v for k, v in (so or {}).items()}
    t0 = time.perf_counter()
    write_table(df, args.root, "Item", options=opts, engine=args.engine)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    read_table(spark, args.root, "Item", storage_options=so, engine=args.engine).write.format("noop").mode(
        "overwrite"
    ).save()
    read_s = time.perf_counter() - t0
    spark.stop()
    print(json.dumps({"write_s": write_s, "read_s": read_s}))


def latency_schema(tables: int) -> str:
    return "\n".join(
        f"node Item{i} {{\n    name: String @key\n    qty: I64\n    kind: String\n    score: F64?\n}}"
        for i in range(tables)
    )


def _latency_child(args) -> None:
    """One latency cell: write_graph of ``--tables`` types through the proxy, then read each;
    prints one JSON line with the seconds and the proxy's request counts per phase."""
    from pyspark.sql import functions as F

    from omnigraph_spark import read_table, write_graph
    from omnigraph_spark.spark import graph_io
    from omnigraph_spark.spark.jvm_read import shim_spark_conf

    from .latency_proxy import read_stats

    so = json.loads(args.storage)
    tables = args.tables[0]
    spark = _session(shim_spark_conf())
    df = _cached_input(spark, args.input)
    frames = {f"Item{i}": df.where(F.col("qty") % tables == i) for i in range(tables)}
    opts = {f"storage.{k}": v for k, v in so.items()}
    opts["maxRowsPerFile"] = str(args.max_rows_per_file[0])
    marks: dict[str, dict] = {}
    commit_s: list[float] = []
    orig = graph_io.commit_staged

    def timed_commit(*a, **kw):
        marks["commit_start"] = read_stats(args.stats_port)
        t0 = time.perf_counter()
        try:
            return orig(*a, **kw)
        finally:
            commit_s.append(time.perf_counter() - t0)
            marks["commit_end"] = read_stats(args.stats_port)

    graph_io.commit_staged = timed_commit
    try:
        marks["write_start"] = read_stats(args.stats_port)
        t0 = time.perf_counter()
        res = write_graph(args.root, frames, options=opts, engine="jvm")
        write_s = time.perf_counter() - t0
    finally:
        graph_io.commit_staged = orig
    marks["write_end"] = read_stats(args.stats_port)
    t0 = time.perf_counter()
    for name in frames:
        read_table(spark, args.root, name, storage_options=so, engine="jvm").write.format("noop").mode(
            "overwrite"
        ).save()
    read_s = time.perf_counter() - t0
    marks["read_end"] = read_stats(args.stats_port)
    spark.stop()

    def between(a: str, b: str) -> dict:
        before, after = marks[a]["by_method"], marks[b]["by_method"]
        return {
            "requests": marks[b]["requests"] - marks[a]["requests"],
            "round_trips": marks[b]["round_trips"] - marks[a]["round_trips"],
            "by_method": {m: after[m] - before.get(m, 0) for m in sorted(after) if after[m] > before.get(m, 0)},
        }

    print(
        json.dumps(
            {
                "write_s": write_s,
                "commit_s": sum(commit_s),
                "stage_s": write_s - sum(commit_s),
                "read_s": read_s,
                "fragments": sum(t.fragments for t in res.tables),
                "rows": sum(t.rows_written for t in res.tables),
                "requests": {
                    "stage": between("write_start", "commit_start"),
                    "commit": between("commit_start", "commit_end"),
                    "write": between("write_start", "write_end"),
                    "read": between("write_end", "read_end"),
                },
            }
        )
    )


def _moto():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto's server did not start")


def snapshot_shim(work: Path) -> None:
    """Copy the checkout's built shim (jar and lib/) under ``work`` and point the children at the
    copy (OMNIGRAPH_SPARK_SHIM_DIR): a rebuild of jvm-shim/ during the run then changes nothing."""
    import shutil

    from omnigraph_spark.spark.shim_conf import SHIM_DIR_ENV, SHIM_JAR, built_shim_jars

    jars = built_shim_jars()
    if not jars:
        return
    dst = work / "shim"
    shutil.rmtree(dst, ignore_errors=True)
    (dst / "lib").mkdir(parents=True)
    shutil.copy2(jars[0], dst / SHIM_JAR)
    for jar in jars[1:]:
        shutil.copy2(jar, dst / "lib")
    os.environ[SHIM_DIR_ENV] = str(dst)


def _run_child(argv: list[str], what: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "benchmarks.object_store_bench", "--child", *argv],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed: {p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ratios(med: dict[str, dict[str, float]], engines: list[str]) -> dict[str, dict]:
    """Per store: python/jvm, python/parquet and jvm/parquet of the median seconds (those whose
    contenders ran), for writes and reads; and each ratio on S3 over the same ratio on local disk."""
    pairs = [
        (a, b)
        for a, b in (("python", "jvm"), ("python", "parquet"), ("jvm", "parquet"))
        if a in engines and b in engines
    ]
    out: dict[str, dict] = {}
    for a, b in pairs:
        by_store = {st: {m: med[f"{st}/{a}"][m] / med[f"{st}/{b}"][m] for m in ("write_s", "read_s")} for st in STORES}
        by_store["s3_over_local"] = {m: by_store["s3"][m] / by_store["local"][m] for m in ("write_s", "read_s")}
        out[f"{a}_over_{b}"] = by_store
    return out


def _compare(args, work: Path, inp: str, client, so: dict[str, str]) -> dict:
    from omnigraph_spark import Graph

    contenders = [(store, engine) for store in STORES for engine in args.engines]
    times: dict[str, list[dict[str, float]]] = {f"{s}/{e}": [] for s, e in contenders}
    for r in range(args.repeats):
        for store, engine in contenders if r % 2 == 0 else contenders[::-1]:
            if store == "s3":
                bucket = f"bench-{uuid.uuid4().hex[:10]}"
                client.create_bucket(Bucket=bucket)
                root, storage = (f"s3a://{bucket}/parquet" if engine == "parquet" else f"s3://{bucket}/graph"), so
            else:
                root, storage = str(work / f"{engine}-{uuid.uuid4().hex[:10]}"), None
            if engine != "parquet":
                Graph.init(root, SCHEMA, storage)
            got = _run_child(
                [
                    "--root",
                    root,
                    "--engine",
                    engine,
                    "--input",
                    inp,
                    "--storage",
                    json.dumps(storage) if storage else "",
                ],
                f"{store}/{engine}",
            )
            times[f"{store}/{engine}"].append(got)
            print(
                f"round {r + 1} {store}/{engine}: write {got['write_s']:.2f} s, read {got['read_s']:.2f} s", flush=True
            )
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("write_s", "read_s")} for k, v in times.items()}
    ratios = _ratios(med, args.engines)
    print(json.dumps({"median_s": med, "ratios": ratios}, indent=1))
    return {"mode": "compare", "engines": args.engines, "seconds": times, "median_s": med, "ratios": ratios}


def _latency(args, inp: str, client, so: dict[str, str], moto_url: str) -> dict:
    from omnigraph_spark import Graph

    from . import latency_proxy

    target = moto_url.split("//", 1)[1]
    cells = []
    for r in range(args.repeats):
        for tables in args.tables:
            for mrpf in args.max_rows_per_file:
                for delay in args.delays_ms if r % 2 == 0 else args.delays_ms[::-1]:
                    bucket = f"bench-{uuid.uuid4().hex[:10]}"
                    client.create_bucket(Bucket=bucket)
                    root = f"s3://{bucket}/graph"
                    Graph.init(root, latency_schema(tables), so)  # directly on moto, not timed
                    proc, port, stats_port = latency_proxy.start(target, delay)
                    try:
                        via = dict(so, aws_endpoint=f"http://127.0.0.1:{port}")
                        got = _run_child(
                            [
                                "--mode",
                                "latency",
                                "--root",
                                root,
                                "--input",
                                inp,
                                "--tables",
                                str(tables),
                                "--max-rows-per-file",
                                str(mrpf),
                                "--storage",
                                json.dumps(via),
                                "--stats-port",
                                str(stats_port),
                            ],
                            f"latency {delay} ms",
                        )
                    finally:
                        proc.terminate()
                        proc.wait(timeout=10)
                    got.update({"repeat": r, "delay_ms": delay, "tables": tables, "max_rows_per_file": mrpf})
                    cells.append(got)
                    q = got["requests"]
                    print(
                        f"round {r + 1} tables {tables} maxRowsPerFile {mrpf} delay {delay:g} ms: "
                        f"{got['fragments']} fragments, write {got['write_s']:.2f} s "
                        f"(commit {got['commit_s']:.2f} s, "
                        f"{q['commit']['round_trips']} round trips; staging {q['stage']['round_trips']}), "
                        f"read {got['read_s']:.2f} s ({q['read']['round_trips']} round trips)",
                        flush=True,
                    )
    summary = []
    for tables in args.tables:
        for mrpf in args.max_rows_per_file:
            for delay in args.delays_ms:
                mine = [
                    c for c in cells if (c["tables"], c["max_rows_per_file"], c["delay_ms"]) == (tables, mrpf, delay)
                ]
                row = {
                    "tables": tables,
                    "max_rows_per_file": mrpf,
                    "delay_ms": delay,
                    "fragments": mine[0]["fragments"],
                }
                for k in ("write_s", "stage_s", "commit_s", "read_s"):
                    row[k] = statistics.median(c[k] for c in mine)
                for k in ("stage", "commit", "read"):
                    row[f"{k}_requests"] = statistics.median(c["requests"][k]["requests"] for c in mine)
                    row[f"{k}_round_trips"] = statistics.median(c["requests"][k]["round_trips"] for c in mine)
                summary.append(row)
    for row in summary:  # how much each added millisecond costs, from the 0 ms cell of the same case
        base = next(
            (
                b
                for b in summary
                if (b["tables"], b["max_rows_per_file"], b["delay_ms"])
                == (row["tables"], row["max_rows_per_file"], min(args.delays_ms))
            ),
            None,
        )
        if base is not None and row["delay_ms"] > base["delay_ms"]:
            d = (row["delay_ms"] - base["delay_ms"]) / 1000.0
            row["commit_added_s_over_round_trips_x_delay"] = (row["commit_s"] - base["commit_s"]) / (
                max(row["commit_round_trips"], 1) * d
            )
    print(json.dumps(summary, indent=1))
    return {"mode": "latency", "cells": cells, "summary": summary}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        if args.mode == "latency":
            _latency_child(args)
        else:
            _child(args)
        return 0

    import boto3

    work = Path(args.work or tempfile.mkdtemp(prefix="og-s3-bench-"))
    inp = _input(work / "input", args.rows)
    snapshot_shim(work)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the children's Python workers import this venv's lance
    proc, url = _moto()
    so = dict(CREDS, aws_endpoint=url)
    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=CREDS["aws_access_key_id"],
        aws_secret_access_key=CREDS["aws_secret_access_key"],
    )
    load0 = list(os.getloadavg())
    started = time.time()
    try:
        if args.mode == "latency":
            body = _latency(args, inp, client, so, url)
        else:
            body = _compare(args, work, inp, client, so)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    result = {
        "rows": args.rows,
        "repeats": args.repeats,
        "cores": os.cpu_count(),
        "loadavg_start": load0,
        "loadavg_end": list(os.getloadavg()),
        "wall_s": time.time() - started,
        **body,
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
