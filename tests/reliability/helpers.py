"""Shared machinery of the reliability suite: Spark subprocesses, graph checks, counters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import commits, tables
from tests.interop.helpers import copy_graph  # noqa: F401  (one copier that re-points sidecars)

from .stats import STATS  # the counters of the closing summary line

HERE = Path(__file__).resolve().parent
JOB = str(HERE / "spark_job.py")
FULL = os.environ.get("OMNIGRAPH_FULL_MATRIX") == "1"


# -- Spark subprocesses ----------------------------------------------------------------------


@dataclass
class JobRun:
    spec: dict
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def result(self) -> dict | None:
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
        return None

    @property
    def error_code(self) -> str | None:
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("ERROR "):
                return line.split()[1]
        return None

    @property
    def completed(self) -> bool:
        return "COMPLETED" in self.stdout.splitlines()

    def tail(self, n: int = 3000) -> str:
        return f"rc={self.returncode}\n--- stdout\n{self.stdout[-n:]}\n--- stderr\n{self.stderr[-n:]}"


def _env(failpoint: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.pop("OMNIGRAPH_SPARK_FAILPOINT", None)
    if failpoint:
        env["OMNIGRAPH_SPARK_FAILPOINT"] = failpoint
    env.pop("SPARK_HOME", None)  # the venv's pyspark, never a system install
    return env


def start_job(spec: dict, failpoint: str | None = None) -> subprocess.Popen:
    """Start one Spark application in its own process group (so the whole tree — the Python
    driver, its JVM and the Python workers — can be reaped, and only it)."""
    return subprocess.Popen(
        [sys.executable, JOB, json.dumps(spec)],
        env=_env(failpoint),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish_job(p: subprocess.Popen, spec: dict, t0: float, timeout: float = 240) -> JobRun:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _reap(p)
        out, err = p.communicate()
        pytest.fail(f"Spark job timed out after {timeout}s: {spec}\n{out[-2000:]}\n{err[-2000:]}")
    _reap(p)
    STATS["spark_apps"] += 1
    return JobRun(spec, p.returncode, out, err, time.monotonic() - t0)


def _reap(p: subprocess.Popen) -> None:
    """Kill what is left of the job's own process group (a JVM whose driver was SIGKILLed)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_job(spec: dict, failpoint: str | None = None, timeout: float = 240) -> JobRun:
    t0 = time.monotonic()
    return finish_job(start_job(spec, failpoint), spec, t0, timeout)


def run_jobs(specs: Sequence[dict], timeout: float = 300, stagger_s: float = 0.0) -> list[JobRun]:
    """Run several Spark applications at once; results in spec order."""
    t0 = time.monotonic()
    procs = []
    for s in specs:
        procs.append(start_job(s))
        if stagger_s:
            time.sleep(stagger_s)
    return [finish_job(p, s, t0, timeout) for p, s in zip(procs, specs)]


# -- graph checks -------------------------------------------------------------------------------


def ids(graph: Graph, key: str, branch: str = "main") -> list[str]:
    return sorted(graph.read_table(key, graph.snapshot(branch), columns=["id"]).column("id").to_pylist())


def assert_no_duplicates(graph: Graph, branch: str = "main") -> int:
    """No id twice in any table of ``branch``; returns the rows checked."""
    n = 0
    snap = graph.snapshot(branch)
    for key in snap.tables:
        got = graph.read_table(key, snap, columns=["id"]).column("id").to_pylist()
        dup = sorted({i for i in got if got.count(i) > 1}) if len(set(got)) != len(got) else []
        assert not dup, f"duplicate ids in {key}@{branch}: {dup[:10]}"
        assert len(got) == snap.tables[key].row_count, f"{key}: manifest row_count disagrees with rows read"
        n += len(got)
    STATS["rows_checked"] += n
    return n


def assert_heads_match_pins(graph: Graph, branch: str = "main") -> None:
    """I7: every table the branch owns has Lance HEAD == manifest pin."""
    snap = graph.snapshot(branch)
    for key, t in snap.tables.items():
        if t.branch == snap.branch:
            assert tables.head_version(t.base_path, t.lance_branch) == t.version, key


def assert_audits_cover(graph: Graph, resolved_ops: Sequence[str]) -> None:
    """I9: every resolved sidecar left an audit row."""
    audited = {a["operation_id"] for a in commits.list_recovery_audits(graph.root)}
    missing = set(resolved_ops) - audited
    assert not missing, f"sidecars resolved without an audit row: {missing}"


def sidecar_ops(graph: Graph) -> list[str]:
    return [Path(p).stem for p in graph.pending_sidecars()]


def tree_files(root: str) -> dict[str, int]:
    """Every file under a graph root (relative path -> size), lease excluded."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, root)
            if rel.startswith("_omnigraph_spark/commit.lease"):
                continue
            out[rel] = os.path.getsize(full)
    return out


# -- the engine (optional) -----------------------------------------------------------------------

ENGINE_VERSION = "0.7.2"


def find_engine() -> str | None:
    """``$OMNIGRAPH_BIN`` when it is an executable reporting 0.7.2; None otherwise."""
    b = os.environ.get("OMNIGRAPH_BIN")
    if not b or not (os.path.isfile(b) and os.access(b, os.X_OK)):
        return None
    try:
        out = subprocess.run([b, "--version"], capture_output=True, text=True, timeout=60)
    except Exception:
        return None
    return b if ENGINE_VERSION in (out.stdout + out.stderr).split() else None


def engine_visible_ids(binary: str, root_copy: str, branch: str, home: str) -> dict[str, list[str]]:
    """Open a COPY of the graph read-write with the engine (its recovery sweep runs), then export
    ``branch``: node ids per type, edge count per type."""
    env = dict(os.environ, OMNIGRAPH_HOME=home, RUST_BACKTRACE="0")
    env.pop("OMNIGRAPH_PROFILE", None)

    def run(*args):
        p = subprocess.run([binary, "--quiet", *args], capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, f"engine {' '.join(args)} failed: {p.stdout[-2000:]} {p.stderr[-2000:]}"
        return p.stdout

    run("snapshot", root_copy, "--branch", branch, "--json")  # read-write open: the engine heals
    out: dict[str, list[str]] = {}
    for line in run("export", root_copy, "--branch", branch).splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if "type" in r:
            out.setdefault(f"node:{r['type']}", []).append(r["data"]["id"] if "id" in r["data"] else r["data"]["name"])
        else:
            out.setdefault(f"edge:{r['edge']}", []).append(r["data"].get("id") or "")
    return {k: sorted(v) for k, v in out.items()}
