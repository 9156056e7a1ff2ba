"""A stand-in for Databricks serverless: docs/databricks.md's notebook steps, run as written.

What serverless gives a notebook, per docs/databricks.md ("Compute types", "Spark confs per
compute type"), and how this test gives the same on one machine:

- Spark Connect only, no py4j, no SparkContext: a local Spark Connect server
  (tests/connect_server.py, loopback only, stopped at the end) and a pyspark Connect client in
  a process of its own (tests/connect_client.py, scenario ``notebook``).
- No JVM jars: the server's class path is empty, so ``format("omnigraph")`` is the Python
  source; the test asserts that the shim's probe fails and that ``engine=jvm`` is refused.
- Only the session confs serverless accepts: the server gets :data:`SERVERLESS_CONF` and no
  other session conf, and the client refuses any conf set on the session outside that list.
- The package from its wheel, "where it runs": the notebook's Python and the Python workers
  that run its tasks. Here both are the interpreter of a fresh virtual environment with the
  wheel installed (tests/wheel_env.py), started outside the checkout and without PYTHONPATH;
  the test asserts that the client's and a task's ``omnigraph_spark`` come from it. The wheel
  carries no shim jar (built by tests/wheel_env.py from a copy of the sources): no jar can load
  on serverless, and so this test needs no Maven build.

The cells are the ```python blocks of docs/databricks.md's "Notebook steps" section, in order,
with only the volume's path replaced by a temporary directory, so the doc and this test cannot
drift: create the graph, ``df.write.format("omnigraph")`` with ``.mode``, ``spark.read`` with a
filter (``display``), ``write_graph``, then a bad row through ``write_graph`` and ``df.write``,
then SQL on a temporary view ``USING omnigraph`` (an INSERT, a SELECT with a filter).
What a cell prints must be what the comment after its ``print(...)`` says. After the cells, the
client runs a load above ``distributedCheckRows`` with a key given twice: its load-wide checks run
as Spark jobs of the client's session (I21), where a Connect session has no SparkContext.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # pytest's own dependency

from ..connect_server import run_client, serve
from ..wheel_env import build_wheel, install, wheel_files

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "databricks.md"
SECTION = "### Notebook steps"
VOLUME = "/Volumes/main/default/graphs/"
#: the session confs a serverless session accepts, per docs/databricks.md ("Spark confs per
#: compute type": serverless accepts a short list "such as spark.sql.session.timeZone and
#: spark.sql.ansi.enabled" and refuses the rest, pushdown and hideTraceback among them)
SERVERLESS_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
}
#: the steps the section must keep, in this order (a guard against a doc that drops one)
STEPS = (
    "omnigraph_spark.Graph.init(",
    '.write.format("omnigraph")',
    '.mode("append").save(uri)',
    'spark.read.format("omnigraph")',
    ".where(",
    "display(",
    "omnigraph_spark.write_graph(",
    "except omnigraph_spark.errors.OmnigraphError",
    "omnigraph_spark.unwrap_error(e)",
    "CREATE OR REPLACE TEMPORARY VIEW person",
    "USING omnigraph OPTIONS",
    "INSERT INTO person VALUES",
    "SELECT name, age FROM person WHERE",
)
PRINT = re.compile(r"^\s*print\(.*\)\s*#\s*(.+?)\s*$", re.M)
#: what Databricks ships with its own pyspark, which the install cell leaves to it
SHIPPED = {"pyspark", "py4j", "pandas", "numpy"}


def notebook_cells(text: str) -> list[str]:
    """The ```python blocks of the "Notebook steps" section, in document order."""
    start = text.index(SECTION)
    end = text.find("\n### ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"^```python[ \t]*\n(.*?)^```[ \t]*$", section, re.M | re.S)


def matches(line: str, expected: str) -> bool:
    """``line`` is what a ``print`` comment says: the same text, or a prefix ending in ``...``."""
    return line.startswith(expected[:-3].rstrip()) if expected.endswith("...") else line == expected


def test_the_notebook_cells_are_the_documented_steps():
    cells = notebook_cells(DOC.read_text(encoding="utf-8"))
    assert len(cells) == 3, cells  # the steps, the bad row, SQL
    text = "\n".join(cells)
    at = [text.find(step) for step in STEPS]
    assert -1 not in at and at == sorted(at), dict(zip(STEPS, at))
    assert text.count(VOLUME) == 2  # the graph's path and its schema's: the only ones replaced
    assert [m.group(1) for m in PRINT.finditer(text)] == [
        "[CONSTRAINT_VIOLATION] node Person column 'role' row 0: ...",
        "CONSTRAINT_VIOLATION",
    ]


def test_the_install_cell_names_the_wheels_other_dependencies():
    """docs/databricks.md installs the wheel with --no-deps, then its dependencies by name:
    setup.py's install_requires, less what Databricks ships with its pyspark (:data:`SHIPPED`)."""
    text = DOC.read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith('%pip install "')]
    named = re.findall(r'"([^"]+)"', line)
    setup = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    (requires,) = [
        kw.value
        for node in ast.walk(setup)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "install_requires"
    ]
    wanted = [Requirement(r) for r in ast.literal_eval(requires)]
    assert [(r.name, r.specifier) for r in map(Requirement, named)] == [
        (r.name, r.specifier) for r in wanted if r.name not in SHIPPED
    ]


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory):
    """The interpreter of a fresh environment with the package installed from its wheel."""
    work = tmp_path_factory.mktemp("serverless-wheel")
    wheel = build_wheel(work)
    files = wheel_files(wheel)
    assert "pyspark_omnigraph.py" in files and not [f for f in files if f.endswith(".jar")]
    return install(wheel, work / "venv")


@pytest.fixture(scope="module")
def serverless(tmp_path_factory, wheel_python):
    """A Spark Connect server as serverless has one: no jar, serverless's session confs only,
    its Python workers the wheel's environment."""
    yield from serve(
        tmp_path_factory.mktemp("serverless-server"), [], session_conf=SERVERLESS_CONF, python=str(wheel_python)
    )


@pytest.mark.slow
def test_the_documented_notebook_steps_run_on_a_serverless_stand_in(serverless, wheel_python, tmp_path):
    volume = tmp_path / "volume"
    volume.mkdir()
    shutil.copy(ROOT / "omnigraph_spark" / "data" / "social.pg", volume / "social.pg")
    cells = [cell.replace(VOLUME, f"{volume}/") for cell in notebook_cells(DOC.read_text(encoding="utf-8"))]
    root = str(volume / "social")
    work = tmp_path / "work"  # the client's working directory: outside the checkout
    work.mkdir()
    remote = run_client(
        serverless.url,
        "notebook",
        work,
        python=str(wheel_python),
        cells=cells,
        accepted_confs=sorted(SERVERLESS_CONF),
        root=root,
    )
    env = str(wheel_python.parent.parent)
    # the wheel's package in the notebook's process and in the server's Python workers
    assert remote["session"].startswith("pyspark.sql.connect")
    assert remote["client_package"].startswith(env), remote["client_package"]
    assert remote["task_package"].startswith(env), remote["task_package"]
    # no JVM provider: the shim's probe fails, and engine=jvm is refused by the Python source
    assert remote["shim_blocker"] and "not on the class path" in remote["shim_blocker"]
    assert remote["jvm_read"]["typed"].startswith("JvmReadUnavailableError: [JVM_READ_UNAVAILABLE]")
    assert "resolved to the Python source" in remote["jvm_read"]["typed"]
    # serverless's confs only: the confs it refuses keep Spark's defaults, and nobody set one
    assert remote["server_conf"] == {
        "spark.sql.python.filterPushdown.enabled": "false",
        "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "false",
    }
    assert remote["conf_sets"] == []

    # the read showed Ada, not Lu (17): Spark applied the filter; the bad row printed what the
    # doc's comments say
    ada = {"id": "Ada", "name": "Ada", "age": 36, "born": None, "city": "Lisbon", "role": "engineer", "skills": None}
    # then the SQL cell's SELECT through the view, after its INSERT (Mo): one graph commit
    assert remote["shown"] == [[ada], [{"name": "Mo", "age": 52}]]
    printed = [line for cell in remote["printed"] for line in cell]
    expected = [m.group(1) for cell in cells for m in PRINT.finditer(cell)]
    assert len(printed) == len(expected) and all(map(matches, printed, expected)), (printed, expected)
    # df.write's own exception without hideTraceback (the doc's list above the cell): the typed
    # error follows a traceback, and unwrap_error finds it
    assert remote["bad_write"]["typed"].startswith(
        "ConstraintViolationError: [CONSTRAINT_VIOLATION] node Person column 'role' row 0:"
    )
    first = remote["bad_write"]["first_line"]
    assert first.startswith("[PYTHON_DATA_SOURCE_ERROR] ") and first.endswith(": Traceback (most recent call last):")

    # a load's checks as Spark jobs of the client's session: the same typed error
    assert remote["distributed"]["typed"].startswith("KeyConflictError: [KEY_CONFLICT] append to node Person:")
    assert "distributed unique check of node:Person: failed" in " ".join(remote["log"])

    # the graph the steps left: the bad rows committed nothing, and left no staged file
    lu = {"id": "Lu", "name": "Lu", "age": 17, "born": None, "city": "Porto", "role": "designer", "skills": None}
    mo = {"id": "Mo", "name": "Mo", "age": 52, "born": None, "city": "Braga", "role": "analyst", "skills": None}
    assert remote["graph"] == {
        "Person": [ada, lu, mo],
        "Company": [
            {
                "id": "Globex",
                "name": "Globex",
                "industry": "software",
                "founded": None,
                "employees": None,
                "revenue_musd": None,
            }
        ],
        "WorksAt": [{"src": "Ada", "dst": "Globex", "title": "CTO", "start": None}],
    }
    assert remote["commits"] == 4  # init, the df.write, the write_graph, the INSERT: none from a refused load
    assert remote["staging_left"] == []
