"""``omnigraph-spark load`` in-process, on the shared SparkSession (the CLI reuses the active
session and does not stop it)."""

from __future__ import annotations

import json

import pytest

from omnigraph_spark import Graph

from .helpers import cli, error_codes

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


@pytest.fixture
def sample_graph(tmp_path):
    from omnigraph_spark.demo import sample_path

    uri = str(tmp_path / "g")
    assert cli("init", uri, "--schema", sample_path("social.pg")).code == 0
    return uri


def test_load_jsonl_sample_one_commit(spark, sample_graph):
    from omnigraph_spark.demo import sample_path

    before = len(Graph.open(sample_graph).log())
    r = cli("load", sample_graph, sample_path("social.jsonl"), "--actor", "cli", "--json")
    assert r.code == 0, r.err
    d = r.json
    assert {t["table"]: t["rows_written"] for t in d["tables"]} == {
        "node:Person": 80,
        "node:Company": 12,
        "edge:Knows": 240,
        "edge:WorksAt": 72,
    }
    g = Graph.open(sample_graph)
    assert len(g.log()) == before + 1 and g.log()[-1].graph_commit_id == d["graph_commit_id"]
    assert g.log()[-1].actor_id == "cli"
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session survives
    # merge the same file again on a branch: rows replaced, counts unchanged, main untouched
    assert cli("branch", "create", sample_graph, "b").code == 0
    r = cli("load", sample_graph, sample_path("social.jsonl"), "--mode", "merge", "--branch", "b")
    assert r.code == 0, r.err
    assert "committed" in r.out and "on b" in r.out
    assert Graph.open(sample_graph).snapshot("b").tables["node:Person"].row_count == 80


def test_load_parquet_one_type(spark, sample_graph, tmp_path):
    path = str(tmp_path / "people.parquet")
    (
        spark.createDataFrame(
            [("P1", "Berlin", "engineer"), ("P2", "Lyon", "analyst")], "name string, city string, role string"
        ).write.parquet(path)
    )
    r = cli("load", sample_graph, path, "--type", "Person", "--format", "parquet", "--json")
    assert r.code == 0, r.err
    assert r.json["tables"][0]["table"] == "node:Person" and r.json["tables"][0]["row_count"] == 2
    # overwrite with one row
    one = str(tmp_path / "one.parquet")
    spark.createDataFrame([("P3", "Osaka", "founder")], "name string, city string, role string").write.parquet(one)
    r = cli("load", sample_graph, one, "--type", "Person", "--mode", "overwrite")
    assert r.code == 0, r.err
    assert Graph.open(sample_graph).snapshot().tables["node:Person"].row_count == 1


def test_load_bad_data_prints_the_error_code(spark, sample_graph, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"type": "Person", "data": {"name": "A", "city": "X", "role": "engineer"}})
        + "\n"
        + json.dumps({"edge": "Knows", "from": "A", "to": "Ghost"})
        + "\n"
    )
    r = cli("load", sample_graph, bad)
    assert r.code == 1
    assert error_codes(r.err) == ["DANGLING_EDGE"]
    assert Graph.open(sample_graph).snapshot().tables["node:Person"].row_count == 0  # nothing committed
    enum = tmp_path / "enum.jsonl"
    enum.write_text(json.dumps({"type": "Person", "data": {"name": "A", "city": "X", "role": "wizard"}}) + "\n")
    r = cli("load", sample_graph, enum, "--json")
    assert r.code == 1 and error_codes(r.err) == ["CONSTRAINT_VIOLATION"]
    assert r.json["error"]["code"] == "CONSTRAINT_VIOLATION"


def test_load_input_errors(sample_graph, tmp_path):
    r = cli("load", sample_graph, tmp_path / "missing.jsonl")
    assert r.code == 1 and error_codes(r.err) == ["FILE_NOT_FOUND"]
    r = cli("load", sample_graph, tmp_path / "x.csv")
    assert r.code == 2 and error_codes(r.err) == ["USAGE"]
    r = cli("load", sample_graph, tmp_path / "x.jsonl", "--type", "Person")
    assert r.code == 2
    r = cli("load", tmp_path / "nograph", tmp_path / "x.jsonl")
    assert r.code == 1  # FILE_NOT_FOUND or GRAPH_NOT_FOUND, before Spark starts
