"""The pure parts of benchmarks/format_bench.py: which contenders and modes run in which order,
how ratios against Parquet are taken per mode, how a process tree is split by role, and the
report's table. No Spark; never asserts timings."""

from __future__ import annotations

import os

import pytest

from benchmarks import format_bench as fb


def test_parse_contenders_keeps_order_and_needs_the_writer_first():
    assert fb.parse_contenders(fb.DEFAULT_CONTENDERS) == list(fb.CONTENDERS)
    assert fb.parse_contenders(" write_omnigraph , read_omnigraph ") == ["write_omnigraph", "read_omnigraph"]
    with pytest.raises(ValueError, match="list 'write_parquet' earlier"):
        fb.parse_contenders("read_parquet,write_parquet")
    with pytest.raises(ValueError, match="unknown 'write_delta'"):
        fb.parse_contenders("write_parquet,write_delta")
    with pytest.raises(ValueError, match="twice"):
        fb.parse_contenders("write_parquet,write_parquet")
    with pytest.raises(ValueError, match="nothing listed"):
        fb.parse_contenders(" , ")


def test_parse_modes():
    assert fb.parse_list("connect,classic", fb.MODES, "modes") == ["connect", "classic"]
    with pytest.raises(ValueError, match="--modes: unknown 'remote'"):
        fb.parse_list("classic,remote", fb.MODES, "modes")


def test_plan_drops_the_python_write_above_its_row_limit():
    names = list(fb.CONTENDERS)
    assert fb.plan(names, 1_000_000, 1_000_000) == names
    assert "write_omnigraph_python" not in fb.plan(names, 10_000_000, 1_000_000)
    assert fb.plan(names, 10_000_000, 1_000_000) == [n for n in names if n != "write_omnigraph_python"]


def test_ratios_per_metric_against_parquet_of_the_same_mode():
    res = {
        "write_parquet": {"write_s": 10.0},
        "write_omnigraph": {"write_s": 8.0},
        "write_omnigraph_python": {"write_s": 40.0},
        "read_parquet": {"full_s": 1.0, "filter_s": 0.5},
        "read_omnigraph": {"full_s": 2.0, "filter_s": 0.25},
    }
    assert fb.ratios(res) == {
        "write_omnigraph.write_s": 1.25,
        "write_omnigraph_python.write_s": 0.25,
        "read_omnigraph.full_s": 0.5,
        "read_omnigraph.filter_s": 2.0,
    }
    # a baseline that did not run (or a missing timing) gives None, never a made-up ratio
    assert fb.ratios({"read_omnigraph": {"full_s": 2.0, "filter_s": 1.0}}) == {
        "read_omnigraph.full_s": None,
        "read_omnigraph.filter_s": None,
    }
    assert fb.ratios({"write_parquet": {"write_s": 3.0}}) == {}


def test_median():
    assert fb.median([3.0, 1.0, 2.0]) == 2.0
    assert fb.median([4.0, 1.0]) == 2.5
    with pytest.raises(ValueError):
        fb.median([])


def test_same_answers_allows_float_sums_in_another_order_only():
    assert fb.same_answers([(100000, 45021.61403557418), (100000, 45021.614035574195), (100000, 45021.61403557419)])
    assert not fb.same_answers([(100000, 1.0), (99999, 1.0)])
    assert not fb.same_answers([(10, 45021.6), (10, 45021.7)])
    assert not fb.same_answers([(10, 1.0), (10, None)])
    assert fb.same_answers([(10, None), (10, None)])


def test_classify_splits_a_tree_by_role():
    mb = 2**20
    table = {
        10: (1, 100 * mb, "python3"),
        11: (10, 2000 * mb, "java"),
        12: (11, 300 * mb, "python3"),
        13: (11, 50 * mb, "python3"),
        14: (11, 250 * mb, "python3"),
        15: (11, 5 * mb, "bash"),
        99: (1, 7 * mb, "python3"),
    }
    cmd = {
        12: "python -m pyspark.daemon",
        13: "python -m pyspark.daemon",
        14: "/venv/bin/python -m omnigraph_spark.spark.bridge",
    }
    groups = fb.classify(table, 10, cmd)
    assert groups == {"root": [10], "jvm": [11], "bridge": [14], "worker": [12, 13]}
    assert fb.tree_rss_mb(table, 10, cmd) == {
        "root_mb": 100,
        "jvm_mb": 2000,
        "bridge_max_mb": 250,
        "worker_max_mb": 300,
        "workers_sum_mb": 350,
    }
    # a Connect server: its root is the JVM itself (spark-submit execs java)
    assert fb.tree_rss_mb(table, 11, cmd)["root_mb"] == 2000


def test_markdown_has_a_row_per_measurement_and_the_ratios():
    hwm = {
        "driver_python_hwm_mb": 300,
        "driver_jvm_hwm_mb": 2000,
        "worker_max_hwm_mb": 60,
        "workers_sum_hwm_mb": 60,
        "workers": 1,
        "worker_max_cmd": None,
    }
    w = {
        "rows": 100,
        "probe_write_s": 1.0,
        "memory_hwm": hwm,
        "load": [[1.0, 1, 1], [1.0, 1, 1]],
        "memory_rss_sampled": {"contender_bridge_max_mb": 200},
    }
    r_ = {
        "plan_s": 0.5,
        "full_answer": [100, 4950],
        "filter_answer": [1, 5.0],
        "full_cold_s": 2.0,
        "filter_cold_s": 1.0,
        "memory_hwm": hwm,
        "load": [[1.0, 1, 1], [1.0, 1, 1]],
        "memory_rss_sampled": {},
    }
    cs = {
        "write_parquet": {**w, "write_s": 2.0},
        "write_omnigraph": {**w, "write_s": 1.0},
        "read_parquet": {**r_, "full_s": 1.0, "filter_s": 1.0},
        "read_omnigraph": {**r_, "full_s": 2.0, "filter_s": 0.5},
    }
    r = {
        "rows": 100,
        "date": "d",
        "command": "c",
        "driver_memory": "8g",
        "load_start": [1],
        "load_end": [2],
        "machine": {"cores": 2, "python": "3", "pyspark": "4"},
        "generate_s": 1.0,
        "read_repeats": 3,
        "input": {"files": 2, "bytes": 10},
        "modes": ["classic"],
        "results": {"classic": cs},
        "ratios": {"classic": fb.ratios(cs)},
    }
    text = fb.markdown(r)
    assert "| write_omnigraph | 100 | 1.0 | 2.00x |" in text
    assert "| read_omnigraph (full) | 100 | 2.0 (cold 2.0) | 0.50x |" in text
    assert "| read_omnigraph (filter) | 1 | 0.5 (cold 1.0) | 2.00x |" in text
    assert text.count("| baseline |") == 3  # the Parquet write, full scan and filter


def test_tree_cpu_counts_the_cpu_of_a_child_process():
    """The writes' CPU seconds: a live child that has spun for 0.6 s of CPU adds about that much
    to its parent's tree; one that only sleeps adds next to nothing. /proc counts CPU in clock
    ticks, by sampling, so a spin reads up to a few ticks short of its exact CPU time."""
    import subprocess
    import sys

    from benchmarks.common import tree_cpu_s

    before = tree_cpu_s(os.getpid())
    spin = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time\nt = time.process_time()\n"
                "while time.process_time() - t < 0.6: pass\nprint('spun', flush=True)\n"
                "sys.stdin.read()"
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    idle = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert spin.stdout.readline().strip() == "spun"  # its 0.6 s of CPU are spent; it waits, alive
        assert 0.5 <= tree_cpu_s(spin.pid) and tree_cpu_s(idle.pid) < 0.3
        assert tree_cpu_s(os.getpid()) - before >= 0.5
    finally:
        spin.communicate("")
        idle.communicate(b"")
