"""The release version, from ``omnigraph_spark/VERSION``: the one file that numbers the wheel
(setup.py reads it), the JVM shim jar (``make jvm-shim`` passes it to Maven as ``-Drevision``,
so the jar is ``omnigraph-spark-shim-<version>.jar``) and ``omnigraph_spark.__version__``.
It ships inside the package, so an installed wheel names its packaged jar by the same value
(tests/test_version.py pins every place to it)."""

from __future__ import annotations

from pathlib import Path

__version__ = Path(__file__).with_name("VERSION").read_text(encoding="utf-8").strip()
