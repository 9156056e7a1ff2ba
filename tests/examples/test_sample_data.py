"""The bundled sample (omnigraph_spark/data) is what its generator produces, parses with the
bundled schema, and has the shape the demo and the docs promise. No Spark."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

from omnigraph_spark.demo import sample_path
from omnigraph_spark.ingest import parse_record
from omnigraph_spark.schema import compile_schema


def _generator():
    spec = importlib.util.spec_from_file_location("generate_sample", sample_path("generate_sample.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_sample_matches_generator():
    with open(sample_path("social.jsonl"), encoding="utf-8") as f:
        assert f.read() == _generator().render(), "run python omnigraph_spark/data/generate_sample.py"


def test_sample_parses_with_schema_and_counts():
    catalog = compile_schema(open(sample_path("social.pg"), encoding="utf-8").read()).catalog()
    counts = Counter()
    names = set()
    with open(sample_path("social.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            td, rec = parse_record(json.loads(line), catalog, i)
            counts[td.table_key] += 1
            if td.table_key == "node:Person":
                names.add(rec["name"])
            if td.table_key == "edge:Knows":
                assert rec["from"] in names and rec["to"] in names
    assert counts == {"node:Person": 80, "node:Company": 12, "edge:Knows": 240, "edge:WorksAt": 72}


def test_schema_uses_several_property_types():
    text = open(sample_path("social.pg"), encoding="utf-8").read()
    for t in ("String @key", "I32", "Date", "enum(", "[String]", "F64"):
        assert t in text
