"""A Spark standalone cluster on this machine for tests and benchmarks/cluster_bench.py (stdlib
only, so a benchmark imports it without the test suite's fixtures): one master and named
workers, each a JVM of its own (``org.apache.spark.deploy.master.Master`` /
``org.apache.spark.deploy.worker.Worker`` from the .venv's pyspark jars), in its own process
group, bound to 127.0.0.1 (RPC and web UI, on free ports). A worker's executors and their
Python workers are its children, so :meth:`Cluster.kill_worker` (SIGKILL to the worker's
process group) takes down the worker, its executor JVM and its Python workers at once, as a
machine that dies would.

:func:`cluster` yields a :class:`Cluster` and stops every process it started at the end, also
when the test failed. Workers find their Python through ``PYSPARK_PYTHON`` (this interpreter,
the package installed).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120
#: the daemons' own heaps are small (they only schedule); a quick-starting JVM
DAEMON_JAVA_OPTS = [
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dspark.master.rest.enabled=false",
]  # no submission server (a fixed port, 6066)


#: the master's log lines that say where it listens (it picks its own free ports: --port 0)
MASTER_URL_RE = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
MASTER_UI_RE = re.compile(r"Bound MasterWebUI to 127\.0\.0\.1, and started at (http://[^\s]+)")


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait_s: float = 20) -> None:
    """Signal ``proc``'s process group; SIGKILL what is left after ``wait_s``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@dataclass
class Cluster:
    """A running master and its workers (name -> process)."""

    url: str  # spark://127.0.0.1:<port>, from the master's log
    workdir: Path
    webui: str  # http://127.0.0.1:<port>: the master's JSON state at /json/, from its log
    env: dict[str, str]
    cores: int
    memory: str
    master: subprocess.Popen = None
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)
    _gone: list[subprocess.Popen] = field(default_factory=list)

    def state(self) -> dict:
        """The master's view (``/json/``): workers with their state, applications."""
        with urllib.request.urlopen(self.webui + "/json/", timeout=5) as r:
            return json.load(r)

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def wait_workers(self, n: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the master has ``n`` ALIVE workers (registered; a killed one may still be listed
        until the master notices), else raise with the logs."""
        deadline = time.monotonic() + timeout_s
        while True:
            for name, p in self.workers.items():
                if p.poll() is not None:
                    raise RuntimeError(f"worker {name} exited ({p.returncode}):\n{self.log(name)[-3000:]}")
            try:
                if self.alive_workers() >= n:
                    return
            except OSError:  # the master's UI is not up yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n} workers did not register in {timeout_s} s:\n{self.log('master')[-3000:]}")
            time.sleep(0.3)

    def log(self, name: str) -> str:
        p = self.workdir / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def start_worker(self, name: str) -> subprocess.Popen:
        """One more worker (``--cores``/``--memory`` of the cluster), registering with the master."""
        work = self.workdir / name
        work.mkdir(parents=True, exist_ok=True)
        cmd = self._java(WORKER_CLASS) + [
            self.url,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--webui-port",
            "0",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(work),
        ]
        self.workers[name] = self._spawn(name, cmd)
        return self.workers[name]

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker's process group: the worker JVM, its executors, their Python workers."""
        p = self.workers.pop(name)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        self._gone.append(p)
        log.info("killed worker %s (pid %d)", name, p.pid)

    def executor_dirs(self, name: str, app_id: str = "app-*") -> list[Path]:
        """The executor directories (``<app id>/<executor id>``) a worker launched (for one application)."""
        return sorted((self.workdir / name).glob(f"{app_id}/*"))

    def stop(self) -> None:
        for p in list(self.workers.values()) + self._gone:
            _stop(p)
        if self.master is not None:
            _stop(self.master)

    def _java(self, main: str) -> list[str]:
        home = self.env["SPARK_HOME"]
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
        return [
            java,
            *DAEMON_JAVA_OPTS,
            "-cp",
            os.pathsep.join([os.path.join(home, "conf"), os.path.join(home, "jars", "*")]),
            main,
        ]

    def _spawn(self, name: str, cmd: Sequence[str]) -> subprocess.Popen:
        with open(self.workdir / f"{name}.log", "wb") as out:
            return subprocess.Popen(
                list(cmd), cwd=self.workdir, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )


@contextmanager
def cluster(workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """Start a master and ``workers`` workers, wait until all registered, yield the
    :class:`Cluster`; stop every process it started (process groups) on the way out."""
    workdir.mkdir(parents=True, exist_ok=True)
    home = _spark_home()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    # SPARK_SCALA_VERSION: a worker builds its executors' class path with Spark's launcher, which
    # asks for it when SPARK_HOME is a pip install (no RELEASE file); bin/load-spark-env.sh sets it
    env.update(
        SPARK_HOME=home,
        SPARK_SCALA_VERSION="2.13",
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
    )
    c = Cluster("", workdir, "", env, cores, memory)
    try:
        c.master = c._spawn(
            "master", c._java(MASTER_CLASS) + ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (c.url and c.webui):  # the ports it bound, from its log
            text = c.log("master")
            url, ui = MASTER_URL_RE.search(text), MASTER_UI_RE.search(text)
            c.url, c.webui = (url.group(1) if url else ""), (ui.group(1).rstrip("/") if ui else "")
            if c.master.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the master did not start ({c.master.poll()}):\n{text[-3000:]}")
            time.sleep(0.2)
        for i in range(workers):
            c.start_worker(f"worker{i + 1}")
        c.wait_workers(workers)
        log.info("standalone cluster %s: %d workers", c.url, workers)
        yield c
    finally:
        c.stop()
