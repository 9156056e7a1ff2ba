"""Small pieces the benchmark scripts share."""
from __future__ import annotations


def read_text(path: str) -> str:
    """A /proc (or any) file's text; "" when it is gone (a process that just exited)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def with_delta(builder):
    """``builder`` with Delta's SQL extension, catalog and jars (delta-spark's pip helper)."""
    from delta import configure_spark_with_delta_pip

    return configure_spark_with_delta_pip(
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
