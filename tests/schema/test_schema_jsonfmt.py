"""serde_json / Rust float renderings, against values produced by the engine's toolchain."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from omnigraph_spark.schema.jsonfmt import rust_debug_f64, serde_f64, to_compact, to_pretty

ROWS = [
    line.split("\t")
    for line in (Path(__file__).parent / "golden" / "floats_engine.tsv").read_text().splitlines()
    if line and not line.startswith("#")
]


def test_golden_has_rows():
    assert len(ROWS) > 400


@pytest.mark.parametrize("text,serde,debug", ROWS[:60])
def test_float_renderings_named(text, serde, debug):
    x = float(text)
    assert serde_f64(x) == serde
    assert rust_debug_f64(x) == debug


def test_float_renderings_all():
    bad = [
        (t, s, d, serde_f64(float(t)), rust_debug_f64(float(t)))
        for t, s, d in ROWS
        if serde_f64(float(t)) != s or rust_debug_f64(float(t)) != d
    ]
    assert not bad, bad[:5]


@pytest.mark.parametrize(
    "x,serde,debug",
    [
        (1e20, "1e+20", "1e20"),
        (1e-5, "0.00001", "1e-5"),
        (1e-6, "1e-6", "1e-6"),
        (0.0001, "0.0001", "0.0001"),
        (1e16, "1e+16", "1e16"),
        (1e15, "1000000000000000.0", "1000000000000000.0"),
        (-0.0, "-0.0", "-0.0"),
        (100.0, "100.0", "100.0"),
        (-40.0, "-40.0", "-40.0"),
        (1.5e-7, "1.5e-7", "1.5e-7"),
        (1.2345678901234568e17, "1.2345678901234568e+17", "1.2345678901234568e17"),
        # an exact tie between two shortest candidates: zmij/Python round to even, Rust up
        (858133775060218.25, "858133775060218.2", "858133775060218.3"),
    ],
)
def test_float_known_values(x, serde, debug):
    assert serde_f64(x) == serde
    assert rust_debug_f64(x) == debug


def test_non_finite():
    assert serde_f64(math.inf) == "null" and serde_f64(math.nan) == "null"
    assert rust_debug_f64(math.inf) == "inf" and rust_debug_f64(-math.inf) == "-inf"
    assert rust_debug_f64(math.nan) == "NaN"


def test_string_escapes_match_serde():
    s = 'q"b\\s\n\r\t\b\f\x01\x1f\x7f é €😀'
    assert to_compact(s) == '"q\\"b\\\\s\\n\\r\\t\\b\\f\\u0001\\u001f\x7f é €😀"'
    assert json.loads(to_compact(s)) == s


def test_pretty_and_compact_layout():
    v = {"a": [], "b": {}, "c": [1, {"d": None, "e": True}], "f": "x"}
    assert to_compact(v) == '{"a":[],"b":{},"c":[1,{"d":null,"e":true}],"f":"x"}'
    assert to_pretty(v) == (
        '{\n  "a": [],\n  "b": {},\n  "c": [\n    1,\n    {\n      "d": null,\n'
        '      "e": true\n    }\n  ],\n  "f": "x"\n}'
    )
    assert to_pretty(v) == json.dumps(v, indent=2, ensure_ascii=False)


def test_unsupported_type():
    with pytest.raises(TypeError):
        to_compact({"a": object()})
