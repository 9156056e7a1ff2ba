"""The Spark tests' own fixture: the shared SparkSession with the JVM shim required."""

import pytest

from tests.shim import need_shim


@pytest.fixture(scope="module")
def jvm(spark):
    need_shim(spark)
    return spark
