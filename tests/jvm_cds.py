"""Class-data sharing (CDS) for every JVM the tests start.

A test run starts some sixty Spark applications of its own (the crash matrix, concurrency,
streams, examples, clusters), and each JVM spends seconds of CPU loading and verifying the same
Spark classes. JDK 17 can map them from an archive instead (``-XX:SharedArchiveFile``). The test
session points ``JAVA_HOME`` at a copy of the real JDK (symbolic links) whose ``bin/java`` is
``tests/java_cds.sh``: it keeps one archive per class path, written once by the first Spark driver
of that class path, in the test environment's own directory (``.venv/omnigraph-test-cds/``: the
archives belong to that environment's pyspark; ``make wheel`` empties ``build/``, ``make clean``
removes them with the environment). ``OMNIGRAPH_TEST_CDS=0`` turns it off.

Only time changes: the JVM validates an archive against its class path and JDK and ignores it,
silently, on any mismatch."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

BASE = Path(sys.prefix) / "omnigraph-test-cds"
WRAPPER = Path(__file__).resolve().parent / "java_cds.sh"
#: the file that marks a JAVA_HOME as this module's (never wrapped twice)
MARKER = "omnigraph-test-cds"


def _real_java_home() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / MARKER).exists():
        return None  # already ours (an xdist worker inherits the controller's)
    java = Path(home) / "bin" / "java" if home else None
    if java is None or not java.exists():
        found = shutil.which("java")
        if not found:
            return None
        java = Path(found)
    real = java.resolve().parent.parent
    return real if (real / "bin" / "java").exists() else None


def _feature_version(home: Path) -> int:
    """The JDK's feature version from its ``release`` file (0 when unknown)."""
    try:
        for line in (home / "release").read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                v = line.split("=", 1)[1].strip('"')
                return int(v.split(".")[0]) if not v.startswith("1.") else int(v.split(".")[1])
    except (OSError, ValueError):
        pass
    return 0


def _build(real: Path, home: Path) -> None:
    """``home``: links to everything in ``real`` but ``bin/java``, which is the wrapper."""
    tmp = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
    for entry in real.iterdir():
        if entry.name != "bin":
            (tmp / entry.name).symlink_to(entry)
    (tmp / "bin").mkdir()
    for tool in (real / "bin").iterdir():
        if tool.name != "java":
            (tmp / "bin" / tool.name).symlink_to(tool)
    text = (
        WRAPPER.read_text()
        .replace("@REAL_JAVA@", _sh_quote(str(real / "bin" / "java")))
        .replace("@ARCHIVES@", _sh_quote(str(home.parent / (home.name + "-archives"))))
    )
    (tmp / "bin" / "java").write_text(text)
    (tmp / "bin" / "java").chmod(0o755)
    (tmp / MARKER).write_text(str(real) + "\n")
    try:
        tmp.rename(home)
    except OSError:  # another session built it first
        shutil.rmtree(tmp, ignore_errors=True)


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def install(base: Path = BASE) -> str | None:
    """A JAVA_HOME whose ``java`` shares class data (built once per JDK and wrapper), or None
    where the JDK cannot write dynamic archives (older than 13) or cannot be found, or ``base``
    cannot be written (a system Python's prefix)."""
    if os.environ.get("OMNIGRAPH_TEST_CDS", "1") == "0":
        return None
    if not os.access(base if base.exists() else base.parent, os.W_OK):
        return None
    real = _real_java_home()
    if real is None or _feature_version(real) < 13:
        return None
    digest = hashlib.sha1(f"{real}\n{WRAPPER.read_text()}".encode()).hexdigest()[:12]
    home = base / f"java-home-{digest}"
    base.mkdir(parents=True, exist_ok=True)
    (base / f"java-home-{digest}-archives").mkdir(exist_ok=True)
    if not (home / MARKER).exists():
        _build(real, home)
    log.info("JVMs share class data through %s (the real JDK: %s)", home, real)
    return str(home)
