"""Bulk ULID minting (convert.fresh_ids): same text as python-ulid, unique, current time."""
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
