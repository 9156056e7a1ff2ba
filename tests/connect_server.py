"""A local Spark Connect server for tests (tests only): the .venv's pyspark runs
``org.apache.spark.sql.connect.service.SparkConnectServer`` through ``spark-submit`` on
127.0.0.1 and a free port, local[2], with the JVM shim on its driver class path and this
interpreter as its Python workers (the package is installed there, so ``format("omnigraph")``
and the Python staging jobs run in the server's workers). The serverless stand-in
(tests/spark/test_serverless.py) gives an empty class path, its own session confs and the
Python of a fresh environment that has the package from its wheel.

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from benchmarks.common import free_port, listening

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 240
CLIENT_SCRIPT = Path(__file__).resolve().parent / "connect_client.py"


#: the session confs of the tests' servers (the serverless stand-in gives its own instead)
TEST_SESSION_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
        "spark.sql.python.filterPushdown.enabled": "true",
    }
)
#: what this test run sets for its own processes (the checkout on the path, its shim, the driver's
#: Python, Lance's pool size): a process of another environment starts without them
RUN_ENV = ("PYTHONPATH", "OMNIGRAPH_SPARK_SHIM_DIR", "PYSPARK_DRIVER_PYTHON", "LANCE_CPU_THREADS")


def process_env(python: str | None) -> dict[str, str]:
    """The environment of a server or client process: this one's without Spark Connect's mode
    variables; with ``python`` (another environment's interpreter) also without
    :data:`RUN_ENV`, so that it imports only what that environment has installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")}
    if python is not None:
        for k in RUN_ENV:
            env.pop(k, None)
    env["PYSPARK_PYTHON"] = python or os.environ.get("PYSPARK_PYTHON", sys.executable)
    return env


@dataclass(frozen=True)
class ConnectServer:
    url: str  # sc://127.0.0.1:<port>
    log_path: Path


def serve(
    workdir: Path,
    class_path: Sequence[str],
    conf: dict[str, str] | None = None,
    session_conf: Mapping[str, str] = TEST_SESSION_CONF,
    python: str | None = None,
) -> Iterator[ConnectServer]:
    """Start a Spark Connect server (its log in ``workdir``); stop it (its whole process group)
    when the generator closes. Waits at most START_TIMEOUT_S for its port.

    Its confs: the server's own (loopback address, port, no UI), ``session_conf``, then
    ``conf``. ``python``: its Python workers' interpreter (default: PYSPARK_PYTHON or this one),
    see :func:`process_env`."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        **session_conf,
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
    env = {**process_env(python), "SPARK_HOME": spark_home, "OMNIGRAPH_SPARK_BRIDGE_LOG": "INFO"}
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


def run_client(
    url: str, scenario: str, workdir: Path, timeout_s: int = 300, python: str | None = None, **params: Any
) -> dict[str, Any]:
    """Run one scenario of ``tests/connect_client.py`` against ``url`` in a fresh Python process
    (``python``, default this interpreter; see :func:`process_env`) in ``workdir``; its JSON
    report (the last line it prints)."""
    args = [python or sys.executable, str(CLIENT_SCRIPT), url, scenario, json.dumps(params)]
    p = subprocess.run(args, cwd=workdir, env=process_env(python), capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise AssertionError(
            f"Connect client {scenario} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
        )
    return json.loads(p.stdout.strip().splitlines()[-1])
