"""A loopback TCP proxy that adds a fixed delay to every HTTP exchange, and counts them.

Put in front of an object-store server (moto's) on this machine, it makes each request's
response start ``--delay-ms`` later than the server sent it: one added round trip per HTTP
exchange, as a farther bucket would add. It knows HTTP only this far: a connection carries one
exchange at a time (HTTP/1.1 without pipelining, as the S3 clients here send), so the first
bytes from the client after the server has answered start a request, and the first bytes from
the server after that start its response, which is held for the delay; the rest of a body
streams through unchanged. An ``Expect: 100-continue`` upload is two exchanges (the interim
``100 Continue`` is held too), as it is two round trips on a network. Opening a connection
adds nothing (clients keep their connections in pools).

Counts: ``round_trips`` (exchanges, each held the delay), ``requests`` (those that start an
HTTP request), ``by_method`` (the request line's first word) and ``connections``; a connection
to ``--stats-port`` gets them as one JSON line. The proxy prints
``ready <port> <stats_port>`` on its first line of output, then runs until terminated (or
``--max-seconds`` pass)::

    python -m benchmarks.latency_proxy --target 127.0.0.1:5000 --delay-ms 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from dataclasses import dataclass, field

METHODS = ("GET", "PUT", "POST", "HEAD", "DELETE", "PATCH", "OPTIONS")
CHUNK = 1 << 16


@dataclass
class Counts:
    """``round_trips``: every exchange (each one held the delay); ``requests``: those that start
    an HTTP request, by method; the others are the bodies of ``Expect: 100-continue`` uploads,
    sent after the interim response."""

    round_trips: int = 0
    requests: int = 0
    connections: int = 0
    by_method: dict[str, int] = field(default_factory=dict)

    def exchange(self, head: bytes) -> None:
        self.round_trips += 1
        word = head[:8].split(b" ", 1)[0].decode("ascii", "replace")
        if word in METHODS:
            self.requests += 1
            self.by_method[word] = self.by_method.get(word, 0) + 1

    def as_dict(self) -> dict[str, object]:
        return {
            "round_trips": self.round_trips,
            "requests": self.requests,
            "connections": self.connections,
            "by_method": dict(self.by_method),
        }


def parse_target(text: str) -> tuple[str, int]:
    """``host:port`` -> (host, port); the host must be a loopback address."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"target must be host:port, got {text!r}")
    host = host.strip("[]")
    if host not in ("localhost", "::1") and not host.startswith("127."):
        raise ValueError(f"target must be on loopback, got {host!r}")
    return host, int(port)


class Proxy:
    """Forwards each accepted connection to ``target``, holding each response start ``delay_s``."""

    def __init__(self, target: tuple[str, int], delay_s: float):
        if delay_s < 0:
            raise ValueError(f"delay must be >= 0, got {delay_s}")
        self.target, self.delay_s, self.counts = target, delay_s, Counts()

    async def _client_to_server(self, reader, writer, state) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if not state["awaiting"]:
                    state["awaiting"] = True
                    self.counts.exchange(data)
                writer.write(data)
                await writer.drain()
        finally:
            _close_write(writer)

    async def _server_to_client(self, reader, writer, state) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if state["awaiting"]:
                    if self.delay_s:
                        await asyncio.sleep(self.delay_s)
                    state["awaiting"] = False
                writer.write(data)
                await writer.drain()
        finally:
            _close_write(writer)

    async def handle(self, c_reader, c_writer) -> None:
        self.counts.connections += 1
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            c_writer.close()
            return
        state = {"awaiting": False}
        try:
            await asyncio.gather(
                self._client_to_server(c_reader, s_writer, state),
                self._server_to_client(s_reader, c_writer, state),
                return_exceptions=True,
            )
        finally:
            for w in (s_writer, c_writer):
                w.close()

    async def stats(self, _reader, writer) -> None:
        writer.write((json.dumps(self.counts.as_dict()) + "\n").encode())
        await writer.drain()
        writer.close()


def _close_write(writer) -> None:
    try:
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        pass


def read_stats(port: int, host: str = "127.0.0.1") -> dict[str, object]:
    """The counts of a running proxy (its ``--stats-port``)."""
    with socket.create_connection((host, port), timeout=10) as s:
        buf = b""
        while not buf.endswith(b"\n"):
            got = s.recv(4096)
            if not got:
                break
            buf += got
    return json.loads(buf)


async def serve(
    target: tuple[str, int],
    delay_s: float,
    port: int = 0,
    stats_port: int = 0,
    max_seconds: float | None = None,
    ready=None,
) -> None:
    proxy = Proxy(target, delay_s)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port)
    stats = await asyncio.start_server(proxy.stats, "127.0.0.1", stats_port)
    ports = (server.sockets[0].getsockname()[1], stats.sockets[0].getsockname()[1])
    if ready is not None:
        ready(*ports)
    async with server, stats:
        if max_seconds is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(max_seconds)


def start(target: str, delay_ms: float, timeout_s: float = 30.0):
    """Start the proxy as a process of its own: (process, port, stats_port). Terminate it when done."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.latency_proxy", "--target", target, "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()  # "ready <port> <stats_port>", or "" when it died
    if not line.startswith("ready "):
        proc.kill()
        proc.wait(timeout=timeout_s)
        raise RuntimeError(f"the latency proxy did not start (exit {proc.poll()})")
    _, port, stats_port = line.split()
    return proc, int(port), int(stats_port)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, help="host:port of the server, on loopback")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="added to each exchange (default 0)")
    ap.add_argument("--port", type=int, default=0, help="listen here on 127.0.0.1 (default: a free port)")
    ap.add_argument("--stats-port", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=6 * 3600.0, help="stop by itself after this long")
    args = ap.parse_args(argv)
    if args.delay_ms < 0:
        ap.error("--delay-ms must be >= 0")
    try:
        target = parse_target(args.target)
    except ValueError as e:
        ap.error(str(e))

    def ready(port: int, stats_port: int) -> None:
        print(f"ready {port} {stats_port}", flush=True)

    try:
        asyncio.run(serve(target, args.delay_ms / 1000.0, args.port, args.stats_port, args.max_seconds, ready))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
