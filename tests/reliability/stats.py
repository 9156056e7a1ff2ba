"""The reliability suite's counters, printed as one summary line at the end of a run
(tests/conftest.py::pytest_terminal_summary; under pytest-xdist each worker hands its own to the
controller, which adds them up)."""

from __future__ import annotations

from collections import Counter

STATS: Counter = Counter()
