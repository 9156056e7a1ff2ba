"""benchmarks/delete_bench.py's harness: which run deletes which keys."""
from __future__ import annotations

import pytest

from benchmarks.delete_bench import _status_kb, plan


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
