"""The @card bound we record with each edge commit (invariant I16) across the real engine: the
engine opens a graph whose edge commits carry it and writes on top; our next append then pins a
version the engine wrote (no bound) and must count, and both sides refuse the same violation."""

from __future__ import annotations

import pytest

from omnigraph_spark import Graph, read_table, write_table
from omnigraph_spark.errors import CardinalityViolationError
from omnigraph_spark.store import tables as _tables
from omnigraph_spark.store.writes import SRC_BOUND_PROP
from tests.shim import need_shim

from .helpers import export_rows
from .test_ours_to_engine import assert_engine_open_is_clean, assert_export_equals_ours

pytestmark = [pytest.mark.spark]

SCHEMA = """
node Person {
    name: String @key
}
edge Knows: Person -> Person @card(0..2)
"""


def recorded(root: str):
    g = Graph.open(root)
    snap = g.snapshot()
    return _tables.transaction_property(
        g.open_table("edge:Knows", snap), snap.table("edge:Knows").version, SRC_BOUND_PROP
    )


@pytest.mark.parametrize("engine_name", ["jvm", "python"])
def test_the_card_bound_survives_the_engine_writing_in_between(engine, spark, tmp_path, engine_name):
    if engine_name == "jvm":
        need_shim(spark)
    root = str(tmp_path / "g")
    schema = tmp_path / "schema.pg"
    schema.write_text(SCHEMA)
    g = Graph.init(root, SCHEMA)
    people = spark.createDataFrame([(n,) for n in ("Alice", "Bob", "Carol", "Dan")], "name string")
    write_table(people, root, "Person", engine=engine_name)
    write_table(spark.createDataFrame([("Alice", "Bob")], "src string, dst string"), root, "Knows", engine=engine_name)
    assert recorded(root) is not None
    assert_engine_open_is_clean(engine, root, g)
    assert_export_equals_ours(engine, root, g)

    more = tmp_path / "more.jsonl"
    more.write_text('{"edge": "Knows", "from": "Alice", "to": "Carol"}\n')
    engine.load(root, more, "append")  # Alice: 2 = max; the engine's commits carry no bound
    assert recorded(root) is None
    with pytest.raises(CardinalityViolationError, match=r"source 'Alice' has 3 edges \(max 2\)"):
        write_table(
            spark.createDataFrame([("Alice", "Dan")], "src string, dst string"), root, "Knows", engine=engine_name
        )
    write_table(spark.createDataFrame([("Bob", "Dan")], "src string, dst string"), root, "Knows", engine=engine_name)
    assert recorded(root) is not None and int(recorded(root)) >= 2
    assert sorted((r.src, r.dst) for r in read_table(spark, root, "Knows").collect()) == [
        ("Alice", "Bob"),
        ("Alice", "Carol"),
        ("Bob", "Dan"),
    ]
    assert_engine_open_is_clean(engine, root, g)
    assert_export_equals_ours(engine, root, g)
    # the engine refuses what we refused, on the version our bound travels with
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"edge": "Knows", "from": "Alice", "to": "Dan"}\n')
    p = engine.run("load", "--data", bad, "--mode", "append", root, check=False)
    assert p.returncode != 0
    assert "@card violation on edge Knows: source 'Alice' has 3 edges (max 2)" in p.stdout + p.stderr
    assert len(export_rows(engine.export(root))["edge:Knows"]) == 3
