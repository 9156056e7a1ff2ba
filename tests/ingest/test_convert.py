"""RowConverter: every accepted cast with exact output, every rejected input with its error."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from conftest import catalog, node, prop

from omnigraph_spark.errors import CorruptGraphError, DataError
from omnigraph_spark.ingest import RowConverter

UTC = dt.timezone.utc


def ms(*a):
    y, mo, d, h, mi, s, milli = (list(a) + [0] * 7)[:7]
    return int(dt.datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp()) * 1000 + milli


def values(col):
    if pa.types.is_date64(col.type):
        return col.cast(pa.int64()).to_pylist()
    return col.to_pylist()


def one_prop(scalar, nullable=True, lst=False, enum=None, constraints=()):
    return catalog([node("T", [prop("p", scalar, nullable, lst, enum)], constraints)]).nodes["T"]


def conv(typedef, **cols):
    return RowConverter(typedef).convert(pa.record_batch(cols))


def err(exc_info):
    return exc_info.value.code, str(exc_info.value)


# --- good conversions ------------------------------------------------------------------


@pytest.mark.parametrize(
    "scalar,arr,expected",
    [
        ("I32", pa.array([1, None, -5], pa.int8()), [1, None, -5]),
        ("I32", pa.array([2**31 - 1, -(2**31)], pa.int64()), [2**31 - 1, -(2**31)]),
        ("U32", pa.array([0, 2**32 - 1], pa.int64()), [0, 2**32 - 1]),
        ("U64", pa.array([0, 2**63 - 1], pa.int64()), [0, 2**63 - 1]),
        ("I64", pa.array([2**63 - 1], pa.uint64()), [2**63 - 1]),
        ("I64", pa.array([Decimal("12"), Decimal("-3")], pa.decimal128(10, 2)), [12, -3]),
        ("F64", pa.array([2**53, -7], pa.int64()), [float(2**53), -7.0]),
        ("F32", pa.array([0.5, float("inf"), None], pa.float64()), [0.5, float("inf"), None]),
        ("F32", pa.array([2**24], pa.int32()), [float(2**24)]),
        ("F64", pa.array([1.25], pa.float32()), [1.25]),
        ("F64", pa.array([Decimal("0.1")], pa.decimal128(5, 1)), [0.1]),
        ("String", pa.array(["a", None], pa.large_string()), ["a", None]),
        ("String", pa.array(["a"], pa.string_view()), ["a"]),
        ("String", pa.array(["x", "y", "x"]).dictionary_encode(), ["x", "y", "x"]),
        ("Bool", pa.array([True, None]), [True, None]),
        ("Date", pa.array([dt.date(2020, 1, 2)]), [dt.date(2020, 1, 2)]),
        ("Date", pa.array(["2020-01-02", "2020-1-2", "20200102", None]), [dt.date(2020, 1, 2)] * 3 + [None]),
        # DateTime results are compared as ms since the epoch (date64 to_pylist drops the time)
        ("DateTime", pa.array([dt.date(2020, 1, 2)]), [ms(2020, 1, 2)]),
        ("DateTime", pa.array([1_500_000], pa.timestamp("us", "UTC")), [1500]),
        ("DateTime", pa.array([3], pa.timestamp("s", "Europe/Paris")), [3000]),
        (
            "DateTime",
            pa.array(
                [
                    "2020-01-02T03:04:05.120Z",
                    "2020-01-02 03:04:05+01:00",
                    "2020-01-02",
                    "2020-01-02t030405-0030",
                    "1969-12-31T23:59:59.999",
                ]
            ),
            [ms(2020, 1, 2, 3, 4, 5, 120), ms(2020, 1, 2, 2, 4, 5), ms(2020, 1, 2), ms(2020, 1, 2, 3, 34, 5), -1],
        ),
        ("I32", pa.nulls(2), [None, None]),
    ],
)
def test_lossless_casts(scalar, arr, expected):
    out = conv(one_prop(scalar), p=arr)
    assert out.schema.field("p").type == one_prop(scalar).arrow_schema().field("p").type
    assert values(out.column("p")) == expected


def test_list_elementwise_and_large_list():
    t = one_prop("I32", lst=True)
    arr = pa.array([[1, None, 3], None, []], pa.large_list(pa.int64()))
    out = conv(t, p=arr)
    assert out.schema.field("p").type == pa.list_(pa.field("item", pa.int32(), True))
    assert out.column("p").to_pylist() == [[1, None, 3], None, []]


def test_sliced_list_input():
    t = one_prop("I32", lst=True)
    arr = pa.array([[2**40], [1], [2, 3]]).slice(1)  # the bad element is outside the slice
    assert conv(t, p=arr).column("p").to_pylist() == [[1], [2, 3]]


def test_output_schema_and_column_order(test_catalog):
    person = test_catalog.nodes["Person"]
    out = RowConverter(person).convert(pa.record_batch({"name": ["Ann"], "age": pa.array([3], pa.int64())}))
    assert out.schema == person.arrow_schema()
    assert out.schema.names == ["id", "age", "name"]
    assert out.to_pylist() == [{"id": "Ann", "age": 3, "name": "Ann"}]


def test_missing_nullable_property_is_null(test_catalog):
    out = RowConverter(test_catalog.nodes["Person"]).convert(pa.record_batch({"name": ["A", "B"]}))
    assert out.column("age").to_pylist() == [None, None]


def test_table_schema_decides_output_types(test_catalog):
    person = test_catalog.nodes["Person"]
    schema = pa.schema(
        [
            pa.field("id", pa.large_string(), False),
            pa.field("age", pa.int32()),
            pa.field("name", pa.large_string(), False),
        ]
    )
    out = RowConverter(person, schema).convert(pa.record_batch({"name": ["A"]}))
    assert out.schema == schema


def test_table_schema_with_other_columns_is_rejected(test_catalog):
    with pytest.raises(CorruptGraphError):
        RowConverter(test_catalog.nodes["Person"], pa.schema([pa.field("id", pa.string())]))


# --- rejected conversions --------------------------------------------------------------


@pytest.mark.parametrize(
    "scalar,arr,row,value_text",
    [
        ("I32", pa.array([1, 2**31], pa.int64()), 1, str(2**31)),
        ("U32", pa.array([5, -1], pa.int32()), 1, "-1"),
        ("U64", pa.array([-3], pa.int64()), 0, "-3"),
        ("I64", pa.array([0, 2**63], pa.uint64()), 1, str(2**63)),
        ("F64", pa.array([1, 2**53 + 1], pa.int64()), 1, str(2**53 + 1)),
        ("F32", pa.array([2**24 + 1], pa.int64()), 0, str(2**24 + 1)),
        ("F32", pa.array([0.5, 0.1], pa.float64()), 1, "0.1"),
        ("F32", pa.array([1e300], pa.float64()), 0, "1e+300"),
        ("I32", pa.array([Decimal("1.50")], pa.decimal128(5, 2)), 0, "1.50"),
        ("I32", pa.array([Decimal("3000000000")], pa.decimal128(12, 0)), 0, "3000000000"),
        ("DateTime", pa.array([1001], pa.timestamp("us", "UTC")), 0, "1970"),
        ("DateTime", pa.array([1], pa.timestamp("ns", "UTC")), 0, "1970"),
        ("Date", pa.array(["2020-01-01", "2021-02-29"]), 1, "2021-02-29"),
        ("Date", pa.array(["2020-01-01 10:00:00"]), 0, "2020-01-01 10:00:00"),
        ("DateTime", pa.array(["2020-01-01T00:00:00.0001"]), 0, "2020-01-01T00:00:00.0001"),
        ("DateTime", pa.array(["yesterday"]), 0, "yesterday"),
        ("I32", pa.array([[1], [2**40]], pa.list_(pa.int64())), 1, str(2**40)),
    ],
)
def test_lossy_values_rejected_with_row_and_value(scalar, arr, row, value_text):
    t = one_prop(scalar, lst=pa.types.is_list(arr.type))
    with pytest.raises(DataError) as e:
        RowConverter(t).convert(pa.record_batch({"p": arr}), row_offset=100, where="part-7")
    code, msg = err(e)
    assert code == "TYPE_MISMATCH"
    assert f"row {100 + row}" in msg and "'p'" in msg and value_text in msg and "part-7" in msg
    assert e.value.context["row"] == 100 + row


@pytest.mark.parametrize(
    "scalar,arr",
    [
        ("I32", pa.array([1.0])),
        ("I32", pa.array(["1"])),
        ("String", pa.array([1])),
        ("Bool", pa.array([1])),
        ("F64", pa.array([True])),
        ("Date", pa.array([1], pa.int32())),
        ("Date", pa.array([1], pa.timestamp("ms", "UTC"))),
        ("DateTime", pa.array([1], pa.timestamp("ms"))),  # no time zone
        ("String", pa.array([b"x"])),
        ("I32", pa.array([[1]])),
    ],
)
def test_unsupported_type_pairs(scalar, arr):
    with pytest.raises(DataError) as e:
        conv(one_prop(scalar), p=arr)
    code, msg = err(e)
    assert code == "TYPE_MISMATCH"
    assert "'p'" in msg and str(arr.type) in msg
    assert e.value.context["source_type"] == str(arr.type)


# --- columns ---------------------------------------------------------------------------


def test_unknown_column_lists_allowed(test_catalog):
    with pytest.raises(DataError) as e:
        RowConverter(test_catalog.nodes["Person"]).convert(pa.record_batch({"name": ["a"], "agee": [1]}))
    code, msg = err(e)
    assert code == "UNKNOWN_COLUMN" and "'agee'" in msg and "age" in msg and "name" in msg


def test_missing_non_nullable_column(test_catalog):
    with pytest.raises(DataError) as e:
        RowConverter(test_catalog.nodes["Person"]).convert(pa.record_batch({"age": [1]}))
    assert e.value.code == "MISSING_COLUMN" and "'name'" in str(e.value)


def test_null_in_non_nullable_names_first_row(test_catalog):
    with pytest.raises(DataError) as e:
        RowConverter(test_catalog.nodes["Person"]).convert(pa.record_batch({"name": ["a", None, None]}), row_offset=10)
    assert e.value.code == "NULL_VIOLATION"
    assert "row 11" in str(e.value) and "'name'" in str(e.value)


# --- ids -------------------------------------------------------------------------------


def test_key_id_and_matching_explicit_id(test_catalog):
    rc = RowConverter(test_catalog.nodes["Person"])
    out = rc.convert(pa.record_batch({"id": ["a", None], "name": ["a", "b"]}))
    assert out.column("id").to_pylist() == ["a", "b"]


def test_key_id_mismatch_names_both(test_catalog):
    with pytest.raises(DataError) as e:
        RowConverter(test_catalog.nodes["Person"]).convert(
            pa.record_batch({"id": ["a", "zz"], "name": ["a", "b"]}), row_offset=5
        )
    code, msg = err(e)
    assert code == "KEY_ID_MISMATCH" and "'zz'" in msg and "'b'" in msg and "row 6" in msg


def test_integer_and_bool_keys_give_text_ids():
    t = catalog([node("N", [prop("k", "I64")], [{"Key": ["k"]}])]).nodes["N"]
    assert conv(t, k=pa.array([-42, 7])).column("id").to_pylist() == ["-42", "7"]
    b = catalog([node("N", [prop("k", "Bool")], [{"Key": ["k"]}])]).nodes["N"]
    assert conv(b, k=pa.array([True, False])).column("id").to_pylist() == ["true", "false"]


@pytest.mark.parametrize("scalar", ["F64", "Date", "DateTime"])
def test_keys_without_defined_id_text_rejected(scalar):
    t = catalog([node("N", [prop("k", scalar)], [{"Key": ["k"]}])]).nodes["N"]
    with pytest.raises(DataError) as e:
        RowConverter(t)
    assert e.value.code == "UNSUPPORTED_VALUE" and "'k'" in str(e.value)


def test_composite_key_uses_sorted_first_column():
    t = catalog([node("N", [prop("a", "String"), prop("b", "String")], [{"Key": ["a", "b"]}])]).nodes["N"]
    assert conv(t, b=["x"], a=["y"]).column("id").to_pylist() == ["y"]


def test_no_key_ids_given_or_ulid():
    t = catalog([node("N", [prop("v", "I32", True)])]).nodes["N"]
    out = conv(t, id=pa.array(["given", None]), v=pa.array([1, 2]))
    ids = out.column("id").to_pylist()
    assert ids[0] == "given" and len(ids[1]) == 26 and ids[1] != "given"
    fresh = conv(t, v=pa.array([1, 2, 3])).column("id").to_pylist()
    assert len(set(fresh)) == 3 and all(len(i) == 26 for i in fresh)


def test_non_string_id_rejected():
    t = catalog([node("N", [prop("v", "I32", True)])]).nodes["N"]
    with pytest.raises(DataError) as e:
        conv(t, id=pa.array([1]))
    assert e.value.code == "TYPE_MISMATCH" and "'id'" in str(e.value)


# --- edges -----------------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [("from", "to"), ("src", "dst")])
def test_edge_endpoint_spellings(test_catalog, a, b):
    out = RowConverter(test_catalog.edges["Knows"]).convert(
        pa.record_batch({a: ["x"], b: ["y"], "id": ["e1"], "since": pa.array([dt.date(2020, 5, 1)])})
    )
    assert out.schema.names == ["id", "src", "dst", "since"]
    assert out.to_pylist() == [{"id": "e1", "src": "x", "dst": "y", "since": dt.date(2020, 5, 1)}]


def test_edge_both_spellings_rejected(test_catalog):
    with pytest.raises(DataError) as e:
        RowConverter(test_catalog.edges["Knows"]).convert(pa.record_batch({"from": ["x"], "src": ["x"], "to": ["y"]}))
    assert e.value.code == "DUPLICATE_COLUMN" and "'from'" in str(e.value) and "'src'" in str(e.value)


def test_edge_missing_and_null_endpoint(test_catalog):
    rc = RowConverter(test_catalog.edges["WorksAt"])
    with pytest.raises(DataError) as e:
        rc.convert(pa.record_batch({"from": ["x"]}))
    assert e.value.code == "MISSING_COLUMN" and "'to'" in str(e.value)
    with pytest.raises(DataError) as e:
        rc.convert(pa.record_batch({"from": ["x", "y"], "to": ["a", None]}))
    assert e.value.code == "NULL_VIOLATION" and "row 1" in str(e.value)


def test_edge_ids_generated(test_catalog):
    out = RowConverter(test_catalog.edges["WorksAt"]).convert(pa.record_batch({"from": ["x", "y"], "to": ["a", "b"]}))
    ids = out.column("id").to_pylist()
    assert len(set(ids)) == 2 and all(len(i) == 26 for i in ids)


# --- row rules -------------------------------------------------------------------------


def test_enum_membership():
    t = one_prop("String", nullable=True, enum=["a", "b"])
    assert conv(t, p=["a", None, "b"]).column("p").to_pylist() == ["a", None, "b"]
    with pytest.raises(DataError) as e:
        conv(t, p=["a", "c"])
    code, msg = err(e)
    assert code == "CONSTRAINT_VIOLATION" and "'c'" in msg and "a, b" in msg and "row 1" in msg


def test_enum_list_elements():
    t = one_prop("String", nullable=True, lst=True, enum=["a", "b"])
    with pytest.raises(DataError) as e:
        conv(t, p=pa.array([["a"], ["b", "zz"]]))
    assert e.value.code == "CONSTRAINT_VIOLATION" and "row 1" in str(e.value) and "'zz'" in str(e.value)


def ranged(scalar, lo, hi, lst=False):
    def b(v):
        return None if v is None else ({"Integer": v} if isinstance(v, int) else {"Float": v})

    return one_prop(scalar, lst=lst, constraints=[{"Range": {"property": "p", "min": b(lo), "max": b(hi)}}])


def test_range_inclusive():
    t = ranged("I32", 0, 10)
    assert conv(t, p=pa.array([0, 10, None])).column("p").to_pylist() == [0, 10, None]
    for bad, row in (([0, -1], 1), ([11], 0)):
        with pytest.raises(DataError) as e:
            conv(t, p=pa.array(bad))
        assert e.value.code == "CONSTRAINT_VIOLATION"
        assert f"row {row}" in str(e.value) and str(bad[row]) in str(e.value)


def test_range_nan_and_float_bounds():
    t = ranged("F64", 0.5, None)
    assert conv(t, p=pa.array([0.5, 7.0])).column("p").to_pylist() == [0.5, 7.0]
    with pytest.raises(DataError) as e:
        conv(t, p=pa.array([1.0, float("nan")]))
    assert e.value.code == "CONSTRAINT_VIOLATION" and "NaN" in str(e.value)
    with pytest.raises(DataError):
        conv(t, p=pa.array([0.25]))


def test_range_exact_on_large_integers():
    t = ranged("U64", None, 2**53)
    with pytest.raises(DataError) as e:
        conv(t, p=pa.array([2**53 + 1], pa.uint64()))
    assert e.value.code == "CONSTRAINT_VIOLATION"


def test_range_on_list_elements():
    t = ranged("I32", 0, None, lst=True)
    with pytest.raises(DataError) as e:
        conv(t, p=pa.array([[1], [2, -4]]))
    assert "row 1" in str(e.value) and "-4" in str(e.value)


def checked(pattern):
    return one_prop("String", constraints=[{"Check": {"property": "p", "pattern": pattern}}])


def test_check_is_unanchored_search():
    t = checked("[0-9]+")
    assert conv(t, p=["ab12", None]).column("p").to_pylist() == ["ab12", None]
    with pytest.raises(DataError) as e:
        conv(t, p=["x1", "none"])
    code, msg = err(e)
    assert code == "CONSTRAINT_VIOLATION" and "'none'" in msg and "row 1" in msg and "[0-9]+" in msg


def test_check_dollar_is_end_of_text_like_rust():
    t = checked("^[a-z]+$")
    with pytest.raises(DataError):
        conv(t, p=["abc\n"])  # Python's re would accept this; Rust does not


def test_check_unicode_digits_like_rust():
    assert conv(checked(r"^\d+$"), p=["٣٤"]).num_rows == 1


def test_check_unsupported_pattern_rejected_at_construction():
    with pytest.raises(DataError) as e:
        RowConverter(checked(r"\bfoo"))
    assert e.value.code == "CHECK_PATTERN_INVALID" and "foo" in str(e.value)


# --- vectors ---------------------------------------------------------------------------


def vec(dim=3, nullable=True):
    return one_prop({"Vector": dim}, nullable=nullable)


def test_vector_from_double_and_float_lists():
    out = conv(vec(), p=pa.array([[1.0, 2.0, 0.5], None], pa.list_(pa.float64())))
    assert out.schema.field("p").type == pa.list_(pa.field("item", pa.float32(), True), 3)
    assert out.column("p").to_pylist() == [[1.0, 2.0, 0.5], None]
    out = conv(vec(), p=pa.array([[0.1, 0.2, 0.3]], pa.list_(pa.float32())))
    assert out.column("p").to_pylist() == pa.array([[0.1, 0.2, 0.3]], pa.list_(pa.float32())).to_pylist()


def test_vector_wrong_length():
    with pytest.raises(DataError) as e:
        RowConverter(vec()).convert(pa.record_batch({"p": pa.array([[1.0, 2.0, 3.0], [1.0, 2.0]])}), row_offset=3)
    code, msg = err(e)
    assert code == "CONSTRAINT_VIOLATION" and "expects 3 dimensions, got 2" in msg and "row 4" in msg


def test_vector_null_component_and_overflow_and_exact_mode():
    with pytest.raises(DataError) as e:
        conv(vec(), p=pa.array([[1.0, None, 3.0]]))
    assert e.value.code == "NULL_VIOLATION"
    with pytest.raises(DataError) as e:
        conv(vec(), p=pa.array([[1.0, 1e300, 3.0]]))
    assert e.value.code == "TYPE_MISMATCH" and "1e+300" in str(e.value)
    with pytest.raises(DataError) as e:
        RowConverter(vec(), exact_vectors=True).convert(pa.record_batch({"p": pa.array([[0.1, 0.5, 1.0]])}))
    assert e.value.code == "TYPE_MISMATCH"


def test_vector_non_nullable_null_row():
    with pytest.raises(DataError) as e:
        conv(vec(nullable=False), p=pa.array([[1.0, 2.0, 3.0], None]))
    assert e.value.code == "NULL_VIOLATION" and "row 1" in str(e.value)


def test_blob_values_unsupported_but_absent_nullable_ok():
    t = catalog([node("N", [prop("b", "Blob", True), prop("k", "String")], [{"Key": ["k"]}])]).nodes["N"]
    assert conv(t, k=["a"]).column("b").to_pylist() == [None]
    with pytest.raises(DataError) as e:
        conv(t, k=["a"], b=pa.array([b"x"]))
    assert e.value.code == "UNSUPPORTED_VALUE"


def test_empty_batch(test_catalog):
    out = RowConverter(test_catalog.nodes["Person"]).convert(pa.record_batch({"name": pa.array([], pa.string())}))
    assert out.num_rows == 0 and out.schema == test_catalog.nodes["Person"].arrow_schema()
