"""Reliability suite: crash matrix, task faults, concurrency, bad input, security.

Prints one summary line at the end of the run (cases tried, crashes survived, rows checked,
bad inputs), from the counters in ``helpers.STATS``.
"""
from __future__ import annotations

from .helpers import STATS


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not STATS:
        return
    keys = ("cases_tried", "crashes_survived", "rows_checked", "bad_inputs", "spark_apps", "engine_checks")
    line = ", ".join(f"{k.replace('_', ' ')}: {STATS.get(k, 0)}" for k in keys)
    terminalreporter.write_line(f"reliability summary: {line}")
