"""The store-level commands, in-process (no Spark): init, status, log, branch, recover,
optimize, cleanup; human and --json output; exit codes and error[CODE] lines."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.cli.codes import EXIT_RECOVERY_PENDING, EXIT_USAGE

from .helpers import cli, error_codes

pytestmark = pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")


@pytest.fixture
def schema_file(tmp_path, test_schema_text):
    p = tmp_path / "test.pg"
    p.write_text(test_schema_text)
    return p


@pytest.fixture
def inited(graph_uri, schema_file):
    r = cli("init", graph_uri, "--schema", schema_file)
    assert r.code == 0, r.err
    return graph_uri


def _write_people(uri, names, branch="main"):
    from tests.store.helpers import write_rows  # the store's Spark-free write helper

    g = Graph.open(uri)
    return write_rows(
        g, "node:Person", [{"id": n, "age": 30, "name": n} for n in names], branch=branch, actor="cli-test"
    )


def test_help_lists_every_command():
    r = cli("--help")
    assert r.code == 0
    for c in ("init", "status", "log", "branch", "recover", "load", "optimize", "cleanup"):
        assert c in r.out
    assert "Exit codes" in r.out


def test_version():
    r = cli("--version")
    assert r.code == 0 and "omnigraph-spark" in r.out


def test_verbose_and_log_config_leave_logging_as_they_found_it(inited):
    import logging

    pkg = logging.getLogger("omnigraph_spark")
    before = (pkg.level, pkg.propagate, list(pkg.handlers))
    conf = os.path.join(os.path.dirname(__file__), "..", "..", "conf", "logging.ini")
    for extra in (["-v"], ["-vv"], ["--log-config", conf]):
        r = cli("status", inited, *extra)
        assert r.code == 0, r.err
        assert (pkg.level, pkg.propagate, list(pkg.handlers)) == before


def test_init_human_and_json(graph_uri, schema_file):
    r = cli("init", graph_uri, "--schema", schema_file, "--json")
    assert r.code == 0, r.err
    d = r.json
    assert d["root"] == graph_uri and d["version"] == 3 and d["branch"] == "main"
    assert d["tables"] == ["edge:Knows", "edge:WorksAt", "node:Company", "node:Person"]
    assert d["commit_id"] == Graph.open(graph_uri).log()[-1].graph_commit_id


def test_init_twice_is_graph_exists(inited, schema_file):
    r = cli("init", inited, "--schema", schema_file)
    assert r.code == 1
    assert error_codes(r.err) == ["GRAPH_EXISTS"]
    assert r.out == ""


def test_init_bad_schema_is_schema_error(tmp_path):
    bad = tmp_path / "bad.pg"
    bad.write_text("node Person { name: Strin @key }\n")
    r = cli("init", tmp_path / "g", "--schema", bad)
    assert r.code == 1
    assert error_codes(r.err)[0] in ("SCHEMA_INVALID", "SCHEMA_SYNTAX")


def test_init_missing_schema_file(tmp_path):
    r = cli("init", tmp_path / "g", "--schema", tmp_path / "nope.pg")
    assert r.code == 1 and error_codes(r.err) == ["FILE_NOT_FOUND"]


def test_status_human(inited):
    _write_people(inited, ["Alice", "Bob"])
    r = cli("status", inited)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"graph {inited}"
    row = next(line for line in lines if line.startswith("node:Person"))
    assert row.split()[:4] == ["node:Person", "2", "3", "main"]  # data at v2, indexes at v3 (I23)
    assert "pending recovery sidecars: none" in r.out
    assert "branches: main" in r.out


def test_status_json(inited):
    res = _write_people(inited, ["Alice"])
    d = cli("status", inited, "--json").json
    assert d["version"] == res.manifest_version and d["head_commit"] == res.graph_commit_id
    assert d["tables"]["node:Person"] == {
        "version": 3,  # data at 2, indexes at 3 (I23)
        "branch": "main",
        "row_count": 1,
        "path": d["tables"]["node:Person"]["path"],
    }
    assert list(d["tables"])[:2] == ["node:Company", "node:Person"]  # nodes first
    assert d["total_rows"] == 1 and d["branches"] == ["main"] and d["pending_sidecars"] == []


def test_status_missing_graph(tmp_path):
    r = cli("status", tmp_path / "nothing", "--json")
    assert r.code == 1 and error_codes(r.err) == ["GRAPH_NOT_FOUND"]
    assert r.json["error"]["code"] == "GRAPH_NOT_FOUND" and r.json["error"]["exit_code"] == 1


def test_status_unknown_branch(inited):
    r = cli("status", inited, "--branch", "nope")
    assert r.code == 1 and error_codes(r.err)[0].startswith("BRANCH")


def test_log_newest_first_and_limit(inited):
    a = _write_people(inited, ["Alice"])
    b = _write_people(inited, ["Bob"])
    d = cli("log", inited, "--json").json
    assert [c["commit_id"] for c in d[:2]] == [b.graph_commit_id, a.graph_commit_id]
    assert d[0]["parent"] == a.graph_commit_id and d[0]["actor"] == "cli-test"
    assert d[-1]["version"] == 3 and d[-1]["parent"] is None  # genesis
    assert d[0]["created_at"].endswith("Z")
    r = cli("log", inited, "-n", "1")
    assert r.code == 0 and len(r.out.splitlines()) == 2 and b.graph_commit_id in r.out
    assert cli("log", inited, "-n", "0").code == EXIT_USAGE


def test_branch_create_list_delete(inited):
    assert cli("branch", "create", inited, "feature").code == 0
    _write_people(inited, ["Zed"], branch="feature")
    d = cli("branch", "list", inited, "--json").json
    assert [b["branch"] for b in d] == ["main", "feature"]
    assert d[1]["owned_tables"] == ["node:Person"]
    r = cli("branch", "list", inited)
    assert r.out.splitlines()[0].split() == ["BRANCH", "GRAPH", "VERSION", "OWNED", "TABLES"]
    r = cli("status", inited, "--branch", "feature", "--json")
    assert r.json["tables"]["node:Person"]["row_count"] == 1
    assert cli("status", inited, "--json").json["tables"]["node:Person"]["row_count"] == 0
    again = cli("branch", "create", inited, "feature")
    assert again.code == 1 and error_codes(again.err) == ["BRANCH_EXISTS"]
    assert cli("branch", "delete", inited, "feature").code == 0
    assert [b["branch"] for b in cli("branch", "list", inited, "--json").json] == ["main"]
    r = cli("branch", "delete", inited, "main")
    assert r.code == 1 and error_codes(r.err) == ["BRANCH_INVALID"]
    r = cli("branch", "delete", inited, "ghost")
    assert r.code == 1 and error_codes(r.err) == ["BRANCH_NOT_FOUND"]


def test_branch_from_other_branch(inited):
    assert cli("branch", "create", inited, "a").code == 0
    _write_people(inited, ["OnA"], branch="a")
    r = cli("branch", "create", inited, "b", "--from", "a", "--json")
    assert r.code == 0 and r.json["from"] == "a"
    assert cli("status", inited, "--branch", "b", "--json").json["tables"]["node:Person"]["row_count"] == 1


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["status"],
        ["frobnicate", "x"],
        ["branch", "x"],
        ["cleanup", "G"],
        ["cleanup", "G", "--older-than", "7x"],
        ["cleanup", "G", "--keep-versions", "0"],
        ["load", "G", "f.parquet"],
    ],
)
def test_usage_errors_exit_2(argv, tmp_path):
    argv = [str(tmp_path / "g") if a == "G" else a for a in argv]
    r = cli(*argv)
    assert r.code == EXIT_USAGE, (argv, r.err)
    assert error_codes(r.err) == ["USAGE"]


def test_optimize_and_cleanup(inited):
    for n in ("A", "B", "C"):
        _write_people(inited, [n])
    plan = cli("optimize", inited, "--dry-run", "--json")
    assert plan.code == 0, plan.err
    assert plan.json["dry_run"] is True
    person = next(t for t in plan.json["tables"] if t["table_key"] == "node:Person")
    assert person["fragments_before"] == 3
    r = cli("optimize", inited)
    assert r.code == 0, r.err
    assert "published graph v" in r.out
    st = cli("status", inited, "--json").json
    assert st["tables"]["node:Person"]["row_count"] == 3
    dry = cli("cleanup", inited, "--keep-versions", "1", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert dry.json["dry_run"] is True and dry.json["keep_versions"] == 1
    journal = os.path.join(inited, "_omnigraph_spark", "staging", "0123abcd")  # a killed load's
    os.makedirs(journal)
    past = time.time() - 7200
    os.utime(journal, (past, past))
    r = cli("cleanup", inited, "--keep-versions", "1", "--older-than", "0s")
    assert r.code == 0, r.err
    assert "removed" in r.out and "removed 1 staging journals of killed loads" in r.out
    assert not os.path.exists(journal)
    assert cli("status", inited, "--json").json["tables"]["node:Person"]["row_count"] == 3


_CRASH = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from omnigraph_spark import Graph
    from omnigraph_spark.store import writes
    g = Graph.open(sys.argv[1])
    t = writes.prepare_target(g, "main", "node:Person", "append")
    st = writes.stage(t, pa.Table.from_pylist([{"id": "x", "age": 1, "name": "x"}], schema=t.schema).to_batches())
    writes.commit_load(g, "main", [st], actor="crash")
""")


def test_pending_recovery_exit_3_then_recover(inited):
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT="after_all_commits")
    p = subprocess.run([sys.executable, "-c", _CRASH, inited], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 137, p.stderr
    r = cli("status", inited)
    assert r.code == EXIT_RECOVERY_PENDING
    assert "pending recovery sidecars (1):" in r.out and f"omnigraph-spark recover {inited}" in r.out
    r = cli("optimize", inited)  # refuses to run over a pending sidecar
    assert r.code == EXIT_RECOVERY_PENDING and error_codes(r.err) == ["RECOVERY_PENDING"]
    assert "omnigraph-spark recover" in r.err
    r = cli("recover", inited, "--json")
    assert r.code == 0, r.err
    d = r.json
    assert len(d["pending_before"]) == 1 and d["pending_after"] == []
    assert d["outcomes"][0]["action"] in ("RolledForward", "RolledBack")
    assert cli("status", inited).code == 0
    assert "nothing to recover" in cli("recover", inited).out
