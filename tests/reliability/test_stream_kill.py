"""Streaming queries killed and restarted from their checkpoint (docs/streaming.md): every input
row lands exactly once, no edge dangles, no sidecar is left (invariants I12, I19).

* ``test_stream_killed_in_the_commit_replays_once`` (fast, in ``make test``): the committing
  process is SIGKILLed after every table of a micro-batch committed but before the manifest
  publish (the commit landed, Spark's checkpoint did not); the restart replays that batch.
* ``test_stream_killed_at_random_moments`` (slow): a nodes-and-edges stream SIGKILLed (the
  whole process group: Python driver, JVM, workers) at random moments, restarted from its
  checkpoint several times, then drained.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnigraph_spark import Graph

from .helpers import STATS, _env, _reap, assert_no_duplicates

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

APP = str(Path(__file__).resolve().parent / "stream_app.py")


def events(batch: int, n: int) -> list[dict]:
    """n people of this batch, a chain of edges among them and one edge to the previous batch."""
    out = [{"kind": "person", "name": f"b{batch:02d}-{i:03d}", "age": i} for i in range(n)]
    out += [{"kind": "knows", "src": f"b{batch:02d}-{i:03d}", "dst": f"b{batch:02d}-{i + 1:03d}"} for i in range(n - 1)]
    if batch:
        out.append({"kind": "knows", "src": f"b{batch:02d}-000", "dst": f"b{batch - 1:02d}-000"})
    return out


def drop_files(src: Path, batches: int, n: int) -> None:
    """One JSON file per batch, modification times increasing (the file source's order)."""
    src.mkdir(parents=True)
    t = time.time() - batches - 10
    for b in range(batches):
        path = src / f"events-{b:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in events(b, n)))
        os.utime(path, (t + b, t + b))


class App:
    """One run of stream_app.py in its own process group, stdout in a file."""

    def __init__(self, spec: dict, out: Path, failpoint: str | None = None):
        self.out = out
        self.f = open(out, "w")
        self.p = subprocess.Popen(
            [sys.executable, APP, json.dumps(spec)],
            env=_env(failpoint),
            stdout=self.f,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        STATS["spark_apps"] += 1

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_started(self, timeout: float = 150) -> None:
        deadline = time.monotonic() + timeout
        while "STARTED" not in self.text():
            assert self.p.poll() is None, f"stream app exited early:\n{self.text()[-3000:]}"
            assert time.monotonic() < deadline, f"stream app did not start:\n{self.text()[-3000:]}"
            time.sleep(0.2)

    def kill(self) -> None:
        _reap(self.p)
        self.p.wait()
        self.f.close()
        STATS["crashes_survived"] += 1

    def finish(self, timeout: float = 240) -> int:
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _reap(self.p)
            pytest.fail(f"stream app timed out:\n{self.text()[-3000:]}")
        _reap(self.p)
        self.f.close()
        return rc


def spec(api: str, tmp_path: Path, trigger: str) -> dict:
    return {
        "api": api,
        "uri": str(tmp_path / "graph"),
        "src": str(tmp_path / "in"),
        "ck": str(tmp_path / "ck"),
        "trigger": trigger,
    }


def assert_exactly_once(uri: str, batches: int, n: int, edges: bool) -> None:
    g = Graph.open(uri)
    assert_no_duplicates(g)
    want = sorted(r["name"] for b in range(batches) for r in events(b, n) if r["kind"] == "person")
    snap = g.snapshot()
    got = sorted(g.read_table("node:Person", snap, columns=["id"]).column("id").to_pylist())
    assert got == want
    e = g.read_table("edge:Knows", snap, columns=["src", "dst"]).to_pylist()
    if edges:
        want_e = sorted((r["src"], r["dst"]) for b in range(batches) for r in events(b, n) if r["kind"] == "knows")
        assert sorted((r["src"], r["dst"]) for r in e) == want_e  # each exactly once
        ids = set(got)
        assert all(r["src"] in ids and r["dst"] in ids for r in e), "a dangling edge"
    assert g.pending_sidecars() == []
    STATS["rows_checked"] += len(got) + len(e)


def test_stream_killed_in_the_commit_replays_once(tmp_path, test_schema_text):
    """I12, I19 through a real writeStream.format("omnigraph") query: the Python worker running
    the micro-batch commit is SIGKILLed after its table commit, before the manifest publish.
    The restarted query replays that batch id: the heal rolls the crashed commit forward and
    the token makes the replay a no-op; every row lands once."""
    batches, n = 3, 40
    Graph.init(str(tmp_path / "graph"), test_schema_text)
    drop_files(tmp_path / "in", batches, n)
    crashed = App(spec("sink", tmp_path, "available"), tmp_path / "run0.log", failpoint="after_all_commits:kill")
    assert crashed.finish() != 0
    assert Graph.open(str(tmp_path / "graph")).pending_sidecars(), "the kill left no sidecar: it missed the commit"
    STATS["crashes_survived"] += 1
    app = App(spec("sink", tmp_path, "available"), tmp_path / "run1.log")
    assert app.finish() == 0, app.text()[-3000:]
    assert_exactly_once(str(tmp_path / "graph"), batches, n, edges=False)


@pytest.mark.slow
def test_stream_killed_at_random_moments(tmp_path, test_schema_text):
    """A foreachBatch(GraphBatchWriter) stream of nodes and edges, SIGKILLed at random moments
    (whole process group) and restarted from its checkpoint several times, then drained: every
    node and edge exactly once, none dangling, no sidecar left. About 2-3 minutes."""
    batches, n, kills = 16, 25, 3
    seed = int(os.environ.get("OMNIGRAPH_STREAM_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    uri = str(tmp_path / "graph")
    Graph.init(uri, test_schema_text)
    drop_files(tmp_path / "in", batches, n)
    landed = []
    for i in range(kills):
        app = App(spec("graph", tmp_path, "processing"), tmp_path / f"run{i}.log")
        app.wait_started()
        # once this run has committed a micro-batch (a cold start takes a while), kill it at a
        # random moment of the following ones: staging, validating, committing, or in between
        before = len(Graph.open(uri).log())
        deadline = time.monotonic() + 120
        while len(Graph.open(uri).log()) == before and time.monotonic() < deadline and app.p.poll() is None:
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 3.0))
        app.kill()
        landed.append(len(Graph.open(uri).log()) - 1)
    app = App(spec("graph", tmp_path, "available"), tmp_path / "final.log")
    assert app.finish() == 0, f"seed {seed}: {app.text()[-3000:]}"
    print(f"seed {seed}: graph commits after each kill {landed}, at the end {len(Graph.open(uri).log()) - 1}")
    assert_exactly_once(uri, batches, n, edges=True)
