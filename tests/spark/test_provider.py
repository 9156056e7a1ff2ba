"""``format("omnigraph")`` on the JVM paths: the shim's OmnigraphProvider plans and commits
through ``omnigraph_spark.spark.bridge`` and stages/scans in the JVM, with the Python source's
semantics; what the JVM paths do not cover goes to the Python source under the same name.
Option ``engine=jvm`` proves the path taken without py4j (the Python source refuses it: only the
provider can answer it), so the same checks run through Spark Connect (test_connect.py).
Invariants: I1 (one commit, all or nothing), I10 (a failed load leaves no staged file), I22 (one
planner: the provider's plans and errors are the Python source's)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from omnigraph_spark import Graph, unwrap_error
from omnigraph_spark.errors import JvmReadUnavailableError, JvmWriteUnavailableError
from omnigraph_spark.spark import bridge
from omnigraph_spark.spark.work import Query, SparkWork
from tests.spark.test_jvm_read import JVM_TYPES_PG, scans_in_jvm
from tests.spark.test_jvm_write import _rels, _things, data_files

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

#: THING_DDL of test_jvm_write with nums as bigint: every column maps in the task (no Spark cast)
DDL = (
    "nums array<bigint>, f64 float, slug string, i64 int, i32 short, day date, tags array<string>, "
    "color string, flag boolean, f32 float"
)


def _save(df, root, type_, mode="append", **opts):
    w = df.write.format("omnigraph").mode(mode).option("type", type_)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(root)


def _load(spark, root, type_, **opts):
    r = spark.read.format("omnigraph").option("type", type_)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(root)


def _check_jobs(spark):
    """The ids of the Spark jobs the load-wide checks ran so far (tagged JOB_TAG)."""
    from omnigraph_spark.spark.dist_checks import JOB_TAG

    return set(spark.sparkContext._jsc.sc().statusTracker().getJobIdsForTag(JOB_TAG))


def _staging_left(root):
    d = os.path.join(root, "_omnigraph_spark", "staging")
    return [os.path.join(p, f) for p, _, fs in os.walk(d) for f in fs] if os.path.isdir(d) else []


def test_I22_the_provider_writes_and_reads_what_the_python_source_does(jvm, tmp_path):
    """Widening input types, columns out of table order, minted edge ids: the graph the provider
    writes (engine=jvm) reads back equal to the one the Python source writes (engine=python),
    through both read paths, each load ONE graph commit (I1)."""
    nodes = jvm.createDataFrame(_things(2000), DDL).repartition(3)
    edges = jvm.createDataFrame(_rels(1500, 2000), "`from` string, `to` string, w double").repartition(2)
    roots = {}
    for engine in ("jvm", "python"):
        g = Graph.init(str(tmp_path / engine), JVM_TYPES_PG)
        _save(nodes, g.root, "Thing", engine=engine)
        _save(edges, g.root, "Rel", engine=engine)
        assert len(Graph.open(g.root).log()) == 3  # init + one commit per save (I1)
        roots[engine] = g.root
    for t in ("Thing", "Rel"):
        fast = _load(jvm, roots["jvm"], t, engine="jvm")
        assert scans_in_jvm(fast)
        slow = _load(jvm, roots["python"], t, engine="python")
        assert not scans_in_jvm(slow)
        if t == "Rel":  # minted ids differ by design
            fast, slow = fast.drop("id"), slow.drop("id")
        assert fast.schema == slow.schema
        assert_df_equality(fast, slow, ignore_row_order=True)
    row = _load(jvm, roots["jvm"], "Thing").filter("slug = 't00001'").collect()[0].asDict()
    assert row["i64"] == 2**31 - 2 and row["i32"] == -14999 and row["day"] == dt.date(2024, 3, 1)


def test_the_provider_pushes_filters_columns_and_snapshots_into_the_jvm_scan(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _save(jvm.createDataFrame(_things(300), DDL), g.root, "Thing", engine="jvm")
    v1 = Graph.open(g.root).snapshot().version
    _save(jvm.createDataFrame(_things(100, 300), DDL), g.root, "Thing", engine="jvm")
    df = _load(jvm, g.root, "Thing", engine="jvm", columns="slug,i64").filter(F.col("i64") > 2**31 - 11)
    assert scans_in_jvm(df) and df.columns == ["slug", "i64"]
    assert sorted(r.slug for r in df.collect()) == [f"t{i:05d}" for i in range(10)]
    assert _load(jvm, g.root, "Thing", engine="jvm", version=str(v1)).count() == 300
    assert _load(jvm, g.root, "Thing", engine="jvm").count() == 400


def test_a_loaded_dataframe_reads_one_snapshot_as_the_python_source_does(jvm, tmp_path):
    """The first query of a loaded DataFrame resolves the branch head (a commit made after
    load() is in it), on both paths; the provider's later queries reuse that snapshot, as the
    Python source's do where Spark reuses its planned read (pyspark 4.3; 4.0 plans every query
    again); a new load() sees everything."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _save(jvm.createDataFrame(_things(30), DDL), g.root, "Thing", engine="jvm")
    frames = {e: _load(jvm, g.root, "Thing", engine=e) for e in ("jvm", "python")}
    _save(jvm.createDataFrame(_things(12, 30), DDL), g.root, "Thing", engine="jvm")
    assert {e: df.count() for e, df in frames.items()} == {"jvm": 42, "python": 42}
    _save(jvm.createDataFrame(_things(8, 42), DDL), g.root, "Thing", engine="jvm")
    counts = {e: df.count() for e, df in frames.items()}
    assert counts["jvm"] == 42 and counts["python"] in (42, 50), counts
    assert {e: _load(jvm, g.root, "Thing", engine=e).count() for e in frames} == {"jvm": 50, "python": 50}
    assert scans_in_jvm(frames["jvm"].select("slug")) and not scans_in_jvm(frames["python"].select("slug"))


def test_the_provider_hands_what_the_jvm_does_not_cover_to_the_python_source(jvm, tmp_path):
    """An input needing a cast only Spark's planner makes (array<int> -> [I64]): engine=auto
    writes it through the Python source, engine=jvm refuses it before any job, naming the column."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    df = jvm.createDataFrame(_things(50), DDL.replace("nums array<bigint>", "nums array<int>"))
    with pytest.raises(Exception) as ei:
        _save(df, g.root, "Thing", engine="jvm")
    err = unwrap_error(ei.value)
    assert isinstance(err, JvmWriteUnavailableError) and "column 'nums': array<int> -> array<bigint>" in str(err)
    assert len(Graph.open(g.root).log()) == 1 and not _staging_left(g.root)
    _save(df, g.root, "Thing")  # auto: the Python source
    assert _load(jvm, g.root, "Thing", engine="python").count() == 50


def test_the_provider_reads_columns_of_table_type_where_the_input_has_them(jvm, tmp_path):
    """Every column already of its table type, in another order than the table's (strings,
    lists, Bool, Date, floats and nulls included): the plan is a pure reordering, which the JVM
    sink reads at the input's ordinals without a per-row projection; the graph reads back equal
    to the Python source's write of the same DataFrame."""
    df = (
        jvm.createDataFrame(_things(1500), DDL)
        .repartition(3)
        .select(
            "tags",
            F.col("f64").cast("double").alias("f64"),
            F.col("i64").cast("bigint").alias("i64"),
            "slug",
            "day",
            "nums",
            "flag",
            F.col("i32").cast("int").alias("i32"),
            "color",
            "f32",
        )
    )
    g = Graph.init(str(tmp_path / "probe"), JVM_TYPES_PG)
    answer, load = bridge.plan_write({"path": g.root, "type": "Thing", "engine": "jvm"}, False, df.schema.json())
    try:
        cols = answer["jvm"]["projection"]
        assert {c["to"] for c in cols} == {"same"} and min(c["ordinal"] for c in cols) >= 0
        assert [c["ordinal"] for c in cols] != list(range(len(cols)))  # reordered, not the rows as given
    finally:
        bridge.abort(load)
    roots = {}
    for engine in ("jvm", "python"):
        roots[engine] = Graph.init(str(tmp_path / engine), JVM_TYPES_PG).root
        _save(df, roots[engine], "Thing", engine=engine)
    fast, slow = _load(jvm, roots["jvm"], "Thing"), _load(jvm, roots["python"], "Thing")
    assert fast.count() == 1500
    assert_df_equality(fast, slow, ignore_row_order=True)


def test_a_local_session_loads_lances_native_library_ahead(jvm):
    """With a local master (its executors are the driver's JVM) the shim's driver plugin loads
    Lance's native library in the background when the session starts, so the first staging
    task or scan does not wait for Lance to unpack it."""
    plugin = jvm.sparkContext._jvm.io.omnigraph.spark.BridgePlugin
    assert "io.omnigraph.spark.BridgePlugin" in jvm.sparkContext.getConf().get("spark.plugins", "")
    deadline = time.monotonic() + 120
    while plugin.lanceLoadedAheadMillis() < 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert plugin.lanceLoadedAheadMillis() >= 0


def test_the_python_source_refuses_engine_jvm(jvm, tmp_path):
    """engine=jvm is an assertion only the provider can satisfy: the Python source, reached by
    name when the shim is absent, raises instead of silently taking the slow path."""
    from omnigraph_spark.spark.reader import read_schema
    from omnigraph_spark.spark.writer import OmnigraphWriter

    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    with pytest.raises(JvmReadUnavailableError, match="engine=jvm"):
        read_schema({"path": g.root, "type": "Thing", "engine": "jvm"})
    with pytest.raises(JvmWriteUnavailableError, match="engine=jvm"):
        OmnigraphWriter({"path": g.root, "type": "Thing", "engine": "JVM"}, None, False)
    with pytest.raises(Exception, match="option 'engine' must be one of"):
        read_schema({"path": g.root, "type": "Thing", "engine": "fast"})


def test_I10_a_bad_row_or_a_key_conflict_commits_nothing_and_leaves_no_file(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _save(jvm.createDataFrame(_things(100), DDL), g.root, "Thing", engine="jvm")
    files = data_files(g.root)
    version = Graph.open(g.root).snapshot().version
    bad = jvm.createDataFrame(_things(10, 100), DDL).withColumn("color", F.lit("blue"))
    dup = jvm.createDataFrame(_things(10, 95), DDL)
    for df, code, text in ((bad, "CONSTRAINT_VIOLATION", "'blue'"), (dup, "KEY_CONFLICT", "'t00095'")):
        with pytest.raises(Exception) as ei:
            _save(df, g.root, "Thing", engine="jvm")
        err = unwrap_error(ei.value)
        assert err is not None and err.code == code and text in str(err), str(ei.value)[:2000]
        assert Graph.open(g.root).snapshot().version == version
        assert data_files(g.root) == files and not _staging_left(g.root)


def test_I21_the_providers_checks_above_distributedCheckRows_run_as_spark_jobs_of_the_write(jvm, tmp_path):
    """The planner has no SparkSession: while it commits, a check above ``distributedCheckRows``
    is Spark work it hands back as an answer, which the provider runs on the write's session
    (SparkWork), so it runs as Spark jobs of this application (tagged JOB_TAG), not in the
    planner's memory. The
    error is the in-memory check's, word for word; the graph is unchanged; a clean load commits."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    repeat = jvm.createDataFrame(_things(40) + _things(3, 10), DDL).repartition(2)  # t00010-t00012 twice
    errors = {}
    for threshold in ("1", "5000000"):
        before = _check_jobs(jvm)
        with pytest.raises(Exception) as ei:
            _save(repeat, g.root, "Thing", engine="jvm", distributedCheckRows=threshold)
        errors[threshold] = unwrap_error(ei.value)
        assert errors[threshold] is not None, str(ei.value)[:2000]
        assert bool(_check_jobs(jvm) - before) == (threshold == "1"), threshold
        assert len(Graph.open(g.root).log()) == 1 and data_files(g.root) == set() and not _staging_left(g.root)
    spark_jobs, in_memory = errors["1"], errors["5000000"]
    assert (type(spark_jobs), spark_jobs.code, str(spark_jobs)) == (type(in_memory), in_memory.code, str(in_memory))
    assert "'t00010'" in str(spark_jobs)
    _save(jvm.createDataFrame(_things(40), DDL), g.root, "Thing", engine="jvm", distributedCheckRows="1")
    assert _load(jvm, g.root, "Thing").count() == 40


def test_I21_a_merge_through_the_provider_replaces_the_rows_the_python_source_does(jvm, tmp_path):
    """writeMode=merge on the provider above ``distributedCheckRows``: the committed rows it
    replaces are found by Spark jobs of the write (the executors' index of the staged ids,
    tagged JOB_TAG), not in the planner's memory, and the graph holds what the Python source's
    merge leaves (five of 30 nodes replaced, five added)."""
    import shutil

    from pyspark.sql import functions as F

    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _save(jvm.createDataFrame(_things(30), DDL), g.root, "Thing", engine="jvm")
    copy = str(tmp_path / "copy")
    shutil.copytree(g.root, copy)
    new = jvm.createDataFrame(_things(10, 25), DDL).withColumn("i64", F.lit(-7)).repartition(2)
    for root, engine in ((g.root, "jvm"), (copy, "python")):
        before = _check_jobs(jvm)
        _save(new, root, "Thing", engine=engine, writeMode="merge", distributedCheckRows="1")
        assert bool(_check_jobs(jvm) - before) == (engine == "jvm"), engine
        assert not _staging_left(root)
    got, want = (sorted(map(tuple, _load(jvm, r, "Thing").collect())) for r in (g.root, copy))
    assert got == want and len(got) == 35
    assert sorted(r.slug for r in _load(jvm, g.root, "Thing").where("i64 = -7").collect()) == [
        f"t{i:05d}" for i in range(25, 35)
    ]


def test_I18_a_delete_through_the_provider_is_the_python_sources_delete(jvm, tmp_path):
    """writeMode=delete on the provider: the JVM tasks collect the key columns, the planner
    resolves them and deletes (cascades included) in one commit, exactly as the Python source:
    the same rows left, the same errors for a null key and a missing column. Above
    ``distributedCheckRows`` its I18 parts run as Spark jobs of the write (JOB_TAG)."""
    import shutil

    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _save(jvm.createDataFrame(_things(30), DDL), g.root, "Thing", engine="jvm")
    _save(jvm.createDataFrame(_rels(60, 30), "src string, dst string, w double"), g.root, "Rel", engine="jvm")
    copy = str(tmp_path / "copy")
    shutil.copytree(g.root, copy)
    gone = jvm.createDataFrame([("t00003",), ("t00004",), ("nobody",)], "slug string").repartition(2)
    for root, engine in ((g.root, "jvm"), (copy, "python")):
        before = _check_jobs(jvm)
        _save(gone, root, "Thing", engine=engine, writeMode="delete", distributedCheckRows="1")
        assert bool(_check_jobs(jvm) - before) == (engine == "jvm"), engine
        assert not _staging_left(root)
    for t in ("Thing", "Rel"):
        got, want = (sorted(map(tuple, _load(jvm, r, t).collect())) for r in (g.root, copy))
        assert got == want
    assert sorted(r.slug for r in _load(jvm, g.root, "Thing").collect()) == [
        f"t{i:05d}" for i in range(30) if i not in (3, 4)
    ]
    assert len(Graph.open(g.root).log()) == len(Graph.open(copy).log()) == 4  # init, two loads, ONE delete commit

    by_edge = jvm.createDataFrame([("t00001", "t00008")], "src string, dst string")
    for root, engine in ((g.root, "jvm"), (copy, "python")):
        _save(by_edge, root, "Rel", engine=engine, writeMode="delete")
    assert sorted(map(tuple, _load(jvm, g.root, "Rel").collect())) == sorted(
        map(tuple, _load(jvm, copy, "Rel").collect())
    )

    version = Graph.open(g.root).snapshot().version
    errors = {}
    # three Arrow batches of 2 rows in the one partition: the nulls of the second are counted
    nulls = jvm.createDataFrame(
        [("t00005",), ("t00006",), (None,), ("t00007",), (None,), (None,)], "slug string"
    ).coalesce(1)
    jvm.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
    try:
        for engine in ("jvm", "python"):
            for name, df in (("null", nulls), ("missing", jvm.createDataFrame([(5,)], "nope int"))):
                with pytest.raises(Exception) as ei:
                    _save(df, g.root, "Thing", engine=engine, writeMode="delete")
                err = unwrap_error(ei.value)
                assert err is not None, str(ei.value)[:2000]
                errors[engine, name] = (type(err), err.code, str(err))
    finally:
        jvm.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert errors["jvm", "null"] == errors["python", "null"] and errors["jvm", "null"][1] == "NULL_VIOLATION"
    assert "has 1 null(s)" in errors["jvm", "null"][2]  # the second batch's, as Spark batches the rows
    assert errors["jvm", "missing"] == errors["python", "missing"] and errors["jvm", "missing"][1] == "MISSING_COLUMN"
    assert Graph.open(g.root).snapshot().version == version and not _staging_left(g.root)


def test_I10_a_failed_job_leaves_no_staged_file(jvm, tmp_path):
    """A task that fails after others staged: Spark aborts the write, the provider's abort
    deletes every journaled file, the graph is unchanged."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    boom = F.udf(lambda s: s if s != "t00150" else (_ for _ in ()).throw(RuntimeError("task dies")), "string")
    df = jvm.createDataFrame(_things(200), DDL).repartition(4).withColumn("slug", boom("slug"))
    with pytest.raises(Exception, match="task dies"):
        _save(df, g.root, "Thing", engine="jvm")
    assert len(Graph.open(g.root).log()) == 1 and data_files(g.root) == set() and not _staging_left(g.root)


def test_the_provider_overwrites_with_spark_mode_overwrite(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _save(jvm.createDataFrame(_things(100), DDL), g.root, "Thing", engine="jvm")
    _save(jvm.createDataFrame(_things(7, 500), DDL), g.root, "Thing", mode="overwrite", engine="jvm")
    assert sorted(r.slug for r in _load(jvm, g.root, "Thing").collect()) == [f"t{i:05d}" for i in range(500, 507)]


# -- the bridge itself (no Spark job) ----------------------------------------------------------


def _ask(requests):
    out = io.StringIO()
    b = bridge.Bridge(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out)
    b.serve()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_I22_the_bridge_answers_with_the_python_sources_errors_and_plans(tmp_path):
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    answers = _ask(
        [
            {"op": "plan_read", "options": {"path": g.root, "type": "Thing", "columns": "slug,nums"}, "parallelism": 3},
            {"op": "plan_read", "options": {"path": g.root, "type": "Nope"}},
            {"op": "plan_read", "options": {"path": g.root, "type": "Thing", "engine": "python"}},
            {"op": "commit"},
            {"op": "what"},
        ]
    )
    plan = answers[0]["ok"]["jvm"]
    assert json.loads(plan["schema"])["fields"][0]["name"] == "slug" and plan["options"]["table"] == "node:Thing"
    assert answers[1]["error"]["code"] == "UNKNOWN_TYPE" and answers[1]["error"]["message"].startswith("[UNKNOWN_TYPE]")
    assert answers[2]["ok"] == {"python": "option engine=python"}
    assert answers[3]["error"]["code"] is None and "without a planned write" in answers[3]["error"]["message"]
    assert "unknown request" in answers[4]["error"]["message"]


def test_the_bridge_cleans_up_a_load_whose_jvm_went_away(tmp_path):
    """stdin closing after plan_write (the driver died mid-job): every file a task journaled is
    deleted, and the journal with it."""
    from pyspark.sql.types import StringType, StructField, StructType

    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    b = bridge.Bridge(io.StringIO(""), io.StringIO())
    spec = b.answer(
        {
            "op": "plan_write",
            "options": {"path": g.root, "type": "Thing"},
            "schema": StructType([StructField("slug", StringType())]).json(),
        }
    )["ok"]["jvm"]["spec"]
    staged = os.path.join(spec["datasetUri"], "data", "task-file.lance")
    os.makedirs(os.path.dirname(staged), exist_ok=True)
    open(staged, "wb").write(b"staged by a task")
    b.load.journal.record(
        "task-0",
        [
            type(
                "S",
                (),
                {
                    "table_key": "node:Thing",
                    "stage_uri": spec["datasetUri"],
                    "fragments": [type("F", (), {"files": [type("D", (), {"path": "task-file.lance"})()]})()],
                },
            )()
        ],
    )
    assert os.listdir(spec["journal"])
    b.serve()  # stdin is already at its end
    assert not os.path.exists(staged) and not os.path.exists(spec["journal"])


def test_the_projection_maps_widening_inputs_and_refuses_planner_casts():
    from pyspark.sql.types import (
        ArrayType,
        DateType,
        DoubleType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        StructField,
        StructType,
    )

    from omnigraph_spark.spark.jvm_write import JvmStagePlan

    schema = StructType(
        [
            StructField("a", ShortType()),
            StructField("b", StringType()),
            StructField("c", ArrayType(IntegerType())),
            StructField("d", DateType()),
        ]
    )
    plan = JvmStagePlan(
        columns=(
            ("x", "a", LongType(), "cast"),
            ("y", "b", StringType(), "as_is"),
            ("z", None, DoubleType(), "cast"),
            ("w", "d", LongType(), "micros_date"),
        ),
        rules=(),
        mint_column=None,
    )
    cols, why = bridge.projection(plan, schema)
    assert why == [] and cols == [
        {"column": "x", "ordinal": 0, "from": "short", "to": "long"},
        {"column": "y", "ordinal": 1, "from": "string", "to": "same"},
        {"column": "z", "ordinal": -1, "from": "null", "to": "null"},
        {"column": "w", "ordinal": 3, "from": "date", "to": "micros_date"},
    ]
    plan = JvmStagePlan(columns=(("n", "c", ArrayType(LongType()), "cast"),), rules=(), mint_column=None)
    assert bridge.projection(plan, schema)[1] == [
        "column 'n': array<int> -> array<bigint> is cast by Spark's planner (the Python source)"
    ]


def test_an_idle_planner_exits_unless_a_write_is_in_progress(tmp_path):
    """A head read's planner waits for the first query's scan, but not forever; a planner
    holding a write waits for its commit however long the job takes."""
    import threading
    import time

    from pyspark.sql.types import StringType, StructField, StructType

    r, w = os.pipe()
    with os.fdopen(r, "r") as inp, os.fdopen(w, "w"):
        t = time.monotonic()
        bridge.Bridge(inp, io.StringIO(), idle_s=0.2).serve()
        assert time.monotonic() - t < 5
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    r, w = os.pipe()
    with os.fdopen(r, "r") as inp, os.fdopen(w, "w") as requests:
        out = io.StringIO()
        b = bridge.Bridge(inp, out, idle_s=0.2)
        serving = threading.Thread(target=b.serve)
        serving.start()
        requests.write(
            json.dumps(
                {
                    "op": "plan_write",
                    "options": {"path": g.root, "type": "Thing"},
                    "schema": StructType([StructField("slug", StringType())]).json(),
                }
            )
            + "\n"
        )
        requests.flush()
        deadline = time.monotonic() + 60
        while b.load is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # five idle periods
        assert serving.is_alive() and b.load is not None
        requests.write(json.dumps({"op": "abort"}) + "\n")
        requests.flush()
        serving.join(10)
        assert not serving.is_alive() and json.loads(out.getvalue().splitlines()[-1]) == {"ok": {"removed": 0}}


def test_I21_spark_work_the_jvm_does_not_run_is_a_refusal_with_the_remedy(monkeypatch):
    """The commit's distributed checks are Spark work the JVM runs: a JVM that answers a work
    with an error, or closes the conversation instead of answering, gets a typed
    JVM_WRITE_UNAVAILABLE naming distributedCheckRows=0 (the load is then aborted like any
    refused commit), never an untyped crash of the planner; the planner asked, it never called."""
    work = SparkWork(queries=(Query("SELECT 1 AS n", (("n", "long"),)),))

    def commit(load, runner, deletes, batch):
        runner(work)
        raise AssertionError("the work was not refused")

    monkeypatch.setattr(bridge, "commit", commit)
    refused = {"op": "ran", "results": [{"id": 1, "error": {"class": "IllegalStateException", "message": "no"}}]}
    for replies in ([refused], []):
        out = io.StringIO()
        b = bridge.Bridge(io.StringIO("".join(json.dumps(m) + "\n" for m in [{"op": "commit"}] + replies)), out)
        b.load = object()  # a planned write
        b.serve()
        answers = [json.loads(line) for line in out.getvalue().splitlines()]
        assert answers[0] == {"ok": {"run": [{"id": 1, "work": work.to_json()}]}}
        err = answers[-1]["error"]
        assert err["code"] == "JVM_WRITE_UNAVAILABLE" and "distributedCheckRows=0" in err["message"], err
