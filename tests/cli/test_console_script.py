"""The installed console script, once, as a real subprocess (``pip install -e .`` puts it in
the venv's bin/ next to the interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _script() -> Path:
    p = Path(sys.executable).parent / "omnigraph-spark"
    if not p.exists():
        pytest.fail(f"{p} is missing: install the project into this venv (pip install -e '.[test]')")
    return p


def test_console_script_help_and_usage_exit_code(tmp_path):
    p = subprocess.run([str(_script()), "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: omnigraph-spark")
    for c in ("init", "status", "log", "branch", "recover", "load", "optimize", "cleanup"):
        assert c in p.stdout
    p = subprocess.run([str(_script()), "status"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "error[USAGE]" in p.stderr
    p = subprocess.run([str(_script()), "status", str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and p.stderr.startswith("error[GRAPH_NOT_FOUND]: ")
