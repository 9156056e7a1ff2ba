"""The change feed and the stream source: ``spark.read`` / ``spark.readStream`` of
``format("omnigraph")`` with ``readChangeFeed`` (docs/change_feed.md).

What runs where:

- ``feed_schema`` runs in Spark's data-source-creation worker on the driver;
  ``ChangeFeedReader.__init__`` and ``partitions`` in the planning worker: they resolve the
  version range and plan each commit's changes (:func:`omnigraph_spark.store.changes.plan_changes`:
  manifests, fragment metadata, deletion vectors and ids of the changed rows, never the table).
- ``read`` runs on executors: one task per piece (the changed rows of one fragment, at most
  ``changes.MAX_PIECE_ROWS``), converted to Spark's Arrow schema.
- ``ChangeFeedStreamReader`` lives in Spark's streaming source worker on the driver for the whole
  query: offsets are graph versions (``{"version": v}``: every change up to and including ``v``
  is delivered), a micro-batch holds whole commits, and ``read`` runs on executors.

Without ``readChangeFeed`` a stream yields the rows each commit inserted, in the type's own
columns, and fails with STREAM_CHANGE_COMMIT at a commit that updated or deleted rows of the
type, or skips such commits with ``skipChangeCommits``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from ..errors import ChangeFeedUnsupportedCommitError, OmnigraphError, OptionError
from ..graph import Graph
from ..store import changes as _changes
from . import types as _types
from .error_tags import tag_error
from .options import ReadOptions

log = logging.getLogger(__name__)


def _read_options(options: Any) -> ReadOptions:
    return options if isinstance(options, ReadOptions) else ReadOptions.from_options(dict(options.items()))


@contextlib.contextmanager
def _tagged() -> Iterator[None]:
    """Our errors carry ``[CODE]`` through Spark's wrapping (``unwrap_error`` finds it)."""
    try:
        yield
    except OmnigraphError as e:
        tag_error(e)
        raise


try:  # admission control and Trigger.AvailableNow for Python stream sources: pyspark 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxFiles,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - pyspark 4.0 / 4.1: latestOffset() takes no limit
    ReadAllAvailable = ReadLimit = ReadMaxFiles = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: pyspark before 4.2 has no Trigger.AvailableNow for Python sources."""


META_SPARK = (
    StructField(_changes.CHANGE_TYPE, StringType(), False),
    StructField(_changes.COMMIT_VERSION, LongType(), False),
    StructField(_changes.COMMIT_TIMESTAMP, TimestampType(), False),
    StructField(_changes.GRAPH_COMMIT_ID, StringType(), True),
)


def feed_schema(opts: ReadOptions) -> StructType:
    """Driver: the type's Spark schema (or its ``columns``), plus the four change columns when
    ``readChangeFeed`` is set."""
    graph = Graph.open(opts.path, opts.storage_options)
    typedef = graph.catalog.resolve(opts.type)
    base = _types.spark_schema(typedef, opts.columns)
    return StructType([*base.fields, *META_SPARK]) if opts.change_feed else base


def is_feed(options: Any) -> bool:
    """Whether a read's options ask for the change feed."""
    keys = options.keys() if hasattr(options, "keys") else ()
    for k in keys:
        if str(k).lower() == "readchangefeed":
            return str(options[k]).strip().lower() in ("true", "1", "yes")
    return False


def schema_of(options: Any) -> StructType:
    """Driver: :func:`feed_schema` from Spark's raw option map."""
    with _tagged():
        return feed_schema(_read_options(options))


def make_feed_reader(options: Any, schema: StructType) -> DataSourceReader:
    """Driver (planning worker): the batch change feed reader."""
    return ChangeFeedReader(options, schema)


class FeedPartition(InputPartition):
    """One read task: pieces of commits (or one commit compared row by row). Picklable."""

    def __init__(self, index: int, work: Sequence[tuple[_changes.CommitChanges, _changes.Piece | None]]) -> None:
        super().__init__(index)
        self.index = index
        self.work = tuple(work)


def _strip(c: _changes.CommitChanges) -> _changes.CommitChanges:
    """The commit without its piece list (each task carries only its own pieces)."""
    return _changes.CommitChanges(
        c.table_key, c.version, c.timestamp_us, c.commit_id, (), c.updated_ids, c.diff, c.rows
    )


def plan_partitions(commits: Sequence[_changes.CommitChanges], start: int = 0) -> list[InputPartition]:
    """One task per piece, and one per commit that is compared row by row; none for nothing."""
    parts: list[InputPartition] = []
    for c in commits:
        head = _strip(c)
        if c.diff is not None:
            parts.append(FeedPartition(start + len(parts), [(head, None)]))
        for p in c.pieces:
            parts.append(FeedPartition(start + len(parts), [(head, p)]))
    return parts


def read_partition(
    part: FeedPartition, columns: list[str] | None, target: pa.Schema, storage_options, with_meta: bool
) -> Iterator[pa.RecordBatch]:
    """Executor: a task's changed rows, converted to ``target``."""
    with _tagged():
        for c, p in part.work:
            t = (
                _changes.read_diff(c, columns, storage_options)
                if p is None
                else _changes.read_piece(c, p, columns, storage_options)
            )
            if not with_meta:
                t = t.filter(pa.compute.equal(t.column(_changes.CHANGE_TYPE), _changes.INSERT))
            for b in t.to_batches():
                if b.num_rows:
                    yield _types.convert_batch(b, target)


class _FeedBase:
    """What the batch and the stream reader share: options, the table, the target schema."""

    def _setup(self, options: Any, schema: StructType) -> None:
        opts = _read_options(options)
        graph = Graph.open(opts.path, opts.storage_options)
        typedef = graph.catalog.resolve(opts.type)
        self.root = graph.root
        self.table_key = typedef.table_key
        self.branch = opts.branch
        self.feed = opts.feed
        self.with_meta = opts.change_feed
        self.storage_options = opts.storage_options
        names = [f.name for f in schema.fields]
        meta = {f.name for f in META_SPARK}
        self.columns: list[str] | None = [n for n in names if n not in meta]
        self.target = _types.arrow_target_schema(schema)

    def _plan(self, rng: _changes.FeedRange) -> list[_changes.CommitChanges]:
        return _changes.plan_changes(self.root, self.table_key, rng, self.storage_options)

    def _read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FeedPartition), type(partition)
        return read_partition(partition, self.columns, self.target, self.storage_options, self.with_meta)


class ChangeFeedReader(_FeedBase, DataSourceReader):
    """Batch ``readChangeFeed``: the changes of the versions in [startingVersion, endingVersion]
    (or the timestamps' versions). ``__init__``/``partitions`` on the driver, ``read`` on executors."""

    def __init__(self, options: Any, schema: StructType) -> None:
        with _tagged():
            self._setup(options, schema)
            f = self.feed
            assert f is not None
            if f.starting_version is None and f.starting_timestamp_us is None:
                raise OptionError(
                    "a change feed read needs startingVersion or startingTimestamp (the first graph version "
                    "whose changes it returns)",
                    option="startingVersion",
                )
            rng = _changes.resolve_range(
                self.root,
                self.branch,
                start=f.starting_version,
                end=f.ending_version,
                start_ts_us=f.starting_timestamp_us,
                end_ts_us=f.ending_timestamp_us,
                storage_options=self.storage_options,
            )
            self.commits = [] if rng is None else self._plan(rng)
            log.info(
                "omnigraph change feed %s on %s %s: %d commits, %d changed rows",
                self.table_key,
                self.branch,
                rng,
                len(self.commits),
                sum(c.rows for c in self.commits),
            )

    def partitions(self) -> list[InputPartition]:
        """Driver: one task per piece; an empty feed is one empty task."""
        return plan_partitions(self.commits) or [FeedPartition(0, [])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: the partition's changed rows."""
        return self._read(partition)


def _version(offset: dict | None) -> int:
    return int((offset or {}).get("version", 0))


class ChangeFeedStreamReader(_FeedBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("omnigraph")``: offsets are graph versions of the branch.

    The offset ``{"version": v}`` means every change up to and including graph version ``v`` was
    delivered; a stream without a starting option begins at ``{"version": head, "snapshot":
    true}``, whose first micro-batch holds the snapshot's rows as inserts at version ``head``.
    Every method but ``read`` runs in Spark's streaming source worker on the driver."""

    def __init__(self, options: Any, schema: StructType) -> None:
        with _tagged():
            self._setup(options, schema)
            self.target_version: int | None = None  # Trigger.AvailableNow's end

    def _head(self) -> int:
        return _changes.head_version(self.root, self.branch, self.storage_options)

    def initialOffset(self) -> dict:
        """The offset before the first change to deliver."""
        with _tagged():
            f = self.feed
            if f is not None and (f.starting_version is not None or f.starting_timestamp_us is not None):
                rng = _changes.resolve_range(
                    self.root,
                    self.branch,
                    start=f.starting_version,
                    start_ts_us=f.starting_timestamp_us,
                    storage_options=self.storage_options,
                )
                assert rng is not None
                return {"version": rng.start - 1}
            return {"version": self._head(), "snapshot": True}

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: never read past the head as it is now."""
        self.target_version = self._head()

    def getDefaultReadLimit(self) -> Any:
        """maxCommitsPerTrigger travels as Spark's ReadMaxFiles (a commit is this source's file),
        maxRowsPerTrigger as ReadMaxRows."""
        f = self.feed
        if f is not None and f.max_commits_per_trigger is not None:
            return ReadMaxFiles(f.max_commits_per_trigger)
        if f is not None and f.max_rows_per_trigger is not None:
            return ReadMaxRows(f.max_rows_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The end of the next micro-batch: whole commits after ``start``, bounded by the limit
        (pyspark 4.2+ passes ``start`` and ``limit``; before, every available commit)."""
        with _tagged():
            head = self._head() if self.target_version is None else self.target_version
            if start is None:
                return {"version": head}
            if start.get("snapshot"):
                return {"version": _version(start)}  # the snapshot itself is the first batch
            begin = _version(start)
            if head <= begin:
                return start
            commits_cap = rows_cap = None
            if limit is not None and ReadAllAvailable is not None and not isinstance(limit, ReadAllAvailable):
                f = self.feed
                if isinstance(limit, ReadMaxFiles):
                    commits_cap = limit.max_files
                elif isinstance(limit, ReadMaxRows):
                    rows_cap = limit.max_rows
                if f is not None:
                    commits_cap = commits_cap or f.max_commits_per_trigger
                    rows_cap = rows_cap or f.max_rows_per_trigger
            if commits_cap is None and rows_cap is None:
                return {"version": head}
            sized = _changes.plan_changes(
                self.root,
                self.table_key,
                _changes.FeedRange(self.branch, begin + 1, head),
                self.storage_options,
                pair=False,
            )
            end, rows = begin, 0
            for i, c in enumerate(sized):
                over_commits = commits_cap is not None and i >= commits_cap
                over_rows = rows_cap is not None and rows + c.rows > rows_cap
                if i and (over_commits or over_rows):
                    break
                end, rows = c.version, rows + c.rows
            if len(sized) == 0 or end == sized[-1].version:
                end = head  # no change after the last one taken: versions up to the head hold none
            return {"version": end}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The tasks of the micro-batch (start, end]: whole commits."""
        with _tagged():
            lo, hi = _version(start), _version(end)
            commits: list[_changes.CommitChanges] = []
            if start.get("snapshot"):
                commits += _changes.snapshot_changes(self.root, self.table_key, self.branch, lo, self.storage_options)
            if hi > lo:
                commits += self._plan(_changes.FeedRange(self.branch, lo + 1, hi))
            if not self.with_meta:
                commits = self._inserts_only(commits)
            return plan_partitions(commits)

    def _inserts_only(self, commits: list[_changes.CommitChanges]) -> list[_changes.CommitChanges]:
        kept = []
        for c in commits:
            changed = c.diff is not None or any(p.side == "old" for p in c.pieces)
            if not changed:
                kept.append(c)
                continue
            f = self.feed
            if f is not None and f.skip_change_commits:
                log.info("stream %s: skipping graph version %d (it updated or deleted rows)", self.table_key, c.version)
                continue
            raise ChangeFeedUnsupportedCommitError(
                f"graph version {c.version} of branch '{self.branch}' updated or deleted rows of {self.table_key}; "
                "a stream without readChangeFeed yields inserted rows only: set readChangeFeed=true to read the "
                "changes, or skipChangeCommits=true to skip such commits",
                version=c.version,
                branch=self.branch,
                table=self.table_key,
            )
        return kept

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: the partition's rows."""
        return self._read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the feed reads committed, immutable versions."""


__all__ = ["ChangeFeedReader", "ChangeFeedStreamReader", "feed_schema"]
