"""Load-wide checks: uniqueness, endpoints, @card."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import catalog, edge, node, prop

from omnigraph_spark.errors import DataError
from omnigraph_spark.ingest import (
    check_cardinality,
    check_endpoints,
    check_unique,
    shadowed_src_counts,
    src_counts,
    unique_groups,
)


@pytest.fixture
def typed():
    return catalog(
        [
            node(
                "P",
                [prop("a", "String"), prop("b", "I32", True), prop("k", "String")],
                [{"Key": ["k"]}, {"Unique": ["a", "b"]}],
            )
        ],
        [edge("E", "P", "P", card={"min": 1, "max": 2})],
    )


def test_unique_groups_include_key(typed):
    assert unique_groups(typed.nodes["P"]) == [(("a", "b"), "@unique"), (("k",), "@key")]


def test_unique_passes_and_nulls_exempt(typed):
    t = pa.table({"a": ["x", "x", "x", "x"], "b": pa.array([1, 2, None, None], pa.int32())})
    check_unique(typed.nodes["P"], t, ["a", "b"], what="@unique")


def test_unique_composite_violation_names_value_and_positions(typed):
    t = pa.table({"a": ["x", "y", "x", "y"], "b": pa.array([1, 1, 2, 1], pa.int32())})
    with pytest.raises(DataError) as e:
        check_unique(typed.nodes["P"], t, ["a", "b"], what="@unique", positions=pa.array([10, 11, 12, 13]))
    msg = str(e.value)
    assert e.value.code == "UNIQUE_VIOLATION"
    assert "P.(a, b)" in msg and "'(y, 1)'" in msg and "rows 11 and 13" in msg


def test_unique_id_on_chunked_table(typed):
    t = pa.Table.from_batches([pa.record_batch({"id": ["a", "b"]}), pa.record_batch({"id": ["c", "a"]})])
    with pytest.raises(DataError) as e:
        check_unique(typed.nodes["P"], t, ["id"], what="id")
    assert "'a'" in str(e.value) and "rows 0 and 3" in str(e.value)


def test_endpoints_ok_and_dangling(typed):
    e = typed.edges["E"]
    check_endpoints(e, pa.array(["a"]), pa.array(["b"]), pa.array(["a", "b"]), pa.array(["b"]))
    with pytest.raises(DataError) as ex:
        check_endpoints(
            e,
            pa.chunked_array([["a", "zz"], ["q"]]),
            pa.array(["b", "b", "nope"]),
            pa.array(["a", "q"]),
            pa.array(["b"]),
            positions=pa.array([5, 6, 7]),
        )
    msg = str(ex.value)
    assert ex.value.code == "DANGLING_EDGE"
    assert "edge E row 6: src 'zz' not found in P" in msg
    assert "edge E row 7: dst 'nope' not found in P" in msg
    assert ex.value.context["dangling_src"] == 1 and ex.value.context["dangling_dst"] == 1


def test_endpoints_limit_and_count(typed):
    with pytest.raises(DataError) as ex:
        check_endpoints(
            typed.edges["E"],
            pa.array([f"s{i}" for i in range(10)]),
            pa.array(["b"] * 10),
            pa.array(["a"]),
            pa.array(["b"]),
            limit=3,
        )
    assert "and 7 more" in str(ex.value) and "s3" not in str(ex.value)


@pytest.mark.parametrize("same_ids", [True, False])
def test_endpoints_split_probe_finds_what_one_probe_finds(typed, monkeypatch, same_ids):
    """Above PARALLEL_PROBE_ROWS the probe runs on two threads: the same verdict, rows, counts."""
    from omnigraph_spark.ingest import checks

    e = typed.edges["E"]
    ids = pa.array([f"n{i}" for i in range(100)])
    src = pa.array([f"n{i}" for i in range(40)] + ["bad-src"] + [f"n{i}" for i in range(9)])
    dst = pa.array([f"n{i}" for i in range(49)] + ["bad-dst"])
    other = ids if same_ids else pa.array([f"n{i}" for i in range(100)])
    messages = []
    for split in (1 << 30, 8):
        monkeypatch.setattr(checks, "PARALLEL_PROBE_ROWS", split)
        with pytest.raises(DataError) as ex:
            check_endpoints(e, src, dst, ids, other)
        messages.append((str(ex.value), ex.value.context))
    assert messages[0] == messages[1]
    assert "row 40: src 'bad-src'" in messages[0][0] and "row 49: dst 'bad-dst'" in messages[0][0]


def counts(**kv):
    return pa.table({"src": list(kv), "count": pa.array(list(kv.values()), pa.int64())})


def test_card_max_counts_committed_plus_pending(typed):
    e = typed.edges["E"]
    check_cardinality(e, pa.array(["a", "b"]), counts(a=1))
    with pytest.raises(DataError) as ex:
        check_cardinality(e, pa.array(["a", "a"]), counts(a=1))
    assert ex.value.code == "CARDINALITY_VIOLATION"
    assert "source 'a' has 3 edges (max 2)" in str(ex.value)


def test_card_with_nothing_committed_checks_pending_alone(typed):
    """An empty committed table (first load of an edge type) takes the no-regroup path: the
    same verdicts and messages."""
    e = typed.edges["E"]
    empty = counts()
    check_cardinality(e, pa.array(["a", "a", "b"]), empty)
    with pytest.raises(DataError) as ex:
        check_cardinality(e, pa.array(["b", "a", "a", "a", "b"]), empty, shadowed_committed=empty)
    assert "source 'a' has 3 edges (max 2)" in str(ex.value) and "'b'" not in str(ex.value)


def test_card_min_only_for_sources_with_edges(typed):
    e = catalog([node("P", [])], [edge("E", "P", "P", card={"min": 2, "max": None})]).edges["E"]
    check_cardinality(e, pa.array(["a", "a"]))  # 'b' has no edges: not checked
    with pytest.raises(DataError) as ex:
        check_cardinality(e, pa.array(["a", "a", "b"]))
    assert "source 'b' has 1 edges (min 2)" in str(ex.value)


def test_card_overwrite_ignores_committed(typed):
    check_cardinality(typed.edges["E"], pa.array(["a"]), counts(a=5), overwrite=True)
    with pytest.raises(DataError):
        check_cardinality(typed.edges["E"], pa.array(["a"]), counts(a=5), overwrite=False)


def test_card_merge_shadows_committed_and_dedupes_pending(typed):
    e = typed.edges["E"]
    committed = pa.table({"id": ["e1", "e2"], "src": ["a", "a"]})
    pending_ids, pending_src = pa.array(["e1", "e2", "e2"]), pa.array(["a", "a", "a"])
    shadow = shadowed_src_counts(committed["id"], committed["src"], pending_ids)
    assert shadow.to_pylist() == [{"src": "a", "count": 2}]
    check_cardinality(e, pending_src, src_counts(committed["src"]), shadowed_committed=shadow, pending_ids=pending_ids)
    with pytest.raises(DataError):  # without the merge dedupe the same input has 3 edges
        check_cardinality(e, pending_src, src_counts(committed["src"]), shadowed_committed=shadow)


def test_card_default_is_noop():
    e = catalog([node("P", [])], [edge("E", "P", "P")]).edges["E"]
    check_cardinality(e, pa.array(["a"] * 100))


def test_unique_single_column_fast_path_nulls_exempt_and_duplicates_found(typed):
    """The one-hash-pass fast path (nulls exempt) and the wording slow path agree."""
    check_unique(typed.nodes["P"], pa.table({"k": ["x", None, None, "y"]}), ["k"], what="@key")
    with pytest.raises(DataError) as e:
        check_unique(typed.nodes["P"], pa.table({"k": ["x", None, "y", None, "x"]}), ["k"], what="@key")
    assert "'x'" in str(e.value) and "rows 0 and 4" in str(e.value)


def test_card_append_form_counts_committed_and_pending_in_one_pass(typed):
    """``committed_src`` (the raw committed column, chunked as Lance returns it) gives the same
    verdicts and messages as precomputed committed counts."""
    e = typed.edges["E"]
    committed = pa.chunked_array([pa.array(["a", "c"]), pa.array([], pa.string()), pa.array(["c", None])])
    check_cardinality(e, pa.array(["a", "b"]), committed_src=committed)
    for pending in (pa.array(["a", "a"]), pa.chunked_array([pa.array(["c"]), pa.array(["a", "a"])])):
        with pytest.raises(DataError) as fast:
            check_cardinality(e, pending, committed_src=committed)
        with pytest.raises(DataError) as slow:
            check_cardinality(e, pending, src_counts(committed))
        assert str(fast.value) == str(slow.value)
    assert "source 'a' has 3 edges (max 2)" in str(fast.value) and "'c' has 3" in str(fast.value)
    check_cardinality(e, pa.array(["a", "a"]), committed_src=committed, overwrite=True)  # overwrite ignores it
    with pytest.raises(ValueError):
        check_cardinality(e, pa.array(["a"]), counts(a=1), committed_src=committed)
