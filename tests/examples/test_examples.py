"""Every example runs, end to end, as a subprocess: the spark-submit job with the REAL
spark-submit script, the notebook headless (nbclient), the Delta pipeline (Delta jars resolved
from Maven Central by configure_spark_with_delta_pip; the first run downloads them into
~/.ivy2.5.2), the read example, and the demo (``python -m omnigraph_spark.demo``, what
``make demo`` runs). No SparkSession is created in the pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnigraph_spark import Graph

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent


def _env(**extra) -> dict:
    env = dict(os.environ)
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
    env.pop("OMNIGRAPH_SPARK_FAILPOINT", None)
    env.update(extra)
    return env


def run(cmd, timeout: float, cwd=ROOT, **env) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t0
    label = next((Path(str(c)).name for c in cmd if str(c).endswith((".py", ".ipynb"))), str(cmd[0]))
    print(f"{label}: rc={p.returncode} in {took:.1f}s")
    if p.returncode != 0:
        print("--- stdout ---\n" + p.stdout[-6000:] + "\n--- stderr ---\n" + p.stderr[-6000:])
    return p


def test_spark_submit_load(tmp_path):
    """The batch job through pyspark's own spark-submit script, with conf/spark-defaults.conf."""
    submit = BIN / "spark-submit"
    assert submit.exists(), f"{submit} missing (pyspark installs it)"
    uri = tmp_path / "graph"
    cmd = [
        submit,
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--properties-file",
        ROOT / "conf" / "spark-defaults.conf",
        EXAMPLES / "spark_submit_load.py",
        uri,
        "--txn-version",
        "1",
    ]
    p = run(cmd, timeout=900)
    assert p.returncode == 0
    assert "committed " in p.stdout and "Person rows on main: 80" in p.stdout
    assert "spark master: local[2]" in p.stdout
    g = Graph.open(str(uri))
    assert {k: t.row_count for k, t in g.snapshot().tables.items()} == {
        "node:Person": 80,
        "node:Company": 12,
        "edge:Knows": 240,
        "edge:WorksAt": 72,
    }
    assert g.log()[-1].actor_id == "spark-submit-example"
    # the same txnVersion again: an idempotent no-op
    p = run(cmd, timeout=900)
    assert p.returncode == 0 and "already applied" in p.stdout
    assert len(Graph.open(str(uri)).log()) == 2
    # a refused load exits 1 with error[CODE] (spark-submit sends the Python driver's stderr
    # to its own stdout)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"edge": "Knows", "from": "Ada Okafor", "to": "Nobody"}\n')
    p = run(cmd[:-3] + [uri, "--jsonl", bad], timeout=900)
    assert p.returncode == 1
    assert "error[DANGLING_EDGE]: edge Knows row 0: dst 'Nobody'" in p.stdout + p.stderr


def test_notebook_headless(tmp_path):
    out = tmp_path / "executed.ipynb"
    p = run(
        [sys.executable, ROOT / "tests" / "examples" / "run_notebook.py", EXAMPLES / "notebook.ipynb", out, 600],
        timeout=900,
        cwd=tmp_path,
        OMNIGRAPH_NOTEBOOK_GRAPH=str(tmp_path / "graph"),
    )
    assert p.returncode == 0
    import nbformat

    nb = nbformat.read(str(out), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code)
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    html = [o for c in code for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert html, "display(df) should render tables"
    assert Graph.open(str(tmp_path / "graph")).snapshot().tables["node:Person"].row_count == 81


def need_delta() -> None:
    """Delta is an optional extra (``pip install omnigraph-spark[delta]``) whose releases each pin
    one pyspark line: skip where it is not installed, fail where OMNIGRAPH_SPARK_REQUIRE_DELTA is
    set (CI installs it with the oldest supported pyspark, ``make test-oldest-spark``)."""
    try:
        import delta  # noqa: F401
    except ImportError:
        if os.environ.get("OMNIGRAPH_SPARK_REQUIRE_DELTA"):
            pytest.fail("OMNIGRAPH_SPARK_REQUIRE_DELTA is set but delta-spark is not installed")
        pytest.skip("delta-spark is not installed (the 'delta' extra; its range caps pyspark)")


def test_delta_to_graph(tmp_path):
    need_delta()
    p = run(
        [sys.executable, EXAMPLES / "delta_to_graph.py", tmp_path / "graph", "--delta-dir", tmp_path / "delta"],
        timeout=1800,
    )
    assert p.returncode == 0
    assert "re-run with the same source versions: skipped=True" in p.stdout
    assert "delta_to_graph OK" in p.stdout
    assert "re-run of the same range: skipped=True" in p.stdout and "1 deleted -> ONE commit" in p.stdout
    g = Graph.open(str(tmp_path / "graph"))
    assert g.snapshot().tables["node:Person"].row_count == 80  # 80 seeded, one hired, one deleted
    assert [c.actor_id for c in g.log()[1:]] == ["delta_to_graph", "delta_to_graph"]


def test_graph_to_delta(tmp_path):
    """The change feed mirrored into Delta exactly once (docs/change_feed.md, I25)."""
    need_delta()
    p = run(
        [sys.executable, EXAMPLES / "graph_to_delta.py", tmp_path / "graph", "--delta-dir", tmp_path / "delta"],
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-3000:]
    assert "delivered {'Person': 80, 'WorksAt': 72}" in p.stdout
    assert "delivered {'Person': 4, 'WorksAt': 1}" in p.stdout  # Ada's two images, Yara, Ben; Ben's edge
    assert "differing 0" in p.stdout and "differing 1" not in p.stdout
    assert "a third run delivers {'Person': 0, 'WorksAt': 0}" in p.stdout
    assert "graph_to_delta OK" in p.stdout


def test_read_graph_example(tmp_path):
    p = run([sys.executable, EXAMPLES / "read_graph.py", tmp_path / "graph"], timeout=900)
    assert p.returncode == 0
    assert "created" in p.stdout and "snapshot: branch main, graph v4" in p.stdout
    assert "employees per industry" in p.stdout and "possible introductions" in p.stdout
    assert "vertices: 92  edges: 312" in p.stdout


def test_demo_main_job(tmp_path):
    """What `make demo` runs, from a directory other than the repo (package data, not paths)."""
    p = run(
        [sys.executable, "-m", "omnigraph_spark.demo", "--graph", tmp_path / "demo-graph"], timeout=900, cwd=tmp_path
    )
    assert p.returncode == 0
    assert "demo OK" in p.stdout
    for text in (
        "load_jsonl social.jsonl -> commit",
        "people per company",
        "branch what-if: graph v",
        "commits on main",
        "time travel to commit",
    ):
        assert text in p.stdout
    g = Graph.open(str(tmp_path / "demo-graph"))
    assert g.branches() == ["main", "what-if"] and len(g.log()) == 4
