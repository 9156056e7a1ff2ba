"""On a Spark standalone cluster: a master and two workers (one core each), separate processes
on this machine (tests/standalone_cluster.py), with applications submitted from a fresh Python
process (tests/cluster_app.py) whose session is built with the one documented line,
``omnigraph_spark.configure_spark(builder)`` on a ``spark://`` master. Tasks run only in the
workers' executors (never in the driver), so a JVM stage or scan that succeeds proves the
executors loaded the shim; the graph is a local directory both workers reach at the same path.

* A write and a read through each entry point: ``write_table``/``read_table`` with
  ``engine="jvm"`` (they raise unless the JVM paths run; the log names the path taken), and
  ``df.write.format("omnigraph")``/``spark.read.format("omnigraph")``; both workers ran an
  executor of the application. Through each way the shim reaches the executors: the checkout's
  jars on their class path, and the wheel's jar with its Maven libraries shipped by the driver
  (``configure_spark`` of a pip install, and ``spark-submit`` with ``shim_spark_conf()``).
* A worker killed mid-load (SIGKILL to the worker, its executor JVM and its Python workers)
  while a task of the load runs there: Spark re-runs the lost task on the other worker (a
  second attempt of that partition is seen), the load commits once, and the table holds every
  input row exactly once (count, distinct ids, the ids equal the input; invariant I1, guarantee
  P2). Through the JVM sink (``write_table``, ``engine="jvm"``) and through
  ``df.write.format("omnigraph")``.
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
from omnigraph_spark.spark.shim_conf import SHIM_JAR

#: one worker under pytest-xdist, so the module's cluster starts once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("standalone")]

APP = Path(__file__).resolve().parent.parent / "cluster_app.py"
APP_TIMEOUT_S = 420
#: docs/api.md's spark-submit row: the shim's settings for this install as spark-submit options
SUBMIT_CONF_LINE = (
    "from omnigraph_spark.spark.shim_conf import shim_spark_conf; "
    'print(" ".join(f"--conf {k}={v}" for k, v in shim_spark_conf().items()))'
)


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


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(extra or {})
    env.update(
        PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return env


def _start(spec: dict, workdir: Path, env: dict | None = None, submit: list | None = None) -> subprocess.Popen:
    """The application in a fresh process: ``python cluster_app.py`` or, with ``submit`` (its
    command-line options), ``spark-submit <options> cluster_app.py``."""
    cmd = [sys.executable, str(APP), json.dumps(spec)]
    if submit is not None:
        cmd = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), *submit, *cmd[1:]]
    return subprocess.Popen(
        cmd,
        cwd=workdir,
        env=_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(p: subprocess.Popen, cluster) -> dict:
    try:
        out, err = p.communicate(timeout=APP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
    lines = out.strip().splitlines()
    if p.returncode != 0 or not lines or not lines[-1].startswith("RESULT "):
        exits = [
            f"{f}: {line}"
            for f in sorted(cluster.workdir.glob("*/app-*/*/stderr"))
            for line in f.read_text(errors="replace").splitlines()
            if "SparkUncaughtExceptionHandler" in line or "NoClassDefFoundError" in line
        ][:20]
        raise AssertionError(
            f"application failed ({p.returncode}):\n{out[-3000:]}\n{err[-6000:]}\n"
            f"--- master\n{cluster.log('master')[-2000:]}\n--- executors' fatal lines: {exits}"
        )
    return json.loads(lines[-1][len("RESULT ") :])


def _graph(tmp_path: Path, schema: str) -> str:
    root = str(tmp_path / "graph")
    Graph.init(root, schema)
    return root


@pytest.mark.parametrize("route", ["checkout", "wheel", "spark-submit"])
def test_write_and_read_through_every_entry_point(standalone, tmp_path, test_schema_text, route):
    """``route``: how the shim reaches the cluster. "checkout": ``configure_spark(builder)`` in
    the application finds the ``make jvm-shim`` jars and puts them on the driver's and the
    executors' class paths (the workers see this checkout's paths); "wheel": the same line where
    a pip install finds only the packaged jar (``make wheel`` puts it in the package), which it
    ships with ``spark.jars`` and its libraries with ``spark.jars.packages``; "spark-submit": the
    same settings on the ``spark-submit`` command line docs/api.md gives (``shim_spark_conf()``
    as ``--conf`` options). The shipped routes put the Lance libraries in Spark's class loader,
    not the executors' class path, where Lance's native dispatcher thread cannot load its class
    (``LanceDispatcherGuard`` in jvm-shim keeps the executors running). One task failure ends
    the application (``spark.task.maxFailures=1``): a lost executor fails the test."""
    from omnigraph_spark.spark.shim_conf import SHIM_DIR_ENV, built_shim_jars, packaged_shim_jar

    env, submit = {}, None
    spec = {"kind": "roundtrip", "master": standalone.url, "n": 200, "conf": {"spark.task.maxFailures": "1"}}
    if route != "checkout":
        jar, built = packaged_shim_jar(), built_shim_jars()
        if jar is None or (built and Path(jar).read_bytes() != Path(built[0]).read_bytes()):
            why = "no packaged shim jar of this build in omnigraph_spark/jars (make wheel or make test-slow)"
            if os.environ.get("OMNIGRAPH_SPARK_REQUIRE_SHIM"):  # CI: every route runs
                pytest.fail(f"OMNIGRAPH_SPARK_REQUIRE_SHIM is set but there is {why}")
            pytest.skip(why)
        env[SHIM_DIR_ENV] = str(tmp_path / "no-build")  # what a wheel install finds: the packaged jar
    if route == "spark-submit":
        # the command docs/api.md gives for spark-submit's options, run as a user would
        line = subprocess.run(
            [sys.executable, "-c", SUBMIT_CONF_LINE], env=_env(env), capture_output=True, text=True, check=True
        ).stdout.split()
        assert "--conf" in line and any(a.startswith("spark.jars=") for a in line), line
        submit = ["--master", standalone.url, "--driver-memory", "768m", *line]
        spec["configure"] = False
    root = spec["root"] = _graph(tmp_path, test_schema_text)
    n = spec["n"]
    res = _finish(_start(spec, tmp_path, env, submit), standalone)
    if route == "checkout":
        assert f"jvm-shim/target/{SHIM_JAR}" in res["conf"]["spark.executor.extraClassPath"], res["conf"]
        # Lance on the executors' class path: its dispatcher thread loads its class, no guard is installed
        for w in standalone.workers:
            for d in standalone.executor_dirs(w, res["app_id"]):
                stderr = (d / "stderr").read_text(errors="replace")
                assert "LanceDispatcherGuard" not in stderr and "AsyncScanner class not found" not in stderr, d
    else:
        jars = res["conf"]["spark.jars"].split(",")
        assert any(j.endswith(f"omnigraph_spark/jars/{SHIM_JAR}") for j in jars), jars
        assert res["conf"]["spark.executor.extraClassPath"] is None, res["conf"]
        # the packaged jar and Ivy's jars of the packages reached every executor (each fetched them
        # into its work directory), also where the session's spark.jars lists the packaged jar alone
        for w in standalone.workers:
            for d in standalone.executor_dirs(w, res["app_id"]):
                fetched = sorted(p.name for p in d.glob("*.jar"))
                for name in (
                    SHIM_JAR,
                    "org.lance_lance-core-7.0.0.jar",
                    "org.apache.arrow_arrow-c-data-19.0.0.jar",
                    "org.apache.arrow_arrow-dataset-18.3.0.jar",
                ):
                    assert name in fetched, (d, fetched)
                # Lance's dispatcher thread could not load its class there, and the executor went on
                # (jvm-shim LanceDispatcherGuard; without it Spark stops the executor with exit code 50)
                stderr = (d / "stderr").read_text(errors="replace")
                assert "WARN LanceDispatcherGuard" in stderr and "AsyncScanner class not found" in stderr, d
    log = res["log"]
    print("seconds per step", res["steps"], "application", res["seconds"])
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
    assert all(standalone.executor_dirs(w, res["app_id"]) for w in standalone.workers), standalone.log("master")[-2000:]


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
    spec = {
        "kind": "load",
        "api": api,
        "master": standalone.url,
        "root": root,
        "n": n,
        "parts": parts,
        "marks": str(marks),
        "sleep_s": 0.4,
        # 5 Arrow batches per task: each task's input takes about 2 s
        "conf": {"spark.sql.execution.arrow.maxRecordsPerBatch": "100"},
    }
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
    assert any(a.startswith(f"{partition}-a") and not a.startswith(f"{partition}-a0") for a in res["attempts"]), res[
        "attempts"
    ]
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
