"""The staging tasks' key fingerprints, proven distinct on the driver in bounded memory
(invariant I15's proof; the window keeps the driver's memory bounded by it, not by the load's
rows)."""
from __future__ import annotations

import numpy as np
import pytest

from omnigraph_spark.store import side_files


def _parts(tmp_path, arrays):
    out = []
    for i, a in enumerate(arrays):
        p = tmp_path / f"task-{i}.bin"
        np.sort(np.asarray(a, dtype="<u8")).tofile(p)
        out.append(str(p))
    return out


@pytest.fixture
def gathered(monkeypatch):
    """The sizes of the slices the proof gathers at once."""
    sizes = []
    real = np.concatenate

    def spy(arrays, *a, **kw):
        out = real(arrays, *a, **kw)
        sizes.append(len(out))
        return out

    monkeypatch.setattr(side_files.np, "concatenate", spy)
    return sizes


def test_distinct_hashes_across_tasks_in_a_small_window(tmp_path, gathered):
    rng = np.random.default_rng(7)
    values = np.unique(rng.integers(0, 2**64 - 1, 40_000, dtype=np.uint64, endpoint=True))
    parts = _parts(tmp_path, np.array_split(rng.permutation(values), 5))
    assert side_files.fingerprints_distinct(parts, window_bytes=8 * 4_000)
    # the sample plus about ten ranges of ~4,000 values each, never the whole load at once
    assert max(gathered[1:]) < 2 * 4_000 and len(gathered) > 10


@pytest.mark.parametrize("window", [8 * 1_000, 64 << 20])
def test_a_value_in_two_tasks_is_found_in_any_window(tmp_path, window):
    rng = np.random.default_rng(3)
    values = np.unique(rng.integers(0, 2**64 - 1, 20_000, dtype=np.uint64, endpoint=True))
    a, b, c = np.array_split(values, 3)
    b = np.append(b, a[len(a) // 2])  # one repeat, far apart in load order
    assert not side_files.fingerprints_distinct(_parts(tmp_path, [a, b, c]), window_bytes=window)


def test_skewed_integer_keys_are_cut_by_quantiles(tmp_path, gathered):
    """Integer keys fingerprint as themselves: all in the bottom of the value space. The ranges
    follow the data, so each stays small, and a repeat within one task is found too."""
    ints = np.arange(30_000, dtype=np.uint64)
    parts = _parts(tmp_path, [ints[0::2], ints[1::2]])
    assert side_files.fingerprints_distinct(parts, window_bytes=8 * 3_000)
    assert max(gathered[1:]) < 2 * 3_000
    dup = _parts(tmp_path, [np.append(ints[0::2], 10_000), ints[1::2][:0]])
    assert not side_files.fingerprints_distinct(dup, window_bytes=8 * 3_000)


def test_empty_and_single_parts(tmp_path):
    assert side_files.fingerprints_distinct([])
    assert side_files.fingerprints_distinct(_parts(tmp_path, [[], [5], []]))
    assert not side_files.fingerprints_distinct(_parts(tmp_path, [[5], [], [5]]), window_bytes=8)
