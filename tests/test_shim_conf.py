"""Where the JVM shim comes from (omnigraph_spark/spark/shim_conf.py): a build directory first,
then the jar a wheel carries (its libraries through spark.jars.packages), and
configure_spark's settings on a builder (no Spark started)."""

from __future__ import annotations

import pytest

from omnigraph_spark.errors import OptionError
from omnigraph_spark.spark import shim_conf


class Builder:
    """The part of SparkSession.Builder configure_spark uses."""

    def __init__(self, **options):
        self._options = dict(options)

    def config(self, key, value):
        self._options[key] = value
        return self


@pytest.fixture
def packaged(tmp_path, monkeypatch):
    """No build directory; the package carries the jar."""
    jar = tmp_path / "pkg" / shim_conf.SHIM_JAR
    jar.parent.mkdir()
    jar.write_bytes(b"jar")
    monkeypatch.setenv(shim_conf.SHIM_DIR_ENV, str(tmp_path / "no-build"))
    monkeypatch.setattr(shim_conf, "packaged_shim_jar", lambda: str(jar))
    return str(jar)


def test_a_build_directory_goes_on_the_driver_and_executor_class_paths(tmp_path):
    (tmp_path / "lib").mkdir()
    for name in (shim_conf.SHIM_JAR, "lib/lance-core-7.0.0.jar"):
        (tmp_path / name).write_bytes(b"jar")
    conf = shim_conf.shim_spark_conf(str(tmp_path))
    cp = f"{tmp_path}/{shim_conf.SHIM_JAR}:{tmp_path}/lib/lance-core-7.0.0.jar"
    # the executors' too: a cluster's executors are other JVMs (tests/spark/test_standalone_cluster.py)
    # and the plugin that starts format("omnigraph")'s planner with the driver (BridgePlugin)
    assert conf == {
        "spark.driver.extraClassPath": cp,
        "spark.executor.extraClassPath": cp,
        "spark.plugins": "io.omnigraph.spark.BridgePlugin",
    }
    b = shim_conf.configure_spark(Builder(), shim_dir=str(tmp_path))
    assert b._options == {**conf, shim_conf.HIDE_TRACEBACK: "true"}  # clean df.write errors


def test_configure_spark_keeps_the_builders_hide_traceback(tmp_path):
    (tmp_path / shim_conf.SHIM_JAR).write_bytes(b"jar")
    b = shim_conf.configure_spark(Builder(**{shim_conf.HIDE_TRACEBACK: "false"}), shim_dir=str(tmp_path))
    assert b._options[shim_conf.HIDE_TRACEBACK] == "false"


def test_the_packaged_jar_ships_through_spark_jars_and_its_libraries_through_ivy(packaged):
    assert shim_conf.shim_jars() == [packaged]
    b = shim_conf.configure_spark(
        Builder(**{"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"}), extra_packages=["org.example:x:1"]
    )
    assert b._options["spark.jars"] == packaged
    assert b._options["spark.jars.packages"].split(",") == [
        "io.delta:delta-spark_2.13:4.0.0",
        *shim_conf.SHIM_PACKAGES,
        "org.example:x:1",
    ]
    assert "org.apache.arrow:arrow-vector" in b._options["spark.jars.excludes"].split(",")
    # the driver plugin: the planner, and Ivy's jars to a cluster's executors when pyspark's builder set
    # spark.jars back to the packaged jar alone (tests/spark/test_standalone_cluster.py, route "wheel")
    assert b._options["spark.plugins"] == "io.omnigraph.spark.BridgePlugin"
    again = shim_conf.configure_spark(b)  # idempotent: nothing listed twice
    assert again._options["spark.jars.packages"].split(",") == [
        "io.delta:delta-spark_2.13:4.0.0",
        *shim_conf.SHIM_PACKAGES,
        "org.example:x:1",
    ]
    assert again._options["spark.jars"] == packaged
    assert again._options["spark.plugins"] == "io.omnigraph.spark.BridgePlugin"


def test_no_shim_is_an_option_error(tmp_path, monkeypatch):
    monkeypatch.setattr(shim_conf, "packaged_shim_jar", lambda: None)
    assert shim_conf.shim_spark_conf(str(tmp_path)) == {}
    with pytest.raises(OptionError, match="no JVM shim here"):
        shim_conf.configure_spark(Builder(), shim_dir=str(tmp_path))


PROBE = """
import sys
from pyspark.sql import SparkSession
from omnigraph_spark.spark.jvm_read import shim_blocker
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.extraClassPath", sys.argv[1]).getOrCreate())
print(shim_blocker(spark))
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "what, expected",
    [
        ("nothing", "is not on the class path"),
        ("the shim jar alone", "the shim's libraries are not on the class path: org.lance.Dataset does not load"),
    ],
)
def test_the_probe_says_why_the_jvm_paths_are_unavailable(what, expected, tmp_path):
    """A session without the shim, and one with the shim jar but not its libraries (a helper
    that replaced spark.jars.packages): the JVM paths are off, and the reason says which."""
    import os
    import subprocess
    import sys

    built = shim_conf.built_shim_jars()
    if not built:
        pytest.skip("the JVM shim is not built (make jvm-shim)")
    class_path = str(tmp_path / "none.jar") if what == "nothing" else built[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")}
    p = subprocess.run(
        [sys.executable, "-c", PROBE, class_path], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert expected in p.stdout.strip().splitlines()[-1]
