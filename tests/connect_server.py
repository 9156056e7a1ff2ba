"""A local Spark Connect server for tests (tests only): the .venv's pyspark runs
``org.apache.spark.sql.connect.service.SparkConnectServer`` through ``spark-submit`` on
127.0.0.1 and a free port, local[2], with the JVM shim on its driver class path and this
interpreter as its Python workers (the package is installed there, so ``format("omnigraph")``
and the Python staging jobs run in the server's workers).

A Connect client cannot share a Python process with the test session's classic SparkSession
(pyspark switches the whole process to Connect mode, ``SPARK_CONNECT_MODE_ENABLED``), so the
tests drive the server from a subprocess: :func:`run_client` runs ``tests/connect_client.py``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import free_port, listening

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 240
CLIENT_SCRIPT = Path(__file__).resolve().parent / "connect_client.py"


@dataclass(frozen=True)
class ConnectServer:
    url: str  # sc://127.0.0.1:<port>
    log_path: Path


def serve(workdir: Path, class_path: Sequence[str], conf: dict[str, str] | None = None) -> Iterator[ConnectServer]:
    """Start a Spark Connect server (its log in ``workdir``); stop it (its whole process group)
    when the generator closes. Waits at most START_TIMEOUT_S for its port."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
        "spark.sql.python.filterPushdown.enabled": "true",
        **(conf or {}),
    }
    if class_path:
        settings["spark.driver.extraClassPath"] = os.pathsep.join(class_path)
    cmd = [
        os.path.join(spark_home, "bin", "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--master",
        "local[2]",
        "--driver-memory",
        "1g",
        "--name",
        "omnigraph-spark-connect-tests",
    ]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    # the provider's planners log at INFO into the server's log (the distributed checks they run)
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "OMNIGRAPH_SPARK_BRIDGE_LOG": "INFO",
    }
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    log_path = workdir / "connect-server.log"
    workdir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening(port):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the Spark Connect server exited ({proc.returncode}): "
                    f"{log_path.read_text(errors='replace')[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen on {port} in {START_TIMEOUT_S} s")
            time.sleep(0.5)
        log.info("Spark Connect server on 127.0.0.1:%d (pid %d)", port, proc.pid)
        yield ConnectServer(f"sc://127.0.0.1:{port}", log_path)
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (spark-submit, its JVM, the Python workers), then
    SIGKILL what is left after 30 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass


def run_client(url: str, scenario: str, workdir: Path, timeout_s: int = 300, **params: Any) -> dict[str, Any]:
    """Run one scenario of ``tests/connect_client.py`` against ``url`` in a fresh Python process;
    its JSON report (the last line it prints)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")}
    env["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
    args = [sys.executable, str(CLIENT_SCRIPT), url, scenario, json.dumps(params)]
    p = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise AssertionError(
            f"Connect client {scenario} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
        )
    return json.loads(p.stdout.strip().splitlines()[-1])
