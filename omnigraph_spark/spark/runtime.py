"""Lance's native compute pool inside a Spark executor, and the driver's imports.

Lance encodes and decodes on a pool of ``max(1, cores - 2)`` threads: it keeps two of the
machine's cores for I/O, and ``LANCE_CPU_THREADS`` (read once per process) overrides the
size. A Spark executor already runs one task per core, so on a small executor the tasks'
Lance writers share fewer encode threads than there are tasks. On 2 cores ONE thread encodes
every task's fragments; each load then ends with that thread working alone while the task
threads wait (perf: a 1M-edge ``write_table`` ran on 1.52 of 2 cores and took
0.55 s; with two Lance threads 1.75 cores and 0.48 s).

The embedded session's executor is the JVM this process launches, so it inherits this
process's environment; a cluster sets ``spark.executorEnv.LANCE_CPU_THREADS`` (docs/api.md).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
import threading

from ..errors import OptionError

log = logging.getLogger(__name__)

#: the variable Lance sizes its compute pool from
LANCE_CPU_THREADS = "LANCE_CPU_THREADS"
#: the third-party modules a driver's first graph load imports that cost seconds (``lance``
#: above all, even with its REST client's APIs deferred by ``.._lance_import``)
WARM_MODULES = ("lance", "pyarrow.dataset")


def warm_imports() -> threading.Thread | None:
    """Import :data:`WARM_MODULES` in a daemon thread, so that a session being built does it
    while its JVM starts (seconds the driver otherwise spends waiting) instead of its first
    ``write_table`` / ``write_graph`` / ``read_table`` doing it after. Third-party modules only:
    none of them imports this package, so the thread and the caller can never wait on each
    other's imports. A failure is only logged (the load's own import raises it). Returns the
    thread, or None when they are imported already."""
    if all(m in sys.modules for m in WARM_MODULES):
        return None
    t = threading.Thread(target=_import_all, name="omnigraph-warm-imports", daemon=True)
    t.start()
    return t


def _import_all() -> None:
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:  # the first load imports it again and reports
            log.debug("%s not imported ahead: %s", name, e)


def lance_cpu_threads(task_slots: int, machine_cores: int | None = None) -> int:
    """Lance's own pool size, but never fewer threads than the executor runs tasks at once."""
    cores = machine_cores or os.cpu_count() or 1
    return max(task_slots, cores - 2, 1)


def local_task_slots(master: str) -> int | None:
    """The tasks a ``local``/``local[N]``/``local[*]``/``local[N, F]`` master runs at once;
    None for any other master (its executors are not this process's children)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    n = m.group(1)
    if n is None:
        return 1
    return (os.cpu_count() or 1) if n == "*" else int(n)


def set_local_lance_threads(master: str) -> int | None:
    """Before an embedded session's JVM starts: size Lance's pool for its task slots through
    this process's environment. A value the user already set is kept. Returns the value in
    effect (None: not a local master, nothing set)."""
    slots = local_task_slots(master)
    if slots is None:
        return None
    value = os.environ.setdefault(LANCE_CPU_THREADS, str(lance_cpu_threads(slots)))
    if not value.isdigit() or int(value) < 1:  # Lance would abort the JVM on it
        raise OptionError(f"{LANCE_CPU_THREADS}={value!r}: Lance needs a positive whole number of threads")
    return int(value)
