"""The package as a user installs it, for tests (tests only): a wheel built from the checkout's
sources, installed into a fresh virtual environment whose processes see no checkout.

:func:`build_wheel` builds from a copy of the sources in a temporary directory, so that it writes
nothing into the checkout (setuptools' ``build/`` and ``*.egg-info``, ``dist/``, which
``make wheel`` and tests/test_wheel.py use at the same time on another pytest worker), and
leaves out the shim jar (``omnigraph_spark/jars/*.jar``, present in a checkout after
``make wheel``): a wheel for compute where no jar can load, which needs no Maven build. pip
builds it as ``make wheel`` does, in an isolated build environment (setuptools from PyPI or
pip's cache).

:func:`install` makes the environment: ``python -m venv --without-pip``, the wheel installed
into it with ``--no-deps`` by this interpreter's pip, and its dependencies (pyspark, pylance,
pyarrow, ...) from this test environment through one ``.pth`` file naming this environment's
site-packages. A ``.pth`` line only adds that directory to ``sys.path``; it does not run the
``.pth`` files inside it, so the checkout's editable install (a ``.pth`` there) stays invisible,
and the fresh environment's own site-packages, earlier on ``sys.path``, wins for the package.
``venv --system-site-packages`` would not do: a venv made from another venv's interpreter
inherits the base interpreter's site-packages, not that venv's, so it would have none of the
dependencies on a machine whose only environment is the clone's ``.venv``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: what setup.py reads besides the package directory
BUILD_FILES = ("setup.py", "README.md", "pyspark_omnigraph.py")
#: never part of the copied sources: caches, and the shim jar `make wheel` copies in
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", "*.jar", "*.egg-info")
TIMEOUT_S = 600


def build_wheel(workdir: Path) -> Path:
    """A wheel of the checkout's package without the shim jar, built under ``workdir``."""
    src = workdir / "src"
    shutil.copytree(ROOT / "omnigraph_spark", src / "omnigraph_spark", ignore=LEFT_OUT)
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, src / name)
    dist = workdir / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    (wheel,) = dist.glob("omnigraph_spark-*.whl")
    return wheel


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def install(wheel: Path, venv: Path) -> Path:
    """A fresh virtual environment at ``venv`` with ``wheel`` installed and this environment's
    packages as its dependencies (module docstring); its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=TIMEOUT_S)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, str(wheel)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    ours = sysconfig.get_paths()
    deps = dict.fromkeys([ours["purelib"], ours["platlib"]])  # the same directory on most systems
    Path(site, "test-deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return python
