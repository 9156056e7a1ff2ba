"""The user docs stay in step with the code: every error code is in troubleshooting.md, every
connector option in options.md, every CLI command and exit code in cli.md, and links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from omnigraph_spark import errors

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
USER_DOCS = [
    "README.md",
    "docs/quickstart.md",
    "docs/cli.md",
    "docs/databricks.md",
    "docs/troubleshooting.md",
    "docs/options.md",
    "docs/object_storage.md",
]


def _all_error_classes():
    out, todo = [], [errors.OmnigraphError]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


ERROR_CODES = sorted({c.code for c in _all_error_classes() if c.__module__ == errors.__name__})


def _read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


@pytest.mark.parametrize("code", ERROR_CODES)
def test_every_error_code_has_a_troubleshooting_entry(code):
    text = _read("docs/troubleshooting.md")
    assert re.search(rf"^### `{code}`", text, re.M), f"docs/troubleshooting.md lacks a '### `{code}`' section"


def test_error_codes_found():
    assert len(ERROR_CODES) > 30 and "DANGLING_EDGE" in ERROR_CODES and "OMNIGRAPH_ERROR" in ERROR_CODES


def test_cli_only_codes_documented():
    from omnigraph_spark.cli.codes import CLI_CODES

    text = _read("docs/troubleshooting.md")
    for code in CLI_CODES:
        assert f"| `{code}` |" in text, f"CLI code {code} missing from troubleshooting.md"


def test_every_option_is_in_options_md():
    from omnigraph_spark.spark.options import OPTIONS

    text = _read("docs/options.md")
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([a-z/]+) \|", text, re.M))
    for o in OPTIONS:
        assert o.name in rows, f"option {o.name} missing from docs/options.md"
        assert rows[o.name] == o.scope, f"option {o.name}: scope {rows[o.name]!r} in docs, {o.scope!r} in code"
    stale = set(rows) - {o.name for o in OPTIONS}
    assert not stale, f"docs/options.md documents options the code does not have: {sorted(stale)}"


def test_cli_commands_and_exit_codes_in_cli_md():
    from omnigraph_spark.cli.codes import EXIT_CODES
    from omnigraph_spark.cli.main import build_parser

    text = _read("docs/cli.md")
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in sub.choices:
        assert re.search(rf"^### `{name}[ `]", text, re.M), f"command {name} has no section in docs/cli.md"
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", text, re.M))
    assert {int(k) for k in table} == set(EXIT_CODES), "docs/cli.md exit code table differs from cli/codes.py"


@pytest.mark.parametrize("rel", USER_DOCS)
def test_relative_links_resolve(rel):
    path = ROOT / rel
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{rel}: broken link {target}"


def test_readme_has_the_two_commands_and_no_placeholder():
    text = _read("README.md")
    assert "make demo" in text and "make test" in text
    assert "work in progress" not in text


def test_conf_files():
    defaults = _read("conf/spark-defaults.conf")
    settings = dict(line.split(None, 1) for line in defaults.splitlines() if line.strip() and not line.startswith("#"))
    assert settings["spark.sql.python.filterPushdown.enabled"].strip() == "true"
    assert "spark.sql.execution.arrow.maxRecordsPerBatch" in settings
    assert "spark.executor.pyspark.memory" not in settings
    import configparser
    import logging.config

    cp = configparser.ConfigParser()
    cp.read(ROOT / "conf" / "logging.ini")
    assert cp["logger_omnigraph_spark"]["level"] == "INFO"
    assert "rootLogger.level = warn" in _read("conf/log4j2.properties")
    # the logging config loads (into a throwaway manager state, then restored)
    import logging

    saved = logging.root.handlers[:], logging.root.level
    try:
        logging.config.fileConfig(ROOT / "conf" / "logging.ini", disable_existing_loggers=False)
    finally:
        pkg = logging.getLogger("omnigraph_spark")
        pkg.handlers.clear()
        pkg.propagate = True
        pkg.setLevel(logging.NOTSET)
        logging.getLogger("py4j").handlers.clear()
        logging.getLogger("py4j").propagate = True
        logging.getLogger("py4j").setLevel(logging.NOTSET)
        logging.root.handlers[:] = saved[0]
        logging.root.setLevel(saved[1])
    for doc in ("docs/databricks.md",):
        for f in ("conf/spark-defaults.conf", "conf/log4j2.properties", "conf/logging.ini"):
            assert f in _read(doc)
