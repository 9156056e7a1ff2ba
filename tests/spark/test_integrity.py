"""Graph integrity across writes through Spark: strict append (I17) on both staging
paths and ``df.write``, its staging-time proof on the JVM path, and the node overwrite / delete
rules (I18) through ``write_table`` / ``write_graph`` / ``df.write``."""

from __future__ import annotations

import pytest

from omnigraph_spark import Graph, read_table, write_graph, write_table
from omnigraph_spark.errors import KeyConflictError
from omnigraph_spark.spark import graph_io, jvm_write, unwrap_error, validate

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

SCHEMA = """
node Person {
    name: String @key
    age: I32?
}
node Tag {
    label: String
}
edge Knows: Person -> Person
"""


@pytest.fixture
def exact(monkeypatch):
    """How often the driver ran its exact committed-id anti-join."""
    seen = {"fresh": 0}
    fn = validate.check_fresh_ids

    def counted(*a, **kw):
        seen["fresh"] += 1
        return fn(*a, **kw)

    monkeypatch.setattr(validate, "check_fresh_ids", counted)
    return seen


def people(spark, names, parts=2):
    return spark.createDataFrame([(n, i) for i, n in enumerate(names)], "name string, age int").repartition(parts)


def ids(spark, root, type_):
    return sorted(r["id"] for r in read_table(spark, root, type_).select("id").collect())


@pytest.mark.parametrize("engine", ["jvm", "python"])
def test_append_of_committed_keys_is_refused_on_both_paths(jvm, tmp_path, engine, exact):  # I17
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm, ["ann", "bob"]), g.root, "Person", engine=engine)
    v = Graph.open(g.root).snapshot().version
    with pytest.raises(KeyConflictError) as e:
        write_table(people(jvm, ["cy", "bob", "dee", "ann"]), g.root, "Person", engine=engine)
    assert "node Person" in str(e.value) and "'ann', 'bob'" in str(e.value) and e.value.code == "KEY_CONFLICT"
    assert Graph.open(g.root).snapshot().version == v and ids(jvm, g.root, "Person") == ["ann", "bob"]
    with pytest.raises(KeyConflictError, match="more than once.*'cy'"):
        write_table(people(jvm, ["cy", "cy"]), g.root, "Person", engine=engine)
    write_table(people(jvm, ["bob", "cy"]), g.root, "Person", mode="merge", engine=engine)  # merge upserts
    assert ids(jvm, g.root, "Person") == ["ann", "bob", "cy"]


def test_append_through_df_write_is_strict(jvm, tmp_path):  # I17
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    people(jvm, ["ann"]).write.format("omnigraph").option("type", "Person").mode("append").save(g.root)
    with pytest.raises(Exception) as e:
        people(jvm, ["ann"]).write.format("omnigraph").option("type", "Person").mode("append").save(g.root)
    assert unwrap_error(e.value).code == "KEY_CONFLICT"
    assert ids(jvm, g.root, "Person") == ["ann"]


def test_given_ids_are_strict_minted_ids_are_not_checked(jvm, tmp_path, exact):  # I17
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    for engine in ("jvm", "python"):
        write_table(jvm.createDataFrame([("x",), ("y",)], "label string"), g.root, "Tag", engine=engine)
    assert exact["fresh"] == 0  # every id minted: nothing to check
    write_table(jvm.createDataFrame([("t1", "x")], "id string, label string"), g.root, "Tag", engine="python")
    with pytest.raises(KeyConflictError, match="node Tag.*'t1'"):
        write_table(jvm.createDataFrame([("t1", "z")], "id string, label string"), g.root, "Tag", engine="jvm")
    write_table(people(jvm, ["ann", "bob"]), g.root, "Person")
    knows = jvm.createDataFrame([("k1", "ann", "bob")], "id string, `from` string, `to` string")
    write_table(knows, g.root, "Knows", engine="jvm")
    with pytest.raises(KeyConflictError, match="edge Knows.*'k1'"):
        write_table(knows, g.root, "Knows", engine="jvm")
    assert len(ids(jvm, g.root, "Knows")) == 1 and len(ids(jvm, g.root, "Tag")) == 5


def test_the_staging_proof_skips_the_driver_anti_join_only_for_the_same_version(
    jvm, tmp_path, exact, monkeypatch
):  # I17
    """JVM path: the tasks probe the staged ids against the executors' index of the committed
    table; the driver trusts "no conflict" only for the exact version it commits on."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm, ["ann", "bob"]), g.root, "Person", engine="jvm")
    write_table(people(jvm, ["cy"]), g.root, "Person", engine="jvm")
    assert exact["fresh"] == 0  # proven while staging
    staged = jvm_write.stage_jvm
    meanwhile = {}

    def stage_then_move(*a, **kw):
        out = staged(*a, **kw)
        meanwhile.pop("do", lambda: None)()
        return out

    monkeypatch.setattr(graph_io._jvm_write, "stage_jvm", stage_then_move)
    meanwhile["do"] = lambda: write_table(people(jvm, ["dee"]), g.root, "Person", engine="python")
    with pytest.raises(KeyConflictError, match="'dee'"):  # committed after the tasks probed
        write_table(people(jvm, ["dee", "eve"]), g.root, "Person", engine="jvm")
    assert exact["fresh"] == 2  # the Python-path writer's own check, then the driver's re-check
    write_table(people(jvm, ["eve"]), g.root, "Person", engine="jvm")
    assert exact["fresh"] == 2
    assert ids(jvm, g.root, "Person") == ["ann", "bob", "cy", "dee", "eve"]


def _seed(spark, root):
    write_graph(
        root,
        {
            "Person": people(spark, ["ann", "bob", "cy"]),
            "Knows": spark.createDataFrame(
                [("ann", "bob"), ("bob", "cy"), ("cy", "ann")], "`from` string, `to` string"
            ),
        },
    )


def test_node_overwrite_refuses_to_orphan_edges_unless_cascade(jvm, tmp_path):  # I18
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    _seed(jvm, g.root)
    v = Graph.open(g.root).snapshot().version
    from omnigraph_spark.errors import DanglingEdgeError

    with pytest.raises(DanglingEdgeError, match="Knows: 2 edge"):
        write_table(people(jvm, ["ann", "cy"]), g.root, "Person", mode="overwrite")
    with pytest.raises(Exception) as e:
        people(jvm, ["ann", "cy"]).write.format("omnigraph").option("type", "Person").mode("overwrite").save(g.root)
    assert unwrap_error(e.value).code == "DANGLING_EDGE"
    assert Graph.open(g.root).snapshot().version == v
    people(jvm, ["ann", "cy"]).write.format("omnigraph").option("type", "Person").option("cascade", "true").mode(
        "overwrite"
    ).save(g.root)
    assert Graph.open(g.root).snapshot().version == v + 1
    assert ids(jvm, g.root, "Person") == ["ann", "cy"] and len(ids(jvm, g.root, "Knows")) == 1


def test_deletes_through_df_write_write_table_and_write_graph(jvm, tmp_path):  # I18
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    _seed(jvm, g.root)
    gone = jvm.createDataFrame([("bob", 99), ("nobody", 0)], "name string, age int")
    gone.write.format("omnigraph").option("type", "Person").option("writeMode", "delete").mode("append").save(g.root)
    assert ids(jvm, g.root, "Person") == ["ann", "cy"] and len(ids(jvm, g.root, "Knows")) == 1  # cascaded
    r = write_table(jvm.createDataFrame([("cy", "ann")], "`from` string, `to` string"), g.root, "Knows", mode="delete")
    assert r.tables[0].rows_deleted == 1 and ids(jvm, g.root, "Knows") == []
    write_graph(
        g.root,
        {"Person": people(jvm, ["dee"]), "Knows": jvm.createDataFrame([("dee", "ann")], "`from` string, `to` string")},
    )
    r = write_graph(
        g.root,
        {
            "Person": jvm.createDataFrame([("ann",)], "id string"),
            "Tag": jvm.createDataFrame([("t-none",)], "id string"),
        },
        mode="delete",
    )
    assert {t.table_key: (t.rows_deleted, t.keys_missing) for t in r.tables} == {
        "node:Person": (1, 0),
        "edge:Knows": (1, 0),
        "node:Tag": (0, 1),
    }
    assert ids(jvm, g.root, "Person") == ["cy", "dee"] and ids(jvm, g.root, "Knows") == []
