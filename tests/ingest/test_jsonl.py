"""JSONL envelope and records_to_batch, including the engine's fixture files."""

from __future__ import annotations

import json
import pathlib

import pyarrow as pa
import pytest
from conftest import catalog, node, prop

from omnigraph_spark.errors import DataError
from omnigraph_spark.ingest import RowConverter, parse_record, records_to_batch

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "omnigraph-0.7.2"


def load(path, cat):
    per_type = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            t, rec = parse_record(line, cat, n)
            per_type.setdefault(t.table_key, (t, []))[1].append(rec)
    return {k: records_to_batch(t, recs) for k, (t, recs) in per_type.items()}


def test_fixture_test_jsonl(test_catalog):
    out = load(FIXTURES / "test.jsonl", test_catalog)
    assert out["node:Person"].to_pylist() == [
        {"id": "Alice", "age": 30, "name": "Alice"},
        {"id": "Bob", "age": 25, "name": "Bob"},
        {"id": "Charlie", "age": 35, "name": "Charlie"},
        {"id": "Diana", "age": 28, "name": "Diana"},
    ]
    assert out["node:Company"].to_pylist() == [{"id": "Acme", "name": "Acme"}, {"id": "Globex", "name": "Globex"}]
    knows = out["edge:Knows"]
    assert knows.schema == test_catalog.edges["Knows"].arrow_schema()
    assert [(r["src"], r["dst"], r["since"]) for r in knows.to_pylist()] == [
        ("Alice", "Bob", None),
        ("Alice", "Charlie", None),
        ("Bob", "Diana", None),
    ]
    assert all(len(i) == 26 for i in knows.column("id").to_pylist())
    assert [(r["src"], r["dst"]) for r in out["edge:WorksAt"].to_pylist()] == [("Alice", "Acme"), ("Bob", "Globex")]


def compiled(name):
    schema = pytest.importorskip("omnigraph_spark.schema")
    if not hasattr(schema, "compile_schema"):
        pytest.skip("schema compiler not available")
    return schema.compile_schema((FIXTURES / name).read_text()).catalog()


def test_fixture_test_pg_compiles_to_hand_catalog(test_catalog):
    cat = compiled("test.pg")
    for t in test_catalog.types():
        assert cat.resolve(t.table_key).arrow_schema() == t.arrow_schema()


def test_fixture_signals():
    cat = compiled("signals.pg")
    out = load(FIXTURES / "signals.jsonl", cat)
    signal = out["node:Signal"]
    assert signal.schema.names == ["id", "observed", "slug", "source", "strength", "title"]
    first = signal.to_pylist()[0]
    assert first["id"] == "aws-cerebras-inference" and str(first["observed"]) == "2026-03-13"
    assert first["strength"] == "strong"
    assert out["edge:FundedBy"].to_pylist()[0]["amount"] == "$225M"
    assert out["edge:Indicates"].num_rows == 6 and out["node:Company"].num_rows == 9


def test_fixture_search_vectors():
    cat = compiled("search.pg")
    doc = load(FIXTURES / "search.jsonl", cat)["node:Doc"]
    assert doc.schema.field("embedding").type == pa.list_(pa.field("item", pa.float32(), True), 4)
    assert doc.column("embedding")[0].as_py() == pa.array([0.1, 0.2, 0.3, 0.4], pa.float32()).to_pylist()


def test_records_equal_row_converter(test_catalog):
    person = test_catalog.nodes["Person"]
    via_json = records_to_batch(person, [{"name": "a", "age": 3, "ignored": 1}, {"name": "b"}])
    via_batch = RowConverter(person).convert(pa.record_batch({"name": ["a", "b"], "age": pa.array([3, None])}))
    assert via_json.equals(via_batch)


# --- envelope errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "line,code,text",
    [
        ("{not json", "INVALID_RECORD", "invalid JSON at record 7"),
        ('{"type": "Nobody", "data": {}}', "UNKNOWN_TYPE", "record 7: unknown node type 'Nobody'"),
        ('{"edge": "Nope", "from": "a", "to": "b"}', "UNKNOWN_TYPE", "record 7: unknown edge type 'Nope'"),
        ('{"edge": "Knows", "to": "b"}', "MISSING_COLUMN", "record 7: edge missing 'from'"),
        ('{"edge": "Knows", "from": "a", "to": 3}', "MISSING_COLUMN", "record 7: edge missing 'to'"),
        ('{"data": {}}', "INVALID_RECORD", "record 7: expected 'type' or 'edge' field"),
        ("[1, 2]", "INVALID_RECORD", "record 7: expected 'type' or 'edge' field"),
        ('{"type": "Person", "data": [1]}', "INVALID_RECORD", "'data' must be a JSON object"),
    ],
)
def test_envelope_errors(test_catalog, line, code, text):
    with pytest.raises(DataError) as e:
        parse_record(line, test_catalog, 7)
    assert e.value.code == code and text in str(e.value)


def test_type_checked_before_edge_and_edge_case_insensitive(test_catalog):
    t, rec = parse_record({"type": "Person", "edge": "Knows", "data": {"name": "x"}}, test_catalog, 1)
    assert t.name == "Person" and rec == {"name": "x"}
    t, rec = parse_record('{"edge": "worksat", "from": "a", "to": "b"}', test_catalog, 1)
    assert t.name == "WorksAt" and rec == {"from": "a", "to": "b"}
    t, rec = parse_record({"type": "Company"}, test_catalog, 1)  # data optional
    assert rec == {}


# --- literal rules ---------------------------------------------------------------------


@pytest.fixture
def typed():
    return catalog(
        [
            node(
                "T",
                [
                    prop("d", "Date", True),
                    prop("dt", "DateTime", True),
                    prop("f", "F32", True),
                    prop("i", "I32", True),
                    prop("u", "U64", True),
                    prop("b", "Bool", True),
                    prop("l", "I32", True, lst=True),
                    prop("s", "String", True),
                    prop("v", {"Vector": 2}, True),
                    prop("blob", "Blob", True),
                ],
            )
        ]
    ).nodes["T"]


def test_temporal_from_int_and_string(typed):
    out = records_to_batch(typed, [{"d": 3, "dt": 1500}, {"d": "2020-01-02", "dt": "1970-01-01T00:00:02Z"}])
    assert [str(x) for x in out.column("d").to_pylist()] == ["1970-01-04", "2020-01-02"]
    assert out.column("dt").cast(pa.int64()).to_pylist() == [1500, 2000]


def test_numbers(typed):
    out = records_to_batch(typed, [{"f": 0.1, "i": -5, "u": 2**64 - 1, "b": True, "l": [1, None]}])
    row = out.to_pylist()[0]
    assert row["f"] == pa.scalar(0.1, pa.float32()).as_py()
    assert (row["i"], row["u"], row["b"], row["l"]) == (-5, 2**64 - 1, True, [1, None])


@pytest.mark.parametrize(
    "record,column,value",
    [
        ({"i": "5"}, "i", '"5"'),
        ({"i": 2.0}, "i", "2.0"),
        ({"i": True}, "i", "true"),
        ({"i": 2**31}, "i", str(2**31)),
        ({"u": -1}, "u", "-1"),
        ({"s": 5}, "s", "5"),
        ({"b": "true"}, "b", '"true"'),
        ({"d": 2**40}, "d", str(2**40)),
        ({"d": "2020-02-30"}, "d", '"2020-02-30"'),
        ({"dt": "2020-01-01T00:00:00.0005"}, "dt", "2020-01-01T00:00:00.0005"),
        ({"f": 1e300}, "f", "1e+300"),
        ({"l": 5}, "l", "5"),
        ({"l": [1, "x"]}, "l", '"x"'),
        ({"v": [1, None]}, "v", "null"),
        ({"v": [1, "a"]}, "v", '"a"'),
    ],
)
def test_wrong_json_types_rejected(typed, record, column, value):
    with pytest.raises(DataError) as e:
        records_to_batch(typed, [{}, record], first_record_no=40)
    msg = str(e.value)
    assert e.value.code in ("TYPE_MISMATCH",)
    assert f"'{column}'" in msg and ("41" in msg) and value in msg


def test_vector_length_and_blob(typed):
    with pytest.raises(DataError) as e:
        records_to_batch(typed, [{"v": [1, 2, 3]}], first_record_no=1)
    assert e.value.code == "CONSTRAINT_VIOLATION" and "expects 2 dimensions, got 3" in str(e.value)
    with pytest.raises(DataError) as e:
        records_to_batch(typed, [{"blob": "base64:AAAA"}])
    assert e.value.code == "UNSUPPORTED_VALUE"


def test_key_rules_in_jsonl(test_catalog):
    person = test_catalog.nodes["Person"]
    with pytest.raises(DataError) as e:
        records_to_batch(person, [{"name": "a", "id": "b"}])
    assert e.value.code == "KEY_ID_MISMATCH"
    with pytest.raises(DataError) as e:
        records_to_batch(person, [{"age": 3}])
    assert e.value.code == "MISSING_COLUMN"
    with pytest.raises(DataError) as e:
        records_to_batch(person, [{"name": "a"}, {"age": 3}], first_record_no=1)
    assert e.value.code == "NULL_VIOLATION" and "row 2" in str(e.value)


def test_records_roundtrip_json_lines(test_catalog):
    lines = [json.dumps({"type": "Person", "data": {"name": f"p{i}", "age": i}}) for i in range(3)]
    recs = [parse_record(line, test_catalog, i + 1)[1] for i, line in enumerate(lines)]
    out = records_to_batch(test_catalog.nodes["Person"], recs)
    assert out.column("age").to_pylist() == [0, 1, 2]
