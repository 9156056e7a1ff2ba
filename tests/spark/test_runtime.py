"""Lance's compute pool in the executor (spark/runtime.py): never fewer encode threads than task
slots, a user's LANCE_CPU_THREADS kept, a bad one refused before the JVM starts."""

from __future__ import annotations

import os

import pytest

from omnigraph_spark.errors import OptionError
from omnigraph_spark.spark.runtime import (
    LANCE_CPU_THREADS,
    lance_cpu_threads,
    local_task_slots,
    set_local_lance_threads,
)


@pytest.mark.parametrize(
    "master, slots",
    [
        ("local", 1),
        ("local[2]", 2),
        ("local[16]", 16),
        ("local[3, 2]", 3),
        ("local[*]", os.cpu_count()),
        ("yarn", None),
        ("spark://h:7077", None),
        ("local-cluster[2,1,1024]", None),
    ],
)
def test_task_slots_of_a_master(master, slots):
    assert local_task_slots(master) == slots


def test_pool_is_lances_own_unless_smaller_than_the_slots():
    assert lance_cpu_threads(2, machine_cores=2) == 2  # Lance alone: 1 thread for two tasks
    assert lance_cpu_threads(4, machine_cores=4) == 4  # Lance alone: 2
    assert lance_cpu_threads(2, machine_cores=16) == 14  # Lance's own: cores - 2 I/O cores
    assert lance_cpu_threads(1, machine_cores=1) == 1


def test_local_master_sets_the_variable_and_keeps_a_users(monkeypatch):
    monkeypatch.delenv(LANCE_CPU_THREADS, raising=False)
    assert set_local_lance_threads("local[2]") == lance_cpu_threads(2) == int(os.environ[LANCE_CPU_THREADS])
    monkeypatch.setenv(LANCE_CPU_THREADS, "7")
    assert set_local_lance_threads("local[2]") == 7 and os.environ[LANCE_CPU_THREADS] == "7"
    monkeypatch.delenv(LANCE_CPU_THREADS)
    assert set_local_lance_threads("yarn") is None and LANCE_CPU_THREADS not in os.environ


@pytest.mark.parametrize("bad", ["0", "two", "-1", ""])
def test_a_value_lance_would_abort_on_is_refused(monkeypatch, bad):
    monkeypatch.setenv(LANCE_CPU_THREADS, bad)
    with pytest.raises(OptionError, match=f"{LANCE_CPU_THREADS}='{bad}': Lance needs a positive whole number"):
        set_local_lance_threads("local[2]")


@pytest.mark.spark
def test_the_session_jvm_sizes_lances_pool_for_its_task_slots(spark):
    """The test session is built like the embedded default (demo.local_builder): its JVM, where
    the JVM paths' Lance runs, has the variable (Lance reads it from the process environment)."""
    jvm_env = spark.sparkContext._jvm.java.lang.System.getenv(LANCE_CPU_THREADS)
    assert jvm_env == os.environ[LANCE_CPU_THREADS] == str(lance_cpu_threads(2))


def test_warm_imports_imports_in_a_thread_once_and_only_logs_a_failure(monkeypatch, caplog):
    """The driver's heavy imports start in a daemon thread (while a session's JVM starts): done
    when the thread ends, nothing started when every module is in already, and a module that
    cannot be imported is logged, never raised (the load's own import reports it)."""
    import logging
    import sys

    from omnigraph_spark.spark import runtime

    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    monkeypatch.setattr(runtime, "WARM_MODULES", ("colorsys",))
    t = runtime.warm_imports()
    assert t is not None and t.daemon
    t.join(30)
    assert "colorsys" in sys.modules
    assert runtime.warm_imports() is None
    caplog.set_level(logging.DEBUG, logger=runtime.__name__)
    monkeypatch.setattr(runtime, "WARM_MODULES", ("omnigraph_spark_no_such_module",))
    t = runtime.warm_imports()
    t.join(30)
    assert any("omnigraph_spark_no_such_module not imported ahead" in r.getMessage() for r in caplog.records)
