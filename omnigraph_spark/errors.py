"""The one exception tree of omnigraph-spark.

Every error raised on purpose by this package is an :class:`OmnigraphError` with a stable
``code`` (assert codes in tests, never message text). Subclasses also inherit the builtin a
caller would expect (``ValueError`` for bad input, ``OSError`` for storage, ``RuntimeError``
for protocol states), so generic handlers keep working.

Messages say what happened, what was expected, what was found and where (table, column, row,
option). Errors from lance, pyarrow and pyspark are translated once per boundary with
``raise ... from e``.

This module imports nothing else from the package (layer rule: errors -> schema -> store ->
ingest -> graph -> spark/cli).
"""

from __future__ import annotations

import re
from typing import Any

#: a dependency's source location inside its message (Lance's Rust errors carry the build
#: machine's paths, ``, /home/runner/work/lance/.../commit.rs:646:26``): meaningless to a user
_SOURCE_LOCATION = re.compile(r",?[ \t]*(?:at[ \t]+)?(?:[A-Za-z]:)?[/\\][^\s,;()]*\.rs:\d+(?::\d+)?")


def user_text(text: str) -> str:
    """``text`` (typically a dependency's error message) without source-file locations."""
    return _SOURCE_LOCATION.sub("", text)


class OmnigraphError(Exception):
    """Base class. ``code`` is stable across releases; ``retryable`` says whether the same
    call may succeed if simply repeated (after a refresh). Messages never carry a
    dependency's source-file locations (:func:`user_text`)."""

    code: str = "OMNIGRAPH_ERROR"
    retryable: bool = False

    def __init__(self, message: str, **context: Any) -> None:
        message = user_text(message)
        super().__init__(message)
        self.message = message
        self.context = context

    def __reduce__(self):  # keep pickling (Spark ships exceptions between processes)
        return (_rebuild, (type(self), self.message, self.context))


def _rebuild(cls, message, context):
    return cls(message, **context)


# --- schema language -------------------------------------------------------------------


class SchemaError(OmnigraphError, ValueError):
    """A .pg schema is invalid. ``line``/``column`` are 1-based when known."""

    code = "SCHEMA_INVALID"

    def __init__(self, message: str, line: int | None = None, column: int | None = None, **context: Any) -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{message}{where}", line=line, column=column, **context)
        self.line = line
        self.column = column
        self.detail = message

    def __reduce__(self):
        ctx = dict(self.context)
        return (_rebuild_schema, (type(self), self.detail, ctx))


def _rebuild_schema(cls, detail, ctx):
    line = ctx.pop("line", None)
    column = ctx.pop("column", None)
    return cls(detail, line=line, column=column, **ctx)


class SchemaSyntaxError(SchemaError):
    code = "SCHEMA_SYNTAX"


class SchemaContractError(OmnigraphError, RuntimeError):
    """_schema.pg, _schema.ir.json and __schema_state.json disagree."""

    code = "SCHEMA_CONTRACT"


# --- options and input data ------------------------------------------------------------


class OptionError(OmnigraphError, ValueError):
    """A connector option is unknown, malformed or contradicts another."""

    code = "OPTION_INVALID"


class SqlUnsupportedError(OptionError):
    """A SQL statement or clause the catalog does not run (docs/sql.md); the message names the
    statement and what to use instead. Nothing was changed."""

    code = "SQL_UNSUPPORTED"


class JvmReadUnavailableError(OptionError):
    """``engine="jvm"`` was asked for a read the JVM path cannot do: the shim is not on the
    classpath, or a column needs a conversion only the Python reader makes."""

    code = "JVM_READ_UNAVAILABLE"


class JvmWriteUnavailableError(OptionError):
    """``engine="jvm"`` was asked for a write the JVM path cannot stage: the shim is not on the
    classpath, or a column needs a per-value check only the Python path makes (docs/api.md, "The JVM write path")."""

    code = "JVM_WRITE_UNAVAILABLE"


class DataError(OmnigraphError, ValueError):
    """Input rows break a rule of the catalog. Context names table, column, row, value."""

    code = "DATA_INVALID"


class UnknownTypeError(DataError):
    code = "UNKNOWN_TYPE"


class UnknownColumnError(DataError):
    code = "UNKNOWN_COLUMN"


class MissingColumnError(DataError):
    code = "MISSING_COLUMN"


class TypeMismatchError(DataError):
    """A column cannot be cast to the catalog's type without loss."""

    code = "TYPE_MISMATCH"


class NullViolationError(DataError):
    code = "NULL_VIOLATION"


class ConstraintViolationError(DataError):
    """@range, @check, enum membership or vector length."""

    code = "CONSTRAINT_VIOLATION"


class UniqueViolationError(DataError):
    """@key / @unique / id duplicated within one load."""

    code = "UNIQUE_VIOLATION"


class DanglingEdgeError(DataError):
    """An edge endpoint is not a node of the endpoint type in the snapshot or the load."""

    code = "DANGLING_EDGE"


class KeyConflictError(UniqueViolationError):
    """An append (a strict insert) gives an id that is already committed on the target branch,
    or gives one id twice in the load. Names the type, a few of the ids and their count;
    nothing is committed. ``writeMode=merge`` upserts instead."""

    code = "KEY_CONFLICT"


class CardinalityViolationError(DataError):
    code = "CARDINALITY_VIOLATION"


class EmptyInputError(DataError):
    code = "EMPTY_INPUT"


# --- graph root and storage ------------------------------------------------------------


class GraphError(OmnigraphError, RuntimeError):
    code = "GRAPH_ERROR"


class GraphNotFoundError(GraphError):
    code = "GRAPH_NOT_FOUND"


class AlreadyInitializedError(GraphError):
    code = "GRAPH_EXISTS"


class GraphNotEmptyError(GraphError):
    """``DROP NAMESPACE`` without ``CASCADE`` of a graph that holds rows or branches."""

    code = "GRAPH_NOT_EMPTY"


class UnsupportedFormatError(GraphError):
    """The manifest stamp (or a sidecar schema_version) is not one this build understands."""

    code = "UNSUPPORTED_FORMAT"


class CorruptGraphError(GraphError):
    """Something on disk breaks a format invariant (missing rows, bad JSON, bad types)."""

    code = "GRAPH_CORRUPT"


class BranchError(GraphError, ValueError):
    code = "BRANCH_INVALID"


class BranchNotFoundError(BranchError):
    code = "BRANCH_NOT_FOUND"


class BranchExistsError(BranchError):
    code = "BRANCH_EXISTS"


class CommitNotFoundError(GraphError, ValueError):
    code = "COMMIT_NOT_FOUND"


class StorageError(OmnigraphError, OSError):
    code = "STORAGE_ERROR"


class SchemaApplyLockedError(GraphError):
    code = "SCHEMA_APPLY_LOCKED"
    retryable = True


class AutoCleanupConfigError(GraphError):
    """A dataset carries lance.auto_cleanup.* config; committing could GC pinned versions."""

    code = "AUTO_CLEANUP_CONFIG"


# --- concurrency and protocol ----------------------------------------------------------


class ConflictError(GraphError):
    """Another writer moved the graph. ``retryable`` says whether re-running the commit
    phase on a fresh snapshot can succeed."""

    code = "CONFLICT"


class ExpectedVersionMismatchError(ConflictError):
    """Publish CAS: the manifest no longer pins the version this write was based on."""

    code = "EXPECTED_VERSION_MISMATCH"
    retryable = True


class RowLevelCasContentionError(ConflictError):
    code = "ROW_CAS_CONTENTION"
    retryable = True


class TableDriftError(ConflictError):
    """A table's Lance HEAD is not the version the manifest pins."""

    code = "TABLE_DRIFT"
    retryable = True


class CommitRebasedError(ConflictError):
    """A Lance commit landed at a version other than expected + 1 (a concurrent commit won).
    Not retryable in place: the recovery sweep must resolve the sidecar first."""

    code = "COMMIT_REBASED"
    retryable = False


class LeaseTimeoutError(ConflictError):
    code = "LEASE_TIMEOUT"
    retryable = True


class RecoveryError(GraphError):
    code = "RECOVERY_ERROR"


class RecoveryPendingError(RecoveryError):
    """A recovery sidecar is pending and this operation refuses to run over it."""

    code = "RECOVERY_PENDING"
    retryable = True


class CorruptSidecarError(RecoveryError):
    code = "SIDECAR_CORRUPT"


class InvariantViolationError(RecoveryError):
    code = "RECOVERY_INVARIANT_VIOLATION"


class FailpointError(OmnigraphError, RuntimeError):
    """Raised by a failpoint configured to raise (tests only)."""

    code = "FAILPOINT"


# --- ingest (appended by the ingest layer) ---------------------------------------------


class DuplicateColumnError(DataError):
    """The input names one column twice, or gives two spellings of one edge endpoint
    (``from`` and ``src``)."""

    code = "DUPLICATE_COLUMN"


class KeyIdMismatchError(DataError):
    """An explicit ``id`` differs from the id the node's @key derives."""

    code = "KEY_ID_MISMATCH"


class KeyChangeError(DataError):
    """An ``UPDATE`` or ``MERGE INTO ... UPDATE`` changes a row's identity: its ``id``, a node's
    @key or an edge's ``src``/``dst``. Names the table, the column and the row's id; nothing is
    committed. Delete the row and insert the new one instead."""

    code = "KEY_CHANGE"


class UnsupportedValueError(DataError):
    """Input the connector cannot write faithfully yet (Blob values, a @key type whose id
    text the engine does not define)."""

    code = "UNSUPPORTED_VALUE"


class CheckPatternError(DataError):
    """A @check pattern that cannot be evaluated with the engine's exact (Rust ``regex``)
    semantics, or that the engine itself would reject."""

    code = "CHECK_PATTERN_INVALID"


class InvalidRecordError(DataError):
    """A JSONL record is not valid JSON or not one of the two record forms."""

    code = "INVALID_RECORD"


# --- the change feed -------------------------------------------------------------------


class ChangeFeedRangeError(OptionError):
    """A change feed's version or timestamp range is empty or lies past the branch's head."""

    code = "CHANGE_FEED_RANGE"


class ChangeFeedVersionUnavailableError(GraphError):
    """A graph version whose changes a feed needs was removed by cleanup; ``oldest`` in the
    context (and the message) names the oldest version whose changes can still be read."""

    code = "CHANGE_FEED_VERSION_UNAVAILABLE"


class ChangeFeedUnsupportedCommitError(GraphError):
    """A stream without ``readChangeFeed`` reached a commit that updated or deleted rows of its
    type (set ``readChangeFeed`` to read them, or ``skipChangeCommits`` to skip such commits)."""

    code = "STREAM_CHANGE_COMMIT"
