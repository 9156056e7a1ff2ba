"""Exit codes and the CLI's own exceptions (a module of their own so every command module
imports the same classes, whichever way the CLI was started)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_RECOVERY_PENDING = 3
EXIT_RETRYABLE = 4
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error (printed as error[CODE]: message)",
    EXIT_USAGE: "usage error",
    EXIT_RECOVERY_PENDING: "recovery pending (run `omnigraph-spark recover URI`)",
    EXIT_RETRYABLE: "retryable conflict (re-run the command)",
    EXIT_INTERRUPTED: "interrupted",
}

#: Codes the CLI itself prints (the library's codes are in omnigraph_spark/errors.py).
CLI_CODES = ("USAGE", "FILE_NOT_FOUND", "INTERNAL", "INTERRUPTED")


class UsageError(Exception):
    """An argument combination the parser cannot express (exit 2, ``error[USAGE]``)."""


class CliError(Exception):
    """A failure found by the CLI itself (not the library), with a stable ``code`` (exit 1).
    Codes: FILE_NOT_FOUND (an input file or the schema file is missing)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
