"""Every SQL write through the shim's catalog (docs/sql.md) leaves a graph the Omnigraph 0.7.2
engine opens clean and exports row for row, with our commit graph: INSERT INTO, INSERT
OVERWRITE, DELETE FROM ... WHERE (with its cascade), UPDATE and MERGE INTO on node and edge
types and on a branch, a write on a branch, CALL optimize."""

from __future__ import annotations

import uuid

import pytest

from omnigraph_spark import Graph

from .helpers import engine_commits, our_commits
from .test_ours_to_engine import assert_engine_open_is_clean, assert_export_equals_ours


@pytest.mark.spark
def test_sql_writes_are_read_by_engine(engine, spark, fixtures_dir, tmp_path):
    from tests.shim import need_shim

    need_shim(spark)
    cat = f"og{uuid.uuid4().hex[:8]}"
    spark.conf.set(f"spark.sql.catalog.{cat}", "io.omnigraph.spark.OmnigraphCatalog")
    spark.conf.set(f"spark.sql.catalog.{cat}.root", str(tmp_path))
    spark.sql(f"CREATE NAMESPACE {cat}.g WITH PROPERTIES ('schemaPath' = '{fixtures_dir / 'test.pg'}')")
    root = str(tmp_path / "g")
    g = Graph.open(root)

    def check(branch: str = "main") -> None:
        assert_engine_open_is_clean(engine, root, g, branch)
        assert_export_equals_ours(engine, root, g, branch)
        assert engine_commits(engine.commits(root)) == our_commits(g)

    statements = [
        "INSERT INTO {g}.Person (name, age) VALUES ('Alice', 30), ('Bob', 25), ('Charlie', 35)",
        "INSERT INTO {g}.Company (name) VALUES ('Acme')",
        "INSERT INTO {g}.Knows (src, dst, since) VALUES ('Alice', 'Bob', DATE'2020-01-01'), ('Bob', 'Charlie', NULL)",
        "INSERT INTO {g}.WorksAt (src, dst) VALUES ('Alice', 'Acme')",
        "INSERT OVERWRITE {g}.Person (name, age) VALUES ('Alice', 31), ('Bob', 26), ('Charlie', 36)",
        "DELETE FROM {g}.Person WHERE name = 'Charlie'",  # cascades to Bob -> Charlie
        "DELETE FROM {g}.Knows WHERE since IS NOT NULL",
        "INSERT INTO {g}.Knows (src, dst) VALUES ('Alice', 'Bob')",
        "UPDATE {g}.Person SET age = age + 1 WHERE name = 'Alice'",
        "UPDATE {g}.Knows SET since = DATE'2021-03-04' WHERE src = 'Alice'",
        (
            "MERGE INTO {g}.Person t USING (SELECT 'Bob' AS name, 27 AS age UNION ALL SELECT 'Dana', 22) s "
            "ON t.name = s.name WHEN MATCHED THEN UPDATE SET age = s.age "
            "WHEN NOT MATCHED THEN INSERT (name, age) VALUES (s.name, s.age)"
        ),
        "MERGE INTO {g}.Person t USING (SELECT 'Dana' AS name) s ON t.name = s.name WHEN MATCHED THEN DELETE",
        "DELETE FROM {g}.Knows WHERE since IS NOT NULL",
    ]
    for stmt in statements:
        before = len(g.log())
        spark.sql(stmt.format(g=f"{cat}.g"))
        assert len(g.log()) == before + 1, stmt  # one graph commit per statement
        check()
    assert {r.name for r in spark.sql(f"SELECT name FROM {cat}.g.Person").collect()} == {"Alice", "Bob"}
    assert spark.sql(f"SELECT count(*) FROM {cat}.g.Knows").first()[0] == 0

    g.create_branch("feature")
    spark.sql(f"INSERT INTO {cat}.g.Person.branch_feature (name, age) VALUES ('Eve', 41)")
    check("feature")
    spark.sql(
        f"MERGE INTO {cat}.g.Person.branch_feature t USING (SELECT 'Eve' AS id, 'Eve' AS name, 42 AS age) s "
        "ON t.name = s.name WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    check("feature")
    for _ in range(2):
        spark.sql(f"INSERT INTO {cat}.g.Company (name) VALUES ('C{uuid.uuid4().hex[:6]}')")
    spark.sql(f"CALL {cat}.system.optimize(graph => 'g')").collect()
    check()
