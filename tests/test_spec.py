"""The shared golden files of ``spec/`` against the Python side of each rule.

The JVM shim's JUnit tests (jvm-shim/src/test/java) read the same files and check the Java side,
so each file pins the two runtimes together field by field: key fingerprints (I15), ULID text,
the per-row rules' errors, filter pushdown, side-file layouts, the planner's answers and the
Spark work a commit hands back."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from ulid import ULID

from omnigraph_spark import errors
from omnigraph_spark.ingest.casts import Ctx
from omnigraph_spark.ingest.convert import encode_ulids
from omnigraph_spark.ingest.fingerprints import fingerprints
from omnigraph_spark.ingest.rules import check_enum, check_not_null
from omnigraph_spark.spark import bridge
from omnigraph_spark.spark.filters import ColumnKind, translate
from omnigraph_spark.spark.scans import SCAN_OPTION, SECRETS_OPTION
from omnigraph_spark.spark.work import JOB_TAG, Query, SparkWork, WorkFailed
from omnigraph_spark.spark.writer import tag_error
from omnigraph_spark.store import side_files
from omnigraph_spark.store.writes import LoadResult

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
        # PythonBridge.call: 'Class: message' unless the message already starts so
        cls_prefix = err["class"] + ":"
        assert want["message"] == (
            err["message"] if err["message"].startswith(cls_prefix) else f"{err['class']}: {err['message']}"
        ), c["name"]


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
