"""One version for the wheel and the shim jar: ``omnigraph_spark/VERSION`` (omnigraph_spark/version.py).

setup.py reads that file, ``make jvm-shim`` passes it to Maven as ``-Drevision``, and the jar's name
(``SHIM_JAR``) carries it. jvm-shim/pom.xml's default ``revision`` (what a plain ``mvn verify`` or an
IDE builds) must be the same value, and so must a built jar's manifest."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

import omnigraph_spark
from omnigraph_spark.spark.shim_conf import SHIM_JAR

ROOT = Path(__file__).resolve().parent.parent
POM = "{http://maven.apache.org/POM/4.0.0}"


def _version() -> str:
    return (ROOT / "omnigraph_spark" / "VERSION").read_text(encoding="utf-8").strip()


def test_the_version_file_holds_one_release_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?(a|b|rc|dev)\d+)?", _version()), _version()
    assert omnigraph_spark.__version__ == _version()


def test_setup_py_builds_the_wheel_with_that_version():
    got = (
        subprocess.run(
            [sys.executable, "setup.py", "--version"], cwd=ROOT, check=True, capture_output=True, text=True, timeout=120
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert got == _version()


def test_the_pom_builds_the_jar_with_that_version():
    pom = ET.parse(ROOT / "jvm-shim" / "pom.xml").getroot()
    assert pom.findtext(f"{POM}artifactId") == "omnigraph-spark-shim"
    assert pom.findtext(f"{POM}version") == "${revision}"  # given by make jvm-shim as -Drevision
    assert pom.findtext(f"{POM}properties/{POM}revision") == _version()
    assert SHIM_JAR == f"omnigraph-spark-shim-{_version()}.jar"


def test_the_makefile_passes_the_version_file_to_maven():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "VERSION := $(shell cat omnigraph_spark/VERSION)" in make
    assert "-Drevision=$(VERSION)" in make
    assert "SHIM := jvm-shim/target/omnigraph-spark-shim-$(VERSION).jar" in make


def test_a_built_jar_carries_that_version():
    built = sorted((ROOT / "jvm-shim" / "target").glob("omnigraph-spark-shim-*.jar"))
    if not built:
        pytest.skip("no jvm-shim build here (make jvm-shim)")
    assert [p.name for p in built] == [SHIM_JAR], "a jar of another version is left in jvm-shim/target"
    with zipfile.ZipFile(built[0]) as z:
        manifest = z.read("META-INF/MANIFEST.MF").decode()
    assert f"Implementation-Version: {_version()}" in manifest.splitlines()
