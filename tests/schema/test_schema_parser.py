"""Parser behaviour, including the engine grammar's PEG quirks (all verified against the engine)."""

from __future__ import annotations

import pytest

from omnigraph_spark.errors import SchemaError
from omnigraph_spark.schema import compile_schema, parse_schema
from omnigraph_spark.schema.ast import (
    Bound,
    CheckConstraint,
    EdgeDecl,
    KeyConstraint,
    NodeDecl,
    RangeConstraint,
    UniqueConstraint,
)


def node(src: str, i: int = 0) -> NodeDecl:
    d = parse_schema(src).declarations[i]
    assert isinstance(d, NodeDecl)
    return d


def test_empty_and_comment_only_schemas():
    for src in ("", "// c", "/* a */ /* b */\n"):
        ir = compile_schema(src).ir
        assert ir == {"ir_version": 1, "interfaces": [], "nodes": [], "edges": []}


def test_keywords_need_no_separator_and_idents_may_be_keywords():
    n = node("nodeP{enum: String node: I32 edge: Bool true: F32 a: Stringb: I64}")
    assert n.name == "P"
    assert [p.name for p in n.properties] == ["enum", "node", "edge", "true", "a", "b"]
    assert n.properties[4].prop_type.scalar == "String"


def test_constraint_with_blanks_and_comments_after_at():
    n = node("node P {\n  name: String @ key /* c */ (name)\n}")
    assert n.properties[0].annotations == ()
    assert n.constraints == (KeyConstraint(("name",)),)


def test_property_annotation_key_desugars_and_stays():
    n = node('node P { name: String @key @unique @index @description("d") }')
    assert [a.name for a in n.properties[0].annotations] == ["key", "unique", "index", "description"]
    assert [c.kind for c in n.constraints] == ["Key", "Unique", "Index"]


def test_range_bounds():
    n = node(
        "node P { a: F64\n @range(a, -40.0..60) @range(a, 1..) @range(a, ..7)"
        " @range(a, 99999999999999999999..1) @range(a, -0..-0.0) }"
    )
    r = [c for c in n.constraints if isinstance(c, RangeConstraint)]
    assert (r[0].min, r[0].max) == (Bound("Float", -40.0), Bound("Integer", 60))
    assert (r[1].min, r[1].max) == (Bound("Integer", 1), None)
    assert (r[2].min, r[2].max) == (Bound("Integer", 7), None)  # engine quirk: `..7` -> min
    assert r[3].min == Bound("Float", 1e20)  # overflowing i64 -> f64
    assert r[4].min == Bound("Integer", 0) and str(r[4].max.value) == "-0.0"


def test_extra_range_and_check_arguments_are_ignored():
    n = node('node P { a: I32\n s: String\n @range(a, 0..1, zz) @check(s, "x", "y") }')
    assert n.constraints[1] == CheckConstraint("s", "x")


def test_string_escapes_decoded():
    n = node('node P @description("a\\n\\"b\\"\\t\\\\c") { a: String }')
    assert n.annotations[0].value == 'a\n"b"\t\\c'


def test_non_string_annotation_args_keep_raw_text():
    n = node("node P @a(ident) @b(1.50) @c(7) @d(true) { a: String }")
    assert [a.value for a in n.annotations] == ["ident", "1.50", "7", "true"]


def test_kwargs_last_wins_and_sorted():
    n = node('node P @a("v", z="1", b="2", z="3") { x: String }')
    assert n.annotations[0].kwargs == (("b", "2"), ("z", "3"))


def test_card_forms():
    s = parse_schema(
        "node P {}\nedge A: P -> P @card(0..1)\nedge B: P -> P @card (3..)\n"
        "edge C: P -> P @card(x)\nedge D: P -> P @card"
    )
    a, b, c, d = s.declarations[1:]
    assert isinstance(a, EdgeDecl)
    assert (a.cardinality.min, a.cardinality.max) == (0, 1)
    assert (b.cardinality.min, b.cardinality.max) == (3, None)
    assert c.cardinality.max is None and c.annotations[0].name == "card" and c.annotations[0].value == "x"
    assert d.annotations[0].name == "card" and d.annotations[0].value is None


def test_edge_unique_on_src_dst():
    e = parse_schema("node P {}\nedge E: P -> P { @unique(src, dst) }").declarations[1]
    assert e.constraints == (UniqueConstraint(("src", "dst")),)


def test_interface_injection_and_conflict_free_redeclaration():
    s = parse_schema("interface I { a: String @key b: I32? }\nnode P implements I { b: I32? c: Bool }")
    p = s.declarations[1]
    assert [x.name for x in p.properties] == ["b", "c", "a"]
    assert p.constraints == (KeyConstraint(("a",)),)


def test_later_interface_with_same_name_wins_for_resolution():
    # resolution uses the last declaration; the duplicate then fails as a type id collision
    with pytest.raises(SchemaError) as ei:
        compile_schema("interface I { a: String }\ninterface I { b: I32 }\nnode P implements I {}")
    assert ei.value.context["rule"] == "type_id_collision"


def test_same_name_node_and_edge_and_interface_allowed():
    ir = compile_schema("interface P { x: I32 }\nnode P { x: I32 }\nedge P: P -> P").ir
    assert [n["name"] for n in ir["nodes"]] == ["P"] and [e["name"] for e in ir["edges"]] == ["P"]
    assert ir["interfaces"][0]["type_id"] != ir["nodes"][0]["type_id"] != ir["edges"][0]["type_id"]


def test_interface_annotations_unchecked_unless_injected():
    compile_schema('interface I { a: String @instruction("x") }')  # the engine accepts it
    with pytest.raises(SchemaError):
        compile_schema('interface I { a: String @instruction("x") }\nnode P implements I {}')


def test_positions_are_one_based():
    n = node("\n\n  node   Person {\n\tage: I32 @unique\n}")
    assert (n.pos.line, n.pos.column) == (3, 10)
    assert (n.properties[0].pos.line, n.properties[0].pos.column) == (4, 2)
    assert (n.properties[0].annotations[0].pos.line, n.properties[0].annotations[0].pos.column) == (4, 11)
