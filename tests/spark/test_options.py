"""Option parsing (no Spark session needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from omnigraph_spark.errors import OptionError
from omnigraph_spark.spark.options import OPTIONS, ReadOptions, WriteOptions


def test_write_defaults_and_case_insensitive_keys():
    o = WriteOptions.from_options({"PATH": "/g", "Type": "Person", "storage.aws_region": "eu"})
    assert (o.path, o.type, o.branch, o.write_mode, o.actor, o.txn) == ("/g", "Person", "main", "append", None, None)
    assert o.storage_options == {"aws_region": "eu"} and o.commit_lease_timeout == 300.0
    o = WriteOptions.from_options(
        {
            "path": "/g",
            "type": "Knows",
            "writemode": "MERGE",
            "txnappid": "a",
            "txnversion": "3",
            "maxrowsperfile": "10",
            "commitleasetimeout": "5",
        }
    )
    assert o.write_mode == "merge" and (o.txn.app_id, o.txn.version) == ("a", 3)
    assert o.max_rows_per_file == 10 and o.commit_lease_timeout == 5.0


def test_spark_overwrite_mode():
    assert WriteOptions.from_options({"path": "/g", "type": "P"}, overwrite=True).write_mode == "overwrite"
    assert WriteOptions.from_options({"path": "/g", "type": "P", "writeMode": "overwrite"}).write_mode == "overwrite"
    for m in ("append", "merge"):
        with pytest.raises(OptionError) as ei:
            WriteOptions.from_options({"path": "/g", "type": "P", "writeMode": m}, overwrite=True)
        assert ei.value.context["option"] == "writeMode"


@pytest.mark.parametrize(
    "opts, bad",
    [
        ({"path": "/g", "type": "P", "colour": "red"}, "colour"),
        ({"type": "P"}, "path"),
        ({"path": "/g"}, "type"),
        ({"path": "/g", "type": "P", "writeMode": "upsert"}, "writeMode"),
        ({"path": "/g", "type": "P", "txnAppId": "a"}, "txnVersion"),
        ({"path": "/g", "type": "P", "txnVersion": "1"}, "txnAppId"),
        ({"path": "/g", "type": "P", "txnAppId": "a", "txnVersion": "-1"}, "txnVersion"),
        ({"path": "/g", "type": "P", "maxRowsPerFile": "lots"}, "maxRowsPerFile"),
        ({"path": "/g", "type": "P", "commitLeaseTimeout": "0"}, "commitLeaseTimeout"),
        ({"path": "/g", "type": "P", "branch": " "}, "branch"),
        ({"path": "/g", "type": "P", "version": "3"}, "version"),  # a read option
    ],
)
def test_write_option_errors(opts, bad):
    with pytest.raises(OptionError) as ei:
        WriteOptions.from_options(opts)
    assert ei.value.code == "OPTION_INVALID"
    assert ei.value.context["option"].lower() == bad.lower()


def test_unknown_key_lists_allowed():
    with pytest.raises(OptionError) as ei:
        WriteOptions.from_options({"path": "/g", "type": "P", "colour": "red"})
    assert "colour" in str(ei.value) and "writeMode" in str(ei.value) and "txnAppId" in str(ei.value)


def test_read_options():
    o = ReadOptions.from_options(
        {
            "path": "/g",
            "type": "Person",
            "columns": "id, name",
            "pushdown": "false",
            "version": "4",
            "maxRowsPerPartition": "100",
            "storage.x": "y",
        }
    )
    assert o.columns == ("id", "name") and o.pushdown is False and o.version == 4
    assert o.max_rows_per_partition == 100 and o.storage_options == {"x": "y"}
    assert o.min_partitions is None
    assert ReadOptions.from_options({"path": "/g", "type": "P"}).pushdown is True
    for extra in (
        {"version": "2", "commit": "01ABC"},
        {"commit": "x", "timestampAsOf": "2026-01-01T00:00:00Z"},
        {"timestampAsOf": "yesterday"},
        {"writeMode": "append"},
        {"pushdown": "maybe"},
    ):
        with pytest.raises(OptionError):
            ReadOptions.from_options({"path": "/g", "type": "P", **extra})


def test_options_table_documents_every_key():
    names = {o.name for o in OPTIONS}
    assert {
        "path",
        "type",
        "branch",
        "writeMode",
        "actor",
        "txnAppId",
        "txnVersion",
        "maxRowsPerFile",
        "maxBytesPerFile",
        "commitLeaseTimeout",
        "version",
        "commit",
        "timestampAsOf",
        "columns",
        "maxRowsPerPartition",
        "minPartitions",
        "pushdown",
        "storage.<key>",
        "cascade",
        "rejectedRowsPath",
        "distributedCheckRows",
        "engine",
        "readChangeFeed",
        "startingVersion",
        "endingVersion",
        "startingTimestamp",
        "endingTimestamp",
        "maxCommitsPerTrigger",
        "maxRowsPerTrigger",
        "skipChangeCommits",
    } == names
    assert all(o.scope in ("read", "write", "read/write") and o.description for o in OPTIONS)
    for o in OPTIONS:  # every documented option parses in its scope
        if o.name.startswith("storage."):
            continue
        if "write" in o.scope and o.name not in ("path", "type"):
            val = {"writeMode": "append", "txnAppId": "a", "txnVersion": "1", "engine": "jvm"}.get(o.name, "1")
            extra = {"txnAppId": "a", "txnVersion": "1"} if o.name.startswith("txn") else {}
            WriteOptions.from_options({"path": "/g", "type": "P", **extra, o.name: val})
        if "read" in o.scope and o.name not in ("path", "type"):
            val = {
                "timestampAsOf": "2026-01-01T00:00:00",
                "startingTimestamp": "2026-01-01T00:00:00",
                "endingTimestamp": "2026-01-01T00:00:00",
                "pushdown": "true",
                "columns": "id",
                "engine": "python",
            }.get(o.name, "1")
            ReadOptions.from_options({"path": "/g", "type": "P", o.name: val})


def test_auto_registration_module_is_discoverable():
    """Spark's lookup (pyspark.sql.worker.lookup_data_sources) imports every top-level
    ``pyspark_*`` module on the worker's path and registers its DefaultSource by name()."""
    code = (
        "from pkgutil import iter_modules; from importlib import import_module;"
        "from pyspark.sql.datasource import DataSource;"
        "m=[i.name for i in iter_modules() if i.name=='pyspark_omnigraph'];"
        "mod=import_module(m[0]); assert issubclass(mod.DefaultSource, DataSource);"
        "import sys; print(mod.DefaultSource.name(), sorted({'lance', 'pyarrow'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    # the lookup runs in every session, also for format("parquet"): it imports neither lance nor
    # pyarrow (the source's planner workers do, when format("omnigraph") is used)
    assert out.stdout.strip() == "omnigraph []"


def test_distributed_check_rows_is_parsed_once():
    assert WriteOptions.from_options({"path": "/g", "type": "P"}).distributed_check_rows == 5_000_000
    assert (
        WriteOptions.from_options({"path": "/g", "type": "P", "distributedCheckRows": "0"}).distributed_check_rows == 0
    )
    for bad in ("-1", "many"):
        with pytest.raises(OptionError) as ei:
            WriteOptions.from_options({"path": "/g", "type": "P", "distributedCheckRows": bad})
        assert ei.value.context.get("option") == "distributedCheckRows"
