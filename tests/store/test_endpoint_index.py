"""The Python staging tasks' endpoint index (invariant I15, ``store/endpoint_index.py``): exact
membership of a node type's ids (committed at a pinned version plus staged files), a fingerprint
collision counted unproven (never proven), a budget, and one index per worker kept only for
exactly the same rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from omnigraph_spark.store import endpoint_index, tables
from omnigraph_spark.store.writes import IdSource

from .helpers import people, stage_rows, write_rows

#: multi-byte UTF-8, quotes, a long id, prefixes of each other, a NUL, another case
NAMES = ["ann", "bob", "zoë", "o'hara", "名前", "x" * 300, "ab", "abc", "a\x00b", "Ann"]
#: values that are none of NAMES but near them
NEAR = ["an", "annn", "ANN", "zoe", "o'har", "名", "x" * 299, "x" * 301, "a", "abcd", "a\x00", "a\x00bc", ""]


def _source(graph, staged=None) -> IdSource:
    t = graph.snapshot().table("node:Person")
    files = tuple(tables.data_file_uris(staged.stage_uri, staged.fragments)) if staged is not None else ()
    return IdSource((t.base_path, t.lance_branch, t.version), files)


def test_I15_the_python_index_is_exact_over_committed_and_staged_ids(test_graph):
    write_rows(test_graph, "node:Person", people(*NAMES[:6]))
    staged = stage_rows(test_graph, "node:Person", people(*NAMES[6:]))
    index = endpoint_index.build(_source(test_graph, staged))
    assert index is not None and len(index) == len(NAMES)
    probe = pa.array(NAMES + NEAR + [None])
    absent = index.absent(probe)
    assert absent.tolist() == [False] * len(NAMES) + [True] * (len(NEAR) + 1)
    # the committed ids alone: the staged ones are absent
    committed = endpoint_index.build(_source(test_graph))
    assert committed is not None
    assert committed.absent(pa.array(NAMES)).tolist() == [False] * 6 + [True] * 4


def test_I15_a_fingerprint_collision_is_unproven_never_proven(test_graph, monkeypatch):
    """Every id hashing alike: a probe finds one id per hash, and any value whose bytes differ
    from it (present or not) is counted unproven, so the driver checks exactly."""
    write_rows(test_graph, "node:Person", people(*NAMES))
    monkeypatch.setattr(endpoint_index, "fingerprints", lambda values: np.full(len(values), 7, np.uint64))
    index = endpoint_index.build(_source(test_graph))
    assert index is not None
    absent = index.absent(pa.array(NAMES + NEAR))
    assert absent[len(NAMES) :].all()  # no absent value is ever proven
    assert (~absent).sum() == 1  # only the one id the search lands on is proven
    check = endpoint_index.EndsCheck((_source(test_graph), _source(test_graph)))
    check.probe(pa.record_batch({"src": pa.array(NAMES), "dst": pa.array(NAMES)}))
    proof = check.proof()
    assert proof is not None and proof.dangling == len(NAMES) - 1
    assert proof.src_bound == len(NAMES)  # every source shares one hash: counted together, never less


def test_a_probe_with_the_callers_fingerprints_answers_as_one_that_hashes(test_graph):
    """The task hashes each batch's sources once (its per-source bound counts by them too):
    given those fingerprints, nulls among the values included, a probe answers the same."""
    write_rows(test_graph, "node:Person", people(*NAMES))
    index = endpoint_index.build(_source(test_graph))
    assert index is not None
    values = pa.array([None, *NAMES, None, *NEAR])
    mask = index.absent(values)
    assert mask.tolist() == index.absent(values, endpoint_index.fingerprints(values)).tolist()
    assert mask[0] and mask[len(NAMES) + 1] and not mask[1 : len(NAMES) + 1].any()


def test_the_task_counts_dangling_rows_and_bounds_edges_per_source(test_graph):
    write_rows(test_graph, "node:Person", people(*NAMES))
    src = _source(test_graph)
    check = endpoint_index.EndsCheck((src, src))
    check.probe(pa.record_batch({"src": pa.array(["ann", "ann", "bob"]), "dst": pa.array(["bob", "ghost", "ann"])}))
    check.probe(pa.record_batch({"src": pa.array(["ann", "nobody"]), "dst": pa.array(["zoë", "nobody"])}))
    proof = check.proof()
    assert proof is not None
    assert (proof.dangling, proof.src_bound, proof.src_ids, proof.dst_ids) == (2, 3, src, src)
    empty = endpoint_index.EndsCheck((src, src)).proof()
    assert empty is not None and (empty.dangling, empty.src_bound) == (0, 0)


def test_over_the_budget_or_unreadable_the_task_proves_nothing(test_graph, tmp_path):
    write_rows(test_graph, "node:Person", people(*NAMES))
    assert endpoint_index.build(_source(test_graph), max_ids=len(NAMES) - 1) is None
    assert endpoint_index.build(_source(test_graph), max_bytes=8) is None
    assert endpoint_index.build(_source(test_graph), max_ids=len(NAMES)) is not None
    gone = IdSource(None, (str(tmp_path / "missing.lance"),))
    check = endpoint_index.EndsCheck((gone, gone))
    check.probe(pa.record_batch({"src": pa.array(["ann"]), "dst": pa.array(["ann"])}))
    assert check.proof() is None


def test_I15_a_worker_keeps_an_index_only_for_the_same_rows(test_graph, monkeypatch):
    """The index is built once per worker for a source and reused while its key names the same
    rows; a new version of the node table (other rows) is built anew, and an id deleted since is
    not in it (a scan of the pinned version honours its deletion files)."""
    write_rows(test_graph, "node:Person", people(*NAMES))
    built = []
    real = endpoint_index.build

    def counting(*a, **kw):
        built.append(a[0])
        return real(*a, **kw)

    monkeypatch.setattr(endpoint_index, "build", counting)
    endpoint_index._index.cache_clear()
    src = _source(test_graph)
    first = endpoint_index.index(src)
    assert endpoint_index.index(src) is first and len(built) == 1
    write_rows(test_graph, "node:Person", people("ann", age=3), mode="merge")  # ann's old row deleted
    moved = _source(test_graph)
    assert moved != src and endpoint_index.rows_key(moved) != endpoint_index.rows_key(src)
    again = endpoint_index.index(moved)
    assert again is not first and len(built) == 2 and len(again) == len(NAMES)
    assert again.absent(pa.array(["ann"])).tolist() == [False]
