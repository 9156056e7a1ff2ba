"""Deletion vectors read from Lance deletion files (store/deletion_files.py), and the change feed's
planning from them (I25): both file kinds, branches, fragments that gain deletions and
fragments deleted wholly."""

from __future__ import annotations

import struct

import lance
import numpy as np
import pyarrow as pa
import pytest

from omnigraph_spark.errors import CorruptGraphError
from omnigraph_spark.ingest.integrity import delete_keys
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import changes, deletion_files, writes

from .helpers import write_rows

P = "node:Person"


def _scanned(ds: lance.LanceDataset, fid: int) -> list[int]:
    """The deleted offsets by the slow road: every physical offset whose row address is gone."""
    return deletion_files._from_row_addresses(ds, fid).tolist()


def _dataset(tmp_path, n: int = 20_000) -> lance.LanceDataset:
    t = pa.table({"id": [str(i) for i in range(n)], "x": list(range(n))})
    return lance.write_dataset(t, str(tmp_path / "ds"), max_rows_per_file=n // 2)


def test_array_and_bitmap_files_decode_to_the_deleted_offsets(tmp_path):
    ds = _dataset(tmp_path)
    ds.delete("x < 10 or x = 9999")  # few: Lance writes the arrow form
    ds.delete("x >= 10000 and x < 17000 and x % 7 <> 3")  # many: the bitmap form
    ds = lance.dataset(ds.uri)
    kinds = {f.fragment_id: f.metadata.deletion_file.file_type for f in ds.get_fragments()}
    assert kinds == {0: "array", 1: "bitmap"}
    assert deletion_files.deleted_offsets(ds, ds.uri, 0).tolist() == [*range(10), 9999]
    assert deletion_files.deleted_offsets(ds, ds.uri, 1).tolist() == [i for i in range(7000) if (10_000 + i) % 7 != 3]
    for fid in (0, 1):
        assert deletion_files.deleted_offsets(ds, ds.uri, fid).tolist() == _scanned(ds, fid)


def test_branch_files_and_inherited_files(tmp_path):
    """A branch writes its deletion files under tree/<branch>; a file it inherits names the
    parent's base."""
    ds = _dataset(tmp_path)
    ds.delete("x >= 10000 and x < 16000")
    ds.create_branch("b1", ds.version)
    br = lance.dataset(ds.uri).checkout_version(("b1", None))
    br.delete("x < 5")
    br = lance.dataset(ds.uri).checkout_version(("b1", None))
    loc = deletion_files.branch_location(ds.uri, "b1")
    assert br.get_fragment(1).metadata.deletion_file.base_id is not None
    assert deletion_files.deleted_offsets(br, loc, 0).tolist() == [0, 1, 2, 3, 4] == _scanned(br, 0)
    assert deletion_files.deleted_offsets(br, loc, 1).tolist() == list(range(6000)) == _scanned(br, 1)
    assert deletion_files.deleted_offsets(br, loc, 1).dtype == np.uint32


def _roaring(containers: list[tuple[int, str, list[int]]], runs_cookie: bool) -> bytes:
    """A portable roaring serialisation built by hand from (key, kind, low values)."""
    n = len(containers)
    out = bytearray()
    if runs_cookie:
        out += struct.pack("<I", 12347 | ((n - 1) << 16))
        flags = 0
        for i, (_, kind, _) in enumerate(containers):
            flags |= (kind == "run") << i
        out += flags.to_bytes((n + 7) // 8, "little")
    else:
        out += struct.pack("<II", 12346, n)
    for key, _, lows in containers:
        out += struct.pack("<HH", key, len(lows) - 1)
    if not runs_cookie or n >= 4:
        out += b"\0" * (4 * n)  # offsets: unused by a sequential reader
    for _, kind, lows in containers:
        if kind == "run":
            runs: list[tuple[int, int]] = []
            for v in lows:
                if runs and runs[-1][0] + runs[-1][1] + 1 == v:
                    runs[-1] = (runs[-1][0], runs[-1][1] + 1)
                else:
                    runs.append((v, 0))
            out += struct.pack("<H", len(runs)) + b"".join(struct.pack("<HH", s, ln) for s, ln in runs)
        elif kind == "array":
            out += b"".join(struct.pack("<H", v) for v in lows)
        else:
            words = np.zeros(8192, np.uint8)
            for v in lows:
                words[v // 8] |= 1 << (v % 8)
            out += words.tobytes()
    return bytes(out)


@pytest.mark.parametrize("runs_cookie", [False, True])
def test_decode_roaring_containers(runs_cookie):
    dense = list(range(0, 60_000, 3))  # > 4096 values: a bitmap container
    conts = [(0, "array", [1, 5, 65535]), (1, "bitmap", dense), (7, "array", [0])]
    if runs_cookie:
        conts += [(9, "run", [*range(100, 200), *range(300, 301)]), (10, "run", list(range(65536)))]
    want = [(k << 16) | v for k, _, lows in conts for v in lows]
    assert deletion_files.decode_roaring(_roaring(conts, runs_cookie)).tolist() == want


def test_decode_roaring_refuses_bad_bytes():
    good = _roaring([(0, "array", [1, 2, 3])], False)
    for bad in (b"", b"\x00\x00\x00\x00", good[:-1], struct.pack("<II", 12346, 1) + struct.pack("<HH", 0, 0)):
        with pytest.raises(CorruptGraphError) as e:
            deletion_files.decode_roaring(bad)
        assert e.value.code == "GRAPH_CORRUPT"
    unsorted = struct.pack("<IIHHHH", 12346, 2, 1, 0, 0, 0) + b"\0" * 8 + struct.pack("<HH", 1, 1)
    with pytest.raises(CorruptGraphError):
        deletion_files.decode_roaring(unsorted)


def _names(n: int, start: int = 0) -> list[dict]:
    return [{"id": f"p{i:05d}", "age": i, "name": f"p{i:05d}"} for i in range(start, start + n)]


def _feed(g, version: int) -> list[tuple[str, str, int]]:
    t = changes.changes_table(g.root, P, changes.FeedRange("main", version, version))
    return sorted((r["id"], r[changes.CHANGE_TYPE], r["age"]) for r in t.to_pylist()) if t else []


def _delete(g, names: list[str]) -> None:
    target = writes.prepare_target(g, "main", P, "delete")
    keys = delete_keys(g.catalog.by_table_key(P), pa.table({"name": names}))
    staged = writes.StagedTable(P, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys)
    writes.commit_load(g, "main", [staged], validate=make_validator(g))


def _deletion_kinds(g) -> dict[int, str | None]:
    """fragment id -> its deletion file's kind (None: no deletions) at the head."""
    t = g.snapshot().table(P)
    ds = lance.dataset(t.base_path, version=t.version)
    return {f.fragment_id: f.metadata.deletion_file and f.metadata.deletion_file.file_type for f in ds.get_fragments()}


def test_I25_feed_plans_deletes_from_deletion_files(test_graph, monkeypatch):
    """Deletes in a fragment found from its deletion files (array and bitmap), a fragment deleted
    wholly (Lance drops it), and a merge's preimages among earlier deletions; the planning never
    scans row addresses."""
    g = test_graph

    def no_scan(*a, **k):
        raise AssertionError("planning scanned row addresses")

    monkeypatch.setattr(deletion_files, "_from_row_addresses", no_scan)
    write_rows(g, P, _names(12_000))
    write_rows(g, P, _names(100, start=20_000))
    few = [f"p{i:05d}" for i in (3, 7, 11_999)]
    _delete(g, few)
    v = g.snapshot().version
    assert _deletion_kinds(g) == {0: "array", 1: None}
    assert _feed(g, v) == [(n, "delete", int(n[1:])) for n in few]

    many = [f"p{i:05d}" for i in range(1000, 7000)]  # with the earlier three: a bitmap file
    gone = [f"p{i:05d}" for i in range(20_000, 20_100)]  # the whole second fragment
    _delete(g, many + gone)
    v = g.snapshot().version
    assert _deletion_kinds(g) == {0: "bitmap"}  # fragment 1 dropped
    assert _feed(g, v) == sorted((n, "delete", int(n[1:])) for n in many + gone)

    merged = [{"id": f"p{i:05d}", "age": -i, "name": f"p{i:05d}"} for i in (0, 8, 999, 7000, 11_998)]
    write_rows(g, P, merged, mode="merge")
    v = g.snapshot().version
    want = [(r["id"], "update_preimage", -r["age"]) for r in merged]
    want += [(r["id"], "update_postimage", r["age"]) for r in merged]
    assert _feed(g, v) == sorted(want)


def test_newly_deleted_positions_take_exactly_the_deleted_rows(tmp_path):
    """The offsets a version deleted, as positions among the fragment's live rows at the old
    version: a take there returns exactly the rows the new version lost. Rows live again (the
    endpoints reversed) give None: the caller compares rows."""
    ds = _dataset(tmp_path)
    ds.delete("x % 3 = 0 and x < 10000")  # v2: 3,334 rows of fragment 0 (an array file)
    ds.delete("(x % 5 in (1, 2) and x < 10000) or x = 9998")  # v3: 2,668 more (a bitmap file)
    kinds = [lance.dataset(ds.uri, version=v).get_fragment(0).metadata.deletion_file.file_type for v in (2, 3)]
    assert kinds == ["array", "bitmap"]
    lin = changes._Lineage(ds.uri, None)
    v2, v3 = changes.Pin(ds.uri, None, 2), changes.Pin(ds.uri, None, 3)
    pos = changes._newly_deleted(lin, v2, v3, 0)
    assert pos is not None
    gone = lance.dataset(ds.uri, version=2).get_fragment(0).take(pos.tolist(), columns=["x"]).column("x").to_pylist()
    assert gone == [x for x in range(10_000) if x % 3 != 0 and (x % 5 in (1, 2) or x == 9998)]
    assert changes._newly_deleted(lin, v3, v2, 0) is None
