"""The engine opens, searches and writes again a graph whose indexes we built in parts (I23).

Every BTree index of a large table is built as parts over runs of its fragments that share one
segment uuid, several at once in the index child process, then merged into one segment; an
INVERTED index is built whole, one partition (store/indexes.py). Here the part size is shrunk
so that a small graph gets them: its BTrees come out of six to twelve parts each. The real 0.7.2 engine
then full-text searches the key, merges, appends, mutates (a cascading delete included) and
optimizes it; we load a delta (built in parts too) on top of the engine's writes; and every
search answers, and the engine's export is the rows we expect. At a million keys, the engine's
optimize after its merge folds its rows into the INVERTED index we built.
"""

from __future__ import annotations

import json
import logging
import os

import pyarrow as pa

from omnigraph_spark import Graph
from omnigraph_spark.store import indexes, writes

from .helpers import export_rows, our_rows
from .test_scale import QUERIES, SCHEMA, engine_merge_and_append, sku

ITEMS = 3000


def load(g: Graph, lo: int, hi: int, per_fragment: int) -> None:
    """Items ``lo`` .. ``hi`` - 1 and two links from each, as one load in small fragments."""
    items = [{"id": sku(i), "sku": sku(i), "price": i * 3} for i in range(lo, hi)]
    links = [
        {"id": f"l{i}-{k}", "src": sku(i), "dst": sku(t), "weight": w}
        for i in range(lo, hi)
        for k, (t, w) in enumerate((((i + 1) % hi, i), ((i * 7 + 3) % hi, -i)))
    ]
    staged = []
    for key, rows in (("node:Item", items), ("edge:Links", links)):
        target = writes.prepare_target(g, "main", key, "append", max_rows_per_file=per_fragment)
        batches = pa.Table.from_pylist(rows, schema=target.schema).to_batches(max_chunksize=per_fragment)
        staged.append(writes.stage(target, batches))
    writes.commit_load(g, "main", staged)


def test_I23_the_engine_searches_and_writes_a_graph_indexed_in_parts(engine, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(indexes, "CHILD_ROWS", 1)  # the child process, where parts run at once
    monkeypatch.setattr(indexes, "PART_ROWS", 700)
    root = str(tmp_path / "g")
    g = Graph.init(root, SCHEMA)
    with caplog.at_level(logging.INFO, logger="omnigraph_spark.store.indexes"):
        load(g, 0, ITEMS, 250)
    assert ": 7 parts," in caplog.text  # six of the id BTree (two fragments each), one of the INVERTED index
    assert ": 36 parts," in caplog.text  # id, src and dst BTrees over 12 fragments of 500 rows: 12 each
    items = g.open_table("node:Item")
    frags = {f.fragment_id for f in items.get_fragments()}
    assert len(frags) == 12
    segs = {d.name: d.segments for d in items.describe_indices()}
    assert {n: [set(s.fragment_ids) for s in v] for n, v in segs.items()} == {"id_idx": [frags], "sku_idx": [frags]}
    files = os.listdir(f"{items.uri}/_indices/{segs['sku_idx'][0].uuid}")
    assert "part_1_docs.lance" not in files, files  # the INVERTED index is one partition

    queries = tmp_path / "q.gq"
    queries.write_text(QUERIES)

    def run(name: str, **params) -> dict:
        verb = "query" if name == "by_sku" else "mutate"
        args = ("--store", root, "--query", queries, name, "--params", json.dumps(params), "--json")
        return json.loads(engine.run(verb, *args, timeout=600).stdout)

    def search(q: str) -> list[tuple]:
        return [(r["i.sku"], r["i.price"]) for r in run("by_sku", q=q)["rows"]]

    for i in (0, 1234, ITEMS - 1):
        assert search(sku(i)) == [(sku(i), i * 3)]

    # the engine writes on top: a merge, an append, mutations with a cascading delete
    engine_merge_and_append(engine, root, tmp_path)
    run("set_price", sku=sku(7), price=42)
    run("drop_item", sku=sku(10))
    # the engine's search gives a row its own merge or update rewrote twice, whether our index
    # was built in parts or whole (seen with both): for those the rows, not their count, count
    assert set(search(sku(3))) == {(sku(3), -3)} and set(search(sku(7))) == {(sku(7), 42)}
    assert search("n0000004") == [("n0000004", 4)] and search(sku(2000)) == [(sku(2000), 6000)]
    assert search(sku(10)) == []

    # our next load: a delta of every index, built in parts, on top of the engine's commits
    g = Graph.open(root)
    before = {f.fragment_id for f in g.open_table("node:Item").get_fragments()}
    load(g, ITEMS, ITEMS + 1500, 250)
    items = g.open_table("node:Item")
    new = {f.fragment_id for f in items.get_fragments()} - before
    segments = next(d for d in items.describe_indices() if d.name == "sku_idx").segments
    assert len(new) == 6 and len(segments) == 2 and set(segments[1].fragment_ids) >= new  # one delta segment
    assert not indexes.plan(items, indexes.expected_indexes(g.catalog.by_table_key("node:Item")))
    assert search(sku(ITEMS + 1499)) == [(sku(ITEMS + 1499), (ITEMS + 1499) * 3)]
    assert search(sku(1234)) == [(sku(1234), 1234 * 3)]

    # the engine optimizes (with the Lance CPU pool docs/interop.md D6 asks for) and exports
    tuned = engine.__class__(engine.binary, engine.env["OMNIGRAPH_HOME"])
    tuned.env = {**engine.env, "LANCE_CPU_THREADS": "2"}
    tuned.run("optimize", root, "--json", timeout=600)
    assert search("a0000002") == [("a0000002", 102)]
    assert search(sku(ITEMS + 700)) == [(sku(ITEMS + 700), (ITEMS + 700) * 3)]
    exported = export_rows(engine.export(root, "main"))
    ours = our_rows(Graph.open(root))
    assert exported["node:Item"] == ours["node:Item"] and len(ours["node:Item"]) == ITEMS + 1500 + 5 + 3 - 1
    assert exported["edge:Links"] == ours["edge:Links"] and len(ours["edge:Links"]) == 2 * (ITEMS + 1500) + 3 - 4


def test_I23_the_engines_optimize_after_its_merge_folds_rows_into_our_text_index(engine, tmp_path):
    """A million keys in four fragments: the engine merges (deleting five of our rows), appends,
    and its optimize folds the rows it left unindexed into our INVERTED index. Lance 7.0 panics
    there when that index has several partitions (``InnerBuilder::merge_from``, an index out of
    bounds once rows were deleted), which an INVERTED index built in parts would have."""
    n = 1_000_000
    root = str(tmp_path / "g")
    g = Graph.init(root, SCHEMA)
    target = writes.prepare_target(g, "main", "node:Item", "append", max_rows_per_file=250_000)
    keys = pa.array([sku(i) for i in range(n)])
    rows = pa.table({"id": keys, "sku": keys, "price": pa.array(range(0, 3 * n, 3), pa.int64())})
    staged = writes.stage(target, rows.select(target.schema.names).cast(target.schema).to_batches(250_000))
    writes.commit_load(g, "main", [staged])
    items = g.open_table("node:Item")
    sku_idx = next(d for d in items.describe_indices() if d.name == "sku_idx")
    assert [set(s.fragment_ids) for s in sku_idx.segments] == [{f.fragment_id for f in items.get_fragments()}]
    assert "part_1_docs.lance" not in os.listdir(f"{items.uri}/_indices/{sku_idx.segments[0].uuid}")

    merge = tmp_path / "merge.jsonl"
    merge.write_text(
        "".join(json.dumps({"type": "Item", "data": {"sku": sku(i), "price": -i}}) + "\n" for i in range(5))
        + "".join(json.dumps({"type": "Item", "data": {"sku": f"n{i:07d}", "price": i}}) + "\n" for i in range(5))
    )
    engine.run("load", "--data", merge, "--mode", "merge", root, "--json", timeout=600)
    tuned = engine.__class__(engine.binary, engine.env["OMNIGRAPH_HOME"])
    tuned.env = {**engine.env, "LANCE_CPU_THREADS": "2"}  # docs/interop.md, D6
    tuned.run("optimize", root, "--json", timeout=600)
    queries = tmp_path / "q.gq"
    queries.write_text(QUERIES)
    args = ("--store", root, "--query", queries, "by_sku", "--json")
    for q, price in ((sku(3), -3), ("n0000004", 4), (sku(n - 1), 3 * (n - 1))):
        rows = json.loads(engine.run("query", *args, "--params", json.dumps({"q": q}), timeout=600).stdout)["rows"]
        assert {(r["i.sku"], r["i.price"]) for r in rows} == {(q, price)}, q
