"""omnigraph-spark: move graph data between Apache Spark and Omnigraph 0.7.

Every dependency names the range CI tests (see docs/compatibility.md).
"""

from pathlib import Path

from setuptools import find_packages, setup

#: the one version of the wheel and of the shim jar inside it (omnigraph_spark/version.py)
VERSION = (Path(__file__).parent / "omnigraph_spark" / "VERSION").read_text(encoding="utf-8").strip()

setup(
    name="omnigraph-spark",
    version=VERSION,
    description="PySpark connector (Python DataSource API) for Omnigraph 0.7 graphs stored as Lance datasets",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["omnigraph_spark", "omnigraph_spark.*"]),
    py_modules=["pyspark_omnigraph"],
    # omnigraph_spark/jars: the JVM shim jar, copied in by `make wheel` (not in git)
    package_data={
        "omnigraph_spark": ["VERSION"],
        "omnigraph_spark.schema": ["*.lark"],
        "omnigraph_spark.data": ["*.pg", "*.jsonl", "*.properties"],
        "omnigraph_spark.jars": ["*.jar"],
    },
    install_requires=[
        # Spark 4.0 brought the Python DataSource API with the Arrow writer; CI runs the Spark
        # tests on the oldest (4.0.1) and the newest (4.3.x) release. Delta is an optional extra
        # with its own, narrower pyspark range: it never caps the core.
        "pyspark>=4.0.1,<4.4",
        # The engine (Omnigraph 0.7.2) pins Lance 7.0.0: stay on the same Lance line.
        "pylance>=7.0.0,<7.1",
        "pyarrow>=26.0.0,<27",
        "py4j>=0.10.9.7,<0.10.10",
        # pyspark's Arrow/Python worker path imports it; pyspark (4.0-4.3) warns on every session
        # that it does not yet fully support pandas >= 3
        "pandas>=2.2,<3",
        "numpy>=1.26,<3",
        "python-ulid>=4.1,<5",
        "lark>=1.2,<2",
        "tqdm>=4.66,<5",
    ],
    extras_require={
        # examples/delta_to_graph.py resolves the Delta jar matching the pip package through
        # configure_spark_with_delta_pip: 4.4.1 is on PyPI but its jar (delta-spark_4.2_2.13) is
        # not on Maven Central, so the tested range stops at 4.4.0. Each delta-spark release pins
        # its own pyspark line (4.0.x: pyspark 4.0): installing this extra may choose an older
        # pyspark than the core allows.
        "delta": ["delta-spark>=4.0.1,<4.4.1"],
        "test": [
            "pytest>=8.3,<10",
            # two workers (Makefile): Spark applications of their own beside the one SparkSession
            "pytest-xdist>=3.6,<4",
            "chispa>=0.10,<0.13",
            "hypothesis>=6.100,<7",
            "nbformat>=5.9,<6",
            "nbclient>=0.10,<0.11",
            "ipykernel>=6.29,<8",
            "matplotlib>=3.8,<4",
            # an S3 endpoint for the object-store tests (tests/object_store.py); boto3 comes with it
            "moto[server]>=5.1.18,<5.2",
            # the Spark Connect client (pyspark[connect]'s own minimums, pyspark 4.3): the
            # Connect tests drive a local Spark Connect server (tests/spark/test_connect.py)
            "grpcio>=1.76.0,<2",
            "grpcio-status>=1.76.0,<2",
            "googleapis-common-protos>=1.71.0,<2",
            "zstandard>=0.25.0,<1",
            # make lint (ruff.toml, mypy.ini): exact pins, as a new release adds rules and checks
            # that would fail CI on unchanged code; raise them on purpose
            "ruff==0.17.6",
            "mypy==2.4.1",
            "types-tqdm==4.70.0.20261106",
        ],
    },
    entry_points={"console_scripts": ["omnigraph-spark=omnigraph_spark.cli.main:main"]},
    classifiers=["Programming Language :: Python :: 3", "Framework :: Apache Spark"],
)
