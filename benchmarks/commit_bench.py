"""The Python path's commit in bounded memory (invariant I24): a stream's commit time as the table
grows, and the committing worker's peak memory for a large Python-source load.

No SparkSession anywhere, as in the Spark Python worker that runs a Python DataSource writer's
``commit`` (it has none, so no check can run as Spark jobs):

* ``stream``: a table of ``--committed`` Person rows (comma-separated sizes, default
  0,1000000,10000000) is built through the store API (staged Arrow batches, one commit, its
  ``id`` index built as every load builds it); then ``--batches`` micro-batches of ``--rows``
  new Person rows are staged by ``OmnigraphStreamWriter.write`` and committed by
  ``OmnigraphStreamWriter.commit`` (strict append: every staged id probed against the committed
  ids), each commit timed in a fresh process, and within it the load-wide validation (wall and
  CPU seconds: the part the committed table's size could change). ``--keys ordered`` gives new
  keys after the committed ones (events with growing keys), ``random`` random hex keys on both
  sides. With ``--in-memory`` the same
  commits run once more on the same table with the in-memory check (the committed ids read).
* ``mutate``: on a table of ``--committed`` ordered Person rows, ``--batches`` stream merges of
  ``--rows`` rows (half of them committed keys, half new) through ``OmnigraphStreamWriter``
  (writeMode=merge), then ``--batches`` deletes of ``--rows`` committed keys through
  ``OmnigraphWriter`` (writeMode=delete), each commit timed in a fresh process, and that
  process's peak RSS (invariant I27). ``--mutate-keys``: ``recent`` (a contiguous run of the
  newest keys: few index pages) and/or ``spread`` (keys evenly over the table: every page).
  Bounded: distributedCheckRows=1 (every check and I18 part bounded); with ``--in-memory``
  also at 0 (the validator's parts in memory).
* ``memory``: ``--nodes`` Item nodes and three times as many Link edges (``@card(0..1000)``,
  minted edge ids) are written as Parquet input files, staged by ``OmnigraphWriter.write`` in one
  process (``--tasks`` tasks, one after the other, as one Python worker runs them: its peak
  RSS is ``*_stage_peak_rss_mb``) and committed by ``OmnigraphWriter.commit`` in a fresh
  process whose peak RSS (``VmHWM``) is the committing worker's; nodes first, then edges. With
  ``--check-rows`` the option distributedCheckRows is set (the rows from which checks run out
  of core; the connector's default otherwise), with ``--in-memory`` the commits run once more
  at distributedCheckRows=0 (every check in memory).

    .venv/bin/python -m benchmarks.commit_bench --sections stream --committed 0,1000000,10000000
    .venv/bin/python -m benchmarks.commit_bench --sections mutate --committed 0,1000000 --rows 2000 --in-memory
    .venv/bin/python -m benchmarks.commit_bench --sections memory --nodes 12000000 --out benchmarks/out/commit.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

log = logging.getLogger("benchmarks.commit_bench")

STREAM_SCHEMA = """
node Person {
    name: String @key
    age: I32?
}
"""

LOAD_SCHEMA = """
node Item {
    name: String @key
    qty: I64
}
edge Link: Item -> Item @card(0..1000) {
    weight: F64?
}
"""

CHUNK = 1_000_000


def _key(i: int, keys: str) -> str:
    """Committed key ``i``: ordered (``c0000000042``), or random over the whole key space (a
    UUID-like hex digest, as new random keys are)."""
    return hashlib.md5(str(i).encode()).hexdigest() if keys == "random" else f"c{i:010d}"


def build_committed(uri: str, rows: int, keys: str) -> float:
    """A Person table of ``rows`` rows through the store API (one commit, indexes built)."""
    import pyarrow as pa

    from omnigraph_spark import Graph
    from omnigraph_spark.store import writes

    graph = Graph.init(uri, STREAM_SCHEMA)
    if not rows:
        return 0.0
    t0 = time.monotonic()
    target = writes.prepare_target(graph, "main", "node:Person", "append")

    def batches():
        for lo in range(0, rows, CHUNK):
            names = [_key(i, keys) for i in range(lo, min(rows, lo + CHUNK))]
            yield pa.RecordBatch.from_pydict(
                {"id": names, "name": names, "age": pa.array([None] * len(names), pa.int32())}, schema=target.schema
            )

    staged = writes.stage(target, batches())
    writes.commit_load(graph, "main", [staged])
    return time.monotonic() - t0


def timed_validators(into: list[tuple[float, float, float]]) -> None:
    """Record (wall, CPU seconds, peak RSS MB so far) of every load-wide validation (the
    checks, under the lease)."""
    from omnigraph_spark.spark import writer

    make = writer.make_validator

    def timed_make(*a, **kw):
        validate = make(*a, **kw)

        def timed(*va, **vkw):
            w, c = time.monotonic(), time.process_time()
            try:
                return validate(*va, **vkw)
            finally:
                into.append((time.monotonic() - w, time.process_time() - c, peak_rss_mb()))

        return timed

    writer.make_validator = timed_make


def stream_commits(
    uri: str, batches: int, rows: int, keys: str, in_memory: bool, checks: list | None = None
) -> list[float]:
    import pyarrow as pa
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from omnigraph_spark.spark import validate
    from omnigraph_spark.spark.stream import OmnigraphStreamWriter, StreamMessage

    if in_memory:
        validate.PROBE_RATIO = 10**18  # the in-memory check: the committed ids read
    if checks is not None:
        timed_validators(checks)
    schema = StructType([StructField("name", StringType()), StructField("age", IntegerType())])
    opts = {"path": uri, "type": "Person"}
    query = f"bench-{uuid.uuid4().hex}"  # a stream of its own: no batch id is a replay (I19)
    lat = []
    for b in range(batches):
        w = OmnigraphStreamWriter(opts, schema, False)
        tag = uuid.uuid4().hex[:6]  # new keys on every run over the same table
        names = [uuid.uuid4().hex if keys == "random" else f"s{tag}-{b:04d}-{i:07d}" for i in range(rows)]
        batch = pa.RecordBatch.from_pydict({"name": names, "age": pa.array([i % 90 for i in range(rows)], pa.int32())})
        msgs = [StreamMessage(w.write(iter([batch])).inner, query, b)]
        t0 = time.monotonic()
        OmnigraphStreamWriter(opts, schema, False).commit(msgs, b)
        lat.append(time.monotonic() - t0)
    return lat


def run_stream(args, work: Path) -> dict:
    out = {}
    for committed in [int(x) for x in args.committed.split(",")]:
        uri = str(work / f"stream-{committed}")
        build_s = build_committed(uri, committed, args.keys)
        for mode in ("bounded", "in_memory") if args.in_memory else ("bounded",):  # on the same table
            got = _child(["stream-run", uri, str(args.batches), str(args.rows), args.keys, mode])
            lat = got["commit_s"]
            out[f"{committed}/{mode}"] = {
                "committed_rows": committed,
                "check": mode,
                "build_s": round(build_s, 1),
                "commit_s": [round(x, 3) for x in lat],
                "commit_s_median": round(statistics.median(lat), 3),
                "checks_s": got["checks_s"],
                "checks_s_median": round(statistics.median(got["checks_s"]), 3),
                "checks_cpu_s_median": round(statistics.median(got["checks_cpu_s"]), 3),
                "peak_rss_mb": got["peak_rss_mb"],
            }
            log.info("%s", out[f"{committed}/{mode}"])
        shutil.rmtree(uri, ignore_errors=True)
    return out


# -- mutate: a stream's merges and a delete's keys as the table grows (I27) ---------------------


def _mutated_keys(committed: int, rows: int, spread: str, b: int, delete: bool) -> list[str]:
    """``rows`` committed ordered keys for batch ``b``: a contiguous run (``recent``: the newest
    rows, as updates to recent events) or spread evenly over the table (``spread``); merges
    and deletes take disjoint keys, so that every batch finds its rows."""
    half = committed // 2
    lo, hi = (half, committed) if delete else (0, half)
    if spread == "recent":
        start = hi - (b + 1) * rows
        return [_key(i, "ordered") for i in range(max(lo, start), max(lo, start + rows))]
    step = max(1, (hi - lo) // rows)
    return [_key(i, "ordered") for i in range(lo + b, hi, step)][:rows]


def mutate_commits(uri: str, committed: int, batches: int, rows: int, spread: str, check_rows: str) -> dict:
    """Child: ``batches`` stream merges (half committed keys, half new ones) through
    ``OmnigraphStreamWriter`` with writeMode=merge, then ``batches`` deletes of ``rows``
    committed keys through ``OmnigraphWriter`` with writeMode=delete, each commit timed."""
    import pyarrow as pa
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from omnigraph_spark.spark.stream import OmnigraphStreamWriter, StreamMessage
    from omnigraph_spark.spark.writer import OmnigraphWriter

    checks: list[tuple[float, float, float]] = []
    timed_validators(checks)
    schema = StructType([StructField("name", StringType()), StructField("age", IntegerType())])
    opts = {"path": uri, "type": "Person", "writeMode": "merge", "distributedCheckRows": check_rows}
    query = f"bench-{uuid.uuid4().hex}"
    merge_s, delete_s = [], []
    for b in range(batches):
        old = _mutated_keys(committed, rows // 2, spread, b, delete=False) if committed else []
        names = old + [f"m{uuid.uuid4().hex[:8]}-{i:07d}" for i in range(rows - len(old))]
        batch = pa.RecordBatch.from_pydict({"name": names, "age": pa.array([7] * len(names), pa.int32())})
        w = OmnigraphStreamWriter(opts, schema, False)
        msgs = [StreamMessage(w.write(iter([batch])).inner, query, b)]
        t0 = time.monotonic()
        OmnigraphStreamWriter(opts, schema, False).commit(msgs, b)
        merge_s.append(time.monotonic() - t0)
    dschema = StructType([StructField("name", StringType())])
    dopts = {**opts, "writeMode": "delete", "engine": "python"}
    for b in range(batches):
        keys = (
            _mutated_keys(committed, rows, spread, b, delete=True) if committed else [f"none-{i}" for i in range(rows)]
        )
        w = OmnigraphWriter(dopts, dschema, False)
        msgs = [w.write(iter([pa.RecordBatch.from_pydict({"name": keys})]))]
        t0 = time.monotonic()
        OmnigraphWriter(dopts, dschema, False).commit(msgs)
        delete_s.append(time.monotonic() - t0)
    return {
        "merge_s": [round(x, 3) for x in merge_s],
        "delete_s": [round(x, 3) for x in delete_s],
        "checks_s": [round(w, 3) for w, _, _ in checks],
    }


def run_mutate(args, work: Path) -> dict:
    out = {}
    for committed in [int(x) for x in args.committed.split(",")]:
        uri = str(work / f"mutate-{committed}")
        build_s = build_committed(uri, committed, "ordered")
        # bounded: every check and I18 part bounded (distributedCheckRows=1); in_memory: none
        for mode, check_rows in (("bounded", "1"), ("in_memory", "0")) if args.in_memory else (("bounded", "1"),):
            for spread in args.mutate_keys.split(","):
                got = _child(["mutate-run", uri, str(committed), str(args.batches), str(args.rows), spread, check_rows])
                out[f"{committed}/{spread}/{mode}"] = {
                    "committed_rows": committed,
                    "keys": spread,
                    "check": mode,
                    "build_s": round(build_s, 1),
                    "merge_s": got["merge_s"],
                    "merge_s_median": round(statistics.median(got["merge_s"]), 3),
                    "delete_s": got["delete_s"],
                    "delete_s_median": round(statistics.median(got["delete_s"]), 3),
                    "peak_rss_mb": got["peak_rss_mb"],
                }
                log.info("%s", out[f"{committed}/{spread}/{mode}"])
        shutil.rmtree(uri, ignore_errors=True)
    return out


# -- memory: a large Python-source load ------------------------------------------------------


def write_inputs(work: Path, nodes: int) -> tuple[Path, Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    nodes_path, edges_path = work / "nodes.parquet", work / "edges.parquet"
    with pq.ParquetWriter(nodes_path, pa.schema([("name", pa.string()), ("qty", pa.int64())])) as w:
        for lo in range(0, nodes, CHUNK):
            i = np.arange(lo, min(nodes, lo + CHUNK))
            w.write_table(pa.table({"name": [f"item-{x:010d}" for x in i], "qty": (i * 7919) % 1000}))
    edge_schema = pa.schema([("src", pa.string()), ("dst", pa.string()), ("weight", pa.float64())])
    with pq.ParquetWriter(edges_path, edge_schema) as w:
        for lo in range(0, 3 * nodes, CHUNK):
            i = np.arange(lo, min(3 * nodes, lo + CHUNK))
            src, dst = i // 3, (i * 7919 + 1) % nodes
            w.write_table(
                pa.table(
                    {
                        "src": [f"item-{x:010d}" for x in src],
                        "dst": [f"item-{x:010d}" for x in dst],
                        "weight": pa.array([None] * len(i), pa.float64()),
                    },
                    schema=edge_schema,
                )
            )
    return nodes_path, edges_path


def _opts(uri: str, type_: str, check_rows: str) -> dict:
    o = {"path": uri, "type": type_, "engine": "python"}
    if check_rows != "default":
        o["distributedCheckRows"] = check_rows
    return o


def _spark_schema(path: str):
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pq.read_schema(path))


def stage_load(uri: str, type_: str, path: str, tasks: int, messages: str) -> None:
    """Child: ``tasks`` staging tasks of ``OmnigraphWriter.write`` over the file's batches."""
    import pyarrow.parquet as pq

    from omnigraph_spark.spark.writer import OmnigraphWriter

    w = OmnigraphWriter(_opts(uri, type_, "default"), _spark_schema(path), False)
    f = pq.ParquetFile(path)
    groups = [list(range(f.num_row_groups))[t::tasks] for t in range(tasks)]
    msgs = [w.write(b for g in groups[t] for b in f.read_row_group(g).to_batches(10_000)) for t in range(tasks)]
    with open(messages, "wb") as fh:
        pickle.dump((w.side_dir, msgs), fh)


def commit_load(uri: str, type_: str, path: str, messages: str, check_rows: str) -> dict:
    """Child: ``OmnigraphWriter.commit`` of the staged messages, as a fresh commit worker."""
    from omnigraph_spark.spark.writer import OmnigraphWriter

    with open(messages, "rb") as fh:
        side_dir, msgs = pickle.load(fh)
    checks: list[tuple[float, float, float]] = []
    timed_validators(checks)
    w = OmnigraphWriter(_opts(uri, type_, check_rows), _spark_schema(path), False)
    w.side_dir = side_dir
    t0 = time.monotonic()
    w.commit(msgs)
    return {
        "commit_s": round(time.monotonic() - t0, 2),
        "checks_s": round(sum(c[0] for c in checks), 2),
        "peak_rss_mb_after_checks": max((c[2] for c in checks), default=0.0),
    }


def run_memory(args, work: Path) -> dict:
    from omnigraph_spark import Graph

    t0 = time.monotonic()
    nodes_path, edges_path = write_inputs(work, args.nodes)
    out: dict = {"nodes": args.nodes, "edges": 3 * args.nodes, "inputs_s": round(time.monotonic() - t0, 1)}
    modes = [("bounded", args.check_rows)] + ([("in_memory", "0")] if args.in_memory else [])
    for mode, check_rows in modes:
        uri = str(work / f"load-{mode}")
        Graph.init(uri, LOAD_SCHEMA)
        res = {"distributedCheckRows": check_rows}
        for type_, path in (("Item", nodes_path), ("Link", edges_path)):
            msgs = str(work / f"{type_}.pickle")
            t0 = time.monotonic()
            staged = _child(["stage", uri, type_, str(path), str(args.tasks), msgs])
            res[f"{type_}_stage_s"] = round(time.monotonic() - t0, 1)
            res[f"{type_}_stage_peak_rss_mb"] = staged["peak_rss_mb"]
            got = _child(["commit", uri, type_, str(path), msgs, check_rows])
            res[f"{type_}_commit_s"] = got["commit_s"]
            res[f"{type_}_commit_peak_rss_mb"] = got["peak_rss_mb"]
            res[f"{type_}_checks_s"] = got["checks_s"]
            res[f"{type_}_peak_rss_mb_after_checks"] = got["peak_rss_mb_after_checks"]
            res[f"{type_}_commit_index_child_peak_rss_mb"] = got["children_peak_rss_mb"]
            log.info("%s %s: %s", mode, type_, res)
        out[mode] = res
        shutil.rmtree(uri, ignore_errors=True)
    return out


# -- children ------------------------------------------------------------------------------------


def _child(argv: list[str]) -> dict:
    """Run ``argv`` in a fresh Python process; its JSON answer, with its peak RSS."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), *sys.path])}
    p = subprocess.run(
        [sys.executable, "-m", "benchmarks.commit_bench", "--child", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode:
        raise RuntimeError(f"child {argv[0]} failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def peak_rss_mb() -> float:
    """This process's peak resident memory since its exec (``VmHWM``: ``ru_maxrss`` on Linux
    also counts the parent's memory at the fork)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child(argv: list[str]) -> None:
    kind, rest = argv[0], argv[1:]
    if kind == "stream-run":
        uri, batches, rows, keys, mode = rest
        checks: list[tuple[float, float]] = []
        got = {"commit_s": stream_commits(uri, int(batches), int(rows), keys, mode == "in_memory", checks)}
        got["checks_s"] = [round(w, 3) for w, _, _ in checks]
        got["checks_cpu_s"] = [round(c, 3) for _, c, _ in checks]
    elif kind == "mutate-run":
        uri, committed, batches, rows, spread, check_rows = rest
        got = mutate_commits(uri, int(committed), int(batches), int(rows), spread, check_rows)
    elif kind == "stage":
        uri, type_, path, tasks, msgs = rest
        stage_load(uri, type_, path, int(tasks), msgs)
        got = {}
    elif kind == "commit":
        uri, type_, path, msgs, check_rows = rest
        got = commit_load(uri, type_, path, msgs, check_rows)
    else:
        raise SystemExit(f"unknown child {kind}")
    got["peak_rss_mb"] = peak_rss_mb()
    # the commit's index builds may run in a child process of their own (store/indexes.py)
    got["children_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    print(json.dumps(got))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        logging.basicConfig(level=logging.WARNING)
        child(argv[1:])
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", default="stream,memory")
    p.add_argument("--committed", default="0,1000000,10000000")
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--keys", choices=("ordered", "random"), default="ordered")
    p.add_argument("--mutate-keys", default="recent,spread", help="mutate: which committed keys (recent, spread)")
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--check-rows", default="default", help="distributedCheckRows for the bounded run")
    p.add_argument("--in-memory", action="store_true", help="also run every commit with the in-memory checks")
    p.add_argument("--work", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    work = Path(args.work or tempfile.mkdtemp(prefix="omnigraph-commit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"args": vars(args), "load_avg_start": os.getloadavg()}
    try:
        sections = args.sections.split(",")
        if "stream" in sections:
            results["stream"] = run_stream(args, work)
        if "mutate" in sections:
            results["mutate"] = run_mutate(args, work)
        if "memory" in sections:
            results["memory"] = run_memory(args, work)
    finally:
        results["load_avg_end"] = os.getloadavg()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
