"""Smoke test of the benchmark harness (benchmarks/run.py) at a tiny scale.

Checks that one run produces results.json with every metric, the Markdown report and the
plot. Never asserts timings: the numbers are only meaningful at benchmark scale."""

from __future__ import annotations

import json
import math

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_harness_writes_every_metric(spark, tmp_path):
    from benchmarks import run

    out = tmp_path / "bench"
    run.main(
        [
            "--rows",
            "200",
            "--repeats",
            "1",
            "--read-repeats",
            "1",
            "--out",
            str(out),
            "--no-warm-up",
            "--fragments",
            "2,4",
            "--tables",
            "1,2",
            "--commit-rows-fragments",
            "2",
            "--commit-rows-per-fragment",
            "1,10",
            "--memory-sizes",
            "100,200",
            "--append-steps",
            "2",
        ],
        spark=spark,
    )
    res = json.loads((out / "results.json").read_text())
    for key in run.REQUIRED_METRICS:
        assert key in res, key
    w = res["write"]
    jvm = (
        {"omnigraph_jvm", "omnigraph_jvm_graph"} if w["jvm_path"] else set()
    )  # the JVM write path (make test builds the shim)
    assert set(w["contenders"]) == {"omnigraph", "parquet", "python_source_floor", "lance_single_process"} | jvm
    if w["jvm_path"]:
        assert w["ratio_omnigraph_jvm_vs_parquet_throughput"] > 0
        assert res["write_graph"]["staging_engine"] == "jvm"
        assert all(s["jvm_path_jvm_rss_mb"] > 0 for s in res["memory"]["sizes"])
    assert w["ratio_omnigraph_vs_python_floor_throughput"] > 0
    for c in w["contenders"].values():
        assert c["rows_per_s"] > 0 and c["mb_per_s"] > 0
    assert w["ratio_omnigraph_vs_parquet_throughput"] > 0
    for kind in ("full_scan", "selective_filter"):
        assert res["read"][kind]["ratio_omnigraph_vs_parquet_throughput"] > 0
        assert res["read"][kind]["ratio_omnigraph_vs_python_floor_throughput"] > 0
        if res["read"]["jvm_path"]:  # the session has jvm-shim on its class path (make test builds it)
            assert res["read"][kind]["ratio_omnigraph_jvm_vs_parquet_throughput"] > 0
    assert [x["fragments"] for x in res["commit_vs_fragments"]] == [2, 4]
    assert [x["tables"] for x in res["commit_vs_tables"]] == [1, 2]
    assert len(res["commit_vs_rows"]) == 2
    assert res["write_graph"]["validate"] >= 0 and res["write_graph"]["commit_publish"] >= 0
    steps = res["append"]["steps"]  # --append-steps 2: the table grows by --rows edges per step
    assert [x["existing_edges_before"] for x in steps] == [200, 200 + 200 + 2 * 1000]
    assert all(x[how]["validate_seconds"] > 0 for x in steps for how in ("recorded", "counted"))
    assert all(x["counted"]["validate_read_mb"] > x["recorded"]["validate_read_mb"] for x in steps)
    gap = res["edge_gap"]  # the format stores a minted id per edge; the DataFrame has none
    assert gap["format_columns"] == ["id", "src", "dst", "weight"] and "id" not in gap["dataframe_columns"]
    assert all(gap[k]["wall_seconds"] > 0 for k in ("spark_noop", "spark_parquet", "omnigraph_write_table"))
    assert gap["lance_encode_format_table"]["cpu_seconds"] > 0 and gap["ceiling_vs_parquet_throughput"] > 0
    assert res["validation"]["ratio_validate_vs_single_process_stage"] >= 0
    assert len(res["memory"]["sizes"]) == 2 and res["memory"]["sizes"][0]["driver_rss_mb"] > 0
    assert math.isclose(sum(res["profile"]["breakdown_share"].values()), 1.0, rel_tol=1e-6)
    for t in (
        "write_ge_parquet",
        "read_ge_parquet",
        "commit_lt_1s_at_1000_fragments",
        "commit_independent_of_rows",
        "validation_lt_half_write",
        "memory_flat",
    ):
        assert t in res["targets"]
    from omnigraph_spark.spark.jvm_read import shim_jars

    assert res["read"]["jvm_path"] == bool(shim_jars()) == w["jvm_path"]
    assert (out / "results.md").read_text().startswith("# omnigraph-spark benchmark")
    assert (out / "results.png").stat().st_size > 0
