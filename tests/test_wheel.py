"""The shim ships with the package: `make wheel` builds a wheel with the shim jar inside, and a
fresh environment that has only that wheel (no checkout, no jvm-shim/target) gets the JVM write
and read paths from one line, ``omnigraph_spark.configure_spark(builder)``: the packaged jar
through ``spark.jars``, the Lance Java SDK through ``spark.jars.packages`` (Ivy: Maven Central
on first use, then Ivy's cache in the user's home).

The fresh venv gets the wheel with ``--no-deps``; its dependencies (pyspark, pylance, ...) come
from this test environment's site-packages (tests/wheel_env.py, :func:`~tests.wheel_env.install`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omnigraph_spark.spark.shim_conf import SHIM_JAR

from .wheel_env import install

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, logging, sys, tempfile
    from pyspark.sql import SparkSession
    import omnigraph_spark
    from omnigraph_spark import Graph, configure_spark, read_table, write_table
    from omnigraph_spark.spark.shim_conf import shim_spark_conf

    class Collect(logging.Handler):
        lines = []
        def emit(self, record):
            self.lines.append(record.getMessage())

    logging.getLogger("omnigraph_spark").addHandler(Collect())
    logging.getLogger("omnigraph_spark").setLevel(logging.INFO)
    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    spark = configure_spark(builder).getOrCreate()
    root = tempfile.mkdtemp() + "/g"
    Graph.init(root, sys.argv[1])
    df = spark.createDataFrame([("Ann", 30), ("Bob", None)], "name string, age int")
    write_table(df, root, "Person", engine="jvm")  # engine="jvm": raises unless the JVM path runs
    rows = sorted(tuple(r) for r in read_table(spark, root, "Person", engine="jvm").collect())
    # the short name: the jar's provider (engine=jvm raises unless it takes the JVM paths)
    more = spark.createDataFrame([("Cy", 25)], "name string, age int")
    more.write.format("omnigraph").option("type", "Person").option("engine", "jvm").mode("append").save(root)
    fmt = spark.read.format("omnigraph").option("type", "Person").option("engine", "jvm").load(root)
    format_rows = sorted(tuple(r) for r in fmt.select("name", "age").collect())
    spark.stop()
    print(json.dumps({"module": omnigraph_spark.__file__, "conf": shim_spark_conf(), "rows": rows,
                      "format_rows": format_rows, "log": Collect.lines}))
""")


def test_wheel_carries_the_shim_and_configure_spark_loads_it(tmp_path, test_schema_text):
    if not shutil.which("mvn") or not shutil.which("javac"):
        pytest.skip("make wheel builds the shim: needs mvn and javac")
    subprocess.run(["make", "wheel", f"PY={sys.executable}"], cwd=ROOT, check=True, capture_output=True, timeout=900)
    wheels = sorted(glob.glob(str(ROOT / "dist" / "omnigraph_spark-*.whl")), key=os.path.getmtime)
    assert wheels, "make wheel wrote no wheel into dist/"
    venv = tmp_path / "venv"
    py = str(install(Path(wheels[-1]), venv))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "OMNIGRAPH_SPARK_SHIM_DIR") and not k.startswith("SPARK_CONNECT")
    }
    env.update(PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py)
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.run(
        [py, "-c", SCRIPT, test_schema_text], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert p.returncode == 0, p.stderr[-5000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["module"].startswith(str(venv))  # the wheel's package, not the checkout
    assert report["conf"]["spark.jars"].startswith(str(venv)) and report["conf"]["spark.jars"].endswith(
        f"omnigraph_spark/jars/{SHIM_JAR}"
    )
    assert "org.lance:lance-core:7.0.0" in report["conf"]["spark.jars.packages"]
    assert any("staged node:Person (jvm)" in line for line in report["log"])
    assert any("omnigraph JVM read node:Person" in line for line in report["log"])
    assert report["rows"] == [["Ann", 30, "Ann"], ["Bob", None, "Bob"]]
    assert report["format_rows"] == [["Ann", 30], ["Bob", None], ["Cy", 25]]
