"""Quarantine (option rejectedRowsPath): the valid rows commit, the bad ones are kept
with their reasons, good + rejected = input (invariant I20's opt-in counterpart)."""

from __future__ import annotations

import logging
import os
import random

import pyarrow.parquet as pq
import pytest

from omnigraph_spark import Graph, write_graph, write_table
from omnigraph_spark.errors import ConstraintViolationError, JvmWriteUnavailableError, OptionError
from omnigraph_spark.store import tables
from omnigraph_spark.store.quarantine import CODE_COLUMN, REASON_COLUMN, REJECTED_AT_PROP, REJECTED_PROP, TABLE_COLUMN

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

PG = """
node Person {
    name: String @key
    city: String
    role: enum(engineer, designer, analyst)
    age: I32?
    @range(age, 0..150)
}

edge Knows: Person -> Person {
    since: I32?
}
"""

PEOPLE = "name string, city string, role string, age bigint"
KNOWS = "`from` string, `to` string, since bigint"


def _rejected(path: str, table: str):
    return pq.read_table(os.path.join(path, table)).to_pylist()


def _names(root: str, key: str, col: str = "id"):
    g = Graph.open(root)
    return sorted(g.read_table(key, g.snapshot()).column(col).to_pylist())


def test_quarantine_round_trip_with_edges_to_rejected_nodes(spark, tmp_path):
    root = Graph.init(str(tmp_path / "g"), PG).root
    q = str(tmp_path / "rejected")
    people = [
        ("Ann", "Paris", "engineer", 30),
        ("Bob", "Rome", "wizard", 40),
        ("Cy", None, "designer", 20),
        ("Di", "Oslo", "analyst", 200),
        ("Ed", "Bern", "analyst", None),
    ]
    knows = [("Ann", "Ed", 1), ("Ann", "Bob", 2), ("Cy", "Ed", 3), ("Ed", "Ann", 2**40), ("Ed", "Di", None)]
    res = write_graph(
        root,
        {
            "Person": spark.createDataFrame(people, PEOPLE).repartition(2),
            "Knows": spark.createDataFrame(knows, KNOWS).repartition(2),
        },
        rejected_rows_path=q,
    )
    # Bob (enum), Cy (null city), Di (@range); Ann->Bob, Cy->Ed, Ed->Di (rejected endpoints), Ed->Ann (I32 overflow)
    assert res.rejected_rows == 7
    assert sum(t.rows_written for t in res.tables) + res.rejected_rows == len(people) + len(knows)
    assert _names(root, "node:Person") == ["Ann", "Ed"]
    g = Graph.open(root)
    assert [(r["src"], r["dst"]) for r in g.read_table("edge:Knows", g.snapshot()).to_pylist()] == [("Ann", "Ed")]
    assert res.rejected_path == f"{q}/load={os.path.basename(res.rejected_path)[5:]}"
    assert os.path.exists(os.path.join(res.rejected_path, "_SUCCESS"))
    assert not os.path.exists(os.path.join(q, "_staging"))
    nodes = {r["name"]: r for r in _rejected(res.rejected_path, "node_Person")}
    assert sorted(nodes) == ["Bob", "Cy", "Di"]
    assert nodes["Bob"][CODE_COLUMN] == "CONSTRAINT_VIOLATION" and "'wizard'" in nodes["Bob"][REASON_COLUMN]
    assert nodes["Bob"][REASON_COLUMN].startswith("[CONSTRAINT_VIOLATION] node Person column 'role' row ")
    assert nodes["Cy"][CODE_COLUMN] == "NULL_VIOLATION" and nodes["Cy"]["city"] is None
    assert nodes["Di"][CODE_COLUMN] == "CONSTRAINT_VIOLATION" and "@range" in nodes["Di"][REASON_COLUMN]
    assert {r[TABLE_COLUMN] for r in nodes.values()} == {"node:Person"}
    assert (nodes["Bob"]["city"], nodes["Bob"]["role"], nodes["Bob"]["age"]) == ("Rome", "wizard", 40)  # as given
    edges = {(r["from"], r["to"]): r for r in _rejected(res.rejected_path, "edge_Knows")}
    assert sorted(edges) == [("Ann", "Bob"), ("Cy", "Ed"), ("Ed", "Ann"), ("Ed", "Di")]
    assert edges[("Ann", "Bob")][CODE_COLUMN] == "DANGLING_EDGE"
    assert "'Bob' is a Person node this load rejected ([CONSTRAINT_VIOLATION]" in edges[("Ann", "Bob")][REASON_COLUMN]
    assert edges[("Cy", "Ed")][CODE_COLUMN] == "DANGLING_EDGE"
    assert "[NULL_VIOLATION]" in edges[("Cy", "Ed")][REASON_COLUMN]
    assert edges[("Ed", "Ann")][CODE_COLUMN] == "TYPE_MISMATCH"
    # the counts travel in each table's commit
    for key, n in (("node:Person", 3), ("edge:Knows", 4)):
        t = g.snapshot().table(key)
        ds = tables.open_dataset(t.base_path)
        assert tables.transaction_property(ds, t.version, REJECTED_PROP) == str(n)
        assert tables.transaction_property(ds, t.version, REJECTED_AT_PROP) == res.rejected_path


def test_good_plus_rejected_is_the_input(spark, tmp_path):
    """Random bad values over 4 partitions: every input row is committed or quarantined, once."""
    rnd = random.Random(28)
    rows = []
    for i in range(400):
        role = rnd.choice(["engineer", "designer", "analyst", "wizard", None])
        age = rnd.choice([10, 20, 160, -1, None, 2**40])
        rows.append((f"p{i:03d}", rnd.choice(["Paris", None, "Rome", "Oslo", "Bern"]), role, age))
    root = Graph.init(str(tmp_path / "g"), PG).root
    res = write_table(
        spark.createDataFrame(rows, PEOPLE).repartition(4), root, "Person", rejected_rows_path=str(tmp_path / "q")
    )
    good = set(_names(root, "node:Person"))
    bad = [r["name"] for r in _rejected(res.rejected_path, "node_Person")]
    assert len(bad) == len(set(bad)) == res.rejected_rows
    assert good.isdisjoint(bad) and good | set(bad) == {r[0] for r in rows}
    expect_bad = {
        r[0]
        for r in rows
        if r[1] is None
        or r[2] not in ("engineer", "designer", "analyst")
        or (r[3] is not None and not 0 <= r[3] <= 150)
    }
    assert set(bad) == expect_bad


def test_df_write_quarantines_too(spark, tmp_path):
    root = Graph.init(str(tmp_path / "g"), PG).root
    q = str(tmp_path / "q")
    df = spark.createDataFrame([("Ann", "Paris", "engineer", 1), ("Bob", "Rome", "wizard", 2)], PEOPLE).repartition(2)
    df.write.format("omnigraph").option("type", "Person").option("rejectedRowsPath", q).mode("append").save(root)
    assert _names(root, "node:Person") == ["Ann"]
    (load,) = [d for d in os.listdir(q) if d.startswith("load=")]
    assert [r["name"] for r in _rejected(os.path.join(q, load), "node_Person")] == ["Bob"]
    assert not os.path.exists(os.path.join(q, "_staging"))


def test_without_the_option_a_bad_row_refuses_the_load_and_a_refused_load_leaves_no_quarantine(spark, tmp_path):
    root = Graph.init(str(tmp_path / "g"), PG).root
    df = spark.createDataFrame([("Ann", "Paris", "engineer", 1), ("Bob", "Rome", "wizard", 2)], PEOPLE)
    with pytest.raises(ConstraintViolationError):
        write_table(df, root, "Person")
    q = str(tmp_path / "q")
    # load-wide rules still refuse the load; the rows quarantined by its tasks are deleted
    dup = spark.createDataFrame(
        [("Ann", "Paris", "engineer", 1), ("Ann", "Rome", "designer", 2), ("Bob", "Rome", "wizard", 2)], PEOPLE
    )
    with pytest.raises(Exception) as ei:
        write_table(dup, root, "Person", rejected_rows_path=q)
    assert ei.value.code in ("UNIQUE_VIOLATION", "KEY_CONFLICT")
    assert not [d for d in os.listdir(q) if not d.startswith(".")] if os.path.exists(q) else True
    assert Graph.open(root).snapshot().table("node:Person").row_count == 0


def test_the_jvm_path_leaves_quarantine_to_python(spark, tmp_path, caplog):
    from tests.shim import need_shim

    need_shim(spark)
    root = Graph.init(str(tmp_path / "g"), PG.replace("    @range(age, 0..150)\n", "")).root
    df = spark.createDataFrame(
        [("Ann", "Paris", "engineer"), ("Bob", "Rome", "wizard")], "name string, city string, role string"
    )
    with pytest.raises(JvmWriteUnavailableError, match="rejectedRowsPath"):
        write_table(df, root, "Person", engine="jvm", rejected_rows_path=str(tmp_path / "q"))
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.graph_io")
    res = write_table(df, root, "Person", rejected_rows_path=str(tmp_path / "q"))
    assert res.rejected_rows == 1 and _names(root, "node:Person") == ["Ann"]
    assert any("rejectedRowsPath is set" in r.getMessage() for r in caplog.records)


def test_option_parsing():
    from omnigraph_spark.spark.options import WriteOptions

    assert WriteOptions.from_options({"path": "/g", "type": "T", "REJECTEDROWSPATH": "/q"}).rejected_rows_path == "/q"
    assert WriteOptions.from_options({"path": "/g", "type": "T"}).rejected_rows_path is None
    with pytest.raises(OptionError, match="rejectedRowsPath"):
        WriteOptions.from_options({"path": "/g", "type": "T", "writeMode": "delete", "rejectedRowsPath": "/q"})


def test_load_jsonl_refuses_the_option(spark, tmp_path):
    from omnigraph_spark import load_jsonl

    root = Graph.init(str(tmp_path / "g"), PG).root
    with pytest.raises(OptionError, match="rejectedRowsPath"):
        load_jsonl(spark, root, str(tmp_path / "x.jsonl"), options={"rejectedRowsPath": str(tmp_path / "q")})
