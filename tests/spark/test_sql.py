"""SQL through the shim's catalog (``io.omnigraph.spark.OmnigraphCatalog``, docs/sql.md): graphs
as namespaces, node and edge types as tables, reads and writes as the ``format("omnigraph")``
provider's (one graph commit per statement, the DataFrame API's checks and codes), DELETE
FROM ... WHERE as the connector's delete, procedures for maintenance. The catalog's answers
come from ``omnigraph_spark.spark.catalog`` (unit-tested at the bottom without Spark).
Invariants: I1 (one statement, one graph commit), I22 (one planner: the provider's errors)."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from omnigraph_spark import Graph, unwrap_error
from omnigraph_spark.errors import OptionError, SqlUnsupportedError
from omnigraph_spark.spark import catalog as C
from omnigraph_spark.spark.options import ReadOptions, WriteOptions
from omnigraph_spark.store.layout import RootPaths

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

SOCIAL_PG = """
node Person {
    name: String @key
    age: I32?
    score: F64?
}

node Company {
    name: String @key
}

edge Knows: Person -> Person {
    since: Date?
}

edge WorksAt: Person -> Company
"""


@pytest.fixture(scope="module")
def og(jvm, tmp_path_factory):
    """A catalog of its own (set at runtime; Spark caches a catalog once loaded, so the name is
    fresh) over a fresh root: (session, catalog name, root)."""
    root = str(tmp_path_factory.mktemp("sql-root"))
    name = f"og{uuid.uuid4().hex[:8]}"
    jvm.conf.set(f"spark.sql.catalog.{name}", "io.omnigraph.spark.OmnigraphCatalog")
    jvm.conf.set(f"spark.sql.catalog.{name}.root", root)
    return jvm, name, root


def _graph(og, request) -> tuple[str, Graph]:
    """A fresh graph of SOCIAL_PG in the catalog, created by SQL: (qualified name, Graph)."""
    spark, cat, root = og
    g = request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:40]
    spark.sql(f"CREATE NAMESPACE {cat}.{g} WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")
    return f"{cat}.{g}", Graph.open(os.path.join(root, g))


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def _code(excinfo) -> str:
    """The typed error's code; its ``[CODE]`` is on the first line of the Spark exception."""
    typed = unwrap_error(excinfo.value)
    assert typed is not None, str(excinfo.value)[:500]
    assert f"[{typed.code}]" in str(excinfo.value).splitlines()[0]
    return typed.code


def _seed(spark, g):
    spark.sql(f"INSERT INTO {g}.Person (name, age) VALUES ('alice', 30), ('bob', 40), ('carol', NULL)")
    spark.sql(
        f"INSERT INTO {g}.Knows (src, dst, since) VALUES ('alice', 'bob', DATE'2020-01-01'), ('bob', 'carol', NULL)"
    )


# -- catalog ----------------------------------------------------------------------------------


def test_namespaces_tables_and_describe(og, request):
    spark, cat, root = og
    g, graph = _graph(og, request)
    assert [g.split(".")[1]] in [list(r) for r in spark.sql(f"SHOW NAMESPACES IN {cat}").collect()]
    tables = {r.tableName for r in spark.sql(f"SHOW TABLES IN {g}").collect()}
    assert tables == {"Person", "Company", "Knows", "WorksAt"}
    person = {r.col_name: (r.data_type, r.comment) for r in spark.sql(f"DESCRIBE TABLE {g}.Person").collect()}
    assert person["name"] == ("string", "String @key, not null")
    assert person["age"] == ("int", "I32?, nullable")
    assert "@key 'name'" in person["id"][1]
    knows = {r.col_name: (r.data_type, r.comment) for r in spark.sql(f"DESCRIBE TABLE EXTENDED {g}.Knows").collect()}
    assert knows["src"] == ("string", "edge source: a Person id, not null")
    assert knows["dst"] == ("string", "edge target: a Person id, not null")
    assert knows["since"] == ("date", "Date?, nullable")
    props = knows["Table Properties"][0]
    assert "omnigraph.kind=edge" in props and "omnigraph.from=Person" in props and "omnigraph.to=Person" in props
    assert knows["Provider"][0] == "omnigraph"
    ns = {r[0]: r[1] for r in spark.sql(f"DESCRIBE NAMESPACE EXTENDED {g}").collect()}
    assert ns["Location"] == graph.root


def test_create_namespace_refuses_an_existing_graph_and_a_bad_schema(og, request):
    spark, cat, _ = og
    g, _ = _graph(og, request)
    with pytest.raises(Exception) as e:
        spark.sql(f"CREATE NAMESPACE {g} WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")
    assert "SCHEMA_ALREADY_EXISTS" in str(e.value) or _code(e) == "GRAPH_EXISTS"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {g} WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")  # a no-op
    with pytest.raises(Exception) as e:
        spark.sql(f"CREATE NAMESPACE {cat}.broken WITH PROPERTIES ('schema' = 'node {{')")
    assert _code(e) == "SCHEMA_SYNTAX"
    with pytest.raises(Exception) as e:
        spark.sql(f"CREATE NAMESPACE {cat}.noschema")
    assert _code(e) == "OPTION_INVALID"
    assert "schema" in str(e.value)
    names = [r[0] for r in spark.sql(f"SHOW NAMESPACES IN {cat}").collect()]
    assert "broken" not in names and "noschema" not in names


def test_drop_namespace_refuses_a_non_empty_graph_unless_cascade(og, request):
    spark, cat, _ = og
    g, graph = _graph(og, request)
    spark.sql(f"INSERT INTO {g}.Person (name) VALUES ('alice')")
    with pytest.raises(Exception) as e:
        spark.sql(f"DROP NAMESPACE {g}")
    assert _code(e) == "GRAPH_NOT_EMPTY"
    assert "node:Person (1 rows)" in str(e.value)
    assert spark.sql(f"SELECT count(*) FROM {g}.Person").first()[0] == 1  # untouched
    spark.sql(f"DROP NAMESPACE {g} CASCADE")
    assert not os.path.exists(graph.root)
    assert g.split(".")[1] not in [r[0] for r in spark.sql(f"SHOW NAMESPACES IN {cat}").collect()]
    empty, graph2 = _graph(og, request)  # the same name again: an empty graph drops without CASCADE
    graph2.create_branch("dev")
    with pytest.raises(Exception) as e:  # ... unless it has a branch
        spark.sql(f"DROP NAMESPACE {empty}")
    assert _code(e) == "GRAPH_NOT_EMPTY"
    assert "branch dev" in str(e.value)
    graph2.delete_branch("dev")
    spark.sql(f"DROP NAMESPACE {empty}")
    assert not os.path.exists(graph2.root)


def test_drop_namespace_cascade_takes_the_graphs_commit_lease(jvm, tmp_path):
    """DROP NAMESPACE ... CASCADE deletes a graph only holding its commit lease: under a writer
    holding it past the catalog's ``commitLeaseTimeout`` it is LEASE_TIMEOUT naming the holder
    and the graph stays; a drop waiting for a holder that releases drops once it is free."""
    from omnigraph_spark.store import lease as _lease

    root = str(tmp_path)
    cats = {}
    for timeout in ("1", "600"):
        cat = f"og{uuid.uuid4().hex[:8]}"
        jvm.conf.set(f"spark.sql.catalog.{cat}", "io.omnigraph.spark.OmnigraphCatalog")
        jvm.conf.set(f"spark.sql.catalog.{cat}.root", root)
        jvm.conf.set(f"spark.sql.catalog.{cat}.commitLeaseTimeout", timeout)
        cats[timeout] = cat
    jvm.sql(f"CREATE NAMESPACE {cats['1']}.held WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")
    jvm.sql(f"INSERT INTO {cats['1']}.held.Person (name) VALUES ('alice')")
    graph = Graph.open(os.path.join(root, "held"))
    with _lease.hold(graph.storage, graph.root, owner="a-test-writer"):
        with pytest.raises(Exception) as e:
            jvm.sql(f"DROP NAMESPACE {cats['1']}.held CASCADE")
        assert _code(e) == "LEASE_TIMEOUT"
        assert "owner 'a-test-writer'" in str(e.value).splitlines()[0]
    assert len(Graph.open(graph.root).snapshot("main").tables) > 0  # untouched
    done: list[BaseException | None] = []

    def drop():
        try:
            jvm.sql(f"DROP NAMESPACE {cats['600']}.held CASCADE")
            done.append(None)
        except BaseException as ex:  # handed to the test thread
            done.append(ex)

    with _lease.hold(graph.storage, graph.root, owner="a-test-writer"):
        t = threading.Thread(target=drop)
        t.start()
        t.join(timeout=5)
        assert done == [] and Graph.open(graph.root).root == graph.root  # waiting: the graph is there
    t.join(timeout=600)
    assert done == [None]
    assert not os.path.exists(graph.root)
    # a writer that died holding the lease (mid-commit) does not block the drop: its lease is stale
    jvm.sql(f"CREATE NAMESPACE {cats['1']}.stale WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")
    stale = Graph.open(os.path.join(root, "stale"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = {"token": "t", "owner": "dead-writer", "host": socket.gethostname(), "pid": int(dead.stdout)}
    record |= {"acquired_at": 0.0, "expires_at": 4e9}  # not expired: only the dead pid makes it stale
    assert stale.storage.create_text(os.path.join(RootPaths(stale.root).spark_dir, "commit.lease"), json.dumps(record))
    jvm.sql(f"DROP NAMESPACE {cats['1']}.stale CASCADE")
    assert not os.path.exists(stale.root)


def test_bad_identifiers_name_the_graph_the_type_and_what_exists(og, request):
    spark, cat, _ = og
    g, _ = _graph(og, request)
    graph_name = g.split(".")[1]
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM {g}.Persn").collect()
    assert _code(e) == "UNKNOWN_TYPE"
    first = str(e.value).splitlines()[0]
    assert f"graph '{graph_name}'" in first and "'Persn'" in first and "Company, Person" in first and "Knows" in first
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM {cat}.nograph.Person").collect()
    assert _code(e) == "GRAPH_NOT_FOUND"
    assert "'nograph'" in str(e.value) and graph_name in str(e.value).splitlines()[0]
    with pytest.raises(Exception) as e:
        spark.sql(f"SHOW TABLES IN {cat}.nograph").collect()
    assert _code(e) == "GRAPH_NOT_FOUND"
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM {g}.Person.branch_nope").collect()
    assert _code(e) == "BRANCH_NOT_FOUND"
    assert "branches: main" in str(e.value)
    for stmt in (f"CREATE TABLE {g}.T (x int)", f"DROP TABLE {g}.Person"):
        with pytest.raises(Exception) as e:
            spark.sql(stmt)
        assert _code(e) == "SQL_UNSUPPORTED", stmt
    with pytest.raises(Exception) as e:  # Spark wraps it: [UNSUPPORTED_TABLE_CHANGE] SqlUnsupportedError: ...
        spark.sql(f"ALTER TABLE {g}.Person ADD COLUMN x int")
    assert unwrap_error(e.value).code == "SQL_UNSUPPORTED"
    assert spark.catalog.tableExists(f"{g}.Person")
    with pytest.raises(Exception) as e:  # a missing type is the typed error here too (docs/sql.md)
        spark.catalog.tableExists(f"{g}.Nope")
    assert _code(e) == "UNKNOWN_TYPE"


#: Every SQL path's refusal, as a user sees it: (id, action, the connector's code). The action
#: gets (spark, catalog, qualified graph name, graph root); docs/sql.md, "Errors".
FIRST_LINE_CASES = (
    ("unknown_type", lambda s, c, g, r: s.sql(f"SELECT * FROM {g}.Persn").collect(), "UNKNOWN_TYPE"),
    ("unknown_graph", lambda s, c, g, r: s.sql(f"SELECT * FROM {c}.nograph.Person").collect(), "GRAPH_NOT_FOUND"),
    ("show_tables", lambda s, c, g, r: s.sql(f"SHOW TABLES IN {c}.nograph").collect(), "GRAPH_NOT_FOUND"),
    ("unknown_branch", lambda s, c, g, r: s.sql(f"SELECT * FROM {g}.Person.branch_no").collect(), "BRANCH_NOT_FOUND"),
    (
        "version",
        lambda s, c, g, r: s.sql(f"SELECT * FROM {g}.Person VERSION AS OF 'nope'").collect(),
        "COMMIT_NOT_FOUND",
    ),
    (
        "bad_schema",
        lambda s, c, g, r: s.sql(f"CREATE NAMESPACE {c}.bad WITH PROPERTIES ('schema' = 'node {{')"),
        "SCHEMA_SYNTAX",
    ),
    ("no_schema", lambda s, c, g, r: s.sql(f"CREATE NAMESPACE {c}.noschema"), "OPTION_INVALID"),
    ("not_empty", lambda s, c, g, r: s.sql(f"DROP NAMESPACE {g}"), "GRAPH_NOT_EMPTY"),
    ("alter_namespace", lambda s, c, g, r: s.sql(f"ALTER NAMESPACE {g} SET PROPERTIES ('a' = 'b')"), "SQL_UNSUPPORTED"),
    ("create_table", lambda s, c, g, r: s.sql(f"CREATE TABLE {g}.T (x int)"), "SQL_UNSUPPORTED"),
    ("drop_table", lambda s, c, g, r: s.sql(f"DROP TABLE {g}.Person"), "SQL_UNSUPPORTED"),
    ("key_conflict", lambda s, c, g, r: s.sql(f"INSERT INTO {g}.Person (name) VALUES ('alice')"), "KEY_CONFLICT"),
    (
        "dangling",
        lambda s, c, g, r: s.sql(f"INSERT INTO {g}.Knows (src, dst) VALUES ('alice', 'zed')"),
        "DANGLING_EDGE",
    ),
    ("unknown_column", lambda s, c, g, r: s.sql(f"INSERT INTO {g}.Person VALUES ('x', 1)"), "UNKNOWN_COLUMN"),
    ("overwrite", lambda s, c, g, r: s.sql(f"INSERT OVERWRITE {g}.Person (name) VALUES ('alice')"), "DANGLING_EDGE"),
    ("delete_float", lambda s, c, g, r: s.sql(f"DELETE FROM {g}.Person WHERE score > 1.0"), "SQL_UNSUPPORTED"),
    ("call_graph", lambda s, c, g, r: s.sql(f"CALL {c}.system.optimize(graph => 'nograph')"), "GRAPH_NOT_FOUND"),
    ("read_option", lambda s, c, g, r: s.read.option("bogus", "x").table(f"{g}.Person").collect(), "OPTION_INVALID"),
    ("fixed_option", lambda s, c, g, r: s.read.option("path", "/x").table(f"{g}.Person").collect(), "OPTION_INVALID"),
    (
        "write_option",
        lambda s, c, g, r: (
            s.range(1).selectExpr("'q' AS name").writeTo(f"{g}.Person").option("writeMode", "bogus").append()
        ),
        "OPTION_INVALID",
    ),
    (
        "session_table",
        lambda s, c, g, r: s.sql(
            f"CREATE TABLE t_{uuid.uuid4().hex[:8]} USING omnigraph OPTIONS (path '{r}', type 'Nope')"
        ),
        "UNKNOWN_TYPE",
    ),
)


@pytest.fixture(scope="module")
def seeded(og):
    """A graph of SOCIAL_PG with rows and an edge, shared by the first-line cases (none changes it)."""
    spark, cat, root = og
    spark.sql(f"CREATE NAMESPACE {cat}.firstlines WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")
    _seed(spark, f"{cat}.firstlines")
    return spark, cat, f"{cat}.firstlines", os.path.join(root, "firstlines")


@pytest.mark.parametrize("case", FIRST_LINE_CASES, ids=[c[0] for c in FIRST_LINE_CASES])
def test_every_sql_refusal_starts_with_the_connectors_code(seeded, case):
    """The exception a user sees (str(exc), its first line) starts with the typed error's
    ``[CODE] `` on every SQL path: catalog answers, INSERT checks, DELETE refusals, CALL, read
    and write options, a session catalog table."""
    spark, cat, g, root = seeded
    _, action, code = case
    version = len(Graph.open(root).log())
    with pytest.raises(Exception) as e:
        action(spark, cat, g, root)
    typed = unwrap_error(e.value)
    assert typed is not None, str(e.value)[:800]
    assert typed.code == code, (typed.code, str(e.value)[:800])
    assert str(e.value).splitlines()[0].startswith(f"[{typed.code}] "), str(e.value)[:800]
    assert len(Graph.open(root).log()) == version


#: Where Spark's own text comes first (docs/sql.md, "Errors"): (id, action, how Spark's first
#: line starts on each Spark line, the connector's code inside or None when there is none).
SPARK_FIRST_CASES = (
    (
        "alter_table",
        lambda s, c, g: s.sql(f"ALTER TABLE {g}.Person ADD COLUMN x int"),
        ("[UNSUPPORTED_TABLE_CHANGE]", "Unsupported table change: [SQL_UNSUPPORTED]"),  # pyspark 4.3, 4.0
        "SQL_UNSUPPORTED",
    ),
    ("unknown_procedure", lambda s, c, g: s.sql(f"CALL {c}.system.nope()"), ("[FAILED_TO_LOAD_ROUTINE]",), None),
    ("parse", lambda s, c, g: s.sql(f"SELEC * FROM {g}.Person"), ("[PARSE_SYNTAX_ERROR]",), None),
)


@pytest.mark.parametrize("case", SPARK_FIRST_CASES, ids=[c[0] for c in SPARK_FIRST_CASES])
def test_the_refusals_that_are_sparks_own(seeded, case):
    """The statements whose first line is Spark's (listed in docs/sql.md): a parser error, an
    unknown procedure, a table change Spark wraps (``unwrap_error`` still finds ours)."""
    spark, cat, g, root = seeded
    _, action, spark_first, code = case
    with pytest.raises(Exception) as e:
        action(spark, cat, g)
    # Spark's line: py4j puts "An error occurred while calling oN.sql." before an exception
    # pyspark does not convert (classic); a ParseException's text starts with a newline
    lines = [x.lstrip(": ").removeprefix("org.apache.spark.SparkException: ") for x in str(e.value).splitlines()]
    lines = [x for x in lines if x.strip()]
    first = next(x for x in lines if not x.startswith("An error occurred while calling"))
    assert first.startswith(spark_first), first
    typed = unwrap_error(e.value)
    assert (typed.code if typed else None) == code, str(e.value)[:800]


# -- reads ------------------------------------------------------------------------------------


def test_select_pushes_filters_and_projection_down(og, request):
    spark, _, _ = og
    g, _ = _graph(og, request)
    _seed(spark, g)
    df = spark.sql(f"SELECT name FROM {g}.Person WHERE name >= 'b' AND age > 35")
    assert _rows(df) == [("bob",)]
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "omnigraph node:Person" in plan  # the provider's JVM scan
    assert "Lance filter: (`age` IS NOT NULL) AND (`name` >= 'b') AND (`age` > 35)" in plan, plan
    assert "id#" not in plan  # the projection: only the columns the query reads are scanned
    assert _rows(spark.sql(f"SELECT src, dst FROM {g}.Knows WHERE since IS NULL")) == [("bob", "carol")]


def test_version_and_timestamp_as_of_and_branches(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    spark.sql(f"INSERT INTO {g}.Person (name, age) VALUES ('alice', 30)")
    first = graph.log()[-1]
    spark.sql(f"INSERT INTO {g}.Person (name, age) VALUES ('bob', 40)")
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person VERSION AS OF {first.manifest_version}")) == [("alice",)]
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person VERSION AS OF '{first.graph_commit_id}'")) == [("alice",)]
    at = dt.datetime.fromtimestamp(first.created_at_us / 1e6, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person TIMESTAMP AS OF '{at}'")) == [("alice",)]
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("bob",)]
    # a branch: in the identifier, as VERSION AS OF its name, or as a read option
    graph.create_branch("dev")
    spark.sql(f"INSERT INTO {g}.Person.branch_dev (name) VALUES ('dora')")
    dev = [("alice",), ("bob",), ("dora",)]
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person.branch_dev")) == dev
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person VERSION AS OF 'dev'")) == dev
    assert _rows(spark.read.option("branch", "dev").table(f"{g}.Person").select("name")) == dev
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("bob",)]  # main untouched
    assert len(graph.log("dev")) == len(graph.log("main")) + 1
    with pytest.raises(Exception) as e:
        spark.read.option("path", "/elsewhere").table(f"{g}.Person").collect()
    assert _code(e) == "OPTION_INVALID"


# -- writes -----------------------------------------------------------------------------------


def test_insert_into_is_a_strict_append_one_commit_each(og, request):
    """I1: each INSERT is ONE graph commit; an id already committed is KEY_CONFLICT (nothing lands)."""
    spark, _, _ = og
    g, graph = _graph(og, request)
    before = len(graph.log())
    _seed(spark, g)
    assert len(graph.log()) == before + 2
    assert _rows(spark.sql(f"SELECT id, name, age FROM {g}.Person")) == [
        ("alice", "alice", 30),
        ("bob", "bob", 40),
        ("carol", "carol", None),
    ]
    with pytest.raises(Exception) as e:
        spark.sql(f"INSERT INTO {g}.Person (name, age) VALUES ('dave', 1), ('alice', 31)")
    assert _code(e) == "KEY_CONFLICT"
    assert len(graph.log()) == before + 2
    with pytest.raises(Exception) as e:
        spark.sql(f"INSERT INTO {g}.Knows (src, dst) VALUES ('alice', 'zed')")
    assert _code(e) == "DANGLING_EDGE"
    # columns are matched by name, as the DataFrame API writes them; the id derives from @key
    spark.sql(f"INSERT INTO {g}.Person SELECT 41 AS age, 'erin' AS name")
    spark.sql(f"INSERT INTO {g}.Person BY NAME SELECT 'fay' AS name")
    assert {r.name for r in spark.sql(f"SELECT name FROM {g}.Person").collect()} >= {"erin", "fay"}
    assert len(graph.log()) == before + 4
    with pytest.raises(Exception) as e:  # unnamed VALUES columns are col1, col2
        spark.sql(f"INSERT INTO {g}.Person VALUES ('gus', 3)")
    assert _code(e) == "UNKNOWN_COLUMN"
    assert "col1" in str(e.value) and "allowed: id, age, name, score" in str(e.value)


def test_insert_overwrite_refuses_to_orphan_edges(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    before = len(graph.log())
    with pytest.raises(Exception) as e:
        spark.sql(f"INSERT OVERWRITE {g}.Person (name, age) VALUES ('alice', 1), ('bob', 2)")
    assert _code(e) == "DANGLING_EDGE"  # bob -> carol would point at a removed node
    assert len(graph.log()) == before
    spark.sql(f"INSERT OVERWRITE {g}.Person (name, age) VALUES ('alice', 1), ('bob', 2), ('carol', 3)")
    assert len(graph.log()) == before + 1
    assert _rows(spark.sql(f"SELECT name, age FROM {g}.Person")) == [("alice", 1), ("bob", 2), ("carol", 3)]
    assert len(_rows(spark.sql(f"SELECT * FROM {g}.Knows"))) == 2


def test_delete_where_cascades_to_edges_in_one_commit(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    before = len(graph.log())
    spark.sql(f"DELETE FROM {g}.Person WHERE name = 'carol' OR age > 100")
    assert len(graph.log()) == before + 1
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("bob",)]
    assert _rows(spark.sql(f"SELECT src, dst FROM {g}.Knows")) == [("alice", "bob")]  # bob -> carol cascaded
    spark.sql(f"DELETE FROM {g}.Knows WHERE since = DATE'2020-01-01'")
    assert _rows(spark.sql(f"SELECT * FROM {g}.Knows")) == []
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("bob",)]
    assert len(graph.log()) == before + 2
    spark.sql(f"DELETE FROM {g}.Person WHERE name LIKE 'zz%'")  # nothing matches: still one (empty) commit
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("bob",)]
    spark.sql(f"DELETE FROM {g}.Person")
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == []


def test_delete_where_refuses_a_condition_it_cannot_evaluate_exactly(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    before = len(graph.log())
    with pytest.raises(Exception) as e:  # Lance orders floats unlike Spark (-0.0, NaN): not exact
        spark.sql(f"DELETE FROM {g}.Person WHERE score > 1.5")
    assert _code(e) == "SQL_UNSUPPORTED"
    assert "score" in str(e.value)
    assert len(graph.log()) == before
    assert len(_rows(spark.sql(f"SELECT * FROM {g}.Person"))) == 3
    # no data source filter at all: Spark evaluates it, as a row-level delete of the matching ids
    # (one commit, cascading to edges, on the snapshot it scanned)
    spark.sql(f"DELETE FROM {g}.Person WHERE length(name) = 5")
    assert len(graph.log()) == before + 1
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("bob",)]
    assert _rows(spark.sql(f"SELECT * FROM {g}.Knows")) == []


def test_update_sets_non_key_columns_in_one_commit(og, request):
    """I1: an UPDATE is ONE graph commit of the changed rows (a writeMode=merge of them); rows
    the WHERE does not match are untouched; an UPDATE matching nothing commits nothing."""
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    v = graph.snapshot().version
    spark.sql(f"UPDATE {g}.Person SET age = age + 1, score = 2.5 WHERE age >= 30")
    assert graph.snapshot().version == v + 1
    assert _rows(spark.sql(f"SELECT id, name, age, score FROM {g}.Person")) == [
        ("alice", "alice", 31, 2.5),
        ("bob", "bob", 41, 2.5),
        ("carol", "carol", None, None),
    ]
    assert len(_rows(spark.sql(f"SELECT * FROM {g}.Knows"))) == 2  # a node update keeps its edges
    feed = (
        spark.read.format("omnigraph")
        .option("type", "Person")
        .option("readChangeFeed", "true")
        .option("startingVersion", v + 1)
        .load(graph.root)
    )
    assert _rows(feed.select("_change_type", "name", "age", "_commit_version")) == [
        ("update_postimage", "alice", 31, v + 1),
        ("update_postimage", "bob", 41, v + 1),
        ("update_preimage", "alice", 30, v + 1),
        ("update_preimage", "bob", 40, v + 1),
    ]
    spark.sql(f"UPDATE {g}.Person SET age = 1 WHERE name = 'nobody'")
    assert graph.snapshot().version == v + 1
    spark.sql(f"UPDATE {g}.Person SET age = 7 WHERE length(name) = 5")  # any Spark condition
    assert _rows(spark.sql(f"SELECT name, age FROM {g}.Person")) == [("alice", 7), ("bob", 41), ("carol", 7)]
    assert graph.snapshot().version == v + 2


def test_update_on_an_edge_type_and_on_a_branch(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    graph.create_branch("dev")
    main_v = graph.snapshot().version
    dev_v = graph.snapshot("dev").version
    spark.sql(f"UPDATE {g}.Knows.branch_dev SET since = DATE'1999-09-09' WHERE src = 'bob'")
    spark.sql(f"UPDATE {g}.Person.branch_dev SET age = 99 WHERE name = 'carol'")
    assert graph.snapshot("dev").version == dev_v + 2
    assert graph.snapshot().version == main_v  # main untouched
    assert _rows(spark.sql(f"SELECT src, dst, since FROM {g}.Knows.branch_dev")) == [
        ("alice", "bob", dt.date(2020, 1, 1)),
        ("bob", "carol", dt.date(1999, 9, 9)),
    ]
    assert _rows(spark.sql(f"SELECT src, dst, since FROM {g}.Knows"))[1] == ("bob", "carol", None)
    assert ("carol", 99) in _rows(spark.sql(f"SELECT name, age FROM {g}.Person.branch_dev"))
    assert ("carol", None) in _rows(spark.sql(f"SELECT name, age FROM {g}.Person"))


def test_update_refuses_to_change_a_rows_identity(og, request):
    """KEY_CHANGE names the column: a node's @key (its id's text), ``id``, an edge's src/dst;
    nothing is committed."""
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    v = graph.snapshot().version
    for sql, column in [
        (f"UPDATE {g}.Person SET name = 'zed' WHERE name = 'bob'", "name"),
        (f"UPDATE {g}.Person SET id = 'zed' WHERE name = 'bob'", "id"),
        (f"UPDATE {g}.Knows SET dst = 'alice' WHERE src = 'bob'", "dst"),
        (f"UPDATE {g}.Knows SET src = 'carol' WHERE src = 'alice'", "src"),
    ]:
        with pytest.raises(Exception) as e:
            spark.sql(sql)
        assert _code(e) == "KEY_CHANGE", sql
        assert f"'{column}'" in str(e.value).splitlines()[0], sql
    assert graph.snapshot().version == v
    spark.sql(f"UPDATE {g}.Person SET name = name WHERE name = 'bob'")  # the same key: not a change
    assert graph.snapshot().version == v + 1


def test_merge_upserts_with_update_set_star_and_insert_star(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    v = graph.snapshot().version
    spark.createDataFrame([("bob", 50, 1.0), ("dora", 20, None)], "name string, age int, score double").selectExpr(
        "name AS id", "name", "age", "score"
    ).createOrReplaceTempView("src_people")
    spark.sql(
        f"MERGE INTO {g}.Person t USING src_people s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert graph.snapshot().version == v + 1
    assert _rows(spark.sql(f"SELECT id, name, age, score FROM {g}.Person")) == [
        ("alice", "alice", 30, None),
        ("bob", "bob", 50, 1.0),
        ("carol", "carol", None, None),
        ("dora", "dora", 20, None),
    ]
    assert len(_rows(spark.sql(f"SELECT * FROM {g}.Knows"))) == 2


def test_merge_clause_forms(og, request):
    """UPDATE SET a = s.a, WHEN MATCHED AND cond THEN DELETE (cascading to edges), INSERT (cols)
    VALUES (...), WHEN NOT MATCHED BY SOURCE: each statement ONE graph commit."""
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    spark.createDataFrame(
        [("alice", 33, False), ("carol", 0, True), ("erin", 25, False)], "name string, age int, gone boolean"
    ).createOrReplaceTempView("src_changes")
    v = graph.snapshot().version
    spark.sql(
        f"MERGE INTO {g}.Person t USING src_changes s ON t.name = s.name "
        "WHEN MATCHED AND s.gone THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET age = s.age "
        "WHEN NOT MATCHED THEN INSERT (name, age) VALUES (s.name, s.age)"
    )
    assert graph.snapshot().version == v + 1
    assert _rows(spark.sql(f"SELECT name, age FROM {g}.Person")) == [("alice", 33), ("bob", 40), ("erin", 25)]
    feed = (
        spark.read.format("omnigraph")
        .option("type", "Person")
        .option("readChangeFeed", "true")
        .option("startingVersion", v + 1)
        .load(graph.root)
    )
    assert _rows(feed.select("_change_type", "name", "age")) == [
        ("delete", "carol", None),
        ("insert", "erin", 25),
        ("update_postimage", "alice", 33),
        ("update_preimage", "alice", 30),
    ]
    assert _rows(spark.sql(f"SELECT src, dst FROM {g}.Knows")) == [("alice", "bob")]  # bob -> carol cascaded
    spark.sql(
        f"MERGE INTO {g}.Person t USING src_changes s ON t.name = s.name "
        "WHEN NOT MATCHED BY SOURCE AND t.name = 'bob' THEN UPDATE SET age = 41"
    )
    assert _rows(spark.sql(f"SELECT name, age FROM {g}.Person")) == [("alice", 33), ("bob", 41), ("erin", 25)]
    spark.sql(f"MERGE INTO {g}.Person t USING src_changes s ON t.name = s.name WHEN NOT MATCHED BY SOURCE THEN DELETE")
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("erin",)]
    assert _rows(spark.sql(f"SELECT * FROM {g}.Knows")) == []  # alice -> bob went with bob
    assert graph.snapshot().version == v + 3


def test_merge_on_an_edge_type_and_a_branch(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    graph.create_branch("dev")
    v = graph.snapshot("dev").version
    spark.createDataFrame(
        [("alice", "bob", dt.date(2021, 2, 2)), ("carol", "alice", None)], "src string, dst string, since date"
    ).createOrReplaceTempView("src_knows")
    spark.sql(
        f"MERGE INTO {g}.Knows.branch_dev t USING src_knows s ON t.src = s.src AND t.dst = s.dst "
        "WHEN MATCHED THEN UPDATE SET since = s.since "
        "WHEN NOT MATCHED THEN INSERT (src, dst, since) VALUES (s.src, s.dst, s.since)"
    )
    assert graph.snapshot("dev").version == v + 1
    assert _rows(spark.sql(f"SELECT src, dst, since FROM {g}.Knows.branch_dev")) == [
        ("alice", "bob", dt.date(2021, 2, 2)),
        ("bob", "carol", None),
        ("carol", "alice", None),
    ]
    assert len(_rows(spark.sql(f"SELECT * FROM {g}.Knows"))) == 2  # main untouched
    with pytest.raises(Exception) as e:  # an inserted edge to a missing node: the API's check
        spark.sql(
            f"MERGE INTO {g}.Knows.branch_dev t USING (SELECT 'alice' AS src, 'zed' AS dst) s "
            "ON t.src = s.src AND t.dst = s.dst WHEN MATCHED THEN UPDATE SET since = NULL "
            "WHEN NOT MATCHED THEN INSERT (src, dst) VALUES (s.src, s.dst)"
        )
    assert _code(e) == "DANGLING_EDGE"
    assert graph.snapshot("dev").version == v + 1


def test_merge_insert_is_a_strict_insert_and_a_failed_statement_changes_nothing(og, request):
    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    v = graph.snapshot().version
    before = _rows(spark.sql(f"SELECT * FROM {g}.Person"))
    with pytest.raises(Exception) as e:  # ON is not the key: 'alice' is "not matched" yet committed
        spark.sql(
            f"MERGE INTO {g}.Person t USING (SELECT 'alice' AS name, 77 AS age) s ON t.age = s.age "
            "WHEN MATCHED THEN UPDATE SET score = 1.0 "
            "WHEN NOT MATCHED THEN INSERT (name, age) VALUES (s.name, s.age)"
        )
    assert _code(e) == "KEY_CONFLICT"
    assert "'alice'" in str(e.value)
    with pytest.raises(Exception) as e:  # the key refusal stops the whole statement, inserts too
        spark.sql(
            f"MERGE INTO {g}.Person t USING (SELECT 'bob' AS name, 'bobby' AS new) s ON t.name = s.name "
            "WHEN MATCHED THEN UPDATE SET name = s.new WHEN NOT MATCHED THEN INSERT (name) VALUES (s.new)"
        )
    assert _code(e) == "KEY_CHANGE"
    with pytest.raises(Exception) as e:  # a target row matched twice: Spark's own error
        spark.sql(
            f"MERGE INTO {g}.Person t USING (SELECT 'bob' AS name, 1 AS age UNION ALL SELECT 'bob', 2) s "
            "ON t.name = s.name WHEN MATCHED THEN UPDATE SET age = s.age"
        )
    assert "MERGE_CARDINALITY_VIOLATION" in str(e.value)
    with pytest.raises(Exception) as e:  # no UPDATE clause beside an INSERT clause: Spark's analysis error
        spark.sql(
            f"MERGE INTO {g}.Person t USING (SELECT 'dora' AS name) s ON t.name = s.name "
            "WHEN NOT MATCHED THEN INSERT (name) VALUES (s.name)"
        )
    assert "UNRESOLVED_COLUMN" in str(e.value)
    assert graph.snapshot().version == v
    assert _rows(spark.sql(f"SELECT * FROM {g}.Person")) == before
    spark.sql(  # ... written with an UPDATE clause that matches nothing, it inserts
        f"MERGE INTO {g}.Person t USING (SELECT 'dora' AS name) s ON t.name = s.name "
        "WHEN MATCHED AND false THEN UPDATE SET age = t.age WHEN NOT MATCHED THEN INSERT (name) VALUES (s.name)"
    )
    assert graph.snapshot().version == v + 1
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("alice",), ("bob",), ("carol",), ("dora",)]


def test_I26_an_update_refuses_a_table_that_moved_since_its_scan(og, request, tmp_path):
    """The concurrency rule: a statement's rows come from the ONE snapshot it scanned; if another
    writer committed to the type's table before the statement commits, the statement is
    EXPECTED_VERSION_MISMATCH and nothing of it lands (the other writer's row stays). The other
    writer here commits from inside the statement's own job (a UDF in its SET), once."""
    from pyspark.sql.functions import udf

    spark, _, _ = og
    g, graph = _graph(og, request)
    _seed(spark, g)
    marker = str(tmp_path / "wrote")
    root = graph.root

    @udf("int")
    def bump(age):
        from omnigraph_spark import Graph as G  # an executor's Python worker
        from tests.store.helpers import people, write_rows

        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return age + 1
        os.close(fd)
        write_rows(G.open(root), "node:Person", people("zoe", age=5), "merge")
        return age + 1

    spark.udf.register("og_bump_once", bump)
    v = graph.snapshot().version
    with pytest.raises(Exception) as e:
        spark.sql(f"UPDATE {g}.Person SET age = og_bump_once(age) WHERE age IS NOT NULL")
    assert _code(e) == "EXPECTED_VERSION_MISMATCH"
    assert graph.snapshot().version == v + 1  # the other writer's commit only
    assert _rows(spark.sql(f"SELECT name, age FROM {g}.Person")) == [
        ("alice", 30),
        ("bob", 40),
        ("carol", None),
        ("zoe", 5),
    ]
    spark.sql(f"UPDATE {g}.Person SET age = og_bump_once(age) WHERE age IS NOT NULL")  # again: it lands
    assert graph.snapshot().version == v + 2
    assert _rows(spark.sql(f"SELECT name, age FROM {g}.Person WHERE age IS NOT NULL")) == [
        ("alice", 31),
        ("bob", 41),
        ("zoe", 6),
    ]


def test_a_sql_script_commits_once_per_statement(og, request):
    """A SQL script (BEGIN ... END; on Spark 4.0 behind spark.sql.scripting.enabled) is one
    graph commit per write statement, in order: a later statement sees the earlier ones' rows."""
    spark, _, _ = og
    g, graph = _graph(og, request)
    before = len(graph.log())
    conf = "spark.sql.scripting.enabled"
    old = spark.conf.get(conf, None)
    spark.conf.set(conf, "true")
    try:
        spark.sql(
            f"""BEGIN
              INSERT INTO {g}.Person (name, age) VALUES ('a', 1), ('b', 2);
              INSERT INTO {g}.Knows (src, dst) VALUES ('a', 'b');
              DELETE FROM {g}.Person WHERE name = 'b';
            END"""
        ).collect()
    finally:
        if old is None:
            spark.conf.unset(conf)
        else:
            spark.conf.set(conf, old)
    assert len(graph.log()) == before + 3
    assert _rows(spark.sql(f"SELECT name FROM {g}.Person")) == [("a",)]
    assert _rows(spark.sql(f"SELECT * FROM {g}.Knows")) == []  # the delete cascaded


def test_procedures_optimize_cleanup_recover(og, request):
    spark, cat, _ = og
    g, graph = _graph(og, request)
    graph_name = g.split(".")[1]
    for i in range(3):
        spark.sql(f"INSERT INTO {g}.Person (name) VALUES ('p{i}')")
    rows = {r.item: r for r in spark.sql(f"CALL {cat}.system.optimize(graph => '{graph_name}')").collect()}
    assert rows["node:Person"].action == "compacted"
    assert "fragments 3 -> 1" in rows["node:Person"].detail
    assert len(_rows(spark.sql(f"SELECT * FROM {g}.Person"))) == 3
    assert spark.sql(f"CALL {cat}.system.recover('{graph_name}')").collect() == []
    cleaned = spark.sql(f"CALL {cat}.system.cleanup(graph => '{graph_name}', keep_versions => 1)").collect()
    assert {r.item for r in cleaned} >= {"node:Person"}
    with pytest.raises(Exception) as e:
        spark.sql(f"CALL {cat}.system.vacuum('{graph_name}')")
    assert "FAILED_TO_LOAD_ROUTINE" in str(e.value) and "vacuum" in str(e.value)  # Spark's wrapping of ours
    with pytest.raises(SqlUnsupportedError, match="procedures: system.cleanup, system.optimize, system.recover"):
        C.procedure(["system"], "vacuum")


# -- the planner's answers, without Spark ---------------------------------------------------------


def test_catalog_options_are_parsed_once_and_strictly(tmp_path):
    o = C.CatalogOptions.from_options({"root": str(tmp_path), "storage.aws_region": "eu-west-1"})
    assert o.storage_options == {"aws_region": "eu-west-1"}
    assert o.provider_options() == {"storage.aws_region": "eu-west-1"}
    with pytest.raises(OptionError, match="'root' is required"):
        C.CatalogOptions.from_options({})
    with pytest.raises(OptionError, match="'rooot' is unknown"):
        C.CatalogOptions.from_options({"root": str(tmp_path), "rooot": "x"})


def test_delete_conditions_follow_the_filter_rules(test_graph):
    person = test_graph.catalog.resolve("Person")
    eq = {"op": "EqualTo", "column": "name", "value": {"string": "O'Brien"}}
    day = {"op": "LessThan", "column": "since", "value": {"date": "2020-01-02"}}
    assert C.delete_condition(person, [eq]) == "(`name` = 'O''Brien')"
    both = {"op": "Or", "left": eq, "right": {"op": "IsNull", "column": "age"}}
    assert C.delete_condition(person, [both, {"op": "AlwaysTrue"}]) == "((`name` = 'O''Brien') OR (`age` IS NULL))"
    assert C.delete_condition(person, []) is None
    assert C.delete_condition(person, [{"op": "AlwaysFalse"}]) == "FALSE"
    assert C.delete_condition(test_graph.catalog.resolve("Knows"), [day]) == "(`since` < date '2020-01-02')"
    for refused in (
        {"op": "GreaterThan", "column": "age", "value": {"double": 1.5}},
        {"op": "EqualTo", "column": "age", "value": {"other": "1.5"}},
        {"op": "Not", "child": {"op": "Something", "text": "f(age)"}},
    ):
        with pytest.raises(SqlUnsupportedError):
            C.delete_condition(person, [refused])


def test_column_comments_carry_types_annotations_and_nullability(test_graph):
    assert C.column_comments(test_graph.catalog.resolve("Person")) == {
        "id": "node id, not null: the @key 'name' as text (omit or NULL on INSERT)",
        "age": "I32?, nullable",
        "name": "String @key, not null",
    }
    assert C.column_comments(test_graph.catalog.resolve("WorksAt"))["dst"] == "edge target: a Company id, not null"


def test_without_the_catalog_sql_reads_a_temporary_view(spark, test_graph):
    """Where only the Python source runs (no shim jar, e.g. serverless; option engine=python here):
    SQL reads a temporary view over ``spark.read.format("omnigraph")``, and a SELECT's result is
    written with ``df.write.format("omnigraph")``, one graph commit (docs/sql.md)."""
    root = test_graph.root
    view = f"person_{uuid.uuid4().hex[:8]}"

    def save(df):
        df.write.format("omnigraph").option("type", "Person").option("engine", "python").mode("append").save(root)

    def person_view():
        r = spark.read.format("omnigraph").option("type", "Person").option("engine", "python").load(root)
        r.createOrReplaceTempView(view)

    save(spark.createDataFrame([("ann", 3), ("bo", 4)], "name string, age int"))
    person_view()
    assert _rows(spark.sql(f"SELECT name FROM {view} WHERE age > 3")) == [("bo",)]
    before = len(test_graph.log())
    save(spark.sql(f"SELECT concat(name, '2') AS name, age + 10 AS age FROM {view}"))
    assert len(test_graph.log()) == before + 1
    person_view()  # a view reads the snapshot it was planned at: a new one sees the write
    assert _rows(spark.sql(f"SELECT name, age FROM {view} WHERE age > 10")) == [("ann2", 13), ("bo2", 14)]


# -- the session catalog and temporary views USING omnigraph ----------------------------------

NOJAR_APP = str(Path(__file__).with_name("sql_nojar_app.py"))


def _session_graph(tmp_path) -> Graph:
    return Graph.init(str(tmp_path / f"g{uuid.uuid4().hex[:8]}"), SOCIAL_PG)


@pytest.mark.parametrize("engine", ["auto", "python"])
def test_a_temporary_view_using_omnigraph_reads_and_writes(spark, tmp_path, engine):
    """``CREATE TEMPORARY VIEW ... USING omnigraph OPTIONS (...)`` with its columns declared:
    SELECT with filters, INSERT INTO (by position, the id derived from @key) and INSERT
    OVERWRITE, each write ONE graph commit with the DataFrame API's checks (I1). ``auto``
    takes the JVM provider when the jar is on the class path, ``python`` the Python source the
    provider hands it to (the no-jar run is test_without_the_jar_...)."""
    graph = _session_graph(tmp_path)
    v = f"p_{uuid.uuid4().hex[:8]}"
    k = f"k_{uuid.uuid4().hex[:8]}"
    opts = f"path '{graph.root}', engine '{engine}'"
    spark.sql(f"CREATE TEMPORARY VIEW {v} (name STRING, age INT) USING omnigraph OPTIONS ({opts}, type 'Person')")
    spark.sql(f"CREATE TEMPORARY VIEW {k} (src STRING, dst STRING) USING omnigraph OPTIONS ({opts}, type 'Knows')")
    before = len(graph.log())
    spark.sql(f"INSERT INTO {v} VALUES ('ann', 30), ('bo', 40)")
    spark.sql(f"INSERT INTO {v} SELECT 'cy' AS name, 50 AS age")
    spark.sql(f"INSERT INTO {k} VALUES ('ann', 'bo')")
    assert len(graph.log()) == before + 3
    assert _rows(spark.sql(f"SELECT name, age FROM {v} WHERE age > 35")) == [("bo", 40), ("cy", 50)]
    with pytest.raises(Exception) as e:
        spark.sql(f"INSERT INTO {v} VALUES ('ann', 31)")
    assert unwrap_error(e.value).code == "KEY_CONFLICT"
    with pytest.raises(Exception) as e:  # bo's edge would point at a removed node
        spark.sql(f"INSERT OVERWRITE {v} VALUES ('ann', 1)")
    assert unwrap_error(e.value).code == "DANGLING_EDGE"
    assert len(graph.log()) == before + 3
    spark.sql(f"INSERT OVERWRITE {v} VALUES ('ann', 1), ('bo', 2)")
    assert len(graph.log()) == before + 4
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {v} USING omnigraph OPTIONS ({opts}, type 'Person')")
    assert _rows(spark.sql(f"SELECT id, name, age FROM {v}")) == [("ann", "ann", 1), ("bo", "bo", 2)]
    with pytest.raises(Exception) as e:
        spark.sql(f"CREATE TEMPORARY VIEW bad_{v} USING omnigraph OPTIONS ({opts}, type 'Person', bogus 'x')")
    assert unwrap_error(e.value).code == "OPTION_INVALID"


def test_a_session_catalog_table_using_omnigraph_with_the_jar(jvm, tmp_path):
    """With the jar, ``CREATE TABLE t USING omnigraph OPTIONS (path, type)`` (or ``LOCATION``) in
    Spark's session catalog is a table of the JVM provider: the session catalog's own keys are
    dropped by name, a user key the connector does not know is OPTION_INVALID; SELECT pushes its
    filter down; INSERT INTO and INSERT OVERWRITE match columns by name, each ONE graph commit
    with the DataFrame API's checks (I1)."""
    graph = _session_graph(tmp_path)
    t, loc, knows = (f"{n}_{uuid.uuid4().hex[:8]}" for n in ("people", "located", "knows"))
    try:
        jvm.sql(f"CREATE TABLE {t} USING omnigraph OPTIONS (path '{graph.root}', type 'Person')")
        jvm.sql(f"CREATE TABLE {loc} USING omnigraph OPTIONS (type 'Person') LOCATION '{graph.root}'")
        jvm.sql(f"CREATE TABLE {knows} USING omnigraph OPTIONS (path '{graph.root}', type 'Knows')")
        before = len(graph.log())
        jvm.sql(f"INSERT INTO {t} (name, age) VALUES ('ann', 30), ('bo', 40)")
        jvm.sql(f"INSERT INTO {t} SELECT 'cy' AS name, 50 AS age")
        jvm.sql(f"INSERT INTO {knows} (src, dst) VALUES ('ann', 'bo')")
        assert len(graph.log()) == before + 3
        df = jvm.sql(f"SELECT name, age FROM {t} WHERE age > 35")
        assert _rows(df) == [("bo", 40), ("cy", 50)]
        assert _rows(jvm.sql(f"SELECT id, name FROM {loc}")) == [("ann", "ann"), ("bo", "bo"), ("cy", "cy")]
        with pytest.raises(Exception) as e:
            jvm.sql(f"INSERT INTO {t} (name) VALUES ('ann')")
        assert _code(e) == "KEY_CONFLICT"
        with pytest.raises(Exception) as e:
            jvm.sql(f"INSERT OVERWRITE {t} (name) VALUES ('ann')")
        assert _code(e) == "DANGLING_EDGE"
        assert len(graph.log()) == before + 3
        jvm.sql(f"INSERT OVERWRITE {t} SELECT name, age + 1 AS age FROM VALUES ('ann', 1), ('bo', 2) AS v(name, age)")
        assert len(graph.log()) == before + 4
        assert _rows(jvm.sql(f"SELECT name, age FROM {t}")) == [("ann", 2), ("bo", 3)]
        for bad in (
            f"CREATE TABLE bad_{t} USING omnigraph OPTIONS (path '{graph.root}', type 'Person', bogus 'x')",
            f"CREATE TABLE bad_{t} USING omnigraph OPTIONS (path '{graph.root}', type 'Person') TBLPROPERTIES (k 'v')",
        ):
            with pytest.raises(Exception) as e:
                jvm.sql(bad)
            assert _code(e) == "OPTION_INVALID", bad
        assert not jvm.catalog.tableExists(f"bad_{t}")
    finally:
        for name in (t, loc, knows):
            jvm.sql(f"DROP TABLE IF EXISTS {name}")  # the catalog entry only: the graph stays
    assert len(graph.log()) == before + 4


@pytest.mark.slow
def test_without_the_jar_sql_runs_on_a_temporary_view_using_omnigraph(tmp_path):
    """Where only the Python source runs (no jar, a Spark application of its own): a temporary
    view ``USING omnigraph`` reads, INSERTs and INSERT OVERWRITEs, one graph commit each with
    the API's checks; a session catalog table ``USING omnigraph`` is created, but Spark hands
    its reads and writes no options (PythonDataSourceV2.getTable keeps only the schema), so
    they are SQL_UNSUPPORTED naming the view instead (docs/sql.md)."""
    graph = _session_graph(tmp_path)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    p = subprocess.run(
        [sys.executable, NOJAR_APP, graph.root, str(tmp_path / "warehouse")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0 and p.stdout.rstrip().endswith("DONE"), p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-2])
    assert r["shim"] is False
    for write in ("insert_values", "insert_select", "insert_edge", "overwrite", "insert_with_id"):
        assert r[write] == {"rows": [], "commits": 1}, write
    assert r["select"]["rows"] == [["bo", 40], ["cy", 50]]
    assert r["select_full"]["rows"] == [["ann", "ann", 31], ["bo", "bo", 41], ["eve", "eve", 70]]
    for refused, code in (
        ("key_conflict", "KEY_CONFLICT"),
        ("overwrite_dangling", "DANGLING_EDGE"),
        ("bad_option_view", "OPTION_INVALID"),
        ("create_table_bad_option", "OPTION_INVALID"),
        ("table_select", "SQL_UNSUPPORTED"),
        ("table_insert", "SQL_UNSUPPORTED"),
        ("table_location_select", "SQL_UNSUPPORTED"),
    ):
        assert r[refused]["code"] == code and r[refused]["commits"] == 0, (refused, r[refused])
        # Spark's own first line for an error of a Python data source (docs/sql.md, "Errors")
        assert r[refused]["first_line"].startswith("[PYTHON_DATA_SOURCE_ERROR] "), r[refused]["first_line"]
    assert "CREATE TEMPORARY VIEW" in r["table_select"]["text"]
    assert r["create_table"]["commits"] == 0 and "code" not in r["create_table"]
    assert r["create_table_location"]["commits"] == 0 and "code" not in r["create_table_location"]
    assert r["graph_commits"] == len(graph.log())


def test_the_session_catalogs_own_keys_are_accepted_by_name_only():
    """What Spark's session catalog hands a source for ``CREATE TABLE t USING omnigraph OPTIONS
    (path '/g', type 'Person')``: its reserved properties, each option again as ``option.<key>``,
    the location qualified as ``file:``. Accepted only with ``provider`` omnigraph; anything
    else stays OPTION_INVALID."""
    given = {
        "location": "file:/g",
        "option.type": "Person",
        "owner": "root",
        "type": "Person",
        "path": "file:/g",
        "provider": "omnigraph",
    }
    r = ReadOptions.from_options(given)
    assert (r.path, r.type) == ("file:/g", "Person")
    w = WriteOptions.from_options({**given, "comment": "people", "option.branch": "main", "branch": "main"})
    assert (w.path, w.type, w.branch) == ("file:/g", "Person", "main")
    located = {k: v for k, v in given.items() if k != "path"}  # LOCATION '/g' without a path option
    assert ReadOptions.from_options(located).path == "file:/g"
    for bad, key in (
        ({**given, "bogus": "x"}, "bogus"),  # a user key (OPTIONS or TBLPROPERTIES)
        ({**given, "option.type": "Company"}, "option.type"),  # not a copy of an option
        ({"path": "/g", "type": "Person", "owner": "root"}, "owner"),  # no session catalog: a user key
    ):
        with pytest.raises(OptionError) as e:
            ReadOptions.from_options(bad)
        assert e.value.context["option"] == key


def test_a_hadoop_file_uri_is_a_local_graph_root(tmp_path):
    """The session catalog qualifies a table's location as ``file:/path``: the same graph."""
    graph = _session_graph(tmp_path)
    assert Graph.open("file:" + graph.root).root == graph.root


def test_every_golden_filter_reads_back_as_the_read_path_translates_it():
    """The other half of CatalogTableTest (jvm-shim): a filter in spec/filters.json's form, as the
    JVM sends a DELETE's, translates exactly as the read path's rules translate it."""
    import json
    from pathlib import Path

    from omnigraph_spark.spark.filters import ColumnKind, translate

    spec = json.loads((Path(__file__).resolve().parents[2] / "spec" / "filters.json").read_text())
    kinds = {c: ColumnKind(v["kind"], bool(v.get("list"))) for c, v in spec["columns"].items()}
    for case in spec["cases"]:
        assert translate(C.filter_from_json(case["filter"]), kinds) == case["sql"], case["name"]


def test_a_catalog_on_object_storage(jvm, s3):
    """``storage.*`` catalog options reach every graph under an S3 prefix: SHOW NAMESPACES lists
    the prefix's graphs, statements write and read, DROP NAMESPACE ... CASCADE removes every object."""
    bucket = s3.new_bucket()
    cat = f"og{uuid.uuid4().hex[:8]}"
    jvm.conf.set(f"spark.sql.catalog.{cat}", "io.omnigraph.spark.OmnigraphCatalog")
    jvm.conf.set(f"spark.sql.catalog.{cat}.root", f"s3://{bucket}/graphs")
    for k, v in s3.storage_options().items():
        jvm.conf.set(f"spark.sql.catalog.{cat}.storage.{k}", v)
    jvm.sql(f"CREATE NAMESPACE {cat}.social WITH PROPERTIES ('schema' = '{SOCIAL_PG}')")
    assert [r[0] for r in jvm.sql(f"SHOW NAMESPACES IN {cat}").collect()] == ["social"]
    jvm.sql(f"INSERT INTO {cat}.social.Person (name, age) VALUES ('a', 1), ('b', 2)")
    jvm.sql(f"DELETE FROM {cat}.social.Person WHERE name = 'a'")
    assert _rows(jvm.sql(f"SELECT name, age FROM {cat}.social.Person")) == [("b", 2)]
    with pytest.raises(Exception) as e:
        jvm.sql(f"DROP NAMESPACE {cat}.social")
    assert _code(e) == "GRAPH_NOT_EMPTY"
    jvm.sql(f"DROP NAMESPACE {cat}.social CASCADE")
    assert [k for k in s3.keys(bucket, "graphs/") if not k.endswith("/")] == []
    assert jvm.sql(f"SHOW NAMESPACES IN {cat}").collect() == []
