"""The JVM shim in tests: skipped with its reason where it is not built, a failure where
``OMNIGRAPH_SPARK_REQUIRE_SHIM`` is set (CI builds it and requires every JVM test to run)."""

from __future__ import annotations

import os

import pytest


def need_shim(spark) -> None:
    """Skip (or, with OMNIGRAPH_SPARK_REQUIRE_SHIM set, fail) unless ``spark`` has the shim."""
    from omnigraph_spark.spark.jvm_read import shim_jars, shim_loaded

    if shim_loaded(spark):
        return
    if os.environ.get("OMNIGRAPH_SPARK_REQUIRE_SHIM"):
        pytest.fail(f"OMNIGRAPH_SPARK_REQUIRE_SHIM is set but the JVM shim is not loadable ({shim_jars()})")
    pytest.skip("the JVM shim is not built (make jvm-shim)")
