"""The Spark read path: format("omnigraph") loads of one type at one pinned snapshot."""
from __future__ import annotations

import pytest
from chispa import assert_df_equality

from tests.store.helpers import people, write_rows

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]


def load(spark, uri, type_name="Person", **options):
    r = spark.read.format("omnigraph").option("type", type_name)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(uri)


def test_read_person_rows_and_schema(spark, test_graph):
    write_rows(test_graph, "node:Person", [{"id": "alice", "age": 30, "name": "alice"},
                                          {"id": "bob", "age": None, "name": "bob"}])
    df = load(spark, test_graph.root)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields] == [
        ("id", "string", False), ("age", "int", True), ("name", "string", False)]
    expected = spark.createDataFrame([("alice", 30, "alice"), ("bob", None, "bob")], df.schema)
    assert_df_equality(df, expected, ignore_row_order=True)


def test_empty_table_reads_zero_rows_with_schema(spark, test_graph):
    df = load(spark, test_graph.root, "Knows")
    assert df.columns == ["id", "src", "dst", "since"]
    assert df.collect() == []
