"""Subprocess body for tests/spark/test_sql.py's no-jar test: SQL where only the Python source
runs (no shim jar on the class path, as on serverless), in a Spark application of its own.

Usage: python sql_nojar_app.py ROOT WAREHOUSE
ROOT holds a graph of test_sql.SOCIAL_PG. Runs the statements of docs/sql.md's "Without the
jar" section and the session catalog's ``CREATE TABLE ... USING omnigraph``, and prints one
JSON object: per statement its rows (sorted) or its error's code (the typed error inside the
Spark exception) and the exception's first line; then the graph's commit count; then "DONE".
"""

import json
import sys

from pyspark.sql import SparkSession

from omnigraph_spark import Graph, unwrap_error
from omnigraph_spark.spark import register
from omnigraph_spark.spark.jvm_read import shim_loaded

root, warehouse = sys.argv[1:3]
spark = (
    SparkSession.builder.master("local[1]")
    .appName("omnigraph-sql-nojar")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "1")
    .config("spark.sql.warehouse.dir", warehouse)
    .getOrCreate()
)
spark.sparkContext.setLogLevel("OFF")
register(spark)
graph = Graph.open(root)


def run(sql: str) -> dict:
    before = len(graph.log())
    try:
        rows = sorted(tuple(r) for r in spark.sql(sql).collect())
        out: dict = {"rows": [list(r) for r in rows]}
    except Exception as e:  # what a user sees: Spark's exception, the typed error inside it
        typed = unwrap_error(e)
        out = {"code": typed.code if typed else None, "first_line": str(e).splitlines()[0], "text": str(e)}
    out["commits"] = len(graph.log()) - before
    return out


OPTS = f"OPTIONS (path '{root}', type 'Person')"
EDGE_OPTS = OPTS.replace("'Person'", "'Knows'")
STATEMENTS = {
    "view": f"CREATE TEMPORARY VIEW people (name STRING, age INT) USING omnigraph {OPTS}",
    "edge_view": f"CREATE TEMPORARY VIEW knows (src STRING, dst STRING) USING omnigraph {EDGE_OPTS}",
    "insert_values": "INSERT INTO people VALUES ('ann', 30), ('bo', 40)",
    "insert_select": "INSERT INTO people SELECT 'cy' AS name, 50 AS age",
    "insert_edge": "INSERT INTO knows VALUES ('ann', 'bo')",
    "select": "SELECT name, age FROM people WHERE age > 35",
    "key_conflict": "INSERT INTO people VALUES ('ann', 31)",
    "overwrite_dangling": "INSERT OVERWRITE people VALUES ('dee', 60)",
    "overwrite": "INSERT OVERWRITE people VALUES ('ann', 31), ('bo', 41)",
    "full_view": f"CREATE TEMPORARY VIEW everyone USING omnigraph OPTIONS (path '{root}', type 'Person')",
    "insert_with_id": "INSERT INTO everyone (id, name, age, score) VALUES ('eve', 'eve', 70, NULL)",  # all: 4.0
    "select_full": "SELECT id, name, age FROM everyone",
    "bad_option_view": f"CREATE TEMPORARY VIEW bad USING omnigraph OPTIONS (path '{root}', type 'Person', bogus 'x')",
    "create_table": f"CREATE TABLE people_t USING omnigraph OPTIONS (path '{root}', type 'Person')",
    "create_table_location": f"CREATE TABLE people_l USING omnigraph OPTIONS (type 'Person') LOCATION '{root}'",
    "table_select": "SELECT name FROM people_t",
    "table_insert": "INSERT INTO people_t (id, name, age, score) VALUES ('fay', 'fay', 80, NULL)",
    "table_location_select": "SELECT name FROM people_l",
    "create_table_bad_option": f"CREATE TABLE people_b USING omnigraph {OPTS[:-1]}, bogus 'x')",
}
result = {"shim": shim_loaded(spark)}
for name, sql in STATEMENTS.items():
    result[name] = run(sql)
result["graph_commits"] = len(graph.log())
print(json.dumps(result))
print("DONE")
spark.stop()
