"""omnigraph-spark: move graph data between Apache Spark and Omnigraph 0.7.

Public names only, each imported when first used: Spark-dependent helpers so that the store
layer works without pyspark installed, and the graph (lance, pyarrow) so that importing the
package is cheap. Spark imports ``pyspark_omnigraph`` (this package's data source) in a Python
worker of every session to look up data sources, before any of them is used.
"""

from . import errors
from ._lance_import import defer_rest_client
from .version import __version__  # noqa: F401 (the package version)

defer_rest_client()  # before this package imports lance: its REST client's APIs load on first use

__all__ = [
    "Graph",
    "Snapshot",
    "TableInfo",
    "errors",
    "register",
    "write_graph",
    "write_table",
    "load_jsonl",
    "read_graph",
    "read_table",
    "shim_jars",
    "configure_spark",
    "unwrap_error",
    "stream_graph",
    "GraphBatchWriter",
]


def register(spark) -> None:
    """Register the ``omnigraph`` data source on ``spark`` (auto-registration also works)."""
    from .spark import register as _register  # lazy: public names load on first use (module doc)

    _register(spark)


def write_graph(uri, frames, **kwargs):
    """Write several DataFrames (node and edge types) as ONE graph commit. See docs/api.md."""
    from .spark.graph_io import write_graph as _w  # lazy: public names load on first use (module doc)

    return _w(uri, frames, **kwargs)


def write_table(df, uri, type, **kwargs):
    """One DataFrame into one node or edge type as one graph commit, staged by the JVM sink
    when it can (see docs/api.md, "The JVM write path"), else by Python workers."""
    from .spark.graph_io import write_table as _w  # lazy: public names load on first use (module doc)

    return _w(df, uri, type, **kwargs)


def load_jsonl(spark, uri, path, **kwargs):
    """Load files in the engine's JSONL envelope format through Spark, as one graph commit."""
    from .spark.graph_io import load_jsonl as _l  # lazy: public names load on first use (module doc)

    return _l(spark, uri, path, **kwargs)


def read_graph(spark, uri, **kwargs):
    """All node and edge tables of one snapshot as DataFrames (vertices/edges views too)."""
    from .spark.read_graph import read_graph as _r  # lazy: public names load on first use (module doc)

    return _r(spark, uri, **kwargs)


def read_table(spark, uri, type, **kwargs):
    """One node or edge type of one snapshot, through the JVM scan when it can (see
    docs/api.md, "The JVM read path"), else the ``omnigraph`` Python source."""
    from .spark.jvm_read import read_table as _r  # lazy: public names load on first use (module doc)

    return _r(spark, uri, type, **kwargs)


def stream_graph(stream_df, uri, split, checkpoint_location, **kwargs):
    """Start a streaming query writing each micro-batch, split into node and edge DataFrames,
    as ONE graph commit, exactly once. See docs/streaming.md."""
    from .spark.stream import stream_graph as _s  # lazy: public names load on first use (module doc)

    return _s(stream_df, uri, split, checkpoint_location, **kwargs)


def __getattr__(name):
    if name in ("Graph", "Snapshot", "TableInfo"):
        from . import graph  # lazy: public names load on first use (module doc)

        return getattr(graph, name)
    if name == "GraphBatchWriter":  # the foreachBatch function of stream_graph (needs pyspark)
        from .spark.stream import GraphBatchWriter  # lazy: public names load on first use (module doc)

        return GraphBatchWriter
    raise AttributeError(f"module 'omnigraph_spark' has no attribute {name!r}")


def shim_jars(shim_dir=None):
    """The JVM shim's jars on this machine: a ``make jvm-shim`` build's jar and libraries, else
    the jar packaged in this install (empty if neither). See :func:`configure_spark`."""
    from .spark.shim_conf import shim_jars as _j  # lazy: public names load on first use (module doc)

    return _j(shim_dir)


def configure_spark(builder, extra_packages=None, shim_dir=None):
    """Put the JVM shim (the fast paths of write_table/write_graph/read_table/read_graph) on a
    ``SparkSession.Builder`` and return it: the packaged jar plus its Lance libraries from Maven
    (``spark.jars`` / ``spark.jars.packages``), or a checkout's ``make jvm-shim`` build. See
    docs/api.md, "The JVM paths"."""
    from .spark.shim_conf import configure_spark as _c  # lazy: public names load on first use (module doc)

    return _c(builder, extra_packages, shim_dir)


def unwrap_error(exc):
    """The typed OmnigraphError a Spark exception carries (e.g. from ``df.write...save()``),
    or None; ``exc`` itself when it already is one. See docs/troubleshooting.md."""
    from .spark.error_tags import unwrap_error as _u  # lazy: public names load on first use (module doc)

    return _u(exc)
