"""On a Spark standalone cluster: a master and two workers (one core each), separate processes
on this machine (tests/standalone_cluster.py), with applications submitted from a fresh Python
process (tests/cluster_app.py) whose session is built with the one documented line,
``omnigraph_spark.configure_spark(builder)`` on a ``spark://`` master. Tasks run only in the
workers' executors (never in the driver), so a JVM stage or scan that succeeds proves the
executors loaded the shim; the graph is a local directory both workers reach at the same path.

* A write and a read through each entry point: ``write_table``/``read_table`` with
  ``engine="jvm"`` (they raise unless the JVM paths run; the log names the path taken), and
  ``df.write.format("omnigraph")``/``spark.read.format("omnigraph")``; both workers ran an
  executor of the application.
* A worker killed mid-load (SIGKILL to the worker, its executor JVM and its Python workers)
  while a task of the load runs there: Spark re-runs the lost task on the other worker (a
  second attempt of that partition is seen), the load commits once, and the table holds every
  input row exactly once (count, distinct ids, the ids equal the input). Through the JVM sink
  (``write_table``, ``engine="jvm"``) and through ``df.write.format("omnigraph")``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnigraph_spark import Graph

pytestmark = [pytest.mark.slow]

APP = Path(__file__).resolve().parent.parent / "cluster_app.py"
APP_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    from omnigraph_spark.spark.shim_conf import shim_spark_conf

    from ..standalone_cluster import cluster

    if not shim_spark_conf():  # what configure_spark would put on the application's session
        if os.environ.get("OMNIGRAPH_SPARK_REQUIRE_SHIM"):
            pytest.fail("OMNIGRAPH_SPARK_REQUIRE_SHIM is set but there is no JVM shim (make jvm-shim)")
        pytest.skip("the JVM shim is not built (make jvm-shim)")

    with cluster(tmp_path_factory.mktemp("standalone")) as c:
        yield c


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable), PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    return env


def _start(spec: dict, workdir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(APP), json.dumps(spec)], cwd=workdir, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(p: subprocess.Popen, cluster) -> dict:
    try:
        out, err = p.communicate(timeout=APP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
    lines = out.strip().splitlines()
    if p.returncode != 0 or not lines or not lines[-1].startswith("RESULT "):
        raise AssertionError(f"application failed ({p.returncode}):\n{out[-3000:]}\n{err[-6000:]}\n"
                             f"--- master\n{cluster.log('master')[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _graph(tmp_path: Path, schema: str) -> str:
    root = str(tmp_path / "graph")
    Graph.init(root, schema)
    return root


def test_write_and_read_through_every_entry_point(standalone, tmp_path, test_schema_text):
    root = _graph(tmp_path, test_schema_text)
    n = 200
    res = _finish(_start({"kind": "roundtrip", "master": standalone.url, "root": root, "n": n}, tmp_path), standalone)
    log = res["log"]
    assert any(line.startswith("staged node:Person (jvm)") for line in log), log  # the JVM sink staged
    assert any(line.startswith("omnigraph JVM read node:Person") for line in log), log  # the JVM scan read
    jvm_expected = [[f"j{i:06d}", i] for i in range(n)]
    assert res["jvm_rows"] == jvm_expected
    both = sorted(jvm_expected + [[f"d{i:06d}", i] for i in range(n)])
    assert res["format_rows"] == both  # format("omnigraph") reads what both writes committed
    assert res["format_filtered"] == n
    snap = Graph.open(root).snapshot()
    assert snap.table("node:Person").row_count == 2 * n
    # the application ran an executor on each worker
    assert all(standalone.executor_dirs(w) for w in standalone.workers), standalone.log("master")[-2000:]


def _running_task_worker(cluster, marks: Path, deadline: float, app: subprocess.Popen):
    """Wait until at least one task finished its input and another is running; the name of the
    worker that runs the latter (from the executor directory its marker holds)."""
    while time.monotonic() < deadline:
        if app.poll() is not None:
            return None, None
        names = os.listdir(marks) if marks.is_dir() else []
        running = sorted(n for n in names if not n.endswith(".done"))
        if any(n.endswith(".done") for n in names) and running:
            for mark in running:
                try:
                    cwd = (marks / mark).read_text()
                except FileNotFoundError:  # it just finished
                    continue
                for name in cluster.workers:
                    if cwd and Path(cwd).is_relative_to(cluster.workdir / name):
                        return name, mark
        time.sleep(0.05)
    return None, None


@pytest.mark.parametrize("api", ["jvm", "df"])
def test_a_worker_killed_mid_load_leaves_every_row_once(standalone, tmp_path, test_schema_text, api):
    root = _graph(tmp_path, test_schema_text)
    marks = tmp_path / "marks"
    n, parts = 3000, 6
    spec = {"kind": "load", "api": api, "master": standalone.url, "root": root, "n": n, "parts": parts,
            "marks": str(marks), "sleep_s": 0.4,
            # 5 Arrow batches per task: each task's input takes about 2 s
            "conf": {"spark.sql.execution.arrow.maxRecordsPerBatch": "100"}}
    app = _start(spec, tmp_path)
    try:
        victim, mark = _running_task_worker(standalone, marks, time.monotonic() + 240, app)
        assert victim is not None, f"no task ran ({app.poll()}): {os.listdir(marks) if marks.is_dir() else []}"
        standalone.kill_worker(victim)
        partition = mark.split("-")[0]
        standalone.start_worker(f"{victim}-replacement")  # back to two workers for what follows
        res = _finish(app, standalone)
    finally:
        if app.poll() is None:
            os.killpg(app.pid, 9)
            app.wait()
    standalone.wait_workers(2)
    # the killed task's partition ran again (on another executor), and every task finished
    assert any(a.startswith(f"{partition}-a") and not a.startswith(f"{partition}-a0") for a in res["attempts"]), \
        res["attempts"]
    assert {a.split("-")[0] for a in res["attempts"] if a.endswith(".done")} == {f"p{i}" for i in range(parts)}
    if api == "jvm":
        assert any(line.startswith("staged node:Person (jvm)") for line in res["log"]), res["log"]
    g = Graph.open(root)
    snap = g.snapshot()
    ids = g.read_table("node:Person", snap, columns=["id"]).column("id").to_pylist()
    assert len(ids) == n and len(set(ids)) == n  # every row once
    assert sorted(ids) == res["ids"]
    assert snap.table("node:Person").row_count == n
    assert snap.version == 4  # one commit after init's v3 (the re-run tasks did not commit twice)
