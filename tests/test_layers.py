"""The package's layers depend one way (ARCHITECTURE.md, "Code map"): pins that invariant.

``errors`` -> ``schema`` -> ``ingest`` / ``store`` -> ``graph`` -> ``spark`` -> ``cli``. Checked
here, without Spark:

* ``omnigraph_spark.errors``, ``.schema``, ``.ingest`` and ``.store`` import in a fresh
  interpreter where pyspark cannot be imported;
* statically, over every module of the package (``ast``): ``schema``, ``ingest`` and ``store``
  never import ``spark``, ``cli`` or ``graph``; ``errors`` imports nothing of the package; no
  module imports another module's private (``_name``) name; and the graph of imports between
  the package's modules has no cycle, counting imports inside functions too.

An import inside a function must say why on its line (a ``#`` comment: an optional dependency,
or a cost or ordering reason); the test lists any that does not.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "omnigraph_spark"

#: layer -> the package's layers it must never import
FORBIDDEN = {
    "omnigraph_spark.schema": ("omnigraph_spark.store", "omnigraph_spark.ingest", "omnigraph_spark.graph"),
    "omnigraph_spark.ingest": ("omnigraph_spark.store", "omnigraph_spark.graph"),
    "omnigraph_spark.store": ("omnigraph_spark.graph",),
}
UPPER = ("omnigraph_spark.spark", "omnigraph_spark.cli", "omnigraph_spark.demo")


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (a module of the package) at ``line``; ``names`` are the
    names taken from it (``from target import names``), empty for ``import target``."""

    source: str
    target: str
    line: int
    in_function: bool
    names: tuple[str, ...] = ()


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _modules()


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_edges(module: str, path: Path, is_package: bool) -> list[Edge]:
    edges: list[Edge] = []
    tree = ast.parse(path.read_text(), str(path))

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "omnigraph_spark":
                        edges.append(Edge(module, alias.name, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                target = _absolute(module, is_package, child)
                if target.split(".")[0] == "omnigraph_spark":
                    for alias in child.names:
                        sub = f"{target}.{alias.name}"
                        if sub in MODULES:  # from package import module
                            edges.append(Edge(module, sub, child.lineno, in_function))
                        else:
                            edges.append(Edge(module, target, child.lineno, in_function, (alias.name,)))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(tree, False)
    return edges


EDGES = [e for module, (path, is_package) in MODULES.items() for e in _module_edges(module, path, is_package)]


def _in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def test_lower_layers_import_without_pyspark():
    """errors, schema, ingest and store import with pyspark unimportable (a ``None`` entry in
    ``sys.modules`` makes every ``import pyspark...`` raise ImportError)."""
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None\n"
        "import omnigraph_spark.errors, omnigraph_spark.schema, omnigraph_spark.ingest, omnigraph_spark.store\n"
        "import omnigraph_spark.store.writes, omnigraph_spark.store.quarantine\n"
        "import omnigraph_spark.store.maintenance, omnigraph_spark.store.maintenance_cleanup\n"
        "import omnigraph_spark.graph\n"
        "print(sorted(m for m in sys.modules if m.startswith('pyspark') and sys.modules[m] is not None))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_lower_layers_never_import_upper_ones():
    """schema/ingest/store never import spark, cli or the demo; nor the layers above their own."""
    bad = []
    for e in EDGES:
        for layer in ("omnigraph_spark.schema", "omnigraph_spark.ingest", "omnigraph_spark.store"):
            if not _in_layer(e.source, layer):
                continue
            above = UPPER + FORBIDDEN[layer]
            if any(_in_layer(e.target, u) for u in above):
                bad.append(f"{e.source}:{e.line} imports {e.target}")
    assert bad == []


def test_errors_imports_nothing_of_the_package():
    assert [e for e in EDGES if e.source == "omnigraph_spark.errors"] == []


def test_no_module_imports_a_private_name_of_another():
    """``from .reader import _helper`` across modules: the helper belongs in a module that makes
    it public (dunders such as ``__version__`` are not private)."""
    bad = [
        f"{e.source}:{e.line} imports {e.target}.{n}"
        for e in EDGES
        for n in e.names
        if n.startswith("_") and not (n.startswith("__") and n.endswith("__")) and e.target != e.source
    ]
    bad += [
        f"{e.source}:{e.line} imports module {e.target}"
        for e in EDGES
        if e.target.rsplit(".", 1)[-1].startswith("_")
        and not e.target.rsplit(".", 1)[-1].startswith("__")
        and e.target != "omnigraph_spark._lance_import"  # the package's own import hook, a module of its own
    ]
    assert bad == []


def _cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in edges:
        if e.target in MODULES and e.target != e.source:
            graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


@pytest.mark.parametrize("in_functions", [False, True], ids=["top-level", "with-in-function"])
def test_the_module_import_graph_has_no_cycle(in_functions):
    """A cycle (even one closed only by an import inside a function) means two modules own
    each other's helpers: move the shared part to the module that owns it."""
    edges = [e for e in EDGES if in_functions or not e.in_function]
    assert _cycles(edges) == []


def test_every_import_inside_a_function_says_why():
    """Imports belong at module top; one inside a function carries its reason on its line."""
    bad = []
    for module, (path, _) in MODULES.items():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                    if "#" not in text:
                        bad.append(f"{module}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert sorted(set(bad)) == []
