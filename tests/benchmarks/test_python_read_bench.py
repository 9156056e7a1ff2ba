"""The pure part of benchmarks/python_read_bench.py: ratios per query are Parquet's seconds over
the contender's in the same round, medians over rounds; contenders that disagree on the
aggregate stop the run. No Spark; never asserts timings."""

from __future__ import annotations

import pytest

from benchmarks import python_read_bench as prb


def _res(warm, cold, answer=None, cpu=None):
    r = {"warm_s": warm, "cold_s": cold, "answer": answer}
    if cpu is not None:
        r["warm_cpu_s"] = cpu
    return r


def test_ratios_per_query_are_medians_of_per_round_ratios():
    rounds = [
        {"parquet:filter_agg": _res(1.0, 10.0, cpu=2.0), "omnigraph:filter_agg": _res(2.0, 20.0, cpu=8.0)},
        {"parquet:filter_agg": _res(3.0, 10.0, cpu=2.0), "omnigraph:filter_agg": _res(1.0, 5.0, cpu=4.0)},
        {"parquet:filter_agg": _res(1.0, 10.0, cpu=2.0), "omnigraph:filter_agg": _res(1.0, 10.0, cpu=1.0)},
    ]
    out = prb.ratios(rounds)
    # warm per round: 0.5, 3.0, 1.0 -> 1.0; cold: 0.5, 2.0, 1.0 -> 1.0; cpu: 0.25, 0.5, 2.0 -> 0.5
    assert out == {
        "omnigraph_vs_parquet.filter_agg.warm": 1.0,
        "omnigraph_vs_parquet.filter_agg.cold": 1.0,
        "omnigraph_vs_parquet.filter_agg.warm_cpu": 0.5,
    }


def test_contenders_must_agree_on_the_aggregate():
    same = {
        "parquet:filter_agg": _res(1, 1, [10, 0.30000000000000004]),
        "omnigraph:filter_agg": _res(1, 1, [10, 0.3]),
        "omnigraph:full": _res(1, 1),
    }
    prb.check_answers(same)  # summation order only
    with pytest.raises(RuntimeError, match="omnigraph:filter_agg"):
        prb.check_answers({**same, "omnigraph:filter_agg": _res(1, 1, [9, 0.3])})
