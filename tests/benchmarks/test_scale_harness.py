"""The pure parts of the scale benchmarks (benchmarks/scale_bench.py, benchmarks/store_scale.py):
how rows are split, which contenders may run in which order, what is deleted between them, how
peaks are read from /proc and how ratios are taken. No Spark; never asserts timings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks import scale_bench as sb
from benchmarks import store_scale as ss


@pytest.mark.parametrize("rows", [8, 1_000_000, 10_000_000, 50_000_001])
def test_split_rows_covers_every_row(rows):
    n = sb.split_rows(rows)
    assert n["nodes"] + n["edges"] == rows
    assert 2.9 <= n["edges"] / n["nodes"] <= 3.2  # about 1:3 nodes:edges
    assert 1 <= n["append_edges"] <= n["edges"] // 10 + 1
    assert 2 <= n["merge_nodes"] <= max(2, n["nodes"] // 10)


@pytest.mark.parametrize("rows", [8, 1_000_000])
def test_the_merge_file_updates_nodes_spread_over_the_table_and_adds_as_many(rows):
    n = sb.split_rows(rows)
    idx = [sb.merge_index(i, n["nodes"]) for i in range(n["merge_nodes"])]
    old = [x for x in idx if x < n["nodes"]]
    assert len(set(idx)) == len(idx)
    assert len(old) == (n["merge_nodes"] + 1) // 2 and len(idx) - len(old) == n["merge_nodes"] // 2
    if rows >= 1_000_000:
        assert max(old) >= 0.9 * n["nodes"]  # up to the last fragments


def test_split_rows_refuses_too_few():
    with pytest.raises(ValueError, match="at least 8"):
        sb.split_rows(7)


@pytest.mark.parametrize("rows,per,files", [(1, 10, 2), (10, 10, 2), (21, 10, 3), (37_500_000, 2_000_000, 19)])
def test_input_files(rows, per, files):
    assert sb.input_files(rows, per) == files


def test_parse_contenders_keeps_order_and_checks_needs():
    assert sb.parse_contenders(sb.DEFAULT_CONTENDERS) == [c for c in sb.CONTENDERS if c != "merge_in_memory"]
    assert sb.parse_contenders(" parquet , write_graph,append ") == ["parquet", "write_graph", "append"]
    with pytest.raises(ValueError, match="needs 'write_graph'"):
        sb.parse_contenders("append,write_graph")
    with pytest.raises(ValueError, match="needs 'parquet'"):
        sb.parse_contenders("parquet_append")
    with pytest.raises(ValueError, match="unknown contender 'orc'"):
        sb.parse_contenders("parquet,orc")
    with pytest.raises(ValueError, match="twice"):
        sb.parse_contenders("parquet,parquet")


def test_drop_outputs_keeps_only_what_a_later_contender_reads(tmp_path):
    for name in ("parquet", "delta", "write_graph", "format"):
        (tmp_path / f"out-{name}").mkdir()
    sb._drop_outputs(tmp_path, "write_graph", ["append", "parquet_append", "format"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out-parquet", "out-write_graph"]
    sb._drop_outputs(tmp_path, "append", ["parquet_append"])
    assert [p.name for p in tmp_path.iterdir()] == ["out-parquet"]
    sb._drop_outputs(tmp_path, "parquet_append", [])
    assert list(tmp_path.iterdir()) == []


def test_status_kb():
    text = "Name:\tpython\nVmPeak:\t  900 kB\nVmHWM:\t  1234 kB\nVmRSS:\t  1000 kB\n"
    assert sb.status_kb(text, "VmHWM") == 1234
    assert sb.status_kb(text, "VmRSS") == 1000
    assert sb.status_kb(text, "VmSwap") == 0


def test_descendants_walks_the_tree():
    table = {1: (0, 0, "python"), 2: (1, 0, "java"), 3: (2, 0, "python3"), 4: (3, 0, "python3"), 9: (0, 0, "x")}
    assert sorted(sb.descendants(table, 1)) == [2, 3, 4]
    assert sb.descendants(table, 4) == []


def test_tree_hwm_reads_this_process_and_its_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(30)"])
    try:
        for _ in range(100):  # until the child has touched its 64 MB
            if sb.status_kb(sb.read_text(f"/proc/{child.pid}/status"), "VmHWM") > 64 * 1024:
                break
            subprocess.run(["sleep", "0.05"])
        h = sb.tree_hwm(os.getpid())
        assert h["driver_python_hwm_mb"] > 0
        # the child is a Python process under this one (as Spark's workers are under its JVM)
        assert h["workers"] >= 1 and h["worker_max_hwm_mb"] >= 64
        # a JVM under this process (the test session's own Spark, if one started) is the only
        # thing counted as the driver JVM: the Python child is not
        table = sb.proc_table()
        jvms = [p for p in sb.descendants(table, os.getpid()) if table[p][2] == "java"]
        assert (h["driver_jvm_hwm_mb"] > 0) == bool(jvms)
    finally:
        child.kill()
        child.wait()


def test_ratios_against_the_baseline_of_the_same_run():
    res = {
        "parquet": {"write_s": 10.0},
        "write_graph": {"write_s": 20.0},
        "delta": {"write_s": 8.0},
        "parquet_append": {"write_s": 3.0},
        "append": {"write_s": 2.0},
    }
    r = sb.ratios(res)
    assert r == {"write_graph_vs_parquet": 0.5, "delta_vs_parquet": 1.25, "append_vs_parquet_append": 1.5}
    assert sb.ratios({"format": {"write_s": 5.0}}) == {"format_vs_parquet": None}


def test_spread():
    assert ss.spread(10_000, 10) == [1000] * 10
    parts = ss.spread(20_003, 7)
    assert sum(parts) == 20_003 and max(parts) - min(parts) <= 1
    with pytest.raises(ValueError):
        ss.spread(5, 0)


def test_fit_line_recovers_a_line():
    xs = [10, 100, 300, 1000]
    f = ss.fit_line(xs, [0.5 + 0.002 * x for x in xs])
    assert f["intercept"] == pytest.approx(0.5) and f["slope"] == pytest.approx(0.002)
    with pytest.raises(ValueError):
        ss.fit_line([1, 1], [2, 3])


def test_history_touches_two_tables_in_turn():
    seen = [ss.tables_touched(c, 10) for c in range(5)]
    assert all(len(t) == 2 for t in seen)
    assert sorted(i for t in seen for i in t) == list(range(10))


def test_schema_of_compiles():
    from omnigraph_spark.schema import compile_schema

    cat = compile_schema(ss.schema_of(3)).catalog()
    assert sorted(cat.nodes) == ["T0", "T1", "T2"]


def test_markdown_has_a_row_per_contender_and_the_ratios():
    hwm = {
        "driver_python_hwm_mb": 300,
        "driver_jvm_hwm_mb": 2000,
        "worker_max_hwm_mb": 60,
        "workers_sum_hwm_mb": 60,
        "workers": 1,
        "worker_max_cmd": "pyspark.daemon",
    }
    contenders = {
        "parquet": {"rows": 100, "write_s": 2.0, "rows_per_s": 50, "memory_hwm": hwm, "files": 2, "bytes": 2**20},
        "write_graph": {
            "rows": 100,
            "write_s": 1.0,
            "rows_per_s": 100,
            "memory_hwm": hwm,
            "files": 4,
            "bytes": 3 * 2**20,
            "shim_loaded": True,
        },
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
        "contenders": contenders,
        "input": {
            "nodes": 25,
            "edges": 75,
            "append_edges": 7,
            "nodes_input": {"files": 2, "bytes": 10},
            "edges_input": {"files": 2, "bytes": 30},
        },
    }
    r["ratios"] = sb.ratios(contenders)
    text = sb.markdown(r)
    rows = [line for line in text.splitlines() if line.startswith("| parquet") or line.startswith("| write_graph")]
    assert len(rows) == 2
    assert "| baseline |" in rows[0] and f"| {r['ratios']['write_graph_vs_parquet']}x parquet |" in rows[1]
    assert "largest Python worker ran `pyspark.daemon`" in text
    assert "- parquet: nodes" not in text  # no per-table times recorded: no line

    contenders["parquet"]["tables_s"] = {"nodes": 0.8, "edges": 1.2}
    assert "- parquet: nodes 0.8 s, then edges 1.2 s" in sb.markdown(r)


def test_timed_tables_runs_nodes_then_edges_and_sums_them(monkeypatch):
    ran = []
    clock = iter([0.0, 1.5, 10.0, 12.25])  # nodes take 1.5 s, edges 2.25 s
    monkeypatch.setattr(sb.time, "perf_counter", lambda: next(clock))
    res = {}
    sb._timed_tables(res, lambda: ran.append("nodes"), lambda: ran.append("edges"))
    assert ran == ["nodes", "edges"]
    assert res == {"write_s": 3.75, "tables_s": {"nodes": 1.5, "edges": 2.25}}


def test_round_order_mirrors_odd_rounds_and_keeps_needs_first():
    names = sb.parse_contenders("parquet,write_graph,append,parquet_append,format")
    assert sb.round_order(names, 0) == names
    assert sb.round_order(names, 2) == names
    odd = sb.round_order(names, 1)
    assert odd == ["format", "write_graph", "append", "parquet", "parquet_append"]
    assert sorted(odd) == sorted(names)
    for n in odd:  # what each contender needs ran before it in the same round
        if n in sb.NEEDS:
            assert odd.index(sb.NEEDS[n]) < odd.index(n)
    assert odd.index("write_graph") < odd.index("parquet")  # and write_graph ran first this time
    assert sb.round_order(["parquet", "delta"], 1) == ["delta", "parquet"]


def test_ratio_summary_gives_every_round_and_the_median():
    rounds = [
        {"ratios": {"write_graph_vs_parquet": 0.99, "format_vs_parquet": None}},
        {"ratios": {"write_graph_vs_parquet": 1.2, "format_vs_parquet": 1.1}},
        {"ratios": {"write_graph_vs_parquet": 1.05}},
    ]
    s = sb.ratio_summary(rounds)
    assert s["write_graph_vs_parquet"] == {"runs": [0.99, 1.2, 1.05], "median": 1.05, "min": 0.99, "max": 1.2}
    assert s["format_vs_parquet"] == {"runs": [1.1], "median": 1.1, "min": 1.1, "max": 1.1}


def test_rounds_markdown_lists_each_round_and_the_medians():
    one = {"parquet": {"write_s": 2.0}, "write_graph": {"write_s": 1.0}}
    two = {"write_graph": {"write_s": 2.5}, "parquet": {"write_s": 2.0}}
    rounds = [
        {"order": ["parquet", "write_graph"], "contenders": one, "ratios": sb.ratios(one)},
        {"order": ["write_graph", "parquet"], "contenders": two, "ratios": sb.ratios(two)},
    ]
    r = {"rounds": rounds, "ratio_summary": sb.ratio_summary(rounds)}
    lines = sb.rounds_markdown(r)
    assert "| 1 | parquet, write_graph | 2.0 | 1.0 | 2.0x |" in lines
    assert "| 2 | write_graph, parquet | 2.0 | 2.5 | 0.8x |" in lines
    assert lines[-1].endswith("| **1.4x** (0.8-2.0) |")
    assert sb.rounds_markdown({"rounds": rounds[:1], "ratio_summary": {}}) == []
