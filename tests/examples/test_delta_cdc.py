"""The CDC step of examples/delta_to_graph.py without Delta: a Change Data Feed range (the
columns Delta's ``readChangeFeed`` adds) becomes ONE graph commit of upserts and deletes, the
deletes cascading to edges, idempotent per range (I18). The example itself runs against real
Delta in test_examples.py (slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from omnigraph_spark import Graph, write_graph
from omnigraph_spark.demo import sample_path

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "delta_to_graph.py"
PEOPLE = "full_name string, age int, birth_date date, city string, role string, skills array<string>"


def _example():
    spec = importlib.util.spec_from_file_location("delta_to_graph", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports no Delta module at load time
    return mod


def test_a_change_feed_range_is_one_commit_of_upserts_and_cascading_deletes(spark, tmp_path):  # I18
    ex = _example()
    g = Graph.init(str(tmp_path / "g"), Path(sample_path("social.pg")).read_text())
    base = [("Ada Okafor", 48, None, "Lagos", "founder", None), ("Ben Kowalski", 30, None, "Oslo", "engineer", None)]
    write_graph(
        g.root,
        {
            "Person": ex.person_frame(spark.createDataFrame(base, PEOPLE)),
            "Knows": spark.createDataFrame([("Ada Okafor", "Ben Kowalski")], "src string, dst string"),
        },
    )
    v = Graph.open(g.root).snapshot().version
    rows = [
        ("Ada Okafor", 48, None, "Lagos", "founder", None, "update_preimage", 2),
        ("Ada Okafor", 48, None, "Berlin", "founder", None, "update_postimage", 2),
        ("Yara Costa", 33, None, "Lisbon", "designer", None, "insert", 2),
        ("Ben Kowalski", 30, None, "Oslo", "engineer", None, "delete", 3),
        ("Cy Temp", 20, None, "Rome", "analyst", None, "insert", 2),
        ("Cy Temp", 20, None, "Rome", "analyst", None, "delete", 3),
    ]
    changes = spark.createDataFrame(rows, PEOPLE + ", _change_type string, _commit_version long")
    res, upserted, deleted = ex.apply_people_changes(g.root, changes, 3)
    assert (upserted, deleted) == (2, 2)
    assert Graph.open(g.root).snapshot().version == v + 1  # ONE graph commit
    by = {t.table_key: t for t in res.tables}
    assert by["node:Person"].rows_deleted == 1 and by["node:Person"].keys_missing == 1  # Cy never reached the graph
    assert by["edge:Knows"].rows_deleted == 1
    people = {
        r["name"]: r["city"] for r in spark.read.format("omnigraph").option("type", "Person").load(g.root).collect()
    }
    assert people == {"Ada Okafor": "Berlin", "Yara Costa": "Lisbon"}
    assert spark.read.format("omnigraph").option("type", "Knows").load(g.root).count() == 0
    again, _, _ = ex.apply_people_changes(g.root, changes, 3)
    assert again.skipped and Graph.open(g.root).snapshot().version == v + 1
