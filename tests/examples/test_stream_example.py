"""examples/stream_events.py end to end as a subprocess (the pattern of test_examples.py): event
files -> nodes and edges, one graph commit per micro-batch; a second run from the same
checkpoint with new files writes only those; a replay of the last batch commits nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from omnigraph_spark import Graph

from .test_examples import EXAMPLES, run

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


def test_stream_events(tmp_path):
    uri, ev, ck = tmp_path / "graph", tmp_path / "events", tmp_path / "ck"
    cmd = [
        sys.executable,
        EXAMPLES / "stream_events.py",
        uri,
        "--events",
        ev,
        "--checkpoint",
        ck,
        "--events-per-file",
        40,
        "--available-now",
    ]
    p = run(cmd + ["--generate", 3], timeout=600)
    assert p.returncode == 0
    assert "3 micro-batches with rows in this run; graph commits 3" in p.stdout
    g = Graph.open(str(uri))
    counts = {k: t.row_count for k, t in g.snapshot().tables.items()}
    # per file: 1 company, 10 people, 10 works_at, 10 knows (+10 to the previous file's people)
    assert counts == {"node:Company": 3, "node:Person": 30, "edge:WorksAt": 30, "edge:Knows": 50}
    assert g.log()[-1].actor_id == "stream-events-example"

    p = run(cmd + ["--generate", 1], timeout=600)
    assert p.returncode == 0 and "1 micro-batches with rows in this run; graph commits 4" in p.stdout
    assert Graph.open(str(uri)).snapshot().tables["node:Person"].row_count == 40

    # the checkpoint forgets its last commit: the replayed micro-batch is already in the graph
    last = max((f for f in (Path(ck) / "commits").iterdir() if f.name.isdigit()), key=lambda f: int(f.name))
    last.unlink()
    crc = last.parent / f".{last.name}.crc"
    if crc.exists():
        crc.unlink()
    p = run(cmd, timeout=600)
    assert p.returncode == 0 and "graph commits 4" in p.stdout
    g = Graph.open(str(uri))
    assert {k: t.row_count for k, t in g.snapshot().tables.items()} == {
        "node:Company": 4,
        "node:Person": 40,
        "edge:WorksAt": 40,
        "edge:Knows": 70,
    }
