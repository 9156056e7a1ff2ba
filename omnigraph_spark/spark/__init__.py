"""The Spark layer: the only package that imports pyspark.

* :func:`register` — make ``format("omnigraph")`` available on a session (also automatic
  once the package is installed, through ``pyspark_omnigraph.DefaultSource``);
* :mod:`.options` — option parsing (``WriteOptions``, ``ReadOptions``, the ``OPTIONS`` table);
* :mod:`.writer` — ``df.write.format("omnigraph")``; :mod:`.graph_io` — multi-type and
  JSONL loads as one graph commit.
"""
from __future__ import annotations


def register(spark) -> None:
    """Register the ``omnigraph`` data source on ``spark`` (driver)."""
    from .source import OmnigraphDataSource

    spark.dataSource.register(OmnigraphDataSource)


def unwrap_error(exc):
    """The typed OmnigraphError inside a Spark exception (see :func:`.writer.unwrap_error`)."""
    from .writer import unwrap_error as _u

    return _u(exc)


__all__ = ["register", "unwrap_error"]
