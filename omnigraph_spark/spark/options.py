"""Connector options: parsed once, on the driver, into frozen dataclasses.

Why one parser: Spark hands a data source its options as strings in a case-insensitive map
(keys arrive lower-cased), and every later stage (planning, executors, commit) must agree on
what they mean. ``WriteOptions.from_options`` / ``ReadOptions.from_options`` validate them up
front, so a typo fails before any Spark job runs, with an :class:`OptionError` naming the key
and the allowed ones.

``OPTIONS`` is the single documented table of every option (docs and a test check it).
This module does not import pyspark (the option objects are pickled to executors).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import OptionError
from ..store.layout import MAIN, normalize_branch
from ..store.tables import DEFAULT_MAX_ROWS_PER_FILE
from ..store.writes import TxnToken

WRITE_MODES = ("append", "merge", "overwrite", "delete")
DEFAULT_DISTRIBUTED_CHECK_ROWS = 5_000_000
STORAGE_PREFIX = "storage."
DEFAULT_LEASE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class OptionSpec:
    """One documented option. ``scope`` is "read", "write" or "read/write"."""

    name: str
    scope: str
    default: str | None
    description: str


#: Every option the connector accepts. Keys are matched case-insensitively.
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("path", "read/write", None, "Graph root URI (the argument of save()/load()). Required."),
    OptionSpec(
        "type",
        "read/write",
        None,
        "Node or edge type name (or table key node:X / edge:Y). Edge names match exactly, "
        "then case-insensitively. Required.",
    ),
    OptionSpec("branch", "read/write", "main", "Graph branch to read from or commit to."),
    OptionSpec(
        "writeMode",
        "write",
        "append",
        "append (a strict insert: an id already committed is KEY_CONFLICT) | merge (upsert on id) | "
        "overwrite (replace the type's rows) | delete (remove the rows named by @key/id, or edge "
        "src+dst; a node delete cascades to its edges). Spark's mode('overwrite') means overwrite; "
        "combining it with another writeMode is an error.",
    ),
    OptionSpec(
        "cascade",
        "write",
        "false",
        "true: a node overwrite deletes, in the same commit, the committed edges it would leave "
        "pointing at removed nodes; false: such an overwrite fails with DANGLING_EDGE.",
    ),
    OptionSpec(
        "rejectedRowsPath",
        "write",
        None,
        "Quarantine instead of refusing: rows breaking a per-row rule (type, null, enum, range, pattern, "
        "key/id, edges to nodes rejected by the same load) are written to Parquet under this path with "
        "_omnigraph_table/_omnigraph_code/_omnigraph_reason columns, the valid rows are committed "
        "(docs/troubleshooting.md, Quarantine). Unset: one bad row refuses the whole load.",
    ),
    OptionSpec("actor", "write", None, "Actor recorded on the graph commit (_graph_commit_actors)."),
    OptionSpec(
        "txnAppId",
        "write",
        None,
        "Idempotency token application id; with txnVersion, a re-run of an applied "
        "(txnAppId, txnVersion) is a no-op. Both or neither.",
    ),
    OptionSpec("txnVersion", "write", None, "Idempotency token version: an integer >= 0."),
    OptionSpec("maxRowsPerFile", "write", str(DEFAULT_MAX_ROWS_PER_FILE), "Maximum rows per staged Lance data file."),
    OptionSpec("maxBytesPerFile", "write", None, "Maximum bytes per staged Lance data file (Lance default)."),
    OptionSpec(
        "commitLeaseTimeout",
        "write",
        str(int(DEFAULT_LEASE_TIMEOUT_S)),
        "Seconds to wait for the graph's commit lease (serialises concurrent writers).",
    ),
    OptionSpec(
        "distributedCheckRows",
        "write",
        str(DEFAULT_DISTRIBUTED_CHECK_ROWS),
        "A load-wide check (key/@unique uniqueness, the strict-append id check, endpoint existence, @card) "
        "that reads at least this many staged + committed rows runs as Spark jobs on the executors, "
        "before the commit lease; the driver holds only counts and the first offenders. Below it the "
        "check reads its columns into the driver. 0: never distributed. Needs an active SparkSession in "
        "the committing process: write_graph, write_table, load_jsonl; df.write.format('omnigraph') "
        "commits in a Python worker without one, so its checks always run in that worker's memory.",
    ),
    OptionSpec(
        "version", "read", None, "Read the branch at this manifest (graph) version. Excludes commit/timestampAsOf."
    ),
    OptionSpec("commit", "read", None, "Read at this graph commit id. Excludes version/timestampAsOf."),
    OptionSpec(
        "timestampAsOf",
        "read",
        None,
        "Read the latest commit at or before this ISO-8601 timestamp. Excludes version/commit.",
    ),
    OptionSpec("columns", "read", None, "Comma-separated columns to read (default: all)."),
    OptionSpec(
        "maxRowsPerPartition",
        "read",
        "Spark's file split size in rows",
        "At most this many rows per read task (a larger fragment is split into row ranges). "
        "Default: whole fragments grouped up to `min(128 MB, max(4 MB, table bytes / cores))` of "
        "data files, as Spark packs Parquet files into tasks, and never fewer rows than one writer "
        "file (1,048,576).",
    ),
    OptionSpec(
        "minPartitions",
        "read",
        None,
        "Spread the read over at least this many tasks when each keeps >= 65,536 rows "
        "(default: the driver's CPU count; on a cluster, the executor cores).",
    ),
    OptionSpec("pushdown", "read", "true", "Push filters down to Lance (true/false)."),
    OptionSpec(
        "readChangeFeed",
        "read",
        "false",
        "true: read the type's change feed (rows plus _change_type, _commit_version, _commit_timestamp, "
        "_graph_commit_id) instead of a snapshot; a batch read needs startingVersion or startingTimestamp "
        "(docs/change_feed.md).",
    ),
    OptionSpec(
        "startingVersion",
        "read",
        None,
        "Change feed / stream: the first graph version (of the branch, inclusive) whose changes are read. "
        "A stream without it starts with the current snapshot's rows as inserts.",
    ),
    OptionSpec(
        "endingVersion", "read", None, "Change feed: the last graph version read (inclusive; default: the head)."
    ),
    OptionSpec(
        "startingTimestamp",
        "read",
        None,
        "Change feed / stream: start at the first graph version committed at or after this ISO-8601 "
        "timestamp. Excludes startingVersion.",
    ),
    OptionSpec(
        "endingTimestamp",
        "read",
        None,
        "Change feed: end at the last graph version committed at or before this ISO-8601 timestamp. "
        "Excludes endingVersion.",
    ),
    OptionSpec(
        "maxCommitsPerTrigger",
        "read",
        None,
        "Stream: at most this many graph commits that changed the type per micro-batch (whole commits; pyspark 4.2+).",
    ),
    OptionSpec(
        "maxRowsPerTrigger",
        "read",
        None,
        "Stream: a micro-batch stops before the commit that would take it past this many changed rows "
        "(at least one whole commit; pyspark 4.2+).",
    ),
    OptionSpec(
        "skipChangeCommits",
        "read",
        "false",
        "Stream without readChangeFeed: skip commits that updated or deleted rows of the type instead of "
        "failing with STREAM_CHANGE_COMMIT (their inserts are skipped too).",
    ),
    OptionSpec(
        "engine",
        "read/write",
        "auto",
        "Which path format('omnigraph') takes: auto (the JVM provider when the shim jar is on the class "
        "path and the read or write qualifies, else this package's Python source, the reason logged), "
        "jvm (the JVM path or JVM_READ_UNAVAILABLE / JVM_WRITE_UNAVAILABLE naming every reason), "
        "python (the Python source). docs/api.md, 'format(\"omnigraph\") and the JVM paths'.",
    ),
    OptionSpec(
        "storage.<key>",
        "read/write",
        None,
        "Passed through to Lance/object-store storage options as <key> (e.g. storage.aws_region).",
    ),
)


def _names(scope: str) -> dict[str, str]:
    """lower-cased key -> documented spelling, for one scope."""
    return {o.name.lower(): o.name for o in OPTIONS if scope in o.scope and not o.name.startswith(STORAGE_PREFIX)}


#: The keys Spark's session catalog adds to a table's options when a table is created ``USING
#: omnigraph`` (``CREATE TABLE people USING omnigraph OPTIONS (...)``): the reserved table
#: properties, and each option again as ``option.<key>``. Accepted by name only, when ``provider``
#: says the map is the session catalog's (docs/sql.md, "CREATE TABLE ... USING omnigraph").
SESSION_CATALOG_KEYS = ("provider", "location", "owner", "comment", "external", "is_managed_location", "collation")
SESSION_OPTION_PREFIX = "option."


def _without_session_catalog_keys(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` less the session catalog's own keys (:data:`SESSION_CATALOG_KEYS`) when they
    are the session catalog's: ``provider`` is ``omnigraph``. Its ``location`` is the graph's
    ``path``; an ``option.<key>`` must repeat ``<key>`` (else it is an unknown option)."""
    given = {str(k): v for k, v in dict(options).items()}
    low = {k.lower(): k for k in given}
    if str(given.get(low.get("provider", ""), "")).lower() != "omnigraph":
        return given
    out: dict[str, str] = {}
    for key, value in given.items():
        k = key.lower()
        if k in SESSION_CATALOG_KEYS:
            continue
        if k.startswith(SESSION_OPTION_PREFIX) and given.get(low.get(k[len(SESSION_OPTION_PREFIX) :], "")) == value:
            continue
        out[key] = value
    if "path" not in {k.lower() for k in out} and "location" in low:
        out["path"] = given[low["location"]]  # CREATE TABLE ... LOCATION '<graph>': Spark sets both
    return out


def _split(options: Mapping[str, str], scope: str) -> tuple[dict[str, str], dict[str, str]]:
    """Lower-case the keys, peel off ``storage.*``, and refuse unknown keys."""
    allowed = _names(scope)
    plain: dict[str, str] = {}
    storage: dict[str, str] = {}
    for key, value in _without_session_catalog_keys(options).items():
        low = str(key).lower()
        if low.startswith(STORAGE_PREFIX):
            sub = str(key)[len(STORAGE_PREFIX) :]
            if not sub:
                raise OptionError("option 'storage.' needs a key after the prefix, e.g. storage.aws_region", option=key)
            storage[sub] = "" if value is None else str(value)
            continue
        if low not in allowed:
            raise OptionError(
                f"unknown {scope} option '{key}'; allowed: {', '.join(sorted(allowed.values()))}, storage.<key>",
                option=key,
                allowed=sorted(allowed.values()),
            )
        if low in plain:
            raise OptionError(f"option '{key}' given twice (keys are case-insensitive)", option=key)
        plain[low] = value
    return plain, storage


def _str(plain: Mapping[str, str], key: str) -> str | None:
    v = plain.get(key.lower())
    if v is None:
        return None
    v = str(v).strip()
    return v or None


def _required(plain: Mapping[str, str], key: str) -> str:
    v = _str(plain, key)
    if v is None:
        raise OptionError(f"option '{key}' is required", option=key)
    return v


def _int(plain: Mapping[str, str], key: str, *, minimum: int) -> int | None:
    v = _str(plain, key)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise OptionError(f"option '{key}' must be an integer, got {v!r}", option=key, value=v) from None
    if n < minimum:
        raise OptionError(f"option '{key}' must be >= {minimum}, got {n}", option=key, value=v)
    return n


def _float(plain: Mapping[str, str], key: str, *, positive: bool = True) -> float | None:
    v = _str(plain, key)
    if v is None:
        return None
    try:
        f = float(v)
    except ValueError:
        raise OptionError(f"option '{key}' must be a number of seconds, got {v!r}", option=key, value=v) from None
    if positive and not f > 0:
        raise OptionError(f"option '{key}' must be > 0, got {v!r}", option=key, value=v)
    return f


def _bool(plain: Mapping[str, str], key: str, default: bool) -> bool:
    v = _str(plain, key)
    if v is None:
        return default
    low = v.lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{key}' must be true or false, got {v!r}", option=key, value=v)


def _branch(plain: Mapping[str, str]) -> str:
    raw = plain.get("branch")
    if raw is None:
        return MAIN
    try:
        return normalize_branch(str(raw))
    except Exception as e:  # BranchError for empty / reserved names: report as an option error
        raise OptionError(f"option 'branch' is invalid: {e}", option="branch", value=raw) from e


ENGINES = ("auto", "python", "jvm")


def _engine(plain: Mapping[str, str]) -> str:
    v = (_str(plain, "engine") or "auto").lower()
    if v not in ENGINES:
        raise OptionError(
            f"option 'engine' must be one of {', '.join(ENGINES)}, got {plain.get('engine')!r}",
            option="engine",
            value=plain.get("engine"),
        )
    return v


def _rejected_rows_path(plain: Mapping[str, str], mode: str) -> str | None:
    path = _str(plain, "rejectedRowsPath")
    if path is not None and mode == "delete":
        raise OptionError(
            "option 'rejectedRowsPath' quarantines rows a write would add; writeMode=delete adds none",
            option="rejectedRowsPath",
            value=path,
        )
    return path


@dataclass(frozen=True)
class WriteOptions:
    """Options of one write job. Built on the driver, pickled to executors."""

    path: str
    type: str | None
    branch: str = MAIN
    write_mode: str = "append"
    actor: str | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    max_bytes_per_file: int | None = None
    commit_lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S
    cascade: bool = False
    rejected_rows_path: str | None = None
    #: checks reading at least this many rows run as Spark jobs (0: never); spark/dist_checks.py
    distributed_check_rows: int = DEFAULT_DISTRIBUTED_CHECK_ROWS
    engine: str = "auto"  # the path format('omnigraph') takes (the JVM provider reads it; see ENGINES)
    storage: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials: never in reprs

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], *, overwrite: bool = False, require_type: bool = True
    ) -> WriteOptions:
        """Parse Spark's option map. ``overwrite`` is Spark's ``mode("overwrite")`` flag (the
        ``overwrite`` argument of ``DataSource.writer``). Driver only."""
        plain, storage = _split(options, "write")
        path = _required(plain, "path")
        type_name = _required(plain, "type") if require_type else _str(plain, "type")
        mode_raw = _str(plain, "writeMode")
        if mode_raw is not None:
            mode = mode_raw.lower()
            if mode not in WRITE_MODES:
                raise OptionError(
                    f"option 'writeMode' must be one of {', '.join(WRITE_MODES)}, got {mode_raw!r}",
                    option="writeMode",
                    value=mode_raw,
                )
            if overwrite and mode != "overwrite":
                raise OptionError(
                    f"Spark save mode 'overwrite' contradicts writeMode={mode!r}; drop one of them "
                    "(mode('overwrite') alone means writeMode=overwrite)",
                    option="writeMode",
                    value=mode_raw,
                )
        else:
            mode = "overwrite" if overwrite else "append"
        app = _str(plain, "txnAppId")
        ver = _int(plain, "txnVersion", minimum=0)
        if (app is None) != (ver is None):
            raise OptionError(
                "options 'txnAppId' and 'txnVersion' go together: give both or neither",
                option="txnAppId" if app is None else "txnVersion",
            )
        rows = _int(plain, "maxRowsPerFile", minimum=1)
        nbytes = _int(plain, "maxBytesPerFile", minimum=1)
        lease = _float(plain, "commitLeaseTimeout")
        return cls(
            path=path,
            type=type_name,
            branch=_branch(plain),
            write_mode=mode,
            actor=_str(plain, "actor"),
            txn_app_id=app,
            txn_version=ver,
            max_rows_per_file=rows if rows is not None else DEFAULT_MAX_ROWS_PER_FILE,
            max_bytes_per_file=nbytes,
            commit_lease_timeout=lease if lease is not None else DEFAULT_LEASE_TIMEOUT_S,
            cascade=_bool(plain, "cascade", False),
            rejected_rows_path=_rejected_rows_path(plain, mode),
            distributed_check_rows=_int(plain, "distributedCheckRows", minimum=0)  # type: ignore[arg-type]  # the key is set, so _int gives a number
            if _str(plain, "distributedCheckRows") is not None
            else DEFAULT_DISTRIBUTED_CHECK_ROWS,
            engine=_engine(plain),
            storage=tuple(sorted(storage.items())),
        )

    @property
    def storage_options(self) -> dict[str, str] | None:
        """Lance storage options (None when there are none)."""
        return dict(self.storage) or None

    @property
    def txn(self):
        """The idempotency token, or None."""
        if self.txn_app_id is None or self.txn_version is None:
            return None
        return TxnToken(self.txn_app_id, self.txn_version)


@dataclass(frozen=True)
class ReadOptions:
    """Options of one read. Built on the driver (the reader pickles what it needs)."""

    path: str
    type: str
    branch: str = MAIN
    version: int | None = None
    commit: str | None = None
    timestamp_as_of: str | None = None
    columns: tuple[str, ...] | None = None
    max_rows_per_partition: int | None = None
    min_partitions: int | None = None
    pushdown: bool = True
    engine: str = "auto"  # the path format('omnigraph') takes (the JVM provider reads it; see ENGINES)
    storage: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials: never in reprs
    feed: FeedOptions | None = None  # the change feed and stream options (docs/change_feed.md)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ReadOptions:
        """Parse Spark's option map for a read. Driver only."""
        plain, storage = _split(options, "read")
        version = _int(plain, "version", minimum=1)
        commit = _str(plain, "commit")
        ts = _str(plain, "timestampAsOf")
        given = [k for k, v in (("version", version), ("commit", commit), ("timestampAsOf", ts)) if v is not None]
        if len(given) > 1:
            raise OptionError(f"options {', '.join(given)} are mutually exclusive: give at most one", option=given[1])
        if ts is not None:
            try:
                dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            except ValueError:
                raise OptionError(
                    f"option 'timestampAsOf' must be an ISO-8601 timestamp, got {ts!r}",
                    option="timestampAsOf",
                    value=ts,
                ) from None
        cols_raw = _str(plain, "columns")
        columns = None
        if cols_raw is not None:
            columns = tuple(c.strip() for c in cols_raw.split(",") if c.strip())
            if not columns:
                raise OptionError("option 'columns' names no column", option="columns", value=cols_raw)
            dup = sorted({c for c in columns if columns.count(c) > 1})
            if dup:
                raise OptionError(f"option 'columns' names {dup} twice", option="columns", value=cols_raw)
        return cls(
            path=_required(plain, "path"),
            type=_required(plain, "type"),
            branch=_branch(plain),
            version=version,
            commit=commit,
            timestamp_as_of=ts,
            columns=columns,
            max_rows_per_partition=_int(plain, "maxRowsPerPartition", minimum=1),
            min_partitions=_int(plain, "minPartitions", minimum=1),
            pushdown=_bool(plain, "pushdown", True),
            engine=_engine(plain),
            storage=tuple(sorted(storage.items())),
            feed=FeedOptions.parse(plain, given),
        )

    @property
    def storage_options(self) -> dict[str, str] | None:
        return dict(self.storage) or None

    @property
    def change_feed(self) -> bool:
        return self.feed is not None and self.feed.read_change_feed


def _timestamp_us(plain: Mapping[str, str], key: str) -> int | None:
    v = _str(plain, key)
    if v is None:
        return None
    try:
        t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f"option '{key}' must be an ISO-8601 timestamp, got {v!r}", option=key, value=v) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1_000_000)


#: the options that only a change feed or a stream reads
FEED_KEYS = (
    "readChangeFeed",
    "startingVersion",
    "endingVersion",
    "startingTimestamp",
    "endingTimestamp",
    "maxCommitsPerTrigger",
    "maxRowsPerTrigger",
    "skipChangeCommits",
)


@dataclass(frozen=True)
class FeedOptions:
    """The change feed's and the stream's options (None on a read that gives none of them)."""

    read_change_feed: bool = False
    starting_version: int | None = None
    ending_version: int | None = None
    starting_timestamp_us: int | None = None
    ending_timestamp_us: int | None = None
    max_commits_per_trigger: int | None = None
    max_rows_per_trigger: int | None = None
    skip_change_commits: bool = False

    @classmethod
    def parse(cls, plain: Mapping[str, str], snapshot_options: list[str]) -> FeedOptions | None:
        if not any(k.lower() in plain for k in FEED_KEYS):
            return None
        f = cls(
            read_change_feed=_bool(plain, "readChangeFeed", False),
            starting_version=_int(plain, "startingVersion", minimum=1),
            ending_version=_int(plain, "endingVersion", minimum=1),
            starting_timestamp_us=_timestamp_us(plain, "startingTimestamp"),
            ending_timestamp_us=_timestamp_us(plain, "endingTimestamp"),
            max_commits_per_trigger=_int(plain, "maxCommitsPerTrigger", minimum=1),
            max_rows_per_trigger=_int(plain, "maxRowsPerTrigger", minimum=1),
            skip_change_commits=_bool(plain, "skipChangeCommits", False),
        )
        for a, b in (("startingVersion", "startingTimestamp"), ("endingVersion", "endingTimestamp")):
            if _str(plain, a) is not None and _str(plain, b) is not None:
                raise OptionError(f"options {a} and {b} are mutually exclusive: give at most one", option=b)
        if snapshot_options:
            raise OptionError(
                f"option {snapshot_options[0]} pins one snapshot; a change feed or stream reads a range of "
                "versions (startingVersion/endingVersion or startingTimestamp/endingTimestamp)",
                option=snapshot_options[0],
            )
        if f.skip_change_commits and f.read_change_feed:
            raise OptionError(
                "option skipChangeCommits applies to a stream without readChangeFeed; the change feed "
                "reports every commit",
                option="skipChangeCommits",
            )
        return f


__all__ = ["ENGINES", "FEED_KEYS", "OPTIONS", "FeedOptions", "OptionSpec", "WriteOptions", "ReadOptions", "WRITE_MODES"]
