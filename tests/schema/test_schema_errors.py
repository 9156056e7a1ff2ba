"""One failing schema per validation rule: error class, code, rule id, line, and the names the
message must mention. Every source here is also rejected by the engine (checked against the
engine's compiler when the cases were written; see golden/engine_cases.jsonl)."""

from __future__ import annotations

import pickle

import pytest

from omnigraph_spark.errors import SchemaError, SchemaSyntaxError
from omnigraph_spark.schema import compile_schema

N = "node P {\n    name: String @key\n}\n"  # a valid node to hang edges on (lines 1-3)

# (rule, source, line, column-or-None, words the message must contain)
SEMANTIC = [
    # --- checks made while building the AST
    ("card_min_max", N + "edge E: P -> P @card(2..1)\n", 4, 16, ["min (2)", "max (1)"]),
    ("card_range", N + "edge E: P -> P @card(4294967296..)\n", 4, 16, ["4294967296"]),
    ("constraint_args", 'node P {\n  a: String\n  @key("a")\n}', 3, 8, ["@key", "property name"]),
    ("constraint_args", "node P {\n  a: I32\n  @range(a)\n}", 3, 3, ["@range"]),
    ("constraint_args", "node P {\n  a: I32\n  @range(a, 5)\n}", 3, 13, ["range bounds", "'a'"]),
    ("constraint_args", "node P {\n  a: String\n  @check(a, x)\n}", 3, 13, ["string", "'a'"]),
    ("constraint_args", "node P {\n  a: String\n  @check(a)\n}", 3, 3, ["@check"]),
    ("list_of_blob", "node P {\n  b: [Blob]\n}", 2, 6, ["list of Blob"]),
    ("vector_dim", "node P {\n  v: Vector(0)\n}", 2, 6, ["greater than zero"]),
    ("vector_dim", "node P {\n  v: Vector(2147483648)\n}", 2, 6, ["exceeds maximum", "2147483647"]),
    ("vector_dim", "node P {\n  v: Vector(99999999999)\n}", 2, 6, ["Vector dimension"]),
    ("enum_duplicate", "node T {\n  s: enum(open, closed, open)\n}", 2, 6, ["duplicate", "open"]),
    # --- interface resolution
    ("unknown_interface", "node P implements Named {\n  a: I32\n}", 1, 19, ["P", "Named"]),
    (
        "interface_type_conflict",
        "interface Named {\n  name: String\n}\nnode P implements Named {\n  name: String?\n}",
        5,
        3,
        ["P", "name", "String?", "Named"],
    ),
    # --- annotation placement and arity
    ("annotation_on_type", "node P @key {\n  a: String\n}", 1, 8, ["@key", "node P"]),
    ("annotation_on_type", 'node P @embed("a") {\n  a: String\n}', 1, 8, ["@embed", "node P"]),
    ("annotation_on_type", N + "edge E: P -> P @unique\n", 4, 16, ["@unique", "edge E"]),
    (
        "annotation_duplicate",
        'node P @description("a")\n  @description("b") {\n  a: String\n}',
        2,
        3,
        ["node P", "@description"],
    ),
    ("annotation_duplicate", "node P {\n  a: String @unique @unique\n}", 2, 21, ["P.a", "@unique"]),
    ("annotation_duplicate", "node P {\n  a: String @key @key\n}", 2, 18, ["P.a", "@key"]),
    ("annotation_duplicate", "node P {\n  t: String\n  v: Vector(2) @embed(t) @embed(t)\n}", 3, 26, ["P.v", "@embed"]),
    ("annotation_value_required", "node P @instruction {\n  a: String\n}", 1, 8, ["@instruction", "node P"]),
    ("annotation_value_required", N + 'edge E: P -> P @description(" \\t ")\n', 4, 16, ["@description", "edge E"]),
    ("annotation_value_required", 'node P {\n  a: String @description("")\n}', 2, 13, ["property P.a"]),
    ("annotation_on_list", "node P {\n  tags: [String] @index\n}", 2, 18, ["@index", "list", "P.tags"]),
    ("annotation_on_vector", "node P {\n  v: Vector(3) @unique\n}", 2, 16, ["@unique", "vector", "P.v"]),
    ("annotation_on_blob", "node P {\n  b: Blob @index\n}", 2, 11, ["@index", "blob", "P.b"]),
    ("instruction_on_property", 'node P {\n  a: String @instruction("x")\n}', 2, 13, ["@instruction", "P.a"]),
    ("annotation_on_edge_property", N + "edge E: P -> P {\n  w: I32 @key\n}", 5, 10, ["@key", "E.w"]),
    (
        "annotation_on_edge_property",
        N + "edge E: P -> P {\n  s: String\n  v: Vector(2) @embed(s)\n}",
        6,
        16,
        ["@embed", "E.v"],
    ),
    ("embed_target", "node P {\n  a: String\n  b: String @embed(a)\n}", 3, 13, ["vector", "P.b"]),
    ("embed_source", "node P {\n  v: Vector(3) @embed\n}", 2, 16, ["source property", "P.v"]),
    ("embed_source", 'node P {\n  v: Vector(3) @embed("  ")\n}', 2, 16, ["non-empty", "P.v"]),
    ("embed_source", "node P {\n  v: Vector(3) @embed(body)\n}", 2, 16, ["unknown source", "body"]),
    ("embed_source", "node P {\n  n: I32\n  v: Vector(3) @embed(n)\n}", 3, 16, ["must be String", "P.n"]),
    ("embed_source", "node P {\n  n: [String]\n  v: Vector(3) @embed(n)\n}", 3, 16, ["must be String"]),
    (
        "embed_kwargs",
        'node P {\n  t: String\n  v: Vector(3) @embed("t", provider="openai")\n}',
        3,
        16,
        ["provider", "only 'model'"],
    ),
    # --- constraints
    ("constraint_on_edge", N + "edge E: P -> P {\n  w: I32\n  @key(w)\n}", 6, 3, ["@key", "edge E"]),
    ("constraint_on_edge", N + "edge E: P -> P {\n  w: I32\n  @range(w, 0..1)\n}", 6, 3, ["@range", "edge E"]),
    ("constraint_on_edge", N + 'edge E: P -> P {\n  w: String\n  @check(w, "x")\n}', 6, 3, ["@check", "edge E"]),
    ("key_multiple", "node P {\n  a: String @key\n  b: String\n  @key(b)\n}", 2, 13, ["P", "multiple @key"]),
    ("key_multiple", "node P {\n  a: String\n  b: String\n  @key(a)\n  @key(b)\n}", 5, 3, ["P", "multiple @key"]),
    ("unknown_property", "node P {\n  a: String\n  @key(b)\n}", 3, 3, ["@key", "P", "'b'"]),
    ("unknown_property", "node P {\n  a: String\n  @unique(a, c)\n}", 3, 3, ["@unique", "'c'"]),
    ("unknown_property", "node P {\n  a: String\n  @index(src)\n}", 3, 3, ["@index", "'src'"]),
    ("unknown_property", "node P {\n  a: I32\n  @range(b, 0..1)\n}", 3, 3, ["@range", "'b'"]),
    ("unknown_property", 'node P {\n  a: String\n  @check(b, "x")\n}', 3, 3, ["@check", "'b'"]),
    ("unknown_property", N + "edge E: P -> P {\n  @unique(src, id)\n}", 5, 3, ["@unique", "E", "'id'"]),
    ("key_type", "node P {\n  a: String?\n  @key(a)\n}", 3, 3, ["P.a", "nullable"]),
    ("key_type", "node P {\n  a: String? @key\n}", 2, 14, ["P.a", "nullable"]),
    ("key_type", "node P {\n  a: [String]\n  @key(a)\n}", 3, 3, ["list", "P.a"]),
    ("key_type", "node P {\n  v: Vector(2)\n  @key(v)\n}", 3, 3, ["vector", "P.v"]),
    ("key_type", "node P {\n  b: Blob\n  @key(b)\n}", 3, 3, ["blob", "P.b"]),
    ("index_type", "node P {\n  b: Blob\n  @index(b)\n}", 3, 3, ["@index", "blob", "P.b"]),
    ("range_type", "node P {\n  name: String\n  @range(name, 0..100)\n}", 3, 3, ["numeric", "P.name", "String"]),
    ("range_type", "node P {\n  s: enum(a, b)\n  @range(s, 0..1)\n}", 3, 3, ["numeric", "enum(a, b)"]),
    ("check_type", 'node P {\n  age: I32\n  @check(age, "[0-9]+")\n}', 3, 3, ["String", "P.age", "I32"]),
    # --- IR ids
    ("type_id_collision", "node P {}\nnode Q {}\nnode P {}", 3, 6, ["duplicate", "node", "P"]),
    ("type_id_collision", "node A {}\nedge E: A -> A\nedge E: A -> A", 3, 6, ["duplicate", "edge", "E"]),
    ("type_id_collision", "interface I {}\ninterface I {}", 2, 11, ["duplicate", "interface", "I"]),
    ("type_id_collision", "node I2lh {}\nnode UCxa {}", 2, 6, ["collision", "I2lh", "UCxa"]),
    ("prop_id_collision", "node P {\n  a: String\n  a: I32\n}", 3, 3, ["duplicate property", "'a'", "P"]),
    ("prop_id_collision", "interface I {\n  a: String\n  a: String\n}", 3, 3, ["'a'", "interface I"]),
    # --- catalog
    ("unknown_endpoint", N + "edge E: P -> Company\n", 4, 14, ["E", "target", "Company"]),
    ("unknown_endpoint", N + "edge E: Company -> P\n", 4, 9, ["E", "source", "Company"]),
    ("unknown_endpoint", "interface I {}\nedge E: I -> I\n", 2, 9, ["E", "source", "I"]),
    ("edge_case_collision", N + "edge Knows: P -> P\nedge KNOWS: P -> P\n", 4, 6, ["Knows", "KNOWS", "case"]),
]


@pytest.mark.parametrize("rule,source,line,column,words", SEMANTIC, ids=[f"{r[0]}-{i}" for i, r in enumerate(SEMANTIC)])
def test_semantic_rule(rule, source, line, column, words):
    with pytest.raises(SchemaError) as ei:
        compile_schema(source)
    err = ei.value
    assert type(err) is SchemaError, f"expected a semantic error, got {type(err).__name__}: {err}"
    assert err.code == "SCHEMA_INVALID"
    assert err.context["rule"] == rule, str(err)
    assert (err.line, err.column) == (line, column), str(err)
    for w in words:
        assert w in err.detail, f"{w!r} not in {err.detail!r}"
    assert f"line {line}, column {column}" in str(err)


SYNTAX = [
    ("node { }", 1, 6),  # missing type name
    ("node P {\n  a: String\n", 3, 1),  # missing '}' (end of input)
    ("node P { a: String }\n/* open", 2, 1),  # unterminated block comment
    ("node P @key(a) {\n  a: String\n}", 1, 8),  # body constraint outside a body
    ("interface I {\n  a: String\n  @key(a)\n}", 3, 3),  # ... or inside an interface
    ("node P {\n  a: String @description(-1)\n}", 2, 26),  # no sign outside @range
    ("node P {\n  a: String @description(true_x)\n}", 2, 26),  # PEG reads `true` first
    ("node P {\n  a: String\n  @key(a, true_a)\n}", 3, 11),
    ('node P {}\nedge E: P -> P @description("d") @card(0..1)\n', 2, 41),
    ("node P { a: Strin }", 1, 13),
    ("node P { a: [Vector(3)] }", 1, 14),
    ("node P { a: String % }", 1, 20),
    ("node P { A: String }", 1, 10),
    ("node P { a: String @Key }", 1, 21),
    ("node P { s: enum() }", 1, 18),
    ("node P {}\nedge E: P - > P", 2, 11),
    ("node P { a: I32\n @range(a, ..) }", 2, 14),
    ('node P { a: String @description("x", k=v) }', 1, 40),
    ('node P { a: String @description(k="v") }', 1, 34),
    ("node P {\f}", 1, 9),
]


@pytest.mark.parametrize("source,line,column", SYNTAX)
def test_syntax_error_position(source, line, column):
    with pytest.raises(SchemaSyntaxError) as ei:
        compile_schema(source)
    err = ei.value
    assert err.code == "SCHEMA_SYNTAX"
    assert (err.line, err.column) == (line, column), str(err)
    assert isinstance(err, SchemaError) and isinstance(err, ValueError)


@pytest.mark.parametrize(
    "source,line,column",
    [
        ('node P @description("a\\qb") {\n  a: String\n}', 1, 21),
        ('node P {\n  a: String\n  @check(a, "\\d+")\n}', 3, 13),
    ],
)
def test_unsupported_string_escape(source, line, column):
    with pytest.raises(SchemaSyntaxError) as ei:
        compile_schema(source)
    assert ei.value.context["rule"] == "string_escape"
    assert "\\q" in str(ei.value) or "\\d" in str(ei.value)
    assert (ei.value.line, ei.value.column) == (line, column)


def test_first_error_follows_engine_order():
    """Annotation rules run over every declaration before any constraint rule: the @embed
    error on the second node wins over the @key error on the first."""
    src = "node A {\n  a: String?\n  @key(a)\n}\nnode B {\n  v: Vector(2) @embed(x)\n}"
    with pytest.raises(SchemaError) as ei:
        compile_schema(src)
    assert ei.value.context["rule"] == "embed_source"
    assert ei.value.line == 6


def test_schema_errors_pickle():
    with pytest.raises(SchemaError) as ei:
        compile_schema("node P {\n  a: String?\n  @key(a)\n}")
    again = pickle.loads(pickle.dumps(ei.value))
    assert type(again) is SchemaError
    assert (again.line, again.column, again.context["rule"]) == (3, 3, "key_type")
    assert str(again) == str(ei.value)
