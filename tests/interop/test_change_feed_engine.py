"""I25 on the engine's commits: the change feed of a graph the real 0.7.2 engine writes into.

We load a small graph; then the engine merges into it (updates and inserts), mutates it (an
update, an insert, a delete that cascades to edges) and optimizes it. After each engine commit
our feed of every type, applied strictly to the rows the feed has built so far, must give our
snapshot at that version (which the other interop tests hold equal to the engine's export),
and a delete's cascaded edges must appear as deletes of the edge type in the same version.
"""

from __future__ import annotations

import json

from omnigraph_spark import Graph
from omnigraph_spark.store import changes

from ..store.helpers import write_rows
from ..store.test_changes_stateful import apply_version
from .test_scale import QUERIES, SCHEMA  # the Item/Links graph and the engine's mutations

TYPES = ("node:Item", "edge:Links")


class Replay:
    """The feed of every type, applied version by version onto an empty graph."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.last = 0
        self.state: dict[str, dict] = {k: {} for k in TYPES}
        self.kinds: dict[tuple[str, int], list[str]] = {}

    def catch_up(self) -> None:
        head = self.g.snapshot().version
        rng = changes.FeedRange("main", self.last + 1, head)
        by_version: dict[tuple[str, int], list[dict]] = {}
        for key in TYPES:
            t = changes.changes_table(self.g.root, key, rng)
            for r in [] if t is None else t.to_pylist():
                by_version.setdefault((key, r[changes.COMMIT_VERSION]), []).append(r)
        for v in range(self.last + 1, head + 1):
            snap = self.g.snapshot(version=v)
            for key in TYPES:
                rows = by_version.get((key, v), [])
                self.kinds[(key, v)] = sorted(r[changes.CHANGE_TYPE] for r in rows)
                apply_version(self.state[key], rows, f"v{v} {key}")
                actual = {r["id"]: r for r in self.g.read_table(key, snap).to_pylist()}
                assert self.state[key] == actual, f"v{v} {key}: the replayed feed differs from the snapshot"
        self.last = head


def test_I25_the_feed_of_the_engines_merges_mutations_and_optimize(engine, tmp_path):
    root = str(tmp_path / "g")
    g = Graph.init(root, SCHEMA)
    items = [{"id": f"i{i}", "sku": f"i{i}", "price": i} for i in range(20)]
    write_rows(g, "node:Item", items)
    links = [{"id": f"l{i}", "src": f"i{i}", "dst": f"i{(i + 1) % 20}", "weight": i} for i in range(20)]
    write_rows(g, "edge:Links", links)
    feed = Replay(g)
    feed.catch_up()

    merge = tmp_path / "merge.jsonl"
    merge.write_text(
        "".join(
            json.dumps({"type": "Item", "data": {"sku": s, "price": p}}) + "\n"
            for s, p in (("i1", 100), ("i2", 200), ("n1", 1), ("n2", 2))
        )
    )
    engine.load(root, merge, "merge")
    feed.catch_up()
    v = feed.last
    assert feed.kinds[("node:Item", v)] == ["insert"] * 2 + ["update_postimage"] * 2 + ["update_preimage"] * 2

    queries = tmp_path / "q.gq"
    queries.write_text(QUERIES)

    def mutate(name: str, **params) -> None:
        engine.run("mutate", "--store", root, "--query", queries, name, "--params", json.dumps(params), "--json")

    mutate("set_price", sku="i3", price=333)
    feed.catch_up()
    assert feed.kinds[("node:Item", feed.last)] == ["update_postimage", "update_preimage"]
    mutate("add_item", sku="n3", price=3)
    feed.catch_up()
    assert feed.kinds[("node:Item", feed.last)] == ["insert"]
    mutate("drop_item", sku="i5")  # i4 -> i5 and i5 -> i6 go with it
    feed.catch_up()
    assert feed.kinds[("node:Item", feed.last)] == ["delete"]
    assert feed.kinds[("edge:Links", feed.last)] == ["delete", "delete"]

    engine.optimize(root)
    before = feed.last
    feed.catch_up()
    assert all(feed.kinds[(k, v)] == [] for k in TYPES for v in range(before + 1, feed.last + 1))
