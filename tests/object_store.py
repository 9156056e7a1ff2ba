"""An S3 endpoint for tests: moto's server in a process of its own on loopback (tests only).

Lance (Rust object_store), pyarrow's S3 filesystem, Spark's Python workers and the executor
JVMs all reach it over HTTP, like a real bucket; nothing is mocked inside our code, and a
test that kills its own process (a crash test) does not take the bucket with it.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Dict, Iterator

from benchmarks.common import free_port

REGION = "us-east-1"
ACCESS_KEY = "testing-key-id"
SECRET_KEY = "testing-secret-key"
#: how long the server may take to answer its first request
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class S3Endpoint:
    url: str
    pid: int = 0

    def storage_options(self) -> Dict[str, str]:
        """What a user passes as ``storage.*`` options / ``storage_options``."""
        return {"aws_endpoint": self.url, "allow_http": "true", "aws_region": REGION,
                "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY}

    def env(self) -> Dict[str, str]:
        """The same, as the environment variables a user sets instead of options."""
        return {"AWS_ENDPOINT": self.url, "AWS_ENDPOINT_URL": self.url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

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


def serve() -> Iterator[S3Endpoint]:
    """Start ``python -m moto.server`` on a free loopback port; stop it when the generator closes.

    The port is picked here and handed to the server (moto's server cannot report one it
    picked); another process taking it in between makes the server exit, which is retried."""
    host = "127.0.0.1"
    for _ in range(3):
        port = free_port()
        log = tempfile.TemporaryFile()  # one line per request: a pipe nobody reads would fill and block it
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, MOTO_PORT=str(port)))
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
        yield S3Endpoint(f"http://{host}:{port}", proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
