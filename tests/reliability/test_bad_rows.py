"""Bad rows: one clean, typed error, never a retried task (invariant I20).

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

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

JOB = str(Path(__file__).resolve().parent / "bad_rows_job.py")
#: console lines of a failed (and retried) task; a data error must produce none of them
TASK_FAILURE_LINES = re.compile(r"Aborting task|TaskSetManager|Lost task|Exception in task|Aborting commit")


@pytest.mark.spark
def test_a_bad_row_is_computed_once_and_logs_no_task_failure(tmp_path):
    """I20: a bad enum value, on local[2,4] (four attempts per task allowed), through df.write,
    write_table(engine="python") and write_table(engine="jvm"): every input row is computed at
    most once, no task-failure line reaches the console at Spark's default log level, the graph
    is unchanged, and the typed error's first line is the same on every path."""
    root = str(tmp_path / "graph")
    Graph.init(root, Path(sample_path("social.pg")).read_text())
    counters = tmp_path / "counters"
    counters.mkdir()
    spec = {"root": root, "counters": str(counters), "master": "local[2,4]"}
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, JOB, json.dumps(spec)],
        env=_env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    run = finish_job(p, spec, t0, timeout=400)
    assert run.result is not None, run.tail()
    res = run.result
    STATS["bad_inputs"] += 3
    noise = [line for line in run.stderr.splitlines() if TASK_FAILURE_LINES.search(line)]
    assert not noise, "task failure lines on the console:\n" + "\n".join(noise[:20])
    expected = "[CONSTRAINT_VIOLATION] node Person column 'role' row "
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
    # the Python source's error is wrapped as [PYTHON_DATA_SOURCE_ERROR]; the shim's provider
    # raises ours as an IllegalArgumentException whose first line starts with its code
    first = res["df_write"]["first_line"]
    assert first.startswith("[PYTHON_DATA_SOURCE_ERROR]") or first.startswith(
        "[CONSTRAINT_VIOLATION] node Person column 'role'"
    ), first
    assert len(lines) == 1, lines


# -- every data-error code: the same first line on every path --------------------------------

PG = """
node Tag {
    name: String @key
    kind: enum(a, b)
    label: String? @unique
}

node Person {
    name: String @key
    age: I32?
    code: String?
    @check(code, "^[A-Z]{3}$")
    @range(age, 0..150)
}

node Doc {
    name: String @key
    body: Blob?
}

node Bad {
    name: String @key
    code: String?
    @check(code, "(a)\\\\1")
}

edge Likes: Tag -> Tag

edge One: Tag -> Tag @card(0..1)
"""

TAG = "name string, kind string"
EDGE = "`from` string, `to` string"

#: (code, type, rows, ddl, jvm): data errors a DataFrame can carry, one per code of
#: troubleshooting.md's "Input data"; jvm: the JVM sink stages this type (engine="jvm")
DATA_CASES = [
    ("UNKNOWN_TYPE", "Nope", [("t9", "a")], TAG, False),
    ("UNKNOWN_COLUMN", "Tag", [("t9", "a", "x")], TAG + ", shoe string", True),
    ("MISSING_COLUMN", "Tag", [("t9",)], "name string", True),
    ("TYPE_MISMATCH", "Person", [("p1", 2**40)], "name string, age bigint", False),
    ("NULL_VIOLATION", "Tag", [("t8", "a"), ("t9", None)], TAG, True),
    ("CONSTRAINT_VIOLATION", "Tag", [("t8", "a"), ("t9", "zzz")], TAG, True),
    ("UNIQUE_VIOLATION", "Tag", [("t8", "a", "x"), ("t9", "b", "x")], TAG + ", label string", True),
    ("DANGLING_EDGE", "Likes", [("t1", "ghost")], EDGE, True),
    ("CARDINALITY_VIOLATION", "One", [("t1", "t1"), ("t1", "t2")], EDGE, True),
    ("DUPLICATE_COLUMN", "Likes", [("t1", "t1", "t2")], "`from` string, src string, `to` string", True),
    ("KEY_ID_MISMATCH", "Tag", [("x", "t9", "a")], "id string, " + TAG, False),
    ("KEY_CONFLICT", "Tag", [("t1", "a")], TAG, True),
    ("UNSUPPORTED_VALUE", "Doc", [("d1", b"x")], "name string, body binary", False),
    ("CHECK_PATTERN_INVALID", "Bad", [("b1", "aa")], "name string, code string", False),
]
#: data-error codes no DataFrame can raise (JSONL only, or reserved): checked through load_jsonl;
#: KEY_CHANGE is SQL UPDATE and MERGE INTO's (tests/spark/test_sql.py)
NOT_FROM_A_DATAFRAME = {"DATA_INVALID", "INVALID_RECORD", "EMPTY_INPUT", "KEY_CHANGE"}


def _input_data_codes() -> set:
    text = (Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md").read_text()
    section = text.split("## Input data", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^### `([A-Z_]+)`", section, re.M))


def test_the_cases_cover_every_documented_data_error():
    covered = {c[0] for c in DATA_CASES} | NOT_FROM_A_DATAFRAME
    assert _input_data_codes() <= covered, _input_data_codes() - covered


@pytest.fixture(scope="module")
def tag_graph(tmp_path_factory, spark):
    from omnigraph_spark import write_graph

    root = str(tmp_path_factory.mktemp("bad-rows") / "graph")
    Graph.init(root, PG)
    write_graph(root, {"Tag": spark.createDataFrame([("t1", "a"), ("t2", "b")], TAG)}, engine="python")
    return root


def _first_line(err) -> str:
    return str(err).splitlines()[0]


@pytest.mark.spark
@pytest.mark.parametrize("case", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_every_data_error_shows_the_same_first_line_on_every_path(spark, tag_graph, case):
    """I20: df.write (through unwrap_error), write_graph (the typed error itself) and, where the
    JVM sink stages the type, write_graph(engine="jvm") give one error class and first line
    starting with [CODE]; the graph is unchanged."""
    from omnigraph_spark import unwrap_error, write_graph
    from omnigraph_spark.errors import OmnigraphError

    code, type_, rows, ddl, jvm = case
    if jvm:
        from tests.shim import need_shim

        need_shim(spark)
    version = Graph.open(tag_graph).snapshot().version
    lines = {}
    df = spark.createDataFrame(rows, ddl).coalesce(1)
    with pytest.raises(Exception) as ei:
        df.write.format("omnigraph").option("type", type_).mode("append").save(tag_graph)
    err = unwrap_error(ei.value)
    assert err is not None and err.code == code, str(ei.value)[:3000]
    lines["df.write"] = _first_line(err)
    for engine in ("python", "jvm") if jvm else ("python",):
        with pytest.raises(OmnigraphError) as ei:
            write_graph(tag_graph, {type_: spark.createDataFrame(rows, ddl).coalesce(1)}, engine=engine)
        assert ei.value.code == code, str(ei.value)
        lines[engine] = _first_line(ei.value)
    assert all(line.startswith(f"[{code}] ") for line in lines.values()), lines
    assert len(set(lines.values())) == 1, lines
    assert Graph.open(tag_graph).snapshot().version == version
    STATS["bad_inputs"] += len(lines)


@pytest.mark.spark
def test_a_bad_jsonl_record_is_the_typed_error(spark, tag_graph, tmp_path):
    """I20 for load_jsonl: a bad record (an enum value, then invalid JSON) raises the typed error
    itself, naming file and line; nothing is committed."""
    from omnigraph_spark import load_jsonl
    from omnigraph_spark.errors import ConstraintViolationError, InvalidRecordError, OmnigraphError

    version = Graph.open(tag_graph).snapshot().version
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"type": "Tag", "data": {"name": "t7", "kind": "a"}}\n{"type": "Tag", "data": {"name": "t8", "kind": "zzz"}}\n'
    )
    with pytest.raises(ConstraintViolationError, match=r"^\[CONSTRAINT_VIOLATION\] .*bad.jsonl:2 \(record 2\)"):
        load_jsonl(spark, tag_graph, str(p))
    p.write_text('{"type": "Tag", "data": {"name": "t7", "kind": "a"}}\n{"type": "Tag", "data": \n')
    with pytest.raises(InvalidRecordError, match=r"^\[INVALID_RECORD\] "):
        load_jsonl(spark, tag_graph, str(p))
    # on a branch the planning pass reads the records first: its refusal is typed the same way
    Graph.open(tag_graph).create_branch("jsonl-bad")
    branch_version = Graph.open(tag_graph).snapshot("jsonl-bad").version
    p.write_text('{"type": "Tag", "data": {"name": "t7", "kind": "a"}}\n{"type": "Robot", "data": {}}\n')
    with pytest.raises(OmnigraphError, match=r"^\[UNKNOWN_TYPE\] .*bad.jsonl:2 \(record 2\)"):
        load_jsonl(spark, tag_graph, str(p), branch="jsonl-bad")
    assert Graph.open(tag_graph).snapshot().version == version
    assert Graph.open(tag_graph).snapshot("jsonl-bad").version == branch_version


def test_each_bad_row_is_found_with_its_own_error_and_one_error_names_the_first_few(tmp_path):
    """Bisection finds every offending row with the error the converter raises for it alone
    (the quarantine's reasons; a refusal's first few rows); the driver's one error leads with
    the first refusing task's message and names the others' rows."""
    import pyarrow as pa

    from omnigraph_spark.errors import ConstraintViolationError
    from omnigraph_spark.ingest import RowConverter
    from omnigraph_spark.spark.bad_rows import MAX_REPORTED_ROWS, BadRow, Refusal, refused_error, split_bad_rows

    td = Graph.init(str(tmp_path / "g"), PG).catalog.resolve("Tag")
    conv = RowConverter(td)
    kinds = ["a", "b", "zz", "a", "b", None, "a", "yy", "a", "b"]
    batch = pa.RecordBatch.from_pydict({"name": [f"t{i}" for i in range(10)], "kind": kinds})
    good, bad = split_bad_rows(lambda b, start: conv.convert(b, row_offset=start, where="test"), batch)
    assert [(i, e.code) for i, e in bad] == [
        (2, "CONSTRAINT_VIOLATION"),
        (5, "NULL_VIOLATION"),
        (7, "CONSTRAINT_VIOLATION"),
    ]
    assert "row 7: invalid enum value 'yy'" in bad[2][1].message
    assert [r for start, b in good for r in range(start, start + b.num_rows)] == [0, 1, 3, 4, 6, 8, 9]
    assert [n for _, b in good for n in b.column("name").to_pylist()] == ["t0", "t1", "t3", "t4", "t6", "t8", "t9"]
    refusals = [Refusal.of(e, [BadRow.of(e)]) for _, e in bad]
    err = refused_error(refusals)
    assert isinstance(err, ConstraintViolationError)
    first = str(err).splitlines()[0]
    assert first.startswith("[CONSTRAINT_VIOLATION] node Tag column 'kind' row 2: invalid enum value 'zz'")
    assert "; more bad rows: node Tag column 'kind' row 5: non-nullable" in first and "(3 tasks refused rows)" in first
    assert [r["row"] for r in err.context["rows"]] == [2, 5, 7] and len(err.context["rows"]) <= MAX_REPORTED_ROWS


@pytest.mark.spark
def test_hide_traceback_puts_the_code_on_df_writes_first_line(spark, tag_graph):
    """With spark.sql.execution.pyspark.udf.hideTraceback.enabled=true (set by local_builder,
    configure_spark and conf/spark-defaults.conf) a failed df.write's own first line carries
    ``[CODE]`` and the column, not Spark's ``Traceback (most recent call last):``."""
    from omnigraph_spark.spark.shim_conf import HIDE_TRACEBACK

    before = spark.conf.get(HIDE_TRACEBACK, None)
    spark.conf.set(HIDE_TRACEBACK, "true")
    try:
        df = spark.createDataFrame([("t8", "a"), ("t9", "zzz")], TAG).coalesce(1)
        with pytest.raises(Exception) as ei:
            df.write.format("omnigraph").option("type", "Tag").mode("append").save(tag_graph)
    finally:
        if before is None:
            spark.conf.unset(HIDE_TRACEBACK)
        else:
            spark.conf.set(HIDE_TRACEBACK, before)
    first = _first_line(ei.value)
    assert "[CONSTRAINT_VIOLATION]" in first and "'kind'" in first, str(ei.value)[:3000]
    assert "Traceback" not in first
