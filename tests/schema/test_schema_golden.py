"""Golden tests: our compiler's bytes against the engine's (see golden/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from omnigraph_spark.errors import SchemaError
from omnigraph_spark.schema import (
    CompiledSchema,
    compile_schema,
    dataset_path,
    fnv1a_32,
    fnv1a_64_hex,
    ir_hash_of_text,
    load_ir,
)

GOLDEN = Path(__file__).parent / "golden"
SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "format" / "omnigraph-0.7.md"
TEST_HASH = "sha256:e37013207fea258e1168975dae0d8a540c99e9f0aaa47da43171bed900a51a95"
TEST_COMPACT = (
    '{"ir_version":1,"interfaces":[],"nodes":[{"name":"Company","type_id":48283596,"annotations":[],'
    '"implements":[],"properties":[{"name":"name","prop_id":2975594761,"prop_type":{"scalar":"String",'
    '"nullable":false,"list":false,"enum_values":null},"annotations":[{"name":"key","value":null}]}],'
    '"constraints":[{"Key":["name"]}]},{"name":"Person","type_id":3227219152,"annotations":[],'
    '"implements":[],"properties":[{"name":"age","prop_id":3446138241,"prop_type":{"scalar":"I32",'
    '"nullable":true,"list":false,"enum_values":null},"annotations":[]},{"name":"name","prop_id":1466009789,'
    '"prop_type":{"scalar":"String","nullable":false,"list":false,"enum_values":null},"annotations":'
    '[{"name":"key","value":null}]}],"constraints":[{"Key":["name"]}]}],"edges":[{"name":"Knows",'
    '"type_id":2041814322,"from_type":"Person","to_type":"Person","cardinality":{"min":0,"max":null},'
    '"annotations":[],"properties":[{"name":"since","prop_id":2596498354,"prop_type":{"scalar":"Date",'
    '"nullable":true,"list":false,"enum_values":null},"annotations":[]}],"constraints":[]},{"name":'
    '"WorksAt","type_id":2608831225,"from_type":"Person","to_type":"Company","cardinality":{"min":0,'
    '"max":null},"annotations":[],"properties":[],"constraints":[]}]}'
)


@pytest.fixture(scope="module")
def test_compiled(fixtures_dir) -> CompiledSchema:
    return compile_schema((fixtures_dir / "test.pg").read_text())


# --- the worked example (spec B.4) ------------------------------------------------------------


def test_worked_example_pretty_bytes(test_compiled):
    expected = (GOLDEN / "test.ir.json").read_text(encoding="utf-8")
    assert not expected.endswith("\n")
    assert test_compiled.ir_pretty_json() == expected


def test_worked_example_matches_spec_text(test_compiled):
    blocks = re.findall(r"```json\n(.*?)\n```", SPEC.read_text(encoding="utf-8"), re.S)
    assert test_compiled.ir_pretty_json() == blocks[0]
    assert test_compiled.state_json() == blocks[1]


def test_worked_example_compact_and_hash(test_compiled):
    assert test_compiled.ir_compact_json() == TEST_COMPACT
    assert test_compiled.ir_hash() == TEST_HASH
    assert (GOLDEN / "test.hash").read_text() == TEST_HASH


def test_worked_example_state_json(test_compiled):
    assert test_compiled.state_json() == (
        '{\n  "format_version": 1,\n  "schema_ir_hash": "' + TEST_HASH + '",\n  "schema_identity_version": 1\n}'
    )


def test_source_is_verbatim(fixtures_dir, test_compiled):
    assert test_compiled.source == (fixtures_dir / "test.pg").read_text()


@pytest.mark.parametrize(
    "text,decimal",
    [
        ("node:Person", 3227219152),
        ("node:Company", 48283596),
        ("edge:Knows", 2041814322),
        ("edge:WorksAt", 2608831225),
        ("node:Person:name", 1466009789),
        ("node:Person:age", 3446138241),
        ("node:Company:name", 2975594761),
        ("edge:Knows:since", 2596498354),
    ],
)
def test_fnv1a_32_ids(text, decimal):
    assert fnv1a_32(text) == decimal


def test_fnv1a_32_zero_becomes_one():
    # "+!=yG" is an FNV-1a-32 preimage of 0 (found by meet-in-the-middle); the engine maps 0 to 1
    assert _raw_fnv32(b"+!=yG", 2166136261, 16777619) == 0
    assert fnv1a_32("+!=yG") == 1


def _raw_fnv32(data: bytes, h: int, p: int) -> int:
    for b in data:
        h = ((h ^ b) * p) & 0xFFFFFFFF
    return h


@pytest.mark.parametrize(
    "key,path",
    [
        ("node:Person", "nodes/40d76f1f51639ec0"),
        ("node:Company", "nodes/7cb4e55c59663b1c"),
        ("edge:Knows", "edges/602a25a3bd0b455b"),
        ("edge:WorksAt", "edges/844eefbe5068b644"),
    ],
)
def test_dataset_names(key, path):
    assert dataset_path(key) == path
    assert fnv1a_64_hex(key.split(":")[1]) == path.split("/")[1]


def test_fnv1a_64_hex_is_zero_padded():
    assert fnv1a_64_hex("") == "cbf29ce484222325"
    assert all(len(fnv1a_64_hex(n)) == 16 for n in ("A", "Zz", "x" * 50))


def test_dataset_path_rejects_bad_key():
    with pytest.raises(Exception) as ei:
        dataset_path("Person")
    assert getattr(ei.value, "code", None) == "UNKNOWN_TYPE"


# --- fixtures and the rich schema, against engine-produced IR --------------------------------


@pytest.mark.parametrize("name", ["test", "search", "signals"])
def test_fixture_ir_is_engine_exact(fixtures_dir, name):
    c = compile_schema((fixtures_dir / f"{name}.pg").read_text())
    assert c.ir_pretty_json() == (GOLDEN / f"{name}.ir.json").read_text(encoding="utf-8")
    assert c.ir_hash() == (GOLDEN / f"{name}.hash").read_text()


def test_rich_schema_is_engine_exact():
    c = compile_schema((GOLDEN / "rich.pg").read_text(encoding="utf-8"))
    assert c.ir_pretty_json() == (GOLDEN / "rich.ir.json").read_text(encoding="utf-8")
    assert c.ir_hash() == (GOLDEN / "rich.hash").read_text()


def test_rich_schema_canonical_details():
    """Spot checks that say *why* the rich IR looks as it does."""
    ir = compile_schema((GOLDEN / "rich.pg").read_text(encoding="utf-8")).ir
    zebra = next(n for n in ir["nodes"] if n["name"] == "Zebra")
    assert zebra["implements"] == ["Described", "Slugged"]  # sorted, de-duplicated
    assert [p["name"] for p in zebra["properties"]] == sorted(p["name"] for p in zebra["properties"])
    assert "slug" in [p["name"] for p in zebra["properties"]]  # injected from the interface
    kind = next(p for p in zebra["properties"] if p["name"] == "kind")
    assert kind["prop_type"]["enum_values"] == ["grevy", "mountain", "plains", "plains_b"]
    emb = next(p for p in zebra["properties"] if p["name"] == "emb")
    assert emb["prop_type"]["scalar"] == {"Vector": 8}
    assert emb["annotations"][0] == {
        "name": "embed",
        "value": "body",
        "kwargs": {"model": "openai/text-embedding-3-small"},
    }
    ranges = [c["Range"] for c in zebra["constraints"] if "Range" in c]
    # `..N` puts N in min (engine quirk); an i64-overflowing integer becomes a Float
    assert {"property": "big", "min": {"Float": 1e20}, "max": None} in ranges
    assert '"Float":1e+20' in compile_schema((GOLDEN / "rich.pg").read_text()).ir_compact_json()
    alpha = next(n for n in ir["nodes"] if n["name"] == "Alpha")
    assert alpha["annotations"] == [
        {"name": "a", "value": "z", "kwargs": {"j": "w", "k": "v"}},
        {"name": "b", "value": None},
        {"name": "b", "value": "2"},
    ]
    assert alpha["constraints"] == [{"Key": ["code", "name"]}]
    assert [e["name"] for e in ir["edges"]] == ["Aardvark", "Likes", "Sees"]
    sees = next(e for e in ir["edges"] if e["name"] == "Sees")
    assert sees["cardinality"] == {"min": 1, "max": None}


# --- the engine's verdict on 831 sources -------------------------------------------------------


def _engine_cases():
    with open(GOLDEN / "engine_cases.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_engine_cases_agree():
    accepted = rejected = 0
    failures = []
    for i, case in enumerate(_engine_cases()):
        try:
            got = compile_schema(case["source"]).ir_hash()
        except SchemaError as e:
            got = e
        if "hash" in case:
            accepted += 1
            if got != case["hash"]:
                failures.append((i, "engine accepts", repr(got)[:120]))
        else:
            rejected += 1
            if not isinstance(got, SchemaError):
                failures.append((i, "engine rejects: " + case["engine_error"][:100], got))
    assert not failures, failures[:10]
    assert accepted > 250 and rejected > 250


# --- existing IR files -------------------------------------------------------------------------


def test_ir_hash_of_text_matches_for_pretty_and_compact(test_compiled):
    assert ir_hash_of_text(test_compiled.ir_pretty_json()) == TEST_HASH
    assert ir_hash_of_text(TEST_COMPACT) == TEST_HASH


def test_ir_hash_of_text_reserialises_like_serde():
    """Field order, unknown fields and empty kwargs do not matter; the engine hashes the
    re-serialised struct."""
    doc = json.loads(TEST_COMPACT)
    company = doc["nodes"][0]
    reordered = {
        "constraints": company["constraints"],
        "properties": company["properties"],
        "implements": [],
        "annotations": [],
        "type_id": company["type_id"],
        "name": "Company",
        "extra_field": 42,
    }
    company["properties"][0]["annotations"][0]["kwargs"] = {}
    doc["nodes"][0] = reordered
    text = json.dumps(doc, indent=4)
    assert ir_hash_of_text(text) == TEST_HASH
    # ...but a changed value does
    doc["nodes"][0]["type_id"] += 1
    assert ir_hash_of_text(json.dumps(doc)) != TEST_HASH


def test_ir_hash_of_text_float_bounds_keep_serde_form():
    text = (GOLDEN / "rich.ir.json").read_text(encoding="utf-8")
    assert ir_hash_of_text(text) == (GOLDEN / "rich.hash").read_text()
    # an integer-valued Float written as `1` is an f64 to serde: re-serialised as 1.0
    bumped = text.replace('"Float": 1000.5', '"Float": 1000')
    assert ir_hash_of_text(bumped) == ir_hash_of_text(text.replace('"Float": 1000.5', '"Float": 1000.0'))


def test_load_ir_round_trip(test_compiled):
    loaded = load_ir(test_compiled.ir_pretty_json())
    assert loaded.ir == test_compiled.ir
    assert loaded.ir_hash() == TEST_HASH
    assert loaded.source == ""


def test_load_ir_rejects_bad_shape():
    from omnigraph_spark.errors import SchemaContractError

    with pytest.raises(SchemaContractError):
        load_ir('{"ir_version": 1, "interfaces": [], "nodes": [{"name": "A"}], "edges": []}')
    with pytest.raises(SchemaContractError):
        load_ir("{not json")
    with pytest.raises(SchemaContractError):
        load_ir('{"ir_version": 2, "interfaces": [], "nodes": [], "edges": []}')
