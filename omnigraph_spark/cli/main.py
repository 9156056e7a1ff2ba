"""``omnigraph-spark``: the parser, the dispatch and the exit codes.

Exit codes (documented in docs/cli.md; scripts may rely on them):

==  =====================================================================================
0   success
1   error: printed as ``error[CODE]: message`` where CODE is the error's stable ``code``
2   usage: bad arguments (argparse), or an argument the command cannot use
3   recovery pending: a recovery sidecar blocks the operation (``status`` also exits 3 when
    sidecars are pending, ``recover`` when some are still pending after the sweep); run
    ``omnigraph-spark recover URI``
4   retryable conflict: another writer moved the graph or holds the commit lease; re-running
    the same command may succeed
130 interrupted (Ctrl-C)
==  =====================================================================================
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import sys
import traceback
from collections.abc import Sequence

from .. import __version__
from ..errors import OmnigraphError, RecoveryPendingError
from . import load_cmd, maintenance_cmds, store_cmds
from .codes import (  # noqa: F401
    CLI_CODES,
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RECOVERY_PENDING,
    EXIT_RETRYABLE,
    EXIT_USAGE,
    CliError,
    UsageError,
)
from .output import Output

log = logging.getLogger("omnigraph_spark.cli")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main(argv)`` can return the code."""

    def error(self, message: str):  # overrides argparse: raise, never exit
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: {message}")


def _common(json_default=argparse.SUPPRESS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument(
        "--json", action="store_true", default=json_default, help="print one JSON document on stdout (for scripts)"
    )
    g.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="log more (-v: INFO, -vv: DEBUG) on stderr"
    )
    g.add_argument(
        "--log-config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="Python logging config file (fileConfig format, e.g. conf/logging.ini)",
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="omnigraph-spark",
        description="Manage Omnigraph 0.7 graphs (trees of Lance datasets) and bulk-load them through Spark.",
        epilog="Exit codes: 0 ok, 1 error (error[CODE]: message), 2 usage, 3 recovery pending, "
        "4 retryable conflict, 130 interrupted. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"omnigraph-spark {__version__}")
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="count", default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log-config", metavar="FILE", default=None, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    store_cmds.add_parsers(sub, common)
    load_cmd.add_parser(sub, common)
    maintenance_cmds.add_parsers(sub, common)
    return parser


def _configure_logging(verbose: int, config_file: str | None):
    """Send the package's log records to stderr at the level asked for. Returns a function that
    restores the previous logging state (``main`` may run in-process: tests, notebooks)."""
    pkg = logging.getLogger("omnigraph_spark")
    saved = (pkg.level, pkg.propagate, pkg.handlers[:])
    root_saved = (logging.root.level, logging.root.handlers[:])

    def restore() -> None:
        pkg.setLevel(saved[0])
        pkg.propagate = saved[1]
        pkg.handlers[:] = saved[2]
        logging.root.setLevel(root_saved[0])
        logging.root.handlers[:] = root_saved[1]

    if config_file:
        logging.config.fileConfig(config_file, disable_existing_loggers=False)
        return restore
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    pkg.setLevel(level)
    pkg.handlers[:] = [h]
    pkg.propagate = False
    return restore


def exit_code_for(e: BaseException) -> int:
    """The exit code of an exception (see the module table)."""
    if isinstance(e, RecoveryPendingError):
        return EXIT_RECOVERY_PENDING
    if isinstance(e, OmnigraphError):
        return EXIT_RETRYABLE if e.retryable else EXIT_ERROR
    if isinstance(e, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_ERROR


def _typed_from_spark(e: BaseException) -> OmnigraphError | None:
    """The OmnigraphError inside a Spark exception (only if pyspark is already imported)."""
    if "pyspark" not in sys.modules:
        return None
    try:
        from ..spark import unwrap_error  # lazy: only when pyspark is already loaded

        return unwrap_error(e)
    except Exception:
        return None


def _report(e: OmnigraphError, args, out: Output) -> int:
    rc = exit_code_for(e)
    hint = ""
    if rc == EXIT_RECOVERY_PENDING:
        hint = f" (run `omnigraph-spark recover {getattr(args, 'uri', 'URI')}`)"
    elif rc == EXIT_RETRYABLE:
        hint = " (retryable: re-run the command)"
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if msg.startswith(f"[{e.code}] "):  # the tag that carries the code across Spark
        msg = msg[len(e.code) + 3 :]
    out.error(
        e.code, msg + hint, rc, retryable=e.retryable, context={k: v for k, v in e.context.items() if v is not None}
    )
    if getattr(args, "verbose", 0) or os.environ.get("OMNIGRAPH_SPARK_TRACEBACK"):
        traceback.print_exc(file=out.stderr)
    return rc


def main(argv: Sequence[str] | None = None, *, stdout=None, stderr=None) -> int:
    """Run the CLI; returns the exit code (never calls ``sys.exit``). ``stdout``/``stderr``
    redirect output (tests)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in argv
    out = Output(json_mode, stdout, stderr)
    parser = build_parser()
    old_err = sys.stderr
    if stderr is not None:
        sys.stderr = stderr  # argparse prints usage and help there
    old_out = sys.stdout
    if stdout is not None:
        sys.stdout = stdout
    try:
        try:
            args = parser.parse_args(argv)
        except UsageError as e:
            out.error("USAGE", str(e), EXIT_USAGE)
            return EXIT_USAGE
        except SystemExit as e:  # --help / --version
            return int(e.code or 0)
        out.json_mode = bool(args.json)
        restore_logging = _configure_logging(getattr(args, "verbose", 0) or 0, getattr(args, "log_config", None))
        try:
            return int(args.func(args, out) or 0)
        except UsageError as e:
            out.error("USAGE", str(e), EXIT_USAGE)
            return EXIT_USAGE
        except KeyboardInterrupt:
            out.error("INTERRUPTED", "interrupted", EXIT_INTERRUPTED)
            return EXIT_INTERRUPTED
        except CliError as e:
            out.error(e.code, str(e), EXIT_ERROR)
            return EXIT_ERROR
        except FileNotFoundError as e:  # an input named on the command line (schema, files)
            out.error(
                "FILE_NOT_FOUND", f"{e.strerror or 'not found'}: {e.filename}" if e.filename else str(e), EXIT_ERROR
            )
            return EXIT_ERROR
        except OmnigraphError as e:
            return _report(e, args, out)
        except Exception as e:
            typed = _typed_from_spark(e)
            if typed is not None:  # a typed error that crossed Spark's JVM boundary
                return _report(typed, args, out)
            # a bug or an untranslated library error: say so, keep the trace on request
            out.error("INTERNAL", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", EXIT_ERROR)
            if getattr(args, "verbose", 0) or os.environ.get("OMNIGRAPH_SPARK_TRACEBACK"):
                traceback.print_exc(file=out.stderr)
            else:
                out.info("(run with -v for the traceback)")
            return EXIT_ERROR
        finally:
            restore_logging()
    finally:
        sys.stderr = old_err
        sys.stdout = old_out
