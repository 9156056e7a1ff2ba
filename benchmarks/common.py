"""Small pieces the benchmark scripts share."""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path


def read_text(path: str) -> str:
    """A /proc (or any) file's text; "" when it is gone (a process that just exited)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def compile_package() -> None:
    """Byte-compile omnigraph_spark as a pip install of the wheel does, so that no contender's
    process compiles it (where PYTHONDONTWRITEBYTECODE is set, each would)."""
    import compileall

    import omnigraph_spark

    compileall.compile_dir(os.path.dirname(omnigraph_spark.__file__), quiet=1)


def with_delta(builder):
    """``builder`` with Delta's SQL extension, catalog and jars (delta-spark's pip helper)."""
    from delta import configure_spark_with_delta_pip

    return configure_spark_with_delta_pip(
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension").config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    )


def proc_table() -> dict[int, tuple]:
    """pid -> (ppid, rss bytes, comm) of every process."""
    page = os.sysconf("SC_PAGE_SIZE")
    out: dict[int, tuple] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        stat = read_text(f"/proc/{d}/stat")
        try:
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            rest = stat[stat.rindex(")") + 2 :].split()
            out[int(d)] = (int(rest[1]), int(rest[21]) * page, comm)
        except (ValueError, IndexError):
            continue
    return out


def descendants(table: Mapping[int, tuple], root: int) -> list[int]:
    """pids under ``root`` in a ``pid -> (ppid, ...)`` table, depth first."""
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    out, stack = [], [root]
    while stack:
        for c in sorted(children.get(stack.pop(), [])):
            out.append(c)
            stack.append(c)
    return out


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) used so far by ``root`` and every live process under it,
    with the children each has waited for: the difference over a timed step is what that step's
    processes computed (the contender's driver Python, its JVM, the bridge, Python workers),
    whatever else the shared machine runs meanwhile."""
    hz = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in [root] + descendants(proc_table(), root):
        stat = read_text(f"/proc/{pid}/stat")
        try:
            total += sum(int(x) for x in stat[stat.rindex(")") + 2 :].split()[11:15])
        except (ValueError, IndexError):
            continue  # exited meanwhile
    return total / hz


def setup_logging(logger: logging.Logger, log_path: str | None) -> None:
    """Progress lines of a benchmark on stderr and, with ``log_path``, in that file; the
    benchmark's own logger at INFO, everything else at WARNING."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s", handlers=handlers)
    logger.setLevel(logging.INFO)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a benchmark or test starts on loopback)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def python_source_session(app_name: str, driver_memory: str = "4g"):
    """A fresh local[2] session as the Python source's benchmarks run it: the embedded default's
    settings (filter pushdown conf on) and no shim on the class path, the ``omnigraph`` Python
    source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # lazy: the harness imports this module without Spark

    from omnigraph_spark import register
    from omnigraph_spark.demo import embedded_settings, quiet_warnings
    from omnigraph_spark.spark.runtime import set_local_lance_threads

    set_local_lance_threads("local[2]")
    quiet_warnings()
    b = SparkSession.builder.master("local[2]").appName(app_name)
    for k, v in {**embedded_settings(), "spark.driver.memory": driver_memory}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
