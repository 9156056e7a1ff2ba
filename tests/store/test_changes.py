"""The change feed's store half (store/changes.py, I25) on an object store, and its retention
error, without Spark."""

from __future__ import annotations

import pytest

from omnigraph_spark.errors import ChangeFeedRangeError
from omnigraph_spark.store import changes

from .helpers import people, write_rows

P = "node:Person"


def _kinds(t) -> list[tuple]:
    return sorted((r["id"], r[changes.CHANGE_TYPE], r["age"]) for r in t.to_pylist())


def test_I25_feed_on_an_object_store(s3, s3_graph):
    """Append, merge and overwrite on S3: the feed reads the same rows it reads on local disk."""
    g = s3_graph
    so = s3.storage_options()
    write_rows(g, P, people("a", "b", age=1))
    v1 = g.snapshot().version
    write_rows(g, P, people("a", age=2), mode="merge")
    write_rows(g, P, people("x", age=3), mode="overwrite")
    rng = changes.resolve_range(g.root, "main", start=v1, storage_options=so)
    assert rng is not None
    t = changes.changes_table(g.root, P, rng, storage_options=so)
    assert _kinds(t) == [
        ("a", "delete", 2),
        ("a", "insert", 1),
        ("a", "update_postimage", 2),
        ("a", "update_preimage", 1),
        ("b", "delete", 1),
        ("b", "insert", 1),
        ("x", "insert", 3),
    ]


def test_range_errors(test_graph):
    g = test_graph
    write_rows(g, P, people("a", age=1))
    head = g.snapshot().version
    with pytest.raises(ChangeFeedRangeError) as e:
        changes.resolve_range(g.root, "main", start=head + 1)
    assert e.value.code == "CHANGE_FEED_RANGE" and e.value.context["head"] == head
    with pytest.raises(ChangeFeedRangeError):
        changes.resolve_range(g.root, "main", start=head, end=head - 1)
    assert changes.resolve_range(g.root, "main", start_ts_us=1, end_ts_us=2) is None  # no version then
