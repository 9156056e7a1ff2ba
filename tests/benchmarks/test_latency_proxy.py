"""benchmarks/latency_proxy.py: each HTTP exchange through it is held the delay (a lower bound, never
a speed assertion), the exchanges and their methods are counted, keep-alive connections carry
several exchanges, and the target must be on loopback. Also the bench's argument checks."""
from __future__ import annotations

import http.client
import http.server
import json
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

    def do_GET(self):  # noqa: N802
        self._reply(b"x" * 200_000)  # larger than one read of the proxy: streams through in chunks

    def do_HEAD(self):  # noqa: N802
        self._reply(b"x" * 10)

    def do_PUT(self):  # noqa: N802
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
