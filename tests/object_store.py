"""S3 endpoints for tests, each a server in a process of its own on loopback (tests only):

- ``moto``: moto's server (``python -m moto.server``), always there (a test dependency);
- ``seaweedfs``: SeaweedFS (``weed server -s3``: master, volume server, filer and S3 gateway in one
  process), a real S3-compatible store, when its binary is built (scripts/install-seaweedfs.sh).

Lance (Rust object_store), pyarrow's S3 filesystem, Spark's Python workers and the executor
JVMs all reach it over HTTP, like a real bucket; nothing is mocked inside our code, and a
test that kills its own process (a crash test) does not take the bucket with it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import free_port

logger = logging.getLogger(__name__)

REGION = "us-east-1"
ACCESS_KEY = "testing-key-id"
SECRET_KEY = "testing-secret-key"
#: how long the server may take to answer its first request
START_TIMEOUT_S = 60.0

#: the servers the object-store tests run against (the ``s3`` fixture's parameters)
SERVERS = ("moto", "seaweedfs")
#: the SeaweedFS module version scripts/install-seaweedfs.sh builds (and caches under this name)
SEAWEEDFS_VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
#: how long a stopped SeaweedFS server may take to exit before it is killed (its data is a temp dir)
STOP_GRACE_S = 2.0


@dataclass(frozen=True)
class S3Endpoint:
    url: str
    pid: int = 0
    #: which server answers (one of SERVERS)
    server: str = "moto"

    def storage_options(self) -> dict[str, str]:
        """What a user passes as ``storage.*`` options / ``storage_options``."""
        return {
            "aws_endpoint": self.url,
            "allow_http": "true",
            "aws_region": REGION,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
        }

    def env(self) -> dict[str, str]:
        """The same, as the environment variables a user sets instead of options."""
        return {
            "AWS_ENDPOINT": self.url,
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def new_bucket(self) -> str:
        name = f"graphs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def serve(server: str = "moto") -> Iterator[S3Endpoint]:
    """Start the named server (one of SERVERS) on loopback; stop it when the generator closes."""
    if server == "moto":
        return _serve_moto()
    if server == "seaweedfs":
        weed = seaweedfs_bin()
        if weed is None:
            raise FileNotFoundError(seaweedfs_missing())
        return _serve_seaweedfs(weed)
    raise ValueError(f"unknown S3 test server {server!r}; one of {SERVERS}")


def _serve_moto() -> Iterator[S3Endpoint]:
    """Start ``python -m moto.server`` on a free loopback port; stop it when the generator closes.

    The port is picked here and handed to the server (moto's server cannot report one it
    picked); another process taking it in between makes the server exit, which is retried."""
    host = "127.0.0.1"
    for _ in range(3):
        port = free_port()
        log = tempfile.TemporaryFile()  # one line per request: a pipe nobody reads would fill and block it
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, MOTO_PORT=str(port)),
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while proc.poll() is None and not _answers(host, port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None and _answers(host, port):
            break
        proc.kill()
        proc.wait()
        log.seek(0)
        err = log.read().decode(errors="replace")[-2000:] or "no answer"
        log.close()
    else:
        raise RuntimeError(f"moto's S3 server did not start: {err}")
    try:
        yield S3Endpoint(f"http://{host}:{port}", proc.pid, "moto")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


#: how long a test session waits for a SeaweedFS build running beside it (.ci/run)
SEAWEEDFS_BUILD_WAIT_S = 40 * 60


def _pending_build() -> str | None:
    """$OMNIGRAPH_SEAWEEDFS_PENDING names the file a build running beside the tests writes when
    it ends (.ci/run: the binary's path, or FAILED): wait for it, and return what it says."""
    done = os.environ.get("OMNIGRAPH_SEAWEEDFS_PENDING")
    if not done:
        return None
    deadline = time.monotonic() + SEAWEEDFS_BUILD_WAIT_S
    if not os.path.exists(done):
        logger.info("waiting for the SeaweedFS build that runs beside the tests (%s)", done)
    while not os.path.exists(done) and time.monotonic() < deadline:
        time.sleep(2)
    return Path(done).read_text().strip() if os.path.exists(done) else "FAILED"


def seaweedfs_bin() -> str | None:
    """The ``weed`` binary: the one a build running beside the tests produced, else
    $OMNIGRAPH_SEAWEEDFS_BIN, else the one scripts/install-seaweedfs.sh left in the cache
    ($OMNIGRAPH_CACHE or ~/.cache/omnigraph-spark); None when none exists."""
    built = _pending_build()
    if built is not None:
        return built if built != "FAILED" and os.access(built, os.X_OK) else None
    named = os.environ.get("OMNIGRAPH_SEAWEEDFS_BIN")
    if named:
        return named if os.access(named, os.X_OK) else None
    cache = Path(os.environ.get("OMNIGRAPH_CACHE") or Path.home() / ".cache" / "omnigraph-spark")
    weed = cache / f"seaweedfs-{SEAWEEDFS_VERSION}" / "bin" / "weed"
    return str(weed) if os.access(weed, os.X_OK) else None


def seaweedfs_missing() -> str:
    """Why the SeaweedFS server cannot run here (the skip's or the failure's reason)."""
    named = os.environ.get("OMNIGRAPH_SEAWEEDFS_BIN")
    pending = os.environ.get("OMNIGRAPH_SEAWEEDFS_PENDING")
    if pending:
        return (
            f"SeaweedFS S3 server not available: the build beside the tests did not produce a binary "
            f"({pending}: {Path(pending).read_text().strip() if os.path.exists(pending) else 'not written'})"
        )
    where = (
        f"OMNIGRAPH_SEAWEEDFS_BIN={named} is not an executable"
        if named
        else f"no weed binary in the cache (seaweedfs-{SEAWEEDFS_VERSION}) and OMNIGRAPH_SEAWEEDFS_BIN unset"
    )
    return f"SeaweedFS S3 server not available: {where}; build it with scripts/install-seaweedfs.sh"


def _identities() -> dict:
    """SeaweedFS's S3 identities config: one admin identity with the tests' key pair (anonymous
    requests are refused once an identity exists)."""
    return {
        "identities": [
            {
                "name": "tests",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }


def _s3_ready(url: str) -> bool:
    """Whether the gateway serves an authenticated write (the filer and a volume are up): a probe
    bucket takes an object, which is then deleted with its bucket."""
    import boto3
    from botocore.config import Config

    c = boto3.client(
        "s3",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 1}),
    )
    try:
        c.create_bucket(Bucket="readiness-probe")
        c.put_object(Bucket="readiness-probe", Key="probe", Body=b"probe")
        c.delete_object(Bucket="readiness-probe", Key="probe")
        c.delete_bucket(Bucket="readiness-probe")
        return True
    except Exception:  # not up yet: the caller retries until its deadline
        return False


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Terminate the process group ``proc`` leads (the server and any child), then reap it."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    proc.poll()


def _remove_sockets(ports: dict[str, int]) -> None:
    """The gRPC unix sockets ``weed server`` puts in /tmp under fixed names (a killed one leaves them)."""
    for name, port in ports.items():
        if name.endswith(".grpc"):
            for sock in Path("/tmp").glob(f"seaweedfs-*-grpc-{port}.sock"):
                sock.unlink(missing_ok=True)


def _serve_seaweedfs(weed: str) -> Iterator[S3Endpoint]:
    """Start ``weed server -s3`` bound to 127.0.0.1, every port (HTTP and gRPC) picked free, data
    in a temp dir; stop its process group and delete the dir when the generator closes.

    Every port is passed explicitly: SeaweedFS's default gRPC port is the HTTP port + 10000, past
    65535 for an ephemeral port. Telemetry, the Iceberg and Lance catalog ports, WebDAV and the
    IAM API are off. A port taken in between makes the server exit, which is retried."""
    host = "127.0.0.1"
    err = "no answer"
    for _ in range(3):
        data = Path(tempfile.mkdtemp(prefix="seaweedfs-tests-"))
        (data / "s3.json").write_text(json.dumps(_identities()))
        (data / "store").mkdir()
        ports = {
            name: free_port()
            for name in (
                "master.port",
                "master.port.grpc",
                "volume.port",
                "volume.port.grpc",
                "filer.port",
                "filer.port.grpc",
                "s3.port",
                "s3.port.grpc",
            )
        }
        if len(set(ports.values())) < len(ports):
            shutil.rmtree(data, ignore_errors=True)
            continue
        args = [
            weed,
            "-logtostderr",
            "server",
            f"-ip={host}",
            f"-ip.bind={host}",
            f"-dir={data / 'store'}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
            "-filer",
            "-s3",
            f"-s3.config={data / 's3.json'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.iam=false",
            "-webdav=false",
            f"-filer.localSocket={data / 'filer.sock'}",
            f"-s3.localSocket={data / 's3.sock'}",
            *(f"-{name}={port}" for name, port in ports.items()),
        ]
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=data, start_new_session=True
        )
        url = f"http://{host}:{ports['s3.port']}"
        deadline = time.monotonic() + START_TIMEOUT_S
        ready = False
        while proc.poll() is None and time.monotonic() < deadline:
            if _answers(host, ports["s3.port"]) and _s3_ready(url):
                ready = True
                break
            time.sleep(0.2)
        if ready:
            break
        _stop_group(proc, STOP_GRACE_S)
        log.seek(0)
        err = log.read().decode(errors="replace")[-3000:] or "no answer"
        log.close()
        _remove_sockets(ports)
        shutil.rmtree(data, ignore_errors=True)
    else:
        raise RuntimeError(f"SeaweedFS's S3 server did not start: {err}")
    try:
        yield S3Endpoint(url, proc.pid, "seaweedfs")
    finally:
        _stop_group(proc, STOP_GRACE_S)
        log.close()
        _remove_sockets(ports)
        shutil.rmtree(data, ignore_errors=True)
