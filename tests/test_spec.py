"""The shared golden files of ``spec/`` against the Python side of each rule.

The JVM shim's JUnit tests (jvm-shim/src/test/java) read the same files and check the Java side,
so each file pins the two runtimes together field by field: key fingerprints (I15), ULID text,
the per-row rules' errors, filter pushdown, side-file layouts, the planner's answers, the error
codes, the type kinds with their widening and the Spark work a commit hands back."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from ulid import ULID

from omnigraph_spark import errors
from omnigraph_spark.cli.codes import CLI_CODES, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE
from omnigraph_spark.ingest.casts import Ctx
from omnigraph_spark.ingest.convert import RowConverter, encode_ulids
from omnigraph_spark.ingest.fingerprints import fingerprints
from omnigraph_spark.ingest.rules import check_enum, check_not_null
from omnigraph_spark.schema import compile_schema
from omnigraph_spark.schema.catalog import SCALARS, PropType
from omnigraph_spark.spark import bridge, jvm_write
from omnigraph_spark.spark.error_tags import error_classes
from omnigraph_spark.spark.filters import ColumnKind, translate
from omnigraph_spark.spark.jvm_read import column_blockers
from omnigraph_spark.spark.scans import SCAN_OPTION, SECRETS_OPTION
from omnigraph_spark.spark.types import arrow_target_schema, spark_type
from omnigraph_spark.spark.work import JOB_TAG, Query, SparkWork, WorkFailed
from omnigraph_spark.spark.writer import tag_error
from omnigraph_spark.store import side_files
from omnigraph_spark.store.writes import LoadResult, WriteTarget

SPEC = Path(__file__).resolve().parent.parent / "spec"


def load(name: str) -> dict:
    return json.loads((SPEC / name).read_text(encoding="utf-8"))


def test_every_spec_file_is_read_by_both_runtimes():
    java = Path(__file__).resolve().parent.parent / "jvm-shim" / "src" / "test" / "java"
    sources = "".join(p.read_text(encoding="utf-8") for p in java.rglob("*.java"))
    here = Path(__file__).read_text(encoding="utf-8")
    for f in sorted(SPEC.glob("*.json")):
        assert f'Spec.load("{f.name}")' in sources, f"no JUnit test reads spec/{f.name}"
        assert f'load("{f.name}")' in here, f"no pytest test reads spec/{f.name}"


def test_key_hashes_are_the_python_fingerprints():
    spec = load("key_hashes.json")
    values = [c["value"] for c in spec["strings"]]
    want = [int(c["hash"], 16) for c in spec["strings"]]
    assert [int(x) for x in fingerprints(pa.array(values))] == want
    ints = [c["value"] for c in spec["integers"]]
    assert [int(x) for x in fingerprints(pa.array(ints, pa.int64()))] == [int(c["hash"], 16) for c in spec["integers"]]


def test_ulid_texts_are_python_ulids_and_the_bulk_encoder():
    spec = load("ulids.json")
    assert len(spec["alphabet"]) == 32 and "ILOU" not in spec["alphabet"]
    for c in spec["texts"]:
        v = int(c["value"], 16)
        assert str(ULID.from_int(v)) == c["text"]
        raw = np.frombuffer(v.to_bytes(16, "big"), np.uint8).reshape(1, 16)
        assert encode_ulids(raw).to_pylist() == [c["text"]]
        assert set(c["text"]) <= set(spec["alphabet"])
    for c in spec["count_up"]:
        start = int(c["start"], 16)
        assert [str(ULID.from_int(start + i)) for i in range(len(c["texts"]))] == c["texts"]
    for text in spec["not_minted"]["texts"]:  # no 128-bit value prints as this text
        try:
            printed = str(ULID.from_str(text))
        except ValueError:
            continue
        assert printed != text, text


def test_row_rule_errors_are_the_python_paths():
    spec = load("row_rules.json")
    for c in spec["cases"]:
        rule = c["rule"]
        ctx = Ctx(c["label"], rule["column"], rule.get("notNull") or "String", c["rowOffset"], c["where"])
        with pytest.raises(errors.OmnigraphError) if c["error"] else contextlib.nullcontext() as raised:
            if rule.get("notNull"):
                check_not_null(pa.array(c["values"]), ctx)
            if rule.get("enum"):
                check_enum(pa.array(c["values"], pa.string()), rule["enum"], ctx, c["typeName"])
        if not c["error"]:
            continue
        e = tag_error(raised.value)
        want = c["error"]
        assert (e.code, str(e)) == (want["code"], want["message"]), c["name"]
        assert e.context["row"] == want["row"], c["name"]
        value = e.context.get("value")
        assert (None if value is None else repr(value)) == want["value"], c["name"]


_VALUES = {"string": str, "int": int, "long": int, "bool": bool, "double": float, "date": dt.date.fromisoformat}


def _filter(f: dict):
    """A filter object as filters.py sees Spark's: duck-typed by class name."""
    obj = type(f["op"], (), {})()
    if "column" in f:
        obj.attribute = (f["column"],)
    if "value" in f:
        obj.value = None if f["value"] is None else _value(f["value"])
    if "values" in f:
        obj.value = tuple(None if v is None else _value(v) for v in f["values"])
    if "child" in f:
        obj.child = _filter(f["child"])
    if "left" in f:
        obj.left, obj.right = _filter(f["left"]), _filter(f["right"])
    return obj


def _value(v: dict):
    ((kind, x),) = v.items()
    return _VALUES[kind](x)


def test_filter_translation_is_the_python_sources():
    spec = load("filters.json")
    columns = {c: ColumnKind(k["kind"], k.get("list", False)) for c, k in spec["columns"].items()}
    for c in spec["cases"]:
        assert translate(_filter(c["filter"]), columns) == c["sql"], c["name"]
        if "jvm_sql" in c:
            assert c["why"], c["name"]  # a difference between the runtimes says why


def test_side_file_locations_and_the_fingerprint_file_layout(tmp_path):
    spec = load("side_files.json")
    for c in spec["locations"]:
        assert side_files.location(c["dir"], c["base"], c["ext"]) == c["location"]
    f = spec["fingerprints"]
    values = np.array([int(v, 16) for v in f["values"]], np.uint64)
    p = tmp_path / "keys.bin"
    side_files.write_fingerprints(str(p), values)
    assert p.read_bytes().hex() == f["bytes"]
    assert [int(x) for x in side_files.read_fingerprints(str(p))] == [int(v, 16) for v in f["values"]]


def test_the_planners_answers_are_the_bridges():
    spec = load("bridge_answers.json")
    for c in spec["answers"]:
        if "raised" not in c:
            assert set(c["answer"]) == {"ok"}
            continue
        cls = getattr(errors, c["raised"]["class"], None) or {"RuntimeError": RuntimeError}[c["raised"]["class"]]
        assert bridge._error(cls(c["raised"]["message"])) == c["answer"], c["name"]
        err = c["answer"]["error"]
        want = c["jvm"]
        assert want["code"] == err["code"], c["name"]
        # PythonBridge.call: a typed error's message as tagged ('[CODE] ...': the code first);
        # an untyped one's 'Class: message' unless the message already starts so
        cls_prefix = err["class"] + ":"
        if err["code"] is not None:
            assert want["message"] == err["message"] and want["message"].startswith(f"[{err['code']}] "), c["name"]
        else:
            assert want["message"] == (
                err["message"] if err["message"].startswith(cls_prefix) else f"{err['class']}: {err['message']}"
            ), c["name"]


# -- error codes ---------------------------------------------------------------------------------


def _error_tree() -> dict[str, type[errors.OmnigraphError]]:
    """Every OmnigraphError class there is, by name, in errors.py's order (subclasses anywhere
    in the package count: the spec must list them, and they must live in errors.py)."""
    found, todo = [], [errors.OmnigraphError]
    while todo:
        c = todo.pop()
        found.append(c)
        todo.extend(c.__subclasses__())
    order = list(vars(errors))
    return {c.__name__: c for c in sorted(found, key=lambda c: order.index(c.__name__) if c.__name__ in order else -1)}


def test_the_error_tree_is_the_spec_class_by_class():
    spec = load("error_codes.json")
    tree = _error_tree()
    assert [e["class"] for e in spec["errors"]] == list(tree), "the spec lists errors.py's classes in order"
    for e in spec["errors"]:
        cls = tree[e["class"]]
        assert cls.__module__ == errors.__name__, e["class"]
        got = {
            "code": cls.code,
            "bases": [b.__name__ for b in cls.__bases__],
            "retryable": cls.retryable,
        }
        assert got == {k: e[k] for k in got}, e["class"]
        assert e["meaning"] and set(e["raised_by"]) <= {"python", "jvm"}, e["class"]
    codes = [e["code"] for e in spec["errors"]]
    assert len(set(codes)) == len(codes), "a code names one class"
    # the driver turns a code that crossed the JVM back into its class
    assert {c: k.__name__ for c, k in error_classes().items()} == {e["code"]: e["class"] for e in spec["errors"]}


def test_the_python_runtime_raises_exactly_the_codes_the_spec_says():
    """raised_by lists "python" when some module of the package constructs the class (a parent
    caught for its children, or a reserved code, is constructed nowhere)."""
    spec = load("error_codes.json")
    package = Path(errors.__file__).parent
    sources = "".join(
        p.read_text(encoding="utf-8") for p in sorted(package.rglob("*.py")) if p != Path(errors.__file__)
    )
    for e in spec["errors"]:
        constructed = re.search(rf"(?<!class )(?<![\w]){e['class']}\(", sources) is not None
        assert constructed == ("python" in e["raised_by"]), (e["class"], e["raised_by"])
        if "jvm" in e["raised_by"]:
            assert "python" in e["raised_by"], f"{e['code']}: the Python path refuses what the JVM path refuses"


def test_troubleshooting_has_a_section_for_each_code_and_no_other():
    spec = load("error_codes.json")
    text = (SPEC.parent / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    sections = re.findall(r"^### `([A-Z0-9_]+)`", text, re.M)
    assert sorted(sections) == sorted(e["code"] for e in spec["errors"])
    table = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| (\d+) \|", text, re.M))
    assert table == {c["code"]: str(c["exit"]) for c in spec["cli"]}
    assert [c["code"] for c in spec["cli"]] == list(CLI_CODES)
    exits = {"USAGE": EXIT_USAGE, "INTERRUPTED": EXIT_INTERRUPTED}
    assert all(c["exit"] == exits.get(c["code"], EXIT_ERROR) for c in spec["cli"])


# -- type kinds and widening ---------------------------------------------------------------------

#: the Spark input types spec/type_widening.json names, by their simpleString
_SPARK_INPUTS = {
    t.simpleString(): t
    for t in (
        ByteType(),
        ShortType(),
        IntegerType(),
        LongType(),
        FloatType(),
        DoubleType(),
        DecimalType(20, 2),
        StringType(),
        BooleanType(),
        DateType(),
        TimestampType(),
        TimestampNTZType(),
        BinaryType(),
    )
}


def _prop_type(kind: str) -> PropType:
    if kind.startswith("Vector("):
        return PropType("Vector", nullable=True, vector_dim=int(kind[len("Vector(") : -1]))
    return PropType(kind, nullable=True)


def _input_arrow(spark_type) -> pa.DataType:
    """The Arrow type Spark hands the Python path for an input column (timestamps in UTC)."""
    return arrow_target_schema(StructType([StructField("p", spark_type)])).field("p").type


def _typedef(kind: str):
    return compile_schema(f"node Item {{\n    p: {kind}?\n}}\n").catalog().resolve("Item")


def _input_values(spark_type, values: list) -> pa.Array:
    def one(v):
        if v is None or isinstance(spark_type, (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType)):
            return v
        if isinstance(spark_type, DecimalType):
            return Decimal(v)
        if isinstance(spark_type, DateType):
            return dt.date.fromisoformat(v)
        if isinstance(spark_type, (TimestampType, TimestampNTZType)):
            return dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        return v

    return pa.array([one(v) for v in values], _input_arrow(spark_type))


def _stored(arr: pa.Array) -> list:
    """A converted column as the spec writes stored values (Date: days, DateTime: ms)."""
    if pa.types.is_date32(arr.type):
        return arr.cast(pa.int32()).to_pylist()
    if pa.types.is_date64(arr.type):
        return arr.cast(pa.int64()).to_pylist()
    return arr.to_pylist()


def _convert(spark_type, kind: str, values: list) -> pa.Array:
    """The Python path's conversion of one input column into a ``kind?`` property."""
    batch = pa.RecordBatch.from_arrays([_input_values(spark_type, values)], names=["p"])
    return RowConverter(_typedef(kind)).convert(batch).column("p")


def test_each_kinds_arrow_and_spark_types_are_the_catalogs():
    spec = load("type_widening.json")
    assert set(spec["kinds"]) == set(SCALARS) | {"Vector(3)"}
    for kind, want in spec["kinds"].items():
        t = _prop_type(kind)
        assert str(t.arrow_type()) == want["arrow"], kind
        assert spark_type(t).simpleString() == want["spark"], kind
        stored = pa.schema([pa.field("p", t.arrow_type())])
        readable = not column_blockers(stored, arrow_target_schema(StructType([StructField("p", spark_type(t))])))
        assert readable == want["jvm_read"], kind


def test_the_widening_matrix_is_the_python_paths():
    """Every (input, kind) pair: refused at planning (an empty batch already fails), or
    converted, exactly or value by value (the golden cases show which)."""
    spec = load("type_widening.json")
    assert set(spec["inputs"]) == set(spec["writes"]) == set(_SPARK_INPUTS)
    scalars = [k for k in SCALARS if k != "Blob"]
    for name, want in spec["inputs"].items():
        st = _SPARK_INPUTS[name]
        assert str(_input_arrow(st)) == want["arrow"], name
        assert want["jvm"] == bridge._INPUT_KINDS.get(type(st).__name__, "other"), name
        assert list(spec["writes"][name]) == scalars, name
        for kind, verdict in spec["writes"][name].items():
            try:
                _convert(st, kind, [])
                refused = False
            except errors.TypeMismatchError:
                refused = True
            assert refused == (verdict == "refused"), (name, kind, verdict)
    cases: dict[tuple[str, str], list[dict]] = {}
    for c in spec["cases"]:
        cases.setdefault((c["input"], c["kind"]), []).append(c)
    jvm = {(j["input"], j["kind"]): j for j in spec["jvm"]}
    for name, kind in cases:
        assert spec["writes"][name][kind] != "refused", (name, kind)
    for name, row in spec["writes"].items():
        for kind, verdict in row.items():
            cs = cases.get((name, kind), [])
            if verdict == "checked":  # a value that does not convert, and one that does
                assert any("error" in c for c in cs) and any("out" in c for c in cs), (name, kind)
            if verdict == "exact":
                assert not any("error" in c for c in cs), (name, kind)
                assert (name, kind) in jvm and "check" not in jvm[(name, kind)], (name, kind)
                if spec["kinds"][kind]["jvm_sink"] != name:  # a conversion the JVM makes: shown by values
                    assert cs, (name, kind)
    for (name, kind), j in jvm.items():
        assert spec["writes"][name][kind] == ("checked" if "check" in j else "exact"), (name, kind)


def test_the_golden_values_are_the_python_paths():
    spec = load("type_widening.json")
    for c in spec["cases"]:
        st, where = _SPARK_INPUTS[c["input"]], (c["input"], c["kind"], c["in"])
        if "error" in c:
            with pytest.raises(errors.TypeMismatchError) as raised:
                _convert(st, c["kind"], c["in"])
            assert raised.value.code == c["error"]["code"] and raised.value.context["row"] == c["error"]["row"], where
        else:
            assert _stored(_convert(st, c["kind"], c["in"])) == c["out"], where


def test_the_jvm_planners_widen_exactly_the_spec_pairs():
    """jvm_write.plan_stage (the sink's plan) and bridge.projection (ProjectedRow's mapping)
    take a pair to the JVM iff the spec's jvm list has it, with its 'to'; their tables
    (jvm_write._WIDENS, bridge._WIDENING) are the spec's, kind by kind."""
    spec = load("type_widening.json")
    jvm = {(j["input"], j["kind"]): j["to"] for j in spec["jvm"]}
    for name, row in spec["writes"].items():
        st = _SPARK_INPUTS[name]
        schema = StructType([StructField("p", st)])
        for kind in row:
            td = _typedef(kind)
            target = WriteTarget("/g", td.table_key, "append", "main", "/g/t", None, 1, td.arrow_schema())
            plan, why = jvm_write.plan_stage(td, target, schema)
            if (name, kind) not in jvm:
                assert plan is None and why, (name, kind)
                continue
            assert plan is not None and not why, (name, kind, why)
            ((_, _, sink_type, _),) = [c for c in plan.columns if c[0] == "p"]
            assert sink_type.simpleString() == spec["kinds"][kind]["jvm_sink"], (name, kind)
            cols, why = bridge.projection(plan, schema)
            assert not why, (name, kind, why)
            ((col,),) = [[c for c in cols if c["column"] == "p"]]
            same = name == spec["kinds"][kind]["jvm_sink"]
            assert (col["from"], col["to"]) == (spec["inputs"][name]["jvm"], "same" if same else jvm[(name, kind)])
    tos = {"int": "IntegerType", "long": "LongType", "float": "FloatType", "double": "DoubleType"}
    want: dict[str, tuple[str, set[str]]] = {}
    for (name, _), to in jvm.items():
        if to in tos:
            want.setdefault(tos[to], (to, set()))[1].add(spec["inputs"][name]["jvm"])
    assert {k: (to, set(froms)) for k, (to, froms) in bridge._WIDENING.items()} == want
    widens = {}
    for arrow, (sink, accepted) in jvm_write._WIDENS.items():
        (kind,) = [k for k, v in spec["kinds"].items() if v["arrow"] == str(arrow)]
        widens[kind] = (sink.simpleString(), {t().simpleString() for t in accepted})
    assert widens == {
        kind: (spec["kinds"][kind]["jvm_sink"], {n for (n, k), to in jvm.items() if k == kind})
        for kind in {k for (_, k), to in jvm.items() if not to.startswith("micros")}
    }


def test_the_planners_spark_work_is_an_answer_and_its_rows_the_next_request(monkeypatch):
    """spec/bridge_protocol.json from the planner's side: a commit that needs Spark work gets it
    run by the JVM, never by calling into it. Each work goes out as the pending request's
    answer (field by field the golden one), the golden ``ran`` request settles it (tables of the
    declared kinds, or the JVM's error as WorkFailed), and the commit's own answer comes last."""
    spec = load("bridge_protocol.json")
    assert (spec["reserved_options"]["scan"], spec["reserved_options"]["secrets"]) == (SCAN_OPTION, SECRETS_OPTION)
    assert spec["job_tag"] == JOB_TAG
    exchanges = spec["exchanges"]
    works = [SparkWork.from_json(x["answer"]["ok"]["run"][0]["work"]) for x in exchanges]
    for x, w in zip(exchanges, works):
        assert w.to_json() == x["answer"]["ok"]["run"][0]["work"], x["name"]
    final = spec["final"]["ok"]
    outcomes = []

    def commit(load, runner, deletes, batch):
        for w in works:  # in turn: one work per exchange
            try:
                outcomes.append({"tables": [t.to_pydict() for t in runner(w)]})
            except WorkFailed as e:
                outcomes.append({"error": str(e)})
        return LoadResult(final["commit"], final["manifest_version"], "main", (), None, skipped=final["skipped"])

    monkeypatch.setattr(bridge, "commit", commit)
    inp = io.StringIO("".join(json.dumps(m) + "\n" for m in [spec["request"]] + [x["ran"] for x in exchanges]))
    out = io.StringIO()
    b = bridge.Bridge(inp, out)
    b.load = object()  # a planned write
    b.serve()
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [x["answer"] for x in exchanges] + [
        spec["final"]
    ]
    assert outcomes == [x["python"]["1"] for x in exchanges]


def test_spark_work_result_rows_are_tables_of_their_declared_kinds():
    for c in load("bridge_protocol.json")["rows"]:
        work = SparkWork(queries=(Query("SELECT 1", tuple((n, k) for n, k in c["columns"])),))
        (table,) = work.tables_from_rows([c["json"]])
        assert [list(r.values()) for r in table.to_pylist()] == c["values"], c["name"]
        assert SparkWork.tables_to_rows([table]) == [c["json"]]
        for bad in ([1, 2, True], ["x", True, True], ["x", 2, 1]):  # another kind: refused, never coerced
            with pytest.raises(WorkFailed):
                work.tables_from_rows([[bad]])
