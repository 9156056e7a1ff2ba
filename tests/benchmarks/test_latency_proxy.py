"""benchmarks/latency_proxy.py: each HTTP exchange through it is held the delay (a lower bound, never
a speed assertion), the exchanges and their methods are counted, keep-alive connections carry
several exchanges, and the target must be on loopback. Also the bench's argument checks, its
ratios and its copy of the shim."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import threading
import time

import pytest

from benchmarks import latency_proxy as lp
from benchmarks import object_store_bench as osb


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: several exchanges on one connection

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self._reply(b"x" * 200_000)  # larger than one read of the proxy: streams through in chunks

    def do_HEAD(self):
        self._reply(b"x" * 10)

    def do_PUT(self):
        n = int(self.headers["Content-Length"])
        self._reply(json.dumps({"got": len(self.rfile.read(n))}).encode())

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _exchanges(port: int):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    took, bodies = [], []
    for method, body in (("GET", None), ("PUT", b"y" * 300_000), ("HEAD", None), ("GET", None)):
        t0 = time.perf_counter()
        conn.request(method, "/bucket/key", body=body)
        resp = conn.getresponse()
        bodies.append(resp.read())
        took.append(time.perf_counter() - t0)
    conn.close()
    return took, bodies


@pytest.mark.parametrize("delay_ms", [0, 150])
def test_proxy_holds_each_exchange_and_counts_them(server, delay_ms):
    proc, port, stats_port = lp.start(server, delay_ms)
    try:
        took, bodies = _exchanges(port)
        stats = lp.read_stats(stats_port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert bodies[0] == bodies[3] == b"x" * 200_000  # bytes pass unchanged both ways
    assert json.loads(bodies[1]) == {"got": 300_000} and bodies[2] == b""
    assert all(t >= delay_ms / 1000 for t in took), took  # the delay is added to every exchange
    assert stats == {"round_trips": 4, "requests": 4, "connections": 1, "by_method": {"GET": 2, "PUT": 1, "HEAD": 1}}


def test_continue_body_is_a_round_trip_not_a_request():
    c = lp.Counts()
    for head in (b"PUT /b/k HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", b"84\r\nbody", b"GET /b/k HTTP/1.1\r\n"):
        c.exchange(head)
    assert c.as_dict() == {"round_trips": 3, "requests": 2, "connections": 0, "by_method": {"PUT": 1, "GET": 1}}


def test_proxy_target_must_be_loopback():
    assert lp.parse_target("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert lp.parse_target("[::1]:9000") == ("::1", 9000)
    for bad in ("10.0.0.1:9000", "example.com:80", "127.0.0.1", "127.0.0.1:x"):
        with pytest.raises(ValueError):
            lp.parse_target(bad)
    with pytest.raises(ValueError, match="delay"):
        lp.Proxy(("127.0.0.1", 1), -1.0)


def test_bench_parses_modes_and_lists():
    a = osb.parse_args(["--mode", "latency", "--delays-ms", "0, 10,30", "--tables", "1,4"])
    assert a.mode == "latency" and a.delays_ms == [0.0, 10.0, 30.0] and a.tables == [1, 4]
    assert osb.parse_args([]).mode == "compare"
    for bad in (["--delays-ms", "-5"], ["--tables", "0"], ["--mode", "other"], ["--rows", "0"]):
        with pytest.raises(SystemExit):
            osb.parse_args(bad)


def test_bench_ratios_per_store_and_s3_over_local():
    med = {
        "local/python": {"write_s": 12.0, "read_s": 20.0},
        "local/jvm": {"write_s": 4.0, "read_s": 1.0},
        "local/parquet": {"write_s": 2.0, "read_s": 2.0},
        "s3/python": {"write_s": 9.0, "read_s": 30.0},
        "s3/jvm": {"write_s": 3.0, "read_s": 1.0},
        "s3/parquet": {"write_s": 6.0, "read_s": 4.0},
    }
    r = osb._ratios(med, ["python", "jvm", "parquet"])
    assert r["python_over_jvm"]["local"] == {"write_s": 3.0, "read_s": 20.0}
    assert r["jvm_over_parquet"]["s3"] == {"write_s": 0.5, "read_s": 0.25}
    assert r["jvm_over_parquet"]["s3_over_local"] == {"write_s": 0.25, "read_s": 0.5}
    assert set(osb._ratios(med, ["jvm", "parquet"])) == {"jvm_over_parquet"}  # only pairs that ran


def test_bench_children_use_a_copy_of_the_shim(tmp_path, monkeypatch):
    from omnigraph_spark.spark.shim_conf import SHIM_DIR_ENV, SHIM_JAR, built_shim_jars

    built = tmp_path / "target"
    (built / "lib").mkdir(parents=True)
    (built / SHIM_JAR).write_bytes(b"shim")
    (built / "lib" / "dep.jar").write_bytes(b"dep")
    monkeypatch.setenv(SHIM_DIR_ENV, str(built))
    osb.snapshot_shim(tmp_path / "work")
    copy = tmp_path / "work" / "shim"
    assert os.environ[SHIM_DIR_ENV] == str(copy)
    (built / SHIM_JAR).unlink()  # a rebuild in the checkout: the children keep the copy
    assert built_shim_jars() == [str(copy / SHIM_JAR), str(copy / "lib" / "dep.jar")]
    assert (copy / SHIM_JAR).read_bytes() == b"shim"
