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


def _as_raw(values):
    return np.frombuffer(b"".join(v.to_bytes(16, "big") for v in values), np.uint8).reshape(len(values), 16)


def test_fresh_ids_text_is_the_encoders_across_every_carry(monkeypatch):
    """fresh_ids writes only the low characters per id and one of two high strings; whatever the
    start, batch size and carry (within the low characters, into the high ones, across the
    64-bit word), its text is the generic encoder's of the same 128-bit values."""
    import random

    import omnigraph_spark.ingest.convert as convert

    rng = random.Random(7)
    ms = 1_700_000_000_123
    monkeypatch.setattr(convert.time, "time_ns", lambda: ms * 1_000_000)
    starts = [0, 1, 31, 32**3 - 5, 32**4 - 9, 2**64 - 3, 2**79 - 40, 32**12 - 2, 32**13 - 1]
    starts += [rng.getrandbits(79) for _ in range(40)] + [(rng.getrandbits(79) >> 15 << 15) - 3 for _ in range(20)]
    for start in starts:
        for n in (1, 2, 33, 1_000, 32**3 + 9):
            if start < 0 or start + n >= 2**79:
                continue
            monkeypatch.setattr(convert.os, "urandom", lambda k, s=start: s.to_bytes(k, "big"))
            values = [(ms << 80) + start + i for i in range(n)]
            assert fresh_ids(n).to_pylist() == encode_ulids(_as_raw(values)).to_pylist(), (start, n)


def test_fill_missing_ids_mints_every_id_of_an_all_null_column():
    import pyarrow as pa

    for t in (pa.string(), pa.large_string()):
        out = fill_missing_ids(pa.nulls(1_000, t))
        assert out.type == t and out.null_count == 0
        values = [int(ULID.from_str(s)) for s in out.to_pylist()]
        assert all(y == x + 1 for x, y in zip(values, values[1:]))
