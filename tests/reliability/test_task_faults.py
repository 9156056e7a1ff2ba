"""Task faults: failed and speculative task attempts never duplicate or lose rows.

A Spark application with task retries (``local[2,3]``) whose first attempts of the even
partitions fail mid-stream, after the writer staged a data file: partition 0's input raises,
partition 2's input raises an OSError (a transient fault; a poison row would be a data error,
which is the load's answer and never retried: I20, test_bad_rows.py). The retried
attempts' messages are the only ones committed, so every row is there exactly once (I1); the
failed attempts' files are unreferenced orphans (never visible) that
``graph.cleanup(orphan_grace_s=0)`` reclaims (I10). Both write paths: ``df.write`` (Spark hands
``commit`` one message per partition) and ``write_graph`` (the staging journal), the latter
staged by Python workers and by the JVM sink (``graph_jvm``: Spark's DSv2 commit coordinator,
a failed attempt's ``DataWriter.abort`` deletes its own files).

Speculation: ``spark.speculation`` on, with a deliberately slow first attempt of one partition.
Spark never launches a speculative copy on the host that already runs the task (``local`` and
``local-cluster`` are one host), so on one machine this is a guard that speculation settings
change nothing; the two-attempts-one-message case itself is pinned deterministically by
``tests/spark/test_write.py::test_only_committed_attempt_is_visible``. The test reports which
attempts ran.
"""

from __future__ import annotations

import os

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import tables

from .helpers import STATS, assert_heads_match_pins, assert_no_duplicates, ids, run_job

pytestmark = [pytest.mark.slow]

N = 40
FAULT_CONF = {"spark.sql.execution.arrow.maxRecordsPerBatch": "2", "spark.task.maxFailures": "3"}


def data_files(root: str) -> set:
    out = set()
    for top in ("nodes", "edges"):
        for dirpath, _d, files in os.walk(os.path.join(root, top)):
            if os.path.basename(dirpath) == "data":
                out |= {os.path.relpath(os.path.join(dirpath, f), root) for f in files if f.endswith(".lance")}
    return out


def referenced_files(g: Graph) -> set:
    """Data files any version of any table (main lineage) references."""
    out = set()
    snap = g.snapshot()
    for t in snap.tables.values():
        ds = tables.open_dataset(t.base_path)
        for v in ds.versions():
            for frag in ds.checkout_version(v["version"]).get_fragments():
                for df in frag.metadata.files:
                    out.add(f"{t.table_path}/data/{df.path}")
    return out


def _check_and_reclaim(g: Graph, expected_ids, before_files: set) -> dict:
    assert ids(g, "node:Person") == sorted(expected_ids)  # none lost, none twice (I1)
    assert_no_duplicates(g)
    assert_heads_match_pins(g)
    assert g.pending_sidecars() == []
    assert not os.path.exists(os.path.join(g.root, "_omnigraph_spark", "staging")) or not any(
        os.scandir(os.path.join(g.root, "_omnigraph_spark", "staging"))
    )
    files = data_files(g.root)
    orphans = files - referenced_files(g) - before_files
    report = g.cleanup(keep_versions=100, orphan_grace_s=0)
    reclaimed = {f"{t.table_path}/{f}" for t in report.tables for f in t.orphan_files}
    assert orphans <= reclaimed, f"orphans cleanup did not reclaim: {orphans - reclaimed}"
    assert data_files(g.root) == files - reclaimed
    g = Graph.open(g.root)
    assert ids(g, "node:Person") == sorted(expected_ids)  # cleanup touched nothing visible
    return {"orphans": len(orphans), "reclaimed": len(reclaimed)}


@pytest.mark.parametrize("api", ["df", "graph", "graph_jvm"])
def test_failed_first_attempts_are_retried_without_duplicates(tmp_path, test_schema_text, api):
    """I1, I10: the input raises on attempt 0 of even partitions; retries land each row once."""
    g = Graph.init(str(tmp_path / "graph"), test_schema_text)
    before = data_files(g.root)
    STATS["cases_tried"] += 1
    run = run_job(
        {
            "kind": "task_fault",
            "api": api,
            "n": N,
            "parts": 4,
            "root": g.root,
            "master": "local[2,3]",
            "conf": FAULT_CONF,
            "marks": str(tmp_path / "attempts"),
        }
    )
    assert run.returncode == 0 and run.result, run.tail()
    # the faults happened: partitions 0 and 2 (input raised) ran a second attempt
    assert {"p0-a0", "p0-a1", "p2-a0", "p2-a1", "p1-a0", "p3-a0"} <= set(run.result["attempts"]), run.result
    g = Graph.open(g.root)
    # whatever the failed attempts left is unreferenced and reclaimed. (Before I20 partition 2's
    # fault was a poison row the writer refused after Lance finished a file, which pinned an
    # orphan here; a data error now deletes its own files and is never retried.)
    got = _check_and_reclaim(g, [f"f{i:03d}" for i in range(N)], before)
    STATS["crashes_survived"] += 2  # two partitions failed once each
    print(f"task faults ({api}): {got['orphans']} orphan files of failed attempts, {got['reclaimed']} reclaimed")


def test_speculative_attempts_do_not_duplicate(tmp_path, test_schema_text):
    """I1, I10: a slow partition is speculated; only one attempt per partition is committed."""
    g = Graph.init(str(tmp_path / "graph"), test_schema_text)
    before = data_files(g.root)
    conf = {
        "spark.speculation": "true",
        "spark.speculation.multiplier": "1.2",
        "spark.speculation.quantile": "0.25",
        "spark.speculation.interval": "100ms",
        "spark.speculation.minTaskRuntime": "200ms",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2",
        "spark.executor.memory": "512m",
    }
    STATS["cases_tried"] += 1
    spec = {
        "kind": "speculation",
        "n": N,
        "marks": str(tmp_path / "attempts"),
        "parts": 4,
        "root": g.root,
        "slow_s": 3.0,
        "conf": conf,
        "master": os.environ.get("OMNIGRAPH_SPECULATION_MASTER", "local[2]"),
    }
    run = run_job(spec, timeout=300)
    assert run.returncode == 0 and run.result, run.tail()
    g = Graph.open(g.root)
    got = _check_and_reclaim(g, [f"f{i:03d}" for i in range(N)], before)
    print(f"speculation on {spec['master']}: attempts {run.result.get('attempts')}, {got['orphans']} orphan files")
