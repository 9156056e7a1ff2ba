"""Graph maintenance without Spark: ``optimize`` (compaction + publish) and ``cleanup``.

Spark writes at least one Lance fragment per task, so graphs loaded by Spark fill up with small
fragments, superseded versions and files of failed task attempts. This module gives users the
engine's maintenance (omnigraph v0.7.2 ``optimize``/``cleanup``, format.md §K.2, §K.11, §K.12),
safe to run against graphs the engine also uses. See docs/maintenance.md.

``optimize`` protocol (one graph commit for all compacted tables of a branch)::

    refuse if any sidecar is pending        -> RecoveryPendingError (engine wording)
    take the commit lease                   -> never races our own writers
    plan per table (owned by the branch, no Blob columns, no drift, enough small fragments)
    write ONE Optimize sidecar (Loose)      -> pins expected = current pin, post = pin + 1
    compact_files per table                 -> content-preserving Rewrite commit(s)
    failpoint after_optimize_compact        -> a crash here is rolled FORWARD by recover()
    publish every compacted version at once -> expected = the pins (monotonic fast-forward)
    append a commit row (actor omnigraph-spark:optimize), delete the sidecar
    compact __manifest, _graph_commits.lance, _graph_commit_actors.lance (no publish: they are
    read at HEAD; compacting __manifest adds graph versions with no commit row, as the engine)

It receives the Graph duck-typed (``root``, ``storage``, ``storage_options``, ``snapshot``,
``branches``, ``pending_sidecars``) and never imports pyspark or ``omnigraph_spark.graph``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import lance
import pyarrow as pa
from lance.optimize import Compaction

from ..errors import ExpectedVersionMismatchError, OptionError, RecoveryPendingError, StorageError
from . import commits as _commits
from . import failpoints, maintenance_cleanup
from . import indexes as _indexes
from . import lease as _lease
from . import manifest as _manifest
from . import sidecar as _sidecar
from . import tables as _tables
from .layout import MAIN, RootPaths, table_uri

log = logging.getLogger(__name__)

OPTIMIZE_ACTOR = "omnigraph-spark:optimize"
COMPACTION_RETRY_BUDGET = 5  # the engine's: up to 5 attempts on a Lance conflict
PUBLISH_RETRY_BUDGET = 5

# Stable skip reasons (machine-readable; part of the report contract)
SKIP_INHERITED = "inherited_table"  # on a branch, the table still lives on an ancestor's lineage
SKIP_BLOB = "blob_columns_unsupported_by_lance"  # the engine's reason, same token
SKIP_DRIFT = "drift_needs_repair"  # Lance HEAD ahead of the manifest pin (engine token)
SKIP_FEW_FRAGMENTS = "below_min_fragments"
SKIP_NOTHING = "nothing_to_compact"  # Lance's planner found no task
SKIP_AUTO_CLEANUP = "auto_cleanup_config"  # a compaction commit would fire Lance's GC (§G.6)
SKIP_NOT_SELECTED = "not_selected"


@dataclass
class TableOptimizeResult:
    """What optimize did (or would do) to one table."""

    table_key: str
    lineage: str  # Lance lineage compacted: "main" or the branch name
    fragments_before: int = 0
    fragments_after: int = 0
    small_fragments: int = 0
    rows: int = 0
    version_before: int = 0
    version_after: int = 0
    skipped: str | None = None  # a SKIP_* reason; None when compacted (or planned in a dry run)
    detail: str = ""
    error: str | None = None

    @property
    def compacted(self) -> bool:
        return self.skipped is None and self.error is None and self.version_after > self.version_before


@dataclass
class InternalCompactResult:
    dataset: str  # __manifest | _graph_commits.lance | _graph_commit_actors.lance
    fragments_before: int = 0
    fragments_after: int = 0
    version_before: int = 0
    version_after: int = 0
    attempts: int = 0
    error: str | None = None


@dataclass
class OptimizeReport:
    branch: str
    dry_run: bool
    tables: list[TableOptimizeResult] = field(default_factory=list)
    internal: list[InternalCompactResult] = field(default_factory=list)
    operation_id: str | None = None
    manifest_version: int | None = None  # the graph version of the optimize publish
    graph_commit_id: str | None = None
    seconds: float = 0.0

    def table(self, key: str) -> TableOptimizeResult:
        for t in self.tables:
            if t.table_key == key:
                return t
        raise KeyError(key)

    @property
    def compacted(self) -> list[str]:
        return [t.table_key for t in self.tables if t.compacted]

    @property
    def errors(self) -> dict[str, str]:
        out = {t.table_key: t.error for t in self.tables if t.error}
        out.update({i.dataset: i.error for i in self.internal if i.error})
        return out


# -- helpers ------------------------------------------------------------------------------


def is_retryable_conflict(e: BaseException) -> bool:
    """A Lance commit conflict a reopen-and-retry can fix (the engine's classifier, by message)."""
    m = str(e).lower()
    return (
        "conflict" in m
        or "too many concurrent writers" in m
        or "contention" in m
        or "retryable" in m
        or "preempted" in m
    )


def has_blob_columns(schema: pa.Schema) -> bool:
    """Blob columns: the ``lance.blob.v2`` extension type or Lance's blob encoding metadata."""

    def blob(f: pa.Field) -> bool:
        meta = f.metadata or {}
        if any(b"blob" in k.lower() for k in meta):
            return True
        t = f.type
        if isinstance(t, pa.ExtensionType) and "blob" in t.extension_name.lower():
            return True
        if pa.types.is_struct(t):
            return any(blob(t.field(i)) for i in range(t.num_fields))
        return False

    return any(blob(f) for f in schema)


def _physical_rows(frag) -> int:
    n = frag.metadata.physical_rows
    return int(n) if n is not None else frag.count_rows()


def _deleted_rows(frag) -> int:
    d = frag.metadata.deletion_file
    return int(getattr(d, "num_deleted_rows", 0) or 0) if d is not None else 0


def fragment_stats(ds: lance.LanceDataset, target_rows: int) -> tuple[int, int]:
    """(fragments, compaction candidates): fragments below ``target_rows`` or carrying deletions."""
    frags = ds.get_fragments()
    cands = 0
    for f in frags:
        if _physical_rows(f) < target_rows or _deleted_rows(f) > 0:
            cands += 1
    return len(frags), cands


def _plan_tasks(ds: lance.LanceDataset, target_rows: int) -> int:
    return Compaction.plan(ds, {"target_rows_per_fragment": target_rows}).num_tasks()  # type: ignore[typeddict-item]  # CompactionOptions' keys are all optional to Lance


def _require_clean(graph, what: str) -> None:
    pending = graph.pending_sidecars()
    if pending:
        raise RecoveryPendingError(
            f"{what} requires a clean recovery state; reopen the graph to run the recovery sweep before "
            f"optimizing (graph.recover() or `omnigraph-spark recover`); pending sidecars: {pending}",
            sidecars=pending,
        )


# -- optimize -----------------------------------------------------------------------------


def optimize(
    graph,
    branch: str = MAIN,
    *,
    tables: Iterable[str] | None = None,
    target_rows_per_fragment: int = _tables.DEFAULT_MAX_ROWS_PER_FILE,
    min_fragments: int = 2,
    dry_run: bool = False,
    compact_internal: bool = True,
    lease_timeout_s: float = 300.0,
) -> OptimizeReport:
    """Compact small fragments of ``branch``'s tables and publish them as ONE graph commit.

    Only tables the branch owns are compacted (on main: every table; on a branch: the tables
    forked onto it). Inherited tables are skipped with ``inherited_table``: compacting them
    on the branch would fork them (a new lineage holding a full rewritten copy of the data),
    and optimizing the owning branch compacts them for everyone. Blob tables, drifted tables,
    tables with Lance auto-cleanup config and tables with fewer than ``min_fragments``
    compaction candidates are skipped with a reason. A dry run takes no lease and changes nothing.
    """
    t0 = time.monotonic()
    if target_rows_per_fragment < 1:
        raise OptionError(
            "target_rows_per_fragment must be >= 1", option="target_rows_per_fragment", value=target_rows_per_fragment
        )
    if min_fragments < 1:
        raise OptionError("min_fragments must be >= 1", option="min_fragments", value=min_fragments)
    report = OptimizeReport(branch=branch, dry_run=dry_run)
    _require_clean(graph, "optimize")
    if dry_run:
        _plan(graph, branch, tables, target_rows_per_fragment, min_fragments, report)
        report.seconds = time.monotonic() - t0
        return report
    with _lease.hold(graph.storage, graph.root, timeout_s=lease_timeout_s, owner=OPTIMIZE_ACTOR):
        _require_clean(graph, "optimize")  # a writer may have crashed while we waited
        _manifest.check_not_locked(graph.root, graph.storage_options)
        snap, work = _plan(graph, branch, tables, target_rows_per_fragment, min_fragments, report)
        if work:
            _compact_and_publish(graph, branch, snap, work, target_rows_per_fragment, report)
        if compact_internal:
            report.internal = compact_internal_datasets(graph, branch)
    report.seconds = time.monotonic() - t0
    log.info(
        "optimize %s: compacted %s, skipped %s, graph version %s (%.2fs)",
        branch,
        report.compacted,
        {t.table_key: t.skipped for t in report.tables if t.skipped},
        report.manifest_version,
        report.seconds,
    )
    return report


def _plan(graph, branch: str, only: Iterable[str] | None, target_rows: int, min_fragments: int, report: OptimizeReport):
    snap = graph.snapshot(branch)
    wanted = None
    if only is not None:
        wanted = set(only)
        unknown = sorted(wanted - set(snap.tables))
        if unknown:
            raise OptionError(
                f"optimize: tables {unknown} are not in branch '{branch}' (tables: {sorted(snap.tables)})",
                option="tables",
                value=unknown,
            )
    work = []
    for key, t in snap.tables.items():
        res = TableOptimizeResult(key, t.branch, version_before=t.version, version_after=t.version, rows=t.row_count)
        report.tables.append(res)
        if wanted is not None and key not in wanted:
            res.skipped = SKIP_NOT_SELECTED
            continue
        if t.branch != branch:
            res.skipped = SKIP_INHERITED
            res.detail = (
                f"inherited from lineage '{t.branch}' at version {t.version}; optimize branch "
                f"'{t.branch}' (or write to the table on '{branch}' first)"
            )
            continue
        try:
            ds = _tables.open_dataset(t.base_path, branch=t.lance_branch, storage_options=graph.storage_options)
            frags, cands = fragment_stats(ds, target_rows)
            res.fragments_before = res.fragments_after = frags
            res.small_fragments = cands
            if has_blob_columns(ds.schema):
                res.skipped = SKIP_BLOB
                res.detail = "blob columns: Lance compaction cannot rewrite them (the engine skips them too)"
                continue
            if ds.version != t.version:
                res.skipped = SKIP_DRIFT
                res.detail = (
                    f"Lance HEAD {ds.version} != manifest pin {t.version}; run graph.recover() or `omnigraph repair`"
                )
                continue
            if any(k.startswith(_tables.AUTO_CLEANUP_PREFIX) for k in ds.config()):
                res.skipped = SKIP_AUTO_CLEANUP
                res.detail = "dataset carries lance.auto_cleanup.* config; run the engine's optimize (it strips it)"
                continue
            if cands < min_fragments:
                res.skipped = SKIP_FEW_FRAGMENTS
                res.detail = f"{cands} compaction candidate(s) < min_fragments={min_fragments}"
                continue
            # index deltas hide adjacent fragments from Lance's planner: they are consolidated first
            specs = _indexes.expected_indexes(graph.catalog.by_table_key(key))
            if _plan_tasks(ds, target_rows) == 0 and not _indexes.consolidation(ds, specs)[0]:
                res.skipped = SKIP_NOTHING
                res.detail = "Lance's compaction planner found no adjacent small fragments to merge"
                continue
        except Exception as e:  # one table's failure never stops the others
            res.error = f"{type(e).__name__}: {e}"
            log.warning("optimize: planning %s failed: %s", key, e)
            continue
        work.append((key, t, res))
    return snap, work


def _compact_one(graph, t, target_rows: int) -> tuple[lance.LanceDataset, int]:
    """Compact one table on its lineage, reopening on a Lance conflict (up to 5 attempts)."""
    last: BaseException | None = None
    for attempt in range(1, COMPACTION_RETRY_BUDGET + 1):
        ds = _tables.open_dataset(t.base_path, branch=t.lance_branch, storage_options=graph.storage_options)
        try:
            ds = _consolidate_indexes(graph, t, ds)
            ds.optimize.compact_files(target_rows_per_fragment=target_rows)
        except Exception as e:
            if attempt < COMPACTION_RETRY_BUDGET and is_retryable_conflict(e):
                last = e
                log.info("optimize: compaction of %s conflicted (attempt %d): %s", t.table_key, attempt, e)
                time.sleep(0.05 * attempt)
                continue
            raise
        return _tables.open_dataset(t.base_path, branch=t.lance_branch, storage_options=graph.storage_options), attempt
    raise StorageError(
        f"compaction of {t.table_key} exhausted {COMPACTION_RETRY_BUDGET} attempts: {last}", table=t.table_key
    )


def _consolidate_indexes(graph, t, ds: lance.LanceDataset) -> lance.LanceDataset:
    """Make every index the engine expects on the table one segment over every fragment, in one
    commit (I23): Lance compacts only fragments one segment covers together, and each load
    adds a delta (store/indexes.py)."""
    work, removed = _indexes.consolidation(ds, _indexes.expected_indexes(graph.catalog.by_table_key(t.table_key)))
    if not work:
        return ds
    job = _indexes.IndexJob(t.base_path, t.lance_branch, ds.version, tuple(work), graph.storage_options)
    segments = _indexes.segments_for(job)
    op = lance.LanceOperation.CreateIndex(new_indices=segments, removed_indices=removed)
    res = _tables.commit_operation(ds, op, ds.version, t.table_key)
    log.info(
        "optimize: indexes of %s in one segment each at v%d: %s", t.table_key, res.version, [w.spec.name for w in work]
    )
    return _tables.open_dataset(t.base_path, branch=t.lance_branch, storage_options=graph.storage_options)


def _compact_and_publish(graph, branch: str, snap, work, target_rows: int, report: OptimizeReport) -> None:
    lb = None if branch == MAIN else branch
    pins = [_sidecar.SidecarPin(key, t.base_path, t.version, t.version + 1, None, lb) for key, t, _ in work]
    sc = _sidecar.Sidecar.new(branch, OPTIMIZE_ACTOR, "Optimize", pins)
    _sidecar.write(graph.storage, graph.root, sc)  # intent durable BEFORE any compaction commit
    report.operation_id = sc.operation_id
    updates: list[_manifest.TableUpdate] = []
    for key, t, res in work:
        try:
            ds, _ = _compact_one(graph, t, target_rows)
        except Exception as e:
            res.error = f"{type(e).__name__}: {e}"
            log.warning("optimize: compaction of %s failed: %s", key, e)
            ds = _tables.open_dataset(t.base_path, branch=t.lance_branch, storage_options=graph.storage_options)
            if ds.version == t.version:
                continue  # nothing landed for this table
        res.version_after = ds.version
        res.fragments_after = len(ds.get_fragments())
        rows = ds.count_rows()
        if rows != t.row_count:  # compaction is content-preserving; never publish otherwise
            res.error = f"row count changed by compaction ({t.row_count} -> {rows}); not published"
            continue
        loc = table_uri(graph.root, t.table_path, lb)
        updates.append(
            _manifest.TableUpdate(
                key,
                ds.version,
                lb,
                rows,
                _tables.version_metadata_json(loc, ds.version, t.table_path, graph.storage_options),
            )
        )
    failpoints.hit("after_optimize_compact")
    if updates:
        state = _publish_fast_forward(graph, branch, updates, {p.table_key: p.expected_version for p in pins})
        report.manifest_version = state.version
        c = _commits.append(graph.root, branch, state.version, OPTIMIZE_ACTOR, graph.storage_options)
        report.graph_commit_id = c.graph_commit_id
    _sidecar.delete(graph.storage, graph.root, sc.operation_id)


def _publish_fast_forward(
    graph, branch: str, updates: list[_manifest.TableUpdate], expected: dict[str, int]
) -> _manifest.ManifestState:
    """Publish the compacted versions; on a moved pin, fast-forward monotonically (§K.12):
    a table whose pin is already >= its compacted version is dropped (Lance versions are
    linear: the newer pin includes the compaction); others retry with expected = current."""
    exp = {u.table_key: expected[u.table_key] for u in updates}
    pending = list(updates)
    for attempt in range(PUBLISH_RETRY_BUDGET + 1):
        try:
            return _manifest.publish(graph.root, branch, pending, exp, graph.storage_options)
        except ExpectedVersionMismatchError as e:
            if attempt >= PUBLISH_RETRY_BUDGET:
                raise
            st = _manifest.read_state(
                _manifest.open_manifest(graph.root, branch, storage_options=graph.storage_options), branch
            )
            pending = [u for u in pending if st.latest_visible.get(u.table_key, 0) < u.version]
            exp = {u.table_key: st.latest_visible.get(u.table_key, 0) for u in pending}
            log.info("optimize publish: pins moved (%s); fast-forwarding %s", e, [u.table_key for u in pending])
            if not pending:
                return st
    raise AssertionError("unreachable")


# -- internal datasets --------------------------------------------------------------------


def compact_internal_datasets(graph, branch: str = MAIN) -> list[InternalCompactResult]:
    """Compact ``__manifest`` and ``_graph_commits.lance`` on ``branch``'s lineage and
    ``_graph_commit_actors.lance`` (main only, the engine never branches it).

    No publish and no sidecar: these are read at HEAD and a Rewrite is content-preserving, so
    a crash leaves them readable and identical. Compacting ``__manifest`` adds graph versions
    with no commit row (as the engine's optimize does). Schema and field metadata (the
    immutable ``object_id`` primary key) are carried over untouched by the Rewrite.
    """
    paths = RootPaths(graph.root)
    lb = None if branch == MAIN else branch
    out = []
    for name, uri, lineage in (
        ("__manifest", paths.manifest, lb),
        ("_graph_commits.lance", paths.commits, lb),
        ("_graph_commit_actors.lance", paths.actors, None),
    ):
        res = InternalCompactResult(name)
        out.append(res)
        try:
            if name != "__manifest" and not graph.storage.exists(uri):
                continue
            _compact_internal(graph, uri, lineage, res)
        except Exception as e:
            res.error = f"{type(e).__name__}: {e}"
            log.warning("optimize: compacting %s failed: %s", name, e)
    return out


def _compact_internal(graph, uri: str, lineage: str | None, res: InternalCompactResult) -> None:
    for attempt in range(1, COMPACTION_RETRY_BUDGET + 1):
        res.attempts = attempt
        ds = _tables.open_dataset(uri, branch=lineage, storage_options=graph.storage_options)
        res.version_before = res.version_before or ds.version
        res.fragments_before = res.fragments_before or len(ds.get_fragments())
        res.fragments_after = len(ds.get_fragments())
        res.version_after = ds.version
        _tables.check_no_auto_cleanup(ds, uri)  # a compaction commit would fire Lance's GC
        if _plan_tasks(ds, _tables.DEFAULT_MAX_ROWS_PER_FILE) == 0:
            return
        try:
            ds.optimize.compact_files()
        except Exception as e:
            if attempt < COMPACTION_RETRY_BUDGET and is_retryable_conflict(e):
                log.info("optimize: compaction of %s conflicted (attempt %d): %s", uri, attempt, e)
                time.sleep(0.05 * attempt)
                continue
            raise
        ds = _tables.open_dataset(uri, branch=lineage, storage_options=graph.storage_options)
        res.fragments_after = len(ds.get_fragments())
        res.version_after = ds.version
        return
    raise StorageError(f"compaction of {uri} exhausted {COMPACTION_RETRY_BUDGET} attempts", uri=uri)


# -- cleanup (implemented in maintenance_cleanup) -------------------------------------------


def cleanup(
    graph,
    *,
    keep_versions: int | None = None,
    older_than: None | dt.timedelta | int | float = None,
    dry_run: bool = False,
    orphan_grace_s: float = 3600.0,
    include_orphans: bool = True,
    **kw,
):
    """Remove old table versions by policy, orphaned data files and orphaned table forks.
    See :func:`omnigraph_spark.store.maintenance_cleanup.cleanup`."""
    return maintenance_cleanup.cleanup(
        graph,
        keep_versions=keep_versions,
        older_than=older_than,
        dry_run=dry_run,
        orphan_grace_s=orphan_grace_s,
        include_orphans=include_orphans,
        **kw,
    )
