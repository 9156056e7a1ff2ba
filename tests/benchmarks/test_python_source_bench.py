"""The pure part of benchmarks/python_source_bench.py: ratios are taken per repeat (the
baseline's seconds over the contender's) and reported as medians, for both tables and for each;
the base-code contender and the phases add their own; memory keeps each peak's largest. No
Spark; never asserts timings."""

from __future__ import annotations

from benchmarks import python_source_bench as psb


def _res(nodes: float, edges: float, memory: dict | None = None) -> dict:
    out = {"write_s": nodes + edges, "tables_s": {"nodes": nodes, "edges": edges}}
    if memory is not None:
        out["memory"] = memory
    return out


def _run(parquet, floor, og, base=None, phases=None):
    r = {"parquet": _res(*parquet), "floor": _res(*floor), "omnigraph": _res(*og)}
    if base is not None:
        r["omnigraph_base"] = _res(*base)
    if phases is not None:
        r["phases"] = {"tasks_s": phases[0], "commit_s": phases[1]}
        r["phases_base"] = {"tasks_s": phases[2], "commit_s": phases[3]}
    return r


def test_ratios_are_medians_of_per_repeat_ratios():
    runs = [_run((5, 5), (10, 10), (20, 20)), _run((10, 20), (10, 20), (10, 20)), _run((5, 5), (5, 5), (25, 25))]
    out = psb.ratios(runs)
    # omnigraph vs floor per repeat: 0.5, 1.0, 0.2 -> 0.5 (not 60 / 120 of the summed seconds)
    assert (out["omnigraph_vs_parquet"], out["omnigraph_vs_floor"], out["floor_vs_parquet"]) == (0.25, 0.5, 1.0)
    assert out["omnigraph_vs_floor_nodes"] == 0.5 and out["omnigraph_vs_floor_edges"] == 0.5


def test_each_table_has_its_own_ratio():
    runs = [_run((1, 9), (2, 8), (4, 16))]
    out = psb.ratios(runs)
    assert out["omnigraph_vs_floor_nodes"] == 0.5 and out["omnigraph_vs_floor_edges"] == 0.5
    assert out["omnigraph_vs_parquet_nodes"] == 0.25 and out["floor_vs_parquet_edges"] == 1.125


def test_base_code_and_phases_add_their_ratios():
    runs = [
        _run((5, 5), (10, 10), (20, 20), base=(40, 40), phases=(2.0, 0.5, 2.2, 2.5)),
        _run((5, 5), (10, 10), (10, 10), base=(10, 10), phases=(3.0, 0.3, 2.0, 3.5)),
    ]
    out = psb.ratios(runs)
    assert out["omnigraph_vs_omnigraph_base"] == 1.5  # 80/40 = 2 and 20/20 = 1
    assert out["omnigraph_base_vs_floor"] == 0.625 and out["omnigraph_base_vs_parquet"] == 0.312
    assert out["phases_commit_s"] == 0.4 and out["phases_base_commit_s"] == 3.0 and out["phases_tasks_s"] == 2.5


def test_memory_keeps_each_peaks_largest_per_contender():
    a = {"driver_python_hwm_mb": 300, "worker_max_hwm_mb": 900, "workers": 3, "worker_max_cmd": "x"}
    b = {"driver_python_hwm_mb": 350, "worker_max_hwm_mb": 700, "workers": 2, "worker_max_cmd": "y"}
    runs = [
        {"omnigraph": _res(1, 1, a), "phases": {"write_s": 1}},
        {"omnigraph": _res(1, 1, b), "phases": {"write_s": 1, "memory_rss_sampled": {"worker_max_rss_mb": 40}}},
    ]
    runs[0]["omnigraph"]["memory_rss_sampled"] = {"worker_max_rss_mb": 1200}  # the index child, say
    runs[1]["omnigraph"]["memory_rss_sampled"] = {"worker_max_rss_mb": 800}
    assert psb.memory(runs) == {
        "omnigraph": {"driver_python_hwm_mb": 350, "worker_max_hwm_mb": 900, "worker_max_rss_mb": 1200},
        "phases": {"worker_max_rss_mb": 40},
    }


def test_index_seconds_span_the_data_commit_to_the_index_commit():
    from datetime import datetime, timedelta

    t0 = datetime(2026, 1, 1)
    versions = [{"version": v, "timestamp": t0 + timedelta(seconds=s)} for v, s in ((1, 0), (2, 10), (3, 12.5))]
    assert psb.index_seconds(versions, 3) == 2.5
    assert psb.index_seconds(versions[:1], 1) == 0.0  # nothing before the pinned version


def test_the_write_less_its_index_builds_against_the_floor():
    a, b = _run((5, 5), (4, 6), (10, 20)), _run((5, 5), (6, 6), (10, 14))
    a["omnigraph"]["index_s"] = {"nodes": 5.0, "edges": 5.0}  # 30 - 10 = 20 s against the floor's 10
    b["omnigraph"]["index_s"] = {"nodes": 4.0, "edges": 8.0}  # 24 - 12 = 12 s against the floor's 12
    out = psb.ratios([a, b])
    assert out["omnigraph_less_indexes_vs_floor"] == 0.75 and out["omnigraph_index_s"] == 11.0


def test_the_small_jobs_compare_whole_processes():
    runs = []
    for parquet_s, og_s in ((8.0, 10.0), (9.0, 9.0), (8.0, 16.0)):
        r = _run((5, 5), (10, 10), (20, 20))
        r["small_parquet"] = {"write_s": 1.0, "job_s": parquet_s}
        r["small_omnigraph"] = {"write_s": 2.0, "job_s": og_s}
        runs.append(r)
    # per repeat 0.8, 1.0, 0.5: the whole jobs' seconds, not the in-process write_s
    assert psb.ratios(runs)["small_omnigraph_vs_parquet"] == 0.8
