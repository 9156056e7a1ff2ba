"""benchmarks/delete_bench.py's harness: which run deletes which keys."""

from __future__ import annotations

import time

import pytest

from benchmarks.delete_bench import _status_kb, _timed_lease, plan


@pytest.mark.parametrize("nodes,deletes,repeats", [(1_000_000, 1000, 2), (5000, 1000, 2), (30, 3, 3)])
def test_runs_alternate_and_delete_disjoint_ranges(nodes, deletes, repeats):
    runs = plan(nodes, deletes, repeats)
    names = [n for n, _ in runs]
    assert names.count("memory") == names.count("spark") == repeats
    assert all(names[i] != names[i + 1] for i in range(0, len(names), 2))  # each pair runs both
    ranges = sorted((first, first + deletes) for _, first in runs)
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))
    assert ranges[0][0] > 0 and ranges[-1][1] <= nodes


def test_too_few_nodes_for_disjoint_ranges():
    with pytest.raises(ValueError, match="disjoint"):
        plan(4000, 1000, 2)


def test_status_kb_reads_this_process():
    st = _status_kb()
    assert st["VmHWM"] >= st["VmRSS"] > 0


def test_timed_lease_records_each_hold(tmp_path, monkeypatch):
    """``lease_s``: every commit lease this process takes is timed from taking to release."""
    from omnigraph_spark.store import lease
    from omnigraph_spark.store.fs import RootStorage

    monkeypatch.setattr(lease, "hold", lease.hold)  # restored after the test
    held = []
    _timed_lease(held)
    st = RootStorage(str(tmp_path))
    for pause in (0.05, 0.0):
        with lease.hold(st, str(tmp_path), timeout_s=5):
            time.sleep(pause)
    assert len(held) == 2 and held[0] >= 0.05 and held[1] < held[0]
