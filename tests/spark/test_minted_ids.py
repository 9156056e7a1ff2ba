"""Ids the connector mints (ULIDs for rows without an id) need no load-wide uniqueness pass;
ids that came from the input always get one (I4: a bad load is refused). No Spark needed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import UniqueViolationError
from omnigraph_spark.ingest.convert import RowConverter
from omnigraph_spark.spark import staging, validate
from omnigraph_spark.spark import writer as W
from omnigraph_spark.spark.options import WriteOptions
from omnigraph_spark.store import writes
from omnigraph_spark.store.writes import StagedTable

SCHEMA = """
node P { name: String @key }
node U { label: String? }
edge E: P -> P @card(0..3)
"""


@pytest.fixture
def g(tmp_path):
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    load(g, {"P": pa.table({"name": ["a", "b"]})})
    return g


def load(g, frames, mode="append"):
    staged = []
    for name, tbl in frames.items():
        td = g.catalog.resolve(name)
        staged.append(
            staging.convert_and_stage(
                writes.prepare_target(g, "main", td.table_key, mode), td, tbl.to_batches(), "test"
            )
        )
    return staged, W.commit_staged(
        g, "main", staged, WriteOptions(path=g.root, type=None, branch="main", write_mode=mode)
    )


@pytest.fixture
def unique_calls(monkeypatch):
    calls = []
    real = validate.check_unique

    def spy(td, table, cols, **kw):
        calls.append((td.table_key, tuple(cols)))
        return real(td, table, cols, **kw)

    monkeypatch.setattr(validate, "check_unique", spy)
    return calls


def test_converter_counts_ids_it_did_not_mint(g):
    e, u, p = (g.catalog.resolve(n) for n in ("E", "U", "P"))
    conv = RowConverter(e)
    conv.convert(pa.record_batch({"from": ["a"], "to": ["b"]}))
    assert conv.given_ids == 0
    conv.convert(pa.record_batch({"from": ["a", "a"], "to": ["b", "b"], "id": pa.array(["x", None])}))
    assert conv.given_ids == 1
    conv = RowConverter(u)
    conv.convert(pa.record_batch({"label": ["q", "r"]}))
    assert conv.given_ids == 0
    conv = RowConverter(p)  # a @key derives the id: not minted
    conv.convert(pa.record_batch({"name": ["q"]}))
    assert conv.given_ids == 1


def test_merge_of_staged_parts_keeps_minted_only_if_every_part_minted():
    def part(rows, minted):
        return StagedTable("edge:E", "append", "u", 1, (), rows, 0, minted)

    assert StagedTable.merge([part(3, True), part(0, False), part(2, True)]).minted_ids
    assert not StagedTable.merge([part(3, True), part(1, False)]).minted_ids
    assert not StagedTable("edge:E", "append", "u", 1, (), 1, 0).minted_ids  # the safe default


def test_minted_edge_ids_skip_the_uniqueness_pass(g, unique_calls):
    staged, res = load(g, {"E": pa.table({"from": ["a", "a", "b"], "to": ["b", "a", "a"]})})
    assert staged[0].minted_ids
    assert ("edge:E", ("id",)) not in unique_calls
    ids = g.read_table("edge:E").column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 3 and all(len(i) == 26 for i in ids)


def test_given_edge_ids_are_still_checked(g, unique_calls):
    with pytest.raises(UniqueViolationError, match="'e1'"):
        load(g, {"E": pa.table({"from": ["a", "b"], "to": ["b", "a"], "id": ["e1", "e1"]})})
    assert ("edge:E", ("id",)) in unique_calls
    assert g.read_table("edge:E").num_rows == 0
    unique_calls.clear()  # one given id among minted ones: the pass runs
    staged, _ = load(g, {"E": pa.table({"from": ["a", "b"], "to": ["b", "a"], "id": pa.array(["e9", None])})})
    assert not staged[0].minted_ids and ("edge:E", ("id",)) in unique_calls


def test_minted_merge_and_card_still_count_committed_edges(g):
    load(g, {"E": pa.table({"from": ["a", "a"], "to": ["b", "a"]})})
    from omnigraph_spark.errors import CardinalityViolationError

    with pytest.raises(CardinalityViolationError, match="source 'a' has 4 edges"):
        load(g, {"E": pa.table({"from": ["a", "a"], "to": ["b", "b"]})}, mode="merge")
    load(g, {"E": pa.table({"from": ["a", "b"], "to": ["b", "b"]})}, mode="merge")  # a: 3 edges, at the max
    assert g.read_table("edge:E").num_rows == 4
