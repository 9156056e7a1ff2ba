"""Bad rows (issue 28): one clean, typed error, never a retried task (invariant I18).

A row that breaks a catalog rule is found in a staging task; the task stops, deletes what it
staged and returns the error as its result; the driver raises ONE typed error and commits
nothing. These tests pin what a user sees: the input is computed once (no task retry, even
with ``spark.task.maxFailures`` = 4), no ``Aborting task`` / ``TaskSetManager`` lines on the
console, the typed error from ``write_table`` / ``write_graph`` / ``load_jsonl`` and, through
``unwrap_error``, from ``df.write``, with the same first line on every path.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.demo import sample_path

from .helpers import STATS, _env, finish_job

pytestmark = [pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
              pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

JOB = str(Path(__file__).resolve().parent / "bad_rows_job.py")
#: console lines of a failed (and retried) task; a data error must produce none of them
TASK_FAILURE_LINES = re.compile(r"Aborting task|TaskSetManager|Lost task|Exception in task|Aborting commit")


@pytest.mark.spark
def test_a_bad_row_is_computed_once_and_logs_no_task_failure(tmp_path):
    """I18: a bad enum value, on local[2,4] (four attempts per task allowed), through df.write,
    write_table(engine="python") and write_table(engine="jvm"): every input row is computed at
    most once, no task-failure line reaches the console at Spark's default log level, the graph
    is unchanged, and the typed error's first line is the same on every path."""
    root = str(tmp_path / "graph")
    Graph.init(root, Path(sample_path("social.pg")).read_text())
    counters = tmp_path / "counters"
    counters.mkdir()
    spec = {"root": root, "counters": str(counters), "master": "local[2,4]"}
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, JOB, json.dumps(spec)], env=_env(None), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    run = finish_job(p, spec, t0, timeout=400)
    assert run.result is not None, run.tail()
    res = run.result
    STATS["bad_inputs"] += 3
    noise = [line for line in run.stderr.splitlines() if TASK_FAILURE_LINES.search(line)]
    assert not noise, "task failure lines on the console:\n" + "\n".join(noise[:20])
    expected = ("[CONSTRAINT_VIOLATION] node Person column 'role' row ")
    lines = set()
    for name in ("df_write", "python", "jvm"):
        r = res[name]
        assert r["code"] == "CONSTRAINT_VIOLATION", (name, r, run.tail())
        assert r["typed_first_line"].startswith(expected) and "'wizard'" in r["typed_first_line"], r
        assert r["rows_computed"] <= 8, f"{name}: input rows computed {r['rows_computed']} times for 8 rows (a retry)"
        assert r["versions"][0] == r["versions"][1], f"{name} changed the graph"
        lines.add(r["typed_first_line"])
    # write_table raises the typed error itself; df.write's exception is Spark's, its cause ours
    assert res["python"]["raised"] == res["jvm"]["raised"] == "omnigraph_spark.errors.ConstraintViolationError"
    assert res["df_write"]["first_line"].startswith("[PYTHON_DATA_SOURCE_ERROR]")
    assert len(lines) == 1, lines
