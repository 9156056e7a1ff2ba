"""The pure part of benchmarks/python_source_bench.py: ratios are taken per repeat (the
baseline's seconds over the contender's) and reported as medians; the base-code contender and
the phases add their own. No Spark; never asserts timings."""

from __future__ import annotations

from benchmarks import python_source_bench as psb


def _run(parquet, floor, og, base=None, phases=None):
    r = {"parquet": {"write_s": parquet}, "floor": {"write_s": floor}, "omnigraph": {"write_s": og}}
    if base is not None:
        r["omnigraph_base"] = {"write_s": base}
    if phases is not None:
        r["phases"] = {"tasks_s": phases[0], "commit_s": phases[1]}
        r["phases_base"] = {"tasks_s": phases[2], "commit_s": phases[3]}
    return r


def test_ratios_are_medians_of_per_repeat_ratios():
    runs = [_run(10, 20, 40), _run(30, 30, 30), _run(10, 10, 50)]
    # omnigraph vs floor per repeat: 0.5, 1.0, 0.2 -> 0.5 (not 60 / 120 of the summed seconds)
    assert psb.ratios(runs) == {"omnigraph_vs_parquet": 0.25, "omnigraph_vs_floor": 0.5, "floor_vs_parquet": 1.0}


def test_base_code_and_phases_add_their_ratios():
    runs = [
        _run(10, 20, 40, base=80, phases=(2.0, 0.5, 2.2, 2.5)),
        _run(10, 20, 20, base=20, phases=(3.0, 0.3, 2.0, 3.5)),
    ]
    out = psb.ratios(runs)
    assert out["omnigraph_vs_omnigraph_base"] == 1.5  # 80/40 = 2 and 20/20 = 1
    assert out["omnigraph_base_vs_floor"] == 0.625 and out["omnigraph_base_vs_parquet"] == 0.312
    assert out["phases_commit_s"] == 0.4 and out["phases_base_commit_s"] == 3.0 and out["phases_tasks_s"] == 2.5
