"""The README's and the quickstart's snippets work when pasted, in order.

Every ```python and ```bash block of README.md and docs/quickstart.md is extracted in document
order and run from the clone root, as a reader would run them:

- python blocks are exec'd one after the other in ONE namespace per document (a later block
  may use the names of an earlier one); ``local_spark()`` in a snippet gets the test run's
  shared session (``getOrCreate``), which the test checks;
- bash blocks run line by line (a line ending in ``\\`` continues on the next), each line with
  ``bash -c`` and a timeout, with the running interpreter's bin directory first on PATH;
- lines starting with one of ``SKIPPED`` (``make ...``, ``git clone``, ``pip install``) are the
  only ones not run. In place of the skipped ``make demo``, the test builds the demo graph the
  quickstart's CLI block inspects with ``omnigraph_spark.demo.run``.

Substitutions, so that nothing is written outside a temporary directory ``tmp``: the graph
paths ``/tmp/social``, ``/tmp/g`` and ``./demo-graph`` become ``tmp/social``, ``tmp/g`` and
``tmp/demo-graph``; and ``.venv/bin/`` becomes the running interpreter's bin directory (the
same directory when the tests run as ``make test`` does). Nothing else in a snippet changes.

A snippet that raises, or a command that exits non-zero, fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "docs/quickstart.md"]
#: the only command lines not run (they build the checkout or fetch it)
SKIPPED = ("make ", "make\t", "git clone ", "pip install ")
COMMAND_TIMEOUT = 600  # seconds; `omnigraph-spark load` starts its own local Spark

BLOCK = re.compile(r"^```(python|bash)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
GRAPH_PATHS = re.compile(r"(?<![\w./-])(?:/tmp/(social|g)|\./(demo-graph))\b")


def blocks(document: str) -> list[tuple[str, str]]:
    """(language, text) of every ```python / ```bash block, in document order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer((ROOT / document).read_text(encoding="utf-8"))]


def substituted(text: str, tmp: Path) -> str:
    """The snippet with its graph paths under ``tmp`` and ``.venv/bin/`` the interpreter's bin."""
    text = GRAPH_PATHS.sub(lambda m: str(tmp / (m.group(1) or m.group(2))), text)
    return text.replace(".venv/bin/", str(Path(sys.executable).parent) + "/")


def command_lines(text: str) -> list[str]:
    lines, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line.strip())
    return lines


def run_bash(text: str, where: str) -> list[str]:
    """Run each command line; return the ones skipped. Fails on a non-zero exit."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    skipped = []
    for line in command_lines(text):
        if line.startswith(SKIPPED):
            skipped.append(line)
            continue
        p = subprocess.run(
            ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT
        )
        assert p.returncode == 0, (
            f"{where}: `{line}` exited {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
        )
    return skipped


def test_snippet_extraction_sees_every_block():
    """The pattern finds the blocks a reader sees (a guard against a test that runs nothing)."""
    for doc in DOCUMENTS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        fenced = len(re.findall(r"^```(?:python|bash)[ \t]*$", text, re.M))
        assert fenced and len(blocks(doc)) == fenced, doc


def test_substitution_covers_every_graph_path(tmp_path):
    for doc in DOCUMENTS:
        for _, text in blocks(doc):
            out = substituted(text, tmp_path)
            assert not re.search(r"(?<![\w./-])(/tmp/(social|g)\b|\./demo-graph|\.venv/bin/)", out), (doc, out)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_documents_snippets_run_in_order(document, spark, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # relative paths in the snippets (omnigraph_spark/data/...) are the clone's
    if any(
        "./demo-graph" in line and not line.startswith(SKIPPED)
        for lang, text in blocks(document)
        if lang == "bash"
        for line in command_lines(text)
    ):
        from omnigraph_spark import demo

        assert demo.run(str(tmp_path / "demo-graph"), spark=spark, quiet=True) == 0  # what `make demo` leaves
    namespace: dict = {"__name__": "__doc_snippets__"}
    ran = {"python": 0, "bash": 0}
    skipped: list[str] = []
    try:
        for i, (lang, text) in enumerate(blocks(document), 1):
            code = substituted(text, tmp_path)
            where = f"{document}, {lang} block {i}"
            if lang == "python":
                exec(compile(code, where, "exec"), namespace)  # the documented snippet itself
            else:
                skipped += run_bash(code, where)
            ran[lang] += 1
    finally:
        spark.sparkContext.setLogLevel("ERROR")  # local_spark() sets WARN on the shared session
    assert ran["python"] and ran["bash"], ran
    if "spark" in namespace:
        assert namespace["spark"] is spark, "local_spark() in a snippet must return the running session"
    assert all(line.startswith(SKIPPED) for line in skipped)
