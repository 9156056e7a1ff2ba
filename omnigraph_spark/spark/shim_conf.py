"""Where the JVM shim comes from, and the Spark settings that load it.

Three places, first found wins:

1. a directory of built jars: ``shim_dir`` / ``$OMNIGRAPH_SPARK_SHIM_DIR``, else this
   checkout's ``jvm-shim/target`` (``make jvm-shim``): the shim jar plus its libraries in
   ``lib/``, put on ``spark.driver.extraClassPath`` and ``spark.executor.extraClassPath``
   (local mode: the executors are the driver's JVM; a cluster's executors find the same paths
   on their machine: this machine's workers, or the directory copied to every node);
2. the jar inside the installed package (``omnigraph_spark/jars/omnigraph-spark-shim-<version>.jar``,
   put there by ``make wheel``): ``spark.jars`` ships it to the driver and the executors, and
   its libraries (the Lance Java SDK and two Arrow modules, :data:`SHIM_PACKAGES`) resolve
   from Maven Central through ``spark.jars.packages``, minus what Spark already ships
   (:data:`SHIM_EXCLUDES`: Arrow's vector and memory modules, Jackson, slf4j, commons-lang3;
   the same exclusions as ``jvm-shim/pom.xml``), like Delta's ``configure_spark_with_delta_pip``.
   The shim's ``spark.plugins`` entry ships the packages' jars to a cluster's executors when a
   Python builder's ``spark.jars`` replaced the list spark-submit resolved (jvm-shim
   ``BridgePlugin``). These jars are in Spark's class loader, not the JVM's class path (jvm-shim
   ``LanceDispatcherGuard``: what that means for Lance's native dispatcher thread);
3. nowhere: the Python paths only.

:func:`configure_spark` applies the settings to a ``SparkSession.Builder`` (before the session
starts: the JVM reads its class path once).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from importlib import resources

from ..errors import OptionError
from ..version import __version__
from .runtime import warm_imports

#: the shim jar's file name: Maven's ``<artifactId>-<version>.jar`` (jvm-shim/pom.xml), the
#: version being the package's own (omnigraph_spark/VERSION)
SHIM_JAR = f"omnigraph-spark-shim-{__version__}.jar"
#: Spark prints a Python data source's error without the Python traceback, so the first line of a
#: failed df.write carries the connector's ``[CODE] message`` (docs/troubleshooting.md).
HIDE_TRACEBACK = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
PLUGIN = "io.omnigraph.spark.BridgePlugin"
SHIM_DIR_ENV = "OMNIGRAPH_SPARK_SHIM_DIR"

#: the shim's runtime libraries as Maven coordinates (jvm-shim/pom.xml's dependencies)
SHIM_PACKAGES = (
    "org.lance:lance-core:7.0.0",
    "org.apache.arrow:arrow-c-data:19.0.0",
    "org.apache.arrow:arrow-dataset:18.3.0",
)
#: what Ivy must not add beside Spark's own jars (Spark 4 ships Arrow 19, Jackson 2.x, slf4j 2,
#: commons-lang3): the transitive dependencies jvm-shim/pom.xml excludes
SHIM_EXCLUDES = (
    "org.apache.arrow:arrow-vector",
    "org.apache.arrow:arrow-memory-core",
    "org.apache.arrow:arrow-memory-netty",
    "org.apache.arrow:arrow-memory-unsafe",
    "org.apache.arrow:arrow-format",
    "org.apache.arrow:arrow-compression",
    "org.apache.arrow:arrow-memory-netty-buffer-patch",
    "com.fasterxml.jackson.core:jackson-core",
    "com.fasterxml.jackson.core:jackson-databind",
    "com.fasterxml.jackson.core:jackson-annotations",
    # Ivy takes the newest version a module asks for (Maven the nearest): lance's jsr310 module
    # would come at 2.19 beside Spark's own 2.21
    "com.fasterxml.jackson.datatype:jackson-datatype-jsr310",
    "org.slf4j:slf4j-api",
    "org.apache.commons:commons-lang3",
)


def _checkout_target() -> str:
    return os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "jvm-shim", "target"
    )


def built_shim_jars(shim_dir: str | None = None) -> list[str]:
    """The shim jar and its libraries from a build directory (place 1), or []."""
    d = shim_dir or os.environ.get(SHIM_DIR_ENV) or _checkout_target()
    jar = os.path.join(d, SHIM_JAR)
    if not os.path.isfile(jar):
        return []
    return [jar] + sorted(glob.glob(os.path.join(d, "lib", "*.jar")))


def packaged_shim_jar() -> str | None:
    """The shim jar inside the installed package (place 2), or None (a checkout before
    ``make wheel``)."""
    jar = resources.files("omnigraph_spark") / "jars" / SHIM_JAR
    return str(jar) if jar.is_file() else None


def shim_jars(shim_dir: str | None = None) -> list[str]:
    """The shim's jars on this machine: a build directory's jar and libraries, else the
    packaged jar alone (its libraries come from Maven through :func:`shim_spark_conf`), else []."""
    built = built_shim_jars(shim_dir)
    if built or shim_dir:
        return built
    jar = packaged_shim_jar()
    return [jar] if jar else []


def shim_spark_conf(shim_dir: str | None = None) -> dict[str, str]:
    """The session settings that load the shim (see the module doc), or {} when there is none.
    Set them before the session starts."""
    built = built_shim_jars(shim_dir)
    if built:
        cp = os.pathsep.join(built)
        # the plugin starts format("omnigraph")'s planner while the driver starts (jvm-shim BridgePlugin)
        return {"spark.driver.extraClassPath": cp, "spark.executor.extraClassPath": cp, "spark.plugins": PLUGIN}
    jar = None if shim_dir else packaged_shim_jar()
    if jar is None:
        return {}
    # spark-submit puts spark.jars (and Ivy's jars of the packages) in the driver's class loader before
    # the context loads its plugins; the plugin also ships Ivy's jars to the executors where pyspark's
    # builder has set spark.jars back to this one jar (BridgePlugin)
    return {
        "spark.jars": jar,
        "spark.jars.packages": ",".join(SHIM_PACKAGES),
        "spark.jars.excludes": ",".join(SHIM_EXCLUDES),
        "spark.plugins": PLUGIN,
    }


#: settings whose values are lists: configure_spark appends to what the builder already has
_LISTS = {
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.jars.excludes": ",",
    "spark.plugins": ",",
    "spark.driver.extraClassPath": os.pathsep,
    "spark.executor.extraClassPath": os.pathsep,
}


def configure_spark(builder, extra_packages: Iterable[str] | None = None, shim_dir: str | None = None):
    """Put the JVM shim on a ``SparkSession.Builder`` (the fast paths of write_table,
    write_graph, read_table and read_graph), and return it::

        spark = omnigraph_spark.configure_spark(SparkSession.builder.appName("etl")).getOrCreate()

    From a pip install: the packaged jar through ``spark.jars`` and its libraries through
    ``spark.jars.packages`` (resolved from Maven Central on first use, then Ivy's cache), on a
    local or a cluster master; from a checkout with ``make jvm-shim``: the built jars on
    ``spark.driver.extraClassPath`` and ``spark.executor.extraClassPath``. Both also set
    ``spark.plugins`` to the shim's driver plugin (``io.omnigraph.spark.BridgePlugin``).
    It also sets ``spark.sql.execution.pyspark.udf.hideTraceback.enabled=true`` (unless the
    builder has it): a failed df.write then shows ``[CODE] message`` on its first line. And it
    starts importing lance in the background (:func:`~omnigraph_spark.spark.runtime.warm_imports`),
    so the first load does not wait for it.
    ``extra_packages``: more Maven coordinates for ``spark.jars.packages`` (e.g. Delta's). List
    settings the builder already has are extended, not replaced.

    Raises:
        OptionError: no shim on this machine (an install without the packaged jar, a checkout
        without ``make jvm-shim``).
    """
    warm_imports()  # while the session this builder makes starts its JVM
    conf = shim_spark_conf(shim_dir)
    if not conf:
        raise OptionError(
            f"no JVM shim here: this install has no packaged {SHIM_JAR} and no "
            "jvm-shim/target build (make jvm-shim, or make wheel and install the wheel)",
            option="spark.jars",
        )
    if extra_packages:
        packages = [p for p in conf.get("spark.jars.packages", "").split(",") if p] + list(extra_packages)
        conf["spark.jars.packages"] = ",".join(packages)
    current = getattr(builder, "_options", {}) or {}  # what the builder was already given
    if HIDE_TRACEBACK not in current:  # df.write errors: "[CODE] message" on the first line
        conf[HIDE_TRACEBACK] = "true"
    for key, value in conf.items():
        sep = _LISTS.get(key)
        before = current.get(key)
        if sep and before:
            have = [v for v in str(before).split(sep) if v]
            value = sep.join(have + [v for v in value.split(sep) if v and v not in have])
        builder = builder.config(key, value)
    return builder


__all__ = [
    "HIDE_TRACEBACK",
    "SHIM_JAR",
    "SHIM_PACKAGES",
    "SHIM_EXCLUDES",
    "built_shim_jars",
    "packaged_shim_jar",
    "shim_jars",
    "shim_spark_conf",
    "configure_spark",
]
