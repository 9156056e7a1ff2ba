"""Auto-registration: Spark looks up top-level ``pyspark_*`` modules exposing ``DefaultSource``,
so ``format("omnigraph")`` works after ``pip install`` with no registration call."""

from omnigraph_spark.spark.source import OmnigraphDataSource as DefaultSource  # noqa: F401
