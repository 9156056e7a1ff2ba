"""Bulk ULID minting (convert.fresh_ids): same text as python-ulid, unique, current time, and
monotonic (one random start per call, + 1 per id)."""

import os
import time

import numpy as np
from ulid import ULID

from omnigraph_spark.ingest.convert import encode_ulids, fill_missing_ids, fresh_ids


def test_encode_matches_python_ulid_bit_for_bit():
    raw = np.frombuffer(os.urandom(16 * 500), np.uint8).reshape(500, 16).copy()
    raw[0] = 0
    raw[1] = 255
    got = encode_ulids(raw).to_pylist()
    assert got == [str(ULID.from_bytes(bytes(r))) for r in raw]


def test_fresh_ids_are_unique_valid_and_now():
    before = time.time()
    ids = fresh_ids(20_000).to_pylist()
    after = time.time()
    assert len(set(ids)) == len(ids) == 20_000
    for s in ids[:100]:
        u = ULID.from_str(s)
        assert str(u) == s and len(s) == 26
        assert before - 0.002 <= u.timestamp <= after + 0.002
    assert fresh_ids(0).to_pylist() == []


def test_fill_missing_ids_keeps_given_ones():
    import pyarrow as pa

    out = fill_missing_ids(pa.array(["a", None, "c", None])).to_pylist()
    assert out[0] == "a" and out[2] == "c"
    assert all(len(x) == 26 for x in (out[1], out[3])) and out[1] != out[3]


def test_fresh_ids_count_up_from_one_random_start():
    a = [int(ULID.from_str(s)) for s in fresh_ids(5_000).to_pylist()]
    b = [int(ULID.from_str(s)) for s in fresh_ids(5_000).to_pylist()]
    assert all(y == x + 1 for x, y in zip(a, a[1:])) and all(y == x + 1 for x, y in zip(b, b[1:]))
    assert a[0] & (1 << 79) == 0 and a[0] != b[0]  # a random start each call, top bit clear


def test_fresh_ids_carry_into_the_top_random_bits_never_into_the_time(monkeypatch):
    import omnigraph_spark.ingest.convert as convert

    monkeypatch.setattr(convert.os, "urandom", lambda k: b"\xff" * k)  # the largest start
    values = [int(ULID.from_str(s)) for s in fresh_ids(3).to_pylist()]
    mask = (1 << 80) - 1
    assert [v & mask for v in values] == [(1 << 79) - 1, 1 << 79, (1 << 79) + 1]
    assert len({v >> 80 for v in values}) == 1  # one millisecond for all three
