"""Fixture schemas compile and their catalogs have the engine's tables and column order."""

from __future__ import annotations

import pyarrow as pa
import pytest

from omnigraph_spark.schema import compile_schema

F32_4 = pa.list_(pa.field("item", pa.float32(), True), 4)

EXPECTED = {
    "test": {
        "node:Company": [("id", pa.string(), False), ("name", pa.string(), False)],
        "node:Person": [("id", pa.string(), False), ("age", pa.int32(), True), ("name", pa.string(), False)],
        "edge:Knows": [
            ("id", pa.string(), False),
            ("src", pa.string(), False),
            ("dst", pa.string(), False),
            ("since", pa.date32(), True),
        ],
        "edge:WorksAt": [("id", pa.string(), False), ("src", pa.string(), False), ("dst", pa.string(), False)],
    },
    "search": {
        "node:Doc": [
            ("id", pa.string(), False),
            ("body", pa.string(), False),
            ("embedding", F32_4, False),
            ("slug", pa.string(), False),
            ("title", pa.string(), False),
        ],
    },
    "signals": {
        "node:Company": ["id", "name", "sector", "slug"],
        "node:Pattern": ["id", "category", "name", "slug"],
        "node:Signal": ["id", "observed", "slug", "source", "strength", "title"],
        "node:Tech": ["id", "kind", "name", "slug", "tier"],
        "edge:Builds": ["id", "src", "dst"],
        "edge:FundedBy": ["id", "src", "dst", "amount"],
        "edge:Indicates": ["id", "src", "dst"],
        "edge:Involves": ["id", "src", "dst"],
        "edge:Mentions": ["id", "src", "dst"],
        "edge:PartnersWith": ["id", "src", "dst"],
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_tables_and_columns(fixtures_dir, name):
    cat = compile_schema((fixtures_dir / f"{name}.pg").read_text()).catalog()
    expected = EXPECTED[name]
    nodes = sorted(k for k in expected if k.startswith("node:"))
    edges = sorted(k for k in expected if k.startswith("edge:"))
    assert cat.table_keys() == nodes + edges
    for key, cols in expected.items():
        schema = cat.resolve(key).arrow_schema()
        if cols and isinstance(cols[0], tuple):
            assert [(f.name, f.type, f.nullable) for f in schema] == cols, key
        else:
            assert schema.names == cols, key


def test_signals_details(fixtures_dir):
    cat = compile_schema((fixtures_dir / "signals.pg").read_text()).catalog()
    signal = cat.resolve("Signal")
    assert signal.key_property == "slug"
    assert signal.prop("strength").type.enum_values == ("moderate", "strong", "weak")
    assert signal.prop("observed").type.nullable
    assert cat.resolve("edge:FundedBy").from_type == "Company"
    assert cat.lookup_edge("fundedby").name == "FundedBy"
    assert cat.resolve("edge:FundedBy").cardinality.max is None


def test_search_key_and_indexes(fixtures_dir):
    doc = compile_schema((fixtures_dir / "search.pg").read_text()).catalog().resolve("node:Doc")
    assert doc.key_property == "slug"
    assert doc.keys == (("slug",),)
    assert doc.indexes == (("body",), ("title",))
    assert doc.prop("embedding").type.vector_dim == 4


def test_composite_key_uses_sorted_first_column():
    cat = compile_schema("node P {\n  b: String\n  a: String\n  @key(b, a)\n}").catalog()
    assert cat.resolve("P").key_property == "a"


def test_embed_and_implements_reach_the_catalog():
    src = (
        "interface Named { name: String }\n"
        "node Doc implements Named {\n  body: String\n"
        '  v: Vector(3) @embed("body", model="m1")\n  w: Vector(3) @embed(name)\n}'
    )
    doc = compile_schema(src).catalog().resolve("Doc")
    assert (doc.prop("v").embed_source, doc.prop("v").embed_model) == ("body", "m1")
    assert (doc.prop("w").embed_source, doc.prop("w").embed_model) == ("name", None)
    assert doc.prop("body").embed_source is None
    assert doc.implements == ("Named",)
    assert [f.name for f in doc.arrow_schema()] == ["id", "body", "name", "v", "w"]


def test_all_scalar_types_map_to_arrow():
    src = (
        "node T {\n  s: String\n  b: Blob?\n  o: Bool\n  i: I32\n  l: I64\n  u: U32\n  v: U64\n"
        "  f: F32\n  d: F64\n  dt: DateTime\n  da: Date\n  ls: [I64]?\n  e: enum(x)\n}"
    )
    schema = compile_schema(src).catalog().resolve("T").arrow_schema()
    got = {f.name: f.type for f in schema}
    assert got["o"] == pa.bool_() and got["i"] == pa.int32() and got["l"] == pa.int64()
    assert got["u"] == pa.uint32() and got["v"] == pa.uint64()
    assert got["f"] == pa.float32() and got["d"] == pa.float64()
    assert got["dt"] == pa.date64() and got["da"] == pa.date32()
    assert got["ls"] == pa.list_(pa.field("item", pa.int64(), True))
    assert got["e"] == pa.string() and got["b"] == pa.large_binary()
    assert schema.field("ls").nullable and not schema.field("e").nullable
