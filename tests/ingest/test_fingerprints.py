"""Key fingerprints computed by Python staging tasks (invariant I15): the same 64 bits the JVM
tasks compute (``NodeIdIndex.hash`` for a string's UTF-8 bytes, the value itself for an
integer), so a table's fingerprints mean the same whichever path staged it. The vectors below
are spec/key_hashes.json, which jvm-shim's KeyHashesTest checks against ``NodeIdIndex.hash``
(tests/spark/test_staged_checks.py also compares against the JVM tasks' own files)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from omnigraph_spark.ingest.fingerprints import fingerprint_column, fingerprints, sorted_fingerprints
from omnigraph_spark.schema import compile_schema

#: (value, NodeIdIndex.hash of its UTF-8 bytes): lengths 0-38 around the 8-byte word boundaries,
#: multi-byte UTF-8, a NUL; the golden file the JVM's KeyHashesTest reads too
JAVA_VECTORS = [
    (c["value"], int(c["hash"], 16))
    for c in json.loads((Path(__file__).resolve().parents[2] / "spec" / "key_hashes.json").read_text(encoding="utf-8"))[
        "strings"
    ]
]


def _hex(a: np.ndarray):
    return [int(x) for x in a]


def test_string_fingerprints_are_the_jvm_hash():
    values = [v for v, _ in JAVA_VECTORS]
    expected = [h for _, h in JAVA_VECTORS]
    assert _hex(fingerprints(pa.array(values))) == expected
    for v, h in JAVA_VECTORS:  # alone: every value is the longest (no other value's words mixed in)
        assert _hex(fingerprints(pa.array([v]))) == [h]
    assert _hex(fingerprints(pa.array(values, pa.large_string()))) == expected


def test_a_slice_and_nulls_fingerprint_only_the_values():
    values = [v for v, _ in JAVA_VECTORS]
    expected = [h for _, h in JAVA_VECTORS]
    arr = pa.array(["before"] + values[:6] + [None] + values[6:] + ["after"])
    assert _hex(fingerprints(arr.slice(1, len(values) + 1))) == expected
    chunked = pa.chunked_array([pa.array(values[:5]), pa.array([None, *values[5:]])])
    assert _hex(fingerprints(chunked)) == expected
    assert len(fingerprints(pa.array([], pa.string()))) == 0
    assert len(fingerprints(pa.array([None, None], pa.string()))) == 0


def test_integers_fingerprint_as_themselves():
    got = fingerprints(pa.array([5, -1, None, 0, 2**40], pa.int64()))
    assert got.dtype == np.uint64
    assert _hex(got) == [5, 2**64 - 1, 0, 2**40]
    assert _hex(fingerprints(pa.array([-2, 7], pa.int32()))) == [2**64 - 2, 7]  # sign-extended, as Java's long


def test_sorted_is_unsigned_ascending_and_equal_values_collide():
    values = [f"key-{i}" * (i % 5 + 1) for i in range(5_000)]  # 5 to 50 bytes
    keys = pa.array(values + [values[7]])
    out = sorted_fingerprints(keys)
    assert bool((out[1:] >= out[:-1]).all())
    assert len(np.unique(out)) == 5_000  # the repeated value's two fingerprints are equal, no other pair is
    assert bool((out >= np.uint64(1 << 63)).any())  # spread over the whole unsigned range


def test_fingerprint_column_is_a_node_types_only_single_column_rule():
    cat = compile_schema("""
node Person { name: String @key }
node Num { n: I64 @key }
node Two { a: String @key  b: String @unique }
node Flt { x: F64 @key }
edge Knows: Person -> Person
""").catalog()

    def col(name):
        td = cat.resolve(name)
        return fingerprint_column(td, td.arrow_schema())

    assert col("Person") == "name" and col("Num") == "n"
    assert col("Two") is None and col("Flt") is None and col("Knows") is None


def test_unknown_types_are_refused():
    with pytest.raises(TypeError):
        fingerprints(pa.array([1.5]))
