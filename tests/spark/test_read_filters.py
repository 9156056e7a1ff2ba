"""Filter pushdown: Spark filters -> Lance SQL. Pushed or not, results must be identical."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct

import lance
import pyarrow as pa
import pyspark.sql.datasource as _ds
import pytest
from pyspark.sql import functions as F

if not hasattr(_ds, "EqualTo"):
    pytest.skip("pyspark < 4.1 has no filter pushdown API: nothing to translate", allow_module_level=True)
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from omnigraph_spark.spark.filters import ColumnKind, escape_like, split_filters, translate
from omnigraph_spark.spark.jvm_read import shim_loaded
from tests.store.helpers import write_rows

HOSTILE = [
    "O'Brien",
    "'; DROP TABLE x; --",
    "%_\\",
    "a%b",
    "a_b",
    "axb",
    "back\\slash",
    "Zoë 😀 名前",
    "",
    "x\\",
    "''",
    "tab\tnl\n",
    "%",
    "_",
]
KINDS = {
    "id": ColumnKind("system"),
    "name": ColumnKind("String"),
    "age": ColumnKind("I32"),
    "score": ColumnKind("F32"),
    "big": ColumnKind("U64"),
    "day": ColumnKind("Date"),
    "at": ColumnKind("DateTime"),
    "tags": ColumnKind("String", is_list=True),
    "ok": ColumnKind("Bool"),
}


def test_translation_quotes_every_value():
    assert translate(EqualTo(("name",), "O'Brien"), KINDS) == "(`name` = 'O''Brien')"
    assert translate(EqualTo(("name",), "'; DROP TABLE x; --"), KINDS) == "(`name` = '''; DROP TABLE x; --')"
    assert translate(StringStartsWith(("name",), "%_\\"), KINDS) == "(`name` LIKE '\\%\\_\\\\%' ESCAPE '\\')"
    assert translate(StringContains(("name",), "it's"), KINDS) == "(`name` LIKE '%it''s%' ESCAPE '\\')"
    assert escape_like("a\\b%c_d") == "a\\\\b\\%c\\_d"
    assert translate(In(("age",), (1, 2)), KINDS) == "(`age` IN (1, 2))"
    assert translate(EqualTo(("day",), dt.date(2024, 2, 29)), KINDS) == "(`day` = date '2024-02-29')"
    assert translate(EqualNullSafe(("age",), None), KINDS) == "(`age` IS NULL)"
    assert translate(Not(EqualNullSafe(("age",), 3)), KINDS) == "(NOT (`age` IS NOT NULL AND `age` = 3))"
    assert translate(EqualTo(("ok",), True), KINDS) == "(`ok` = TRUE)"
    assert translate(EqualTo(("big",), decimal.Decimal(7)), KINDS) == "(`big` = 7)"
    assert translate(EqualTo(("Name",), "x"), KINDS) == "(`name` = 'x')"  # Spark is case-insensitive


@pytest.mark.parametrize(
    "f",
    [
        EqualTo(("score",), math.nan),
        GreaterThan(("score",), math.inf),
        LessThan(("score",), 0.1),
        GreaterThanOrEqual(("score",), 0.0),
        EqualTo(("score",), 1.5),
        In(("score",), (0.0, 1.0)),  # floats: never
        EqualTo(("age",), 2**31),
        EqualTo(("age",), "1"),
        EqualTo(("age",), True),
        In(("age",), (1, None)),
        EqualTo(("at",), dt.datetime(2024, 1, 1)),
        EqualTo(("tags",), ["a"]),
        EqualTo(("a", "b"), 1),
        EqualTo(("nope",), 1),
        EqualTo(("day",), dt.datetime(2024, 1, 1)),
        EqualTo(("big",), 2**64 - 1),
        EqualTo(("big",), decimal.Decimal("1.5")),
        StringStartsWith(("age",), "1"),
        Not(EqualTo(("at",), 1)),
    ],
)
def test_untranslatable_filters_stay_with_spark(f):
    assert translate(f, KINDS) is None
    pushed, kept = split_filters([EqualTo(("id",), "a"), f], KINDS)
    assert pushed == ["(`id` = 'a')"] and kept == [f] and kept[0] is f


def test_translations_evaluate_like_spark_in_lance(tmp_path):
    """Each translated filter, run by Lance, selects exactly the rows Python semantics select."""
    names = HOSTILE + ["O'Brien jr", "prefix%_\\suffix"]
    ages = [None if i % 4 == 0 else i for i in range(len(names))]
    ds = lance.write_dataset(
        pa.table({"id": [f"r{i}" for i in range(len(names))], "name": names, "age": pa.array(ages, pa.int32())}),
        str(tmp_path / "t"),
    )
    rows = list(zip(names, ages))

    def check(f, pred):
        sql = translate(f, KINDS)
        assert sql is not None, f
        got = sorted(ds.to_table(filter=sql).column("name").to_pylist())
        assert got == sorted(n for n, a in rows if pred(n, a)), (f, sql)

    for v in HOSTILE:
        check(EqualTo(("name",), v), lambda n, a, v=v: n == v)
        check(StringStartsWith(("name",), v), lambda n, a, v=v: n.startswith(v))
        check(StringEndsWith(("name",), v), lambda n, a, v=v: n.endswith(v))
        check(StringContains(("name",), v), lambda n, a, v=v: v in n)
        check(Not(StringContains(("name",), v)), lambda n, a, v=v: v not in n)
        check(GreaterThan(("name",), v), lambda n, a, v=v: n.encode() > v.encode())
    check(In(("name",), tuple(HOSTILE[:5])), lambda n, a: n in HOSTILE[:5])
    check(Not(EqualTo(("age",), 1)), lambda n, a: a is not None and a != 1)  # NULL stays out
    check(Not(EqualNullSafe(("age",), 1)), lambda n, a: a != 1)  # NULL comes in
    check(EqualNullSafe(("age",), None), lambda n, a: a is None)
    check(IsNull(("age",)), lambda n, a: a is None)
    check(IsNotNull(("age",)), lambda n, a: a is not None)
    check(Not(IsNull(("age",))), lambda n, a: a is not None)
    check(GreaterThanOrEqual(("age",), 5), lambda n, a: a is not None and a >= 5)
    check(LessThanOrEqual(("age",), 5), lambda n, a: a is not None and a <= 5)
    check(Not(In(("age",), (1, 2, 3))), lambda n, a: a is not None and a not in (1, 2, 3))


# -- through Spark: pushdown on and off give identical rows ---------------------------------


def has_filter_node(plan: str) -> bool:
    """Whether Spark still filters after the scan (a pushed filter leaves no Filter node)."""
    return re.search(r"\bFilter\b", plan) is not None


def _people(spark, root, pushdown=None, engine=None):
    r = spark.read.format("omnigraph").option("type", "Person")
    if engine is not None:
        r = r.option("engine", engine)
    if pushdown is not None:
        r = r.option("pushdown", pushdown)
    return r.load(root)


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")
def test_pushdown_on_and_off_return_identical_rows(spark, test_graph):
    rows = [{"id": f"p{i}", "age": None if i % 3 == 0 else i, "name": n} for i, n in enumerate(HOSTILE)]
    write_rows(test_graph, "node:Person", rows[:7])
    write_rows(test_graph, "node:Person", rows[7:])  # two fragments
    name, age = F.col("name"), F.col("age")
    cases = {
        "eq": name == "O'Brien",
        "in": name.isin("%_\\", "back\\slash", "Zoë 😀 名前", "", "'; DROP TABLE x; --"),
        "starts": name.startswith("%_"),
        "ends": name.endswith("\\"),
        "contains": name.contains("_") & ~name.contains("%"),
        "not_eq_nullsafe": ~age.eqNullSafe(4) & (age > 1) & ~name.startswith("'"),
        "or": (name == "a%b") | (age == 1),
    }
    expected = {
        "eq": ["O'Brien"],
        "in": ["", "%_\\", "'; DROP TABLE x; --", "Zoë 😀 名前", "back\\slash"],
        "starts": ["%_\\"],
        "ends": ["%_\\", "x\\"],
    }
    results = {}
    for mode in ("true", "false"):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", mode)
        try:
            for label, cond in cases.items():
                # one load per filtered query: the explicit opt-in on Spark <= 4.2 (see reader doc)
                q = _people(spark, test_graph.root, pushdown="true", engine="python").filter(cond)
                results[(mode, label)] = sorted(r["name"] for r in q.select("name").collect())
            plan = _plan(_people(spark, test_graph.root, pushdown="true", engine="python").filter(name == "O'Brien"))
            assert has_filter_node(plan) == (mode == "false"), plan
        finally:
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    if shim_loaded(spark):  # the JVM scan (FilterSql) pushes the same filters: the same rows
        for label, cond in cases.items():
            q = _people(spark, test_graph.root, engine="jvm").filter(cond)
            results[("jvm", label)] = sorted(r["name"] for r in q.select("name").collect())
            assert results[("jvm", label)] == results[("true", label)], label
    for label in cases:
        assert results[("true", label)] == results[("false", label)], label
    for label, names in expected.items():
        assert results[("true", label)] == sorted(names), label
    # the pushdown option turns it off per read, even with the conf on
    q = _people(spark, test_graph.root, pushdown="false", engine="python").filter(name == "O'Brien")
    assert has_filter_node(_plan(q))
    assert [r["name"] for r in q.collect()] == ["O'Brien"]


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")
def test_reusing_a_loaded_dataframe_never_loses_rows(spark, test_graph):
    """Spark <= 4.2 reuses one planned read for every query of a loaded DataFrame; by default
    nothing is pushed there, so a filtered query cannot leak its filter into the next one."""
    write_rows(test_graph, "node:Person", [{"id": f"p{i}", "age": i, "name": n} for i, n in enumerate(HOSTILE)])
    df = _people(spark, test_graph.root)
    assert [r["name"] for r in df.filter(F.col("name") == "O'Brien").collect()] == ["O'Brien"]
    assert df.count() == len(HOSTILE)
    assert df.filter((F.col("age") == 1) | (F.col("age") == 2)).count() == 2
    from omnigraph_spark.spark.reader import SCAN_SCOPED_READ_INFO

    if not SCAN_SCOPED_READ_INFO:  # default: Spark filters (no pushFilters on this Spark)
        assert has_filter_node(_plan(df.filter(F.col("name") == "O'Brien")))


#: a NaN with its sign bit set (what x86 makes of 0.0 / 0.0): Spark counts it as NaN, the largest value
NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")
def test_float_filters_keep_spark_semantics(spark, tmp_path):
    """Lance compares floats in IEEE total order (-0.0 < 0.0; a negative NaN below everything),
    Spark has -0.0 = 0.0 and every NaN above everything. Pushed, ``x >= 0.0`` lost the -0.0 row;
    float filters therefore stay with Spark and every row Spark selects comes back."""
    from omnigraph_spark import Graph

    g = Graph.init(str(tmp_path / "g"), "node M {\n    name: String @key\n    x: F64?\n}\n")
    rows = [("negz", -0.0), ("z", 0.0), ("one", 1.0), ("nan", math.nan), ("negnan", NEG_NAN), ("null", None)]
    write_rows(g, "node:M", [{"id": n, "name": n, "x": x} for n, x in rows])
    x = F.col("x")
    expected = {
        "ge0": (x >= 0.0, ["nan", "negnan", "negz", "one", "z"]),
        "eq0": (x == 0.0, ["negz", "z"]),
        "in": (x.isin(0.0, 1.0), ["negz", "one", "z"]),
        "gt1": (x > 0.5, ["nan", "negnan", "one"]),
        "lt": (x < 0.5, ["negz", "z"]),
    }
    for label, (cond, names) in expected.items():
        q = spark.read.format("omnigraph").option("type", "M").option("pushdown", "true").load(g.root).filter(cond)
        assert sorted(r["name"] for r in q.collect()) == names, label
        assert has_filter_node(_plan(q)), label  # Spark filters: nothing pushed
