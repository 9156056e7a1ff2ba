"""Concurrency: several Spark applications write one graph at once while another reads it.

* four appenders (two ``df.write``, two ``write_graph``) on one table, plus a reader: every
  acknowledged row is present exactly once, each load is one commit (I1, I14);
* a mixed run: two appends and a merge commit while an overwrite, planned before them, waits
  to stage; the overwrite then loses with a typed ``EXPECTED_VERSION_MISMATCH`` (I3, strict
  overwrite) and changes nothing; the winners are all there;
* the reader (its own Spark application, running during the writes) pins one snapshot per read:
  the rows it reads equal the manifest ``row_count`` of that snapshot, with no duplicate ids (I13).

Afterwards the graph is consistent: no sidecar, HEAD == pin (I7), no duplicates, the commit log
holds exactly the acknowledged loads, and the next write succeeds.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import writes

from .helpers import STATS, assert_heads_match_pins, assert_no_duplicates, finish_job, ids, start_job

pytestmark = [pytest.mark.slow]

N = 25
CONFLICT_CODES = {"EXPECTED_VERSION_MISMATCH", "COMMIT_REBASED", "TABLE_DRIFT", "LEASE_TIMEOUT"}


def _graph(tmp_path, schema_text, base=()):
    g = Graph.init(str(tmp_path / "graph"), schema_text)
    if base:
        t = writes.prepare_target(g, "main", "node:Person", "append")
        st = writes.stage(
            t, pa.Table.from_pylist([{"id": i, "age": 1, "name": i} for i in base], schema=t.schema).to_batches()
        )
        writes.commit_load(g, "main", [st], actor="setup")
    return g


def _check_reads(reader_run) -> int:
    """I13: each read of a pinned snapshot returns exactly that snapshot's rows, once."""
    res = reader_run.result
    assert res is not None, reader_run.tail()
    reads = res["reads"]
    assert reads, "the reader made no read"
    for r in reads:
        assert r["read"] == r["row_count"], r
        assert r["distinct"] == r["read"], r
    STATS["rows_checked"] += sum(r["read"] for r in reads)
    versions = [r["version"] for r in reads]
    assert versions == sorted(versions)  # snapshots only move forward
    return len(set(versions))


def _after(g: Graph):
    assert g.pending_sidecars() == []
    assert_heads_match_pins(g)
    assert_no_duplicates(g)
    t = writes.prepare_target(g, "main", "node:Person", "append")
    writes.commit_load(
        g,
        "main",
        [
            writes.stage(
                t, pa.Table.from_pylist([{"id": "after", "age": 1, "name": "after"}], schema=t.schema).to_batches()
            )
        ],
    )
    assert "after" in ids(g, "node:Person")


def test_four_parallel_appenders_and_a_reader(tmp_path, test_schema_text):
    """I1, I13, I14: four Spark applications append to one table at once; all land, once each."""
    g = _graph(tmp_path, test_schema_text)
    first_read = str(tmp_path / "first-read")
    apps = [
        {
            "kind": "load",
            "api": api,
            "mode": "append",
            "prefix": p,
            "n": N,
            "root": g.root,
            "actor": f"app-{p}",
            "gate": first_read,
        }
        for p, api in (("a", "df"), ("b", "graph"), ("c", "df"), ("d", "graph"))
    ]
    stop = str(tmp_path / "writers-done")
    reader = {"kind": "reader", "root": g.root, "seconds": 280, "max_reads": 400, "until": stop, "signal": first_read}
    STATS["cases_tried"] += 1
    t0 = time.monotonic()
    p_reader = start_job(reader)
    procs = [start_job(s) for s in apps]
    runs = [finish_job(p, s, t0, timeout=300) for p, s in zip(procs, apps)]
    open(stop, "w").close()
    runs.append(finish_job(p_reader, reader, t0, timeout=300))
    for r in runs[:4]:
        assert r.returncode == 0 and r.result, r.tail()
    g = Graph.open(g.root)
    expected = sorted(i for r in runs[:4] for i in r.result["ids"])
    assert ids(g, "node:Person") == expected  # every acknowledged row, exactly once
    edges = sorted(e for r in runs[:4] for e in r.result.get("edges", []))
    assert ids(g, "edge:Knows") == edges
    log = g.log()
    assert sorted(c.actor_id for c in log[1:]) == sorted(a["actor"] for a in apps)  # one commit per load
    distinct_snapshots = _check_reads(runs[4])
    # the reader read before any writer staged (gate) and once more after all of them committed
    assert runs[4].result["reads"][0]["version"] < g.snapshot().version == runs[4].result["reads"][-1]["version"]
    assert runs[4].result["reads"][-1]["read"] == 4 * N
    _after(g)
    print(f"4 appenders + reader: {time.monotonic() - t0:.0f}s, reader saw {distinct_snapshots} snapshots")


def test_mixed_merge_overwrite_appends(tmp_path, test_schema_text):
    """I3: an overwrite planned before concurrent commits loses with a typed conflict and changes
    nothing; the concurrent appends and merge all land (I1, I14), a reader stays consistent (I13)."""
    base = [f"old{i}" for i in range(5)]
    g = _graph(tmp_path, test_schema_text, base)
    gate = str(tmp_path / "go")
    common = {"kind": "load", "n": N, "root": g.root}
    overwrite = dict(common, api="df", mode="overwrite", prefix="w", actor="overwrite", gate=gate)
    first_read = str(tmp_path / "first-read")
    others = [
        dict(common, api="df", mode="append", prefix="a", actor="append-a", gate=first_read),
        dict(common, api="graph", mode="append", prefix="b", actor="append-b", gate=first_read),
        dict(
            common, api="graph", mode="merge", prefix="m", actor="merge", extra_people=[["old0", 99]], gate=first_read
        ),
    ]
    stop = str(tmp_path / "writers-done")
    reader = {"kind": "reader", "root": g.root, "seconds": 280, "max_reads": 400, "until": stop, "signal": first_read}
    STATS["cases_tried"] += 1
    t0 = time.monotonic()
    p_over = start_job(overwrite)
    p_reader = start_job(reader)
    procs = [start_job(s) for s in others]
    runs = [finish_job(p, s, t0, timeout=300) for p, s in zip(procs, others)]
    for r in runs[:3]:
        assert r.returncode == 0 and r.result, r.tail()
    open(gate, "w").close()  # now let the overwrite stage and try to commit
    over = finish_job(p_over, overwrite, t0, timeout=300)
    open(stop, "w").close()
    runs.append(finish_job(p_reader, reader, t0, timeout=300))
    assert over.returncode == 3 and over.error_code in CONFLICT_CODES, over.tail()
    assert over.error_code == "EXPECTED_VERSION_MISMATCH", over.tail()
    assert "node:Person" in over.stdout  # the error names the table

    g = Graph.open(g.root)
    expected = sorted(set(base) | {i for r in runs[:3] for i in r.result["ids"]})
    assert ids(g, "node:Person") == expected
    assert not [i for i in ids(g, "node:Person") if i.startswith("w")]  # nothing of the loser
    ages = {r["id"]: r["age"] for r in g.read_table("node:Person").to_pylist()}
    assert ages["old0"] == 99
    assert sorted(c.actor_id for c in g.log()[2:]) == ["append-a", "append-b", "merge"]
    _check_reads(runs[3])
    assert runs[3].result["reads"][0]["version"] < g.snapshot().version == runs[3].result["reads"][-1]["version"]
    _after(g)
    print(f"mixed run: {time.monotonic() - t0:.0f}s")
