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


# -- the edge tasks' bucket counts (I15's @card bound) -------------------------------------------


def _sketch(tmp_path, name, counts):
    """A task's bucket-count file as jvm-shim ``EndpointCheck.sketch`` writes it: 16-bit counts,
    four to a little-endian 64-bit word."""
    p = tmp_path / f"{name}.bin"
    np.asarray(counts, dtype="<u2").view("<u8").tofile(p)
    return str(p)


def _proof(bound, sketches=(), unsketched=None):
    from omnigraph_spark.store.writes import EndsProof, IdSource

    ids = IdSource(None, ())
    return EndsProof(ids, ids, 0, bound, src_sketches=tuple(sketches), unsketched_bound=unsketched)


def test_I15_the_tasks_bucket_counts_add_up_bucket_by_bucket(tmp_path):
    """Three tasks whose fullest buckets are different buckets: their bounds sum to 9, while no
    bucket holds more than 4 in all; a fourth task without a file adds its own bound (1): 5."""
    from omnigraph_spark.store.writes import StagedTable, proven_src_bound

    a, b, c = (np.zeros(8, dtype=np.int64) for _ in range(3))
    a[1], b[2], c[3] = 3, 3, 3
    a[5] = b[5] = 2
    files = [_sketch(tmp_path, n, x) for n, x in (("a", a), ("b", b), ("c", c))]
    assert side_files.summed_counts_max(files) == 4  # bucket 5: 2 + 2
    tasks = [_proof(3, [f], 0) for f in files] + [_proof(1)]
    staged = [StagedTable("edge:E", "append", "", 0, (), 1, 0, ends=p) for p in tasks]
    merged = StagedTable.merge(staged).ends
    assert (merged.src_bound, merged.unsketched_bound, merged.src_sketches) == (10, 1, tuple(files))
    assert proven_src_bound(merged) == 5  # 4 + the fourth task's 1, never the plain sum (10)
    assert proven_src_bound(_proof(3)) == 3  # no file: the tasks' bound as it is
    assert proven_src_bound(_proof(2, files, 0)) == 2  # never above the plain sum


def test_a_saturated_or_foreign_count_falls_back_to_the_tasks_bounds(tmp_path):
    """A count of 65,535 may stand for more, and files of different lengths are not buckets of
    one hash: both leave the plain sum of the tasks' bounds."""
    from omnigraph_spark.store.writes import proven_src_bound

    full = _sketch(tmp_path, "full", [0xFFFF, 0, 0, 0])
    small = _sketch(tmp_path, "small", [1, 0, 0, 0])
    longer = _sketch(tmp_path, "longer", [1] * 8)
    assert side_files.summed_counts_max([small, full]) is None
    assert side_files.summed_counts_max([small, longer]) is None
    assert proven_src_bound(_proof(70_000, [small, full], 0)) == 70_000
    assert side_files.summed_counts_max([]) == 0
