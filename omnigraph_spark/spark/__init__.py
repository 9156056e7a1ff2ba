"""The Spark layer: the only package that imports pyspark.

* :func:`register` — make ``format("omnigraph")`` available on a session (also automatic
  once the package is installed, through ``pyspark_omnigraph.DefaultSource``);
* :mod:`.options` — option parsing (``WriteOptions``, ``ReadOptions``, the ``OPTIONS`` table);
* :mod:`.writer` — ``df.write.format("omnigraph")``; :mod:`.graph_io` — multi-type and
  JSONL loads as one graph commit.
"""

from __future__ import annotations

from .error_tags import unwrap_error


def register(spark) -> None:
    """Register the ``omnigraph`` data source on ``spark`` (driver).

    Idempotent: Spark 4.0 refuses to re-register a name that auto-registration (or an earlier
    call) already made available (``DATA_SOURCE_ALREADY_EXISTS``); that is success here.
    """
    from .source import OmnigraphDataSource  # lazy: importing a spark submodule stays free of pyspark

    try:
        spark.dataSource.register(OmnigraphDataSource)
    except Exception as e:  # pyspark's AnalysisException; its class moved between releases
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise


__all__ = ["register", "unwrap_error"]
