"""Interop suite: the real Omnigraph 0.7.2 engine CLI is the oracle.

The binary is found as ``$OMNIGRAPH_BIN``, else the cached build of
``scripts/install-omnigraph.sh`` (``~/.cache/omnigraph-spark/omnigraph-cli-0.7.2/bin/omnigraph``,
or under ``$OMNIGRAPH_CACHE``), else ``omnigraph`` on PATH. It must report version 0.7.2.
Without it every test here is skipped with the reason. Every test in this directory carries
the ``interop`` marker (``-m "not interop"`` deselects the suite).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ENGINE_VERSION = "0.7.2"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.interop)


def find_engine() -> tuple:
    """``(path, None)`` or ``(None, reason)``."""
    tried: list[str] = []
    candidates: list[str] = []
    if os.environ.get("OMNIGRAPH_BIN"):
        candidates.append(os.environ["OMNIGRAPH_BIN"])
    cache = os.environ.get("OMNIGRAPH_CACHE") or os.path.expanduser("~/.cache/omnigraph-spark")
    candidates.append(os.path.join(cache, f"omnigraph-cli-{ENGINE_VERSION}", "bin", "omnigraph"))
    on_path = shutil.which("omnigraph")
    if on_path:
        candidates.append(on_path)
    for c in candidates:
        if not (os.path.isfile(c) and os.access(c, os.X_OK)):
            tried.append(f"{c} (absent)")
            continue
        try:
            out = subprocess.run([c, "--version"], capture_output=True, text=True, timeout=60)
            text = (out.stdout + out.stderr).strip()
        except Exception as e:  # pragma: no cover - broken binary
            tried.append(f"{c} ({e})")
            continue
        if ENGINE_VERSION in text.split():
            return c, None
        tried.append(f"{c} (reports {text!r}, need {ENGINE_VERSION})")
    return None, (
        "Omnigraph engine CLI 0.7.2 not available; set OMNIGRAPH_BIN or run "
        "`make engine` (scripts/install-omnigraph.sh). Tried: " + "; ".join(tried)
    )


class Engine:
    """Runs the engine CLI against local graph roots. Every embedded command opens the graph
    read-write (``Omnigraph::open``), i.e. runs the engine's recovery sweep first."""

    def __init__(self, binary: str, home: str):
        self.binary = binary
        self.env = dict(os.environ)
        # an empty operator config: no profile/default store can redirect a command
        self.env["OMNIGRAPH_HOME"] = home
        self.env.pop("OMNIGRAPH_PROFILE", None)
        self.env.setdefault("RUST_BACKTRACE", "0")

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [self.binary, "--quiet", *[str(a) for a in args]]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and p.returncode != 0:
            raise AssertionError(
                f"engine command failed ({p.returncode}): {' '.join(cmd)}\n"
                f"stdout: {p.stdout[-4000:]}\nstderr: {p.stderr[-4000:]}"
            )
        return p

    def json(self, *args: str) -> dict:
        return json.loads(self.run(*args, "--json").stdout)

    # -- commands ------------------------------------------------------------------------
    def init(self, uri: str, schema_path) -> None:
        self.run("init", "--schema", schema_path, uri)

    def load(self, uri: str, data_path, mode: str, branch: str | None = None, from_branch: str | None = None) -> dict:
        args = ["load", "--data", data_path, "--mode", mode]
        if branch:
            args += ["--branch", branch]
        if from_branch:
            args += ["--from", from_branch]
        return self.json(*args, uri)

    def snapshot(self, uri: str, branch: str = "main") -> dict:
        return self.json("snapshot", uri, "--branch", branch)

    def export(self, uri: str, branch: str = "main") -> list[dict]:
        out = self.run("export", uri, "--branch", branch).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def commits(self, uri: str, branch: str | None = None) -> list[dict]:
        args = ["commit", "list", uri]
        if branch:
            args += ["--branch", branch]
        return self.json(*args)["commits"]

    def branches(self, uri: str) -> list[str]:
        return self.json("branch", "list", "--uri", uri)["branches"]

    def create_branch(self, uri: str, name: str, from_branch: str = "main") -> None:
        self.run("branch", "create", "--uri", uri, "--from", from_branch, name)

    def query(
        self, uri: str, query_file, name: str, params: dict | None = None, branch: str | None = None, check: bool = True
    ):
        args = ["query", "--store", uri, "--query", query_file, name]
        if params:
            args += ["--params", json.dumps(params)]
        if branch:
            args += ["--branch", branch]
        p = self.run(*args, "--json", check=check)
        if p.returncode != 0:
            return p
        return json.loads(p.stdout)

    def optimize(self, uri: str) -> dict:
        return self.json("optimize", uri)


_ENGINE = find_engine()


@pytest.fixture(scope="session")
def engine_bin() -> str:
    path, reason = _ENGINE
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def engine(engine_bin, tmp_path_factory) -> Engine:
    return Engine(engine_bin, str(tmp_path_factory.mktemp("omnigraph-home")))


@pytest.fixture(autouse=True)
def _needs_engine(engine_bin):
    """Every interop test needs the binary: skip them all, with the reason, when it is absent."""
    return engine_bin
