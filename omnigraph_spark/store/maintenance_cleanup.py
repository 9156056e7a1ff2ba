"""``cleanup``: old table versions by policy, orphaned data files, orphaned table forks.

Safety rule (what makes it safe next to the engine and our own writers): a table version is
removed only if it is older than EVERY version some kept graph version references on that
lineage. The kept graph versions are, per graph branch, the ``__manifest`` versions the policy
retains (the head always; the last ``keep_versions``; every one newer than ``older_than``), so
time travel to any kept graph version still reads the same rows. Versions named by a pending
recovery sidecar are kept too. Per (table dataset, Lance lineage) this yields one cut version
and Lance's own ``cleanup_old_versions`` removes exactly the versions below it (Lance also keeps
every version a child branch was forked from, and never the latest).

Then, per table dataset:
- orphan forks: Lance branches of the table that no live graph branch places the table on
  (a deleted branch's leftover, or a job that forked at planning and died), untouched for
  ``orphan_grace_s``, are deleted (children first) under the commit lease;
- orphan files: ``*.lance`` files under ``data/`` or ``tree/<b>/data/`` that no existing
  version of any lineage of the dataset references, last modified more than ``orphan_grace_s``
  ago (a running job's staged files are younger than that), are deleted.

Last, staging journals (``_omnigraph_spark/staging/<load>/``: the files each task attempt of a
Spark load staged, and the JVM tasks' key fingerprints) that a killed driver never removed,
untouched for ``orphan_grace_s``, are deleted; the data files they name are orphan files above.
So are the node-id indexes the JVM shim keeps (``_omnigraph_spark/id_indexes/``, a cache) that no
load read or wrote for ``orphan_grace_s``.

Failures are isolated per table: recorded in the report, the other tables continue.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import lance
import pyarrow.fs as pafs

from ..errors import OptionError
from . import lease as _lease
from . import manifest as _manifest
from . import sidecar as _sidecar
from . import tables as _tables
from .layout import MAIN, SCHEMA_APPLY_LOCK_BRANCH, RootPaths, join
from .quarantine import recover_quarantine

log = logging.getLogger(__name__)

CLEANUP_ACTOR = "omnigraph-spark:cleanup"


@dataclass
class LineageCleanup:
    lineage: str  # "main" or a Lance branch name
    head: int
    cut: int  # versions < cut are removed (Lance keeps branch parents and the head regardless)
    versions_removed: list[int] = field(default_factory=list)
    bytes_removed: int = 0


@dataclass
class TableCleanupResult:
    table_key: str
    table_path: str
    lineages: list[LineageCleanup] = field(default_factory=list)
    forks_removed: list[str] = field(default_factory=list)
    orphan_files: list[str] = field(default_factory=list)  # relative to the table dataset
    orphan_bytes: int = 0
    error: str | None = None

    @property
    def versions_removed(self) -> int:
        return sum(len(x.versions_removed) for x in self.lineages)

    @property
    def bytes_removed(self) -> int:
        return sum(x.bytes_removed for x in self.lineages) + self.orphan_bytes


@dataclass
class CleanupReport:
    dry_run: bool
    keep_versions: int | None
    older_than: dt.timedelta | None
    tables: list[TableCleanupResult] = field(default_factory=list)
    commit_graph_forks_removed: list[str] = field(default_factory=list)
    staging_journals_removed: list[str] = field(default_factory=list)  # load ids (directory names)
    id_indexes_removed: list[str] = field(default_factory=list)  # file names under _omnigraph_spark/id_indexes
    kept_graph_versions: dict[str, list[int]] = field(default_factory=dict)  # branch -> __manifest versions
    protected: dict[tuple[str, str], int] = field(default_factory=dict)  # (table_path, lineage) -> min version
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def table(self, key: str) -> TableCleanupResult:
        for t in self.tables:
            if t.table_key == key:
                return t
        raise KeyError(key)

    @property
    def versions_removed(self) -> int:
        return sum(t.versions_removed for t in self.tables)

    @property
    def bytes_removed(self) -> int:
        return sum(t.bytes_removed for t in self.tables)

    @property
    def orphan_files(self) -> int:
        return sum(len(t.orphan_files) for t in self.tables)


def _as_timedelta(v) -> dt.timedelta | None:
    if v is None or isinstance(v, dt.timedelta):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return dt.timedelta(seconds=float(v))
    raise OptionError(
        f"older_than must be a timedelta or seconds, not {type(v).__name__}", option="older_than", value=repr(v)
    )


def _deletable_by_policy(
    version: int, ts: dt.datetime, head: int, keep: int | None, cutoff: dt.datetime | None
) -> bool:
    """Outside the policy: older than the last ``keep`` versions AND older than ``cutoff``
    (both must hold when both are given, as in Lance and the engine)."""
    if version >= head:
        return False
    if keep is not None and version > head - keep:
        return False
    if cutoff is not None and ts >= cutoff:
        return False
    return True


def _cut(versions: list[dict], head: int, keep, cutoff, protected_min: int | None) -> int:
    """The smallest version that must stay: every version below it is removable."""
    cut = head
    for v in sorted(versions, key=lambda x: x["version"]):
        if not _deletable_by_policy(v["version"], v["timestamp"], head, keep, cutoff):
            cut = v["version"]
            break
    if protected_min is not None:
        cut = min(cut, protected_min)
    return cut


# -- what the graph references ----------------------------------------------------------------


def _kept_graph_state(graph, keep, cutoff, report: CleanupReport):
    """Protected (table_path, lineage) -> min version over every kept __manifest version of every
    branch; plus table_path -> table_key and the head placement of each branch."""
    protected: dict[tuple[str, str], int] = {}
    keys: dict[str, str] = {}
    placements: dict[str, dict[str, str]] = {}  # branch -> table_path -> lineage at head
    root, so = graph.root, graph.storage_options

    def protect(path: str, lineage: str, version: int) -> None:
        k = (path, lineage)
        protected[k] = min(protected.get(k, version), version)

    for b in graph.branches():
        head_ds = _manifest.open_manifest(root, b, storage_options=so)
        head = head_ds.version
        kept = [
            v["version"]
            for v in head_ds.versions()
            if not _deletable_by_policy(v["version"], v["timestamp"], head, keep, cutoff)
        ]
        report.kept_graph_versions[b] = kept
        for mv in kept:
            st = _manifest.read_state(_manifest.open_manifest(root, b, mv, storage_options=so), b)
            for key, loc in st.locations.items():
                keys.setdefault(loc, key)
            for e in st.entries.values():
                protect(e.table_path, e.branch, e.version)
            if mv == head:
                placements[b] = {e.table_path: e.branch for e in st.entries.values()}
    # a pending recovery sidecar may restore its pinned version: keep it
    for sc in _sidecar.read_all(graph.storage, root):
        for p in sc.tables:
            protect(p.table_dir or p.table_path, p.table_branch or MAIN, p.expected_version)
    report.protected = dict(protected)
    return protected, keys, placements


# -- file listing -------------------------------------------------------------------------------


def _list_files(storage, base: str) -> list[tuple[str, float, int]]:
    """(relative path, mtime epoch seconds, size) of every file below ``base``."""
    if storage.local:
        out = []
        for d, _, files in os.walk(base):
            for n in files:
                p = os.path.join(d, n)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    continue
                out.append((os.path.relpath(p, base), st.st_mtime, st.st_size))
        return out

    fs = storage._pafs()
    b = storage._strip(base).rstrip("/")
    sel = pafs.FileSelector(b, allow_not_found=True, recursive=True)
    return [
        (i.path[len(b) + 1 :], i.mtime.timestamp() if i.mtime else time.time(), i.size or 0)
        for i in fs.get_file_info(sel)
        if i.type == pafs.FileType.File
    ]


def _is_data_file(rel: str) -> bool:
    parts = rel.split("/")
    return (
        len(parts) >= 2
        and parts[-2] == "data"
        and parts[-1].endswith(".lance")
        and (len(parts) == 2 or parts[0] == "tree")
    )


def _referenced_names(base: str, lineages: Iterable[str], so) -> set[str]:
    """Names of every data file any existing version of any lineage references (names are
    unique random ids, so matching by name is exact and conservative across base paths)."""
    names: set[str] = set()
    for lin in lineages:
        lb = None if lin == MAIN else lin
        ds = _tables.open_dataset(base, branch=lb, storage_options=so)
        for v in ds.versions():
            vds = ds.checkout_version((lb, v["version"]) if lb else v["version"])
            for frag in vds.get_fragments():
                for df in frag.metadata.files:
                    names.add(df.path.rsplit("/", 1)[-1])
    return names


# -- cleanup ------------------------------------------------------------------------------------


def cleanup(
    graph,
    *,
    keep_versions: int | None = None,
    older_than: None | dt.timedelta | int | float = None,
    dry_run: bool = False,
    orphan_grace_s: float = 3600.0,
    include_orphans: bool = True,
    reconcile_forks: bool = True,
    lease_timeout_s: float = 300.0,
    rejected_rows_path: str | None = None,
) -> CleanupReport:
    """Remove old table versions by policy, orphaned data files and orphaned forks (module doc).

    At least one of ``keep_versions`` (keep the last N versions) / ``older_than`` (timedelta or
    seconds) is required. A dry run lists what would go and deletes nothing.
    ``rejected_rows_path``: first settle the quarantines crashed loads of this graph left there
    (:func:`~omnigraph_spark.store.quarantine.recover_quarantine`: finish those of committed
    loads, delete the ``_staging/<load id>/`` of loads that never committed), before any table
    version that proves a load committed can go.
    """
    t0 = time.monotonic()
    older = _as_timedelta(older_than)
    if keep_versions is None and older is None:
        raise OptionError("cleanup requires at least one of keep_versions or older_than", option="keep_versions")
    if keep_versions is not None and (isinstance(keep_versions, bool) or int(keep_versions) < 1):
        raise OptionError("keep_versions must be >= 1", option="keep_versions", value=keep_versions)
    if older is not None and older < dt.timedelta(0):
        raise OptionError("older_than must not be negative", option="older_than", value=str(older))
    if orphan_grace_s < 0:
        raise OptionError("orphan_grace_s must not be negative", option="orphan_grace_s", value=orphan_grace_s)
    keep = int(keep_versions) if keep_versions is not None else None
    now = time.time()
    # Lance reports version timestamps as naive local time (datetime.fromtimestamp)
    cutoff = dt.datetime.fromtimestamp(now - older.total_seconds()) if older is not None else None
    report = CleanupReport(dry_run, keep, older)
    _manifest.check_not_locked(graph.root, graph.storage_options)
    if rejected_rows_path is not None and not dry_run:
        recover_quarantine(graph, rejected_rows_path, graph.storage_options, lease_timeout_s=lease_timeout_s)
    protected, keys, placements = _kept_graph_state(graph, keep, cutoff, report)
    live = set(placements)
    for path in sorted(keys):
        res = TableCleanupResult(keys[path], path)
        report.tables.append(res)
        try:
            _cleanup_table(
                graph,
                res,
                protected,
                placements,
                live,
                keep,
                cutoff,
                now,
                dry_run,
                orphan_grace_s,
                include_orphans,
                reconcile_forks,
                lease_timeout_s,
            )
        except Exception as e:  # isolate: record and continue with the next table
            res.error = f"{type(e).__name__}: {e}"
            report.errors[res.table_key] = res.error
            log.warning("cleanup of %s (%s) failed: %s", res.table_key, path, e)
    if reconcile_forks:
        try:
            report.commit_graph_forks_removed = _reconcile_commit_graph(
                graph, live, now, orphan_grace_s, dry_run, lease_timeout_s
            )
        except Exception as e:
            report.errors["_graph_commits.lance"] = f"{type(e).__name__}: {e}"
    if include_orphans:
        try:
            report.staging_journals_removed = _sweep_staging_journals(graph, now, orphan_grace_s, dry_run)
        except Exception as e:
            report.errors["_omnigraph_spark/staging"] = f"{type(e).__name__}: {e}"
        try:
            report.id_indexes_removed = _sweep_id_indexes(graph, now, orphan_grace_s, dry_run)
        except Exception as e:
            report.errors["_omnigraph_spark/id_indexes"] = f"{type(e).__name__}: {e}"
    report.seconds = time.monotonic() - t0
    log.info(
        "cleanup%s: %d versions, %d orphan files, %d bytes, forks %s, %d staging journals, errors %s (%.2fs)",
        " (dry run)" if dry_run else "",
        report.versions_removed,
        report.orphan_files,
        report.bytes_removed,
        [(t.table_key, f) for t in report.tables for f in t.forks_removed],
        len(report.staging_journals_removed),
        report.errors,
        report.seconds,
    )
    return report


def _cleanup_table(
    graph,
    res: TableCleanupResult,
    protected,
    placements,
    live,
    keep,
    cutoff,
    now,
    dry_run,
    grace,
    include_orphans,
    reconcile_forks,
    lease_timeout_s,
) -> None:
    so = graph.storage_options
    base = join(graph.root, res.table_path)
    branches = _tables.lance_branches(base, so)
    if reconcile_forks:
        removed = _reconcile_forks(
            graph, res, base, branches, protected, placements, live, now, grace, dry_run, lease_timeout_s
        )
        res.forks_removed = removed
        branches = {b: m for b, m in branches.items() if b not in removed}
    lineages = [MAIN] + sorted(branches)
    for lin in lineages:
        res.lineages.append(
            _cleanup_lineage(base, lin, branches, protected.get((res.table_path, lin)), keep, cutoff, dry_run, so)
        )
    if include_orphans:
        _sweep_orphans(graph, res, base, lineages, now, grace, dry_run)


def _cleanup_lineage(
    base: str, lin: str, branches: dict[str, dict], protected_min: int | None, keep, cutoff, dry_run: bool, so
) -> LineageCleanup:
    lb = None if lin == MAIN else lin
    ds = _tables.open_dataset(base, branch=lb, storage_options=so)
    head = ds.version
    versions = ds.versions()
    cut = _cut(versions, head, keep, cutoff, protected_min)
    out = LineageCleanup(lin, head, cut)
    # Lance keeps the version each child branch was forked from
    parents = {
        int(v)
        for v in (m.get("parent_version") for m in branches.values() if (m.get("parent_branch") or MAIN) == lin)
        if v is not None
    }
    doomed = [v["version"] for v in versions if v["version"] < cut and v["version"] not in parents]
    if not doomed:
        return out
    if dry_run:
        out.versions_removed = doomed
        return out
    _tables.check_no_auto_cleanup(ds, base)
    stats = ds.cleanup_old_versions(retain_versions=head - cut + 1, error_if_tagged_old_versions=False)
    left = {v["version"] for v in _tables.open_dataset(base, branch=lb, storage_options=so).versions()}
    out.versions_removed = [v for v in doomed if v not in left]
    out.bytes_removed = int(stats.bytes_removed)
    if len(out.versions_removed) != int(stats.old_versions):
        log.info(
            "cleanup %s@%s: Lance removed %d versions, %d expected",
            base,
            lin,
            stats.old_versions,
            len(out.versions_removed),
        )
    return out


def _fork_dir(base: str, b: str) -> str:
    return join(base, "tree", *b.split("/"))


def _reconcile_forks(
    graph,
    res: TableCleanupResult,
    base: str,
    branches: dict[str, dict],
    protected,
    placements,
    live,
    now,
    grace,
    dry_run,
    lease_timeout_s,
) -> list[str]:
    """Delete Lance branches of this table no live graph branch places the table on."""

    def orphan(b: str, meta: dict) -> bool:
        if b == MAIN or b == SCHEMA_APPLY_LOCK_BRANCH:
            return False
        if b in live and placements[b].get(res.table_path) == b:
            return False  # legitimately forked: the branch's head reads this lineage
        if (res.table_path, b) in protected:
            return False  # a kept graph version still reads it
        created = meta.get("create_at") or 0
        if now - float(created) < grace:
            return False  # maybe a job that forked at planning and is still staging
        newest = max((m for _, m, _ in _list_files(graph.storage, _fork_dir(base, b))), default=0.0)
        return now - newest >= grace

    cands = sorted((b for b, m in branches.items() if orphan(b, m)), key=lambda b: (-len(b), b))
    if dry_run or not cands:
        return cands
    removed = []
    with _lease.hold(graph.storage, graph.root, timeout_s=lease_timeout_s, owner=CLEANUP_ACTOR):
        # re-check under the lease from fresh authority (a writer may have published meanwhile)
        fresh = {
            b: _manifest.read_state(_manifest.open_manifest(graph.root, b, storage_options=graph.storage_options), b)
            for b in graph.branches()
        }
        for b in cands:
            st = fresh.get(b)
            if st is not None and any(e.table_path == res.table_path and e.branch == b for e in st.entries.values()):
                continue
            _tables.delete_lance_branch(base, b, graph.storage_options)
            removed.append(b)
            log.info("cleanup: removed orphan fork '%s' of %s", b, res.table_key)
    return removed


def _sweep_orphans(graph, res: TableCleanupResult, base: str, lineages: list[str], now, grace, dry_run) -> None:
    # list first, then read references: a file committed in between shows up as referenced
    files = [(rel, m, s) for rel, m, s in _list_files(graph.storage, base) if _is_data_file(rel)]
    old = [(rel, s) for rel, m, s in files if now - m >= grace]
    if not old:
        return
    refs = _referenced_names(base, lineages, graph.storage_options)
    for rel, size in sorted(old):
        if rel.rsplit("/", 1)[-1] in refs:
            continue
        res.orphan_files.append(rel)
        res.orphan_bytes += size
        if not dry_run:
            graph.storage.delete(join(base, rel))


def _sweep_staging_journals(graph, now: float, grace: float, dry_run: bool) -> list[str]:
    """Journal directories of loads whose driver died before cleaning up: every file (and, on a
    local root, the directory itself) untouched for ``grace`` seconds. A live load writes its
    journal as tasks finish; its driver reads the journal only to delete files it does not
    commit and falls back to exact checks if a fingerprint file is gone, so a slow load that
    loses its journal still commits correctly and leaves orphans to the sweep above."""
    base = RootPaths(graph.root).staging_dir
    newest: dict[str, float] = {}
    files: dict[str, list[str]] = {}
    for rel, mtime, _ in _list_files(graph.storage, base):
        if "/" not in rel:
            continue  # a stray file beside the load directories: not ours to judge
        load = rel.split("/", 1)[0]
        newest[load] = max(newest.get(load, 0.0), mtime)
        files.setdefault(load, []).append(rel)
    if graph.storage.local and os.path.isdir(base):
        for load in os.listdir(base):
            d = os.path.join(base, load)
            if os.path.isdir(d):
                newest[load] = max(newest.get(load, 0.0), os.stat(d).st_mtime)
    gone = sorted(load for load, m in newest.items() if now - m >= grace)
    if dry_run:
        return gone
    for load in gone:
        if graph.storage.local:
            shutil.rmtree(os.path.join(base, load), ignore_errors=True)  # its files and the directory
            continue
        for rel in files.get(load, []):
            graph.storage.delete(join(base, rel))
    return gone


def _sweep_id_indexes(graph, now: float, grace: float, dry_run: bool) -> list[str]:
    """Kept node-id indexes (a cache the JVM shim reads only for exactly the rows it was built
    from) that no load read or wrote for ``grace`` seconds: reading one marks it used. A load
    that finds its file gone builds the index again."""
    if not graph.storage.local:
        return []  # kept on local roots only
    base = RootPaths(graph.root).id_indexes
    gone = sorted(rel for rel, mtime, _ in _list_files(graph.storage, base) if "/" not in rel and now - mtime >= grace)
    if not dry_run:
        for rel in gone:
            graph.storage.delete(join(base, rel))
    return gone


def _reconcile_commit_graph(graph, live: set[str], now, grace, dry_run, lease_timeout_s) -> list[str]:
    """``_graph_commits.lance`` branches of graph branches that no longer exist (engine's backstop)."""
    uri = RootPaths(graph.root).commits
    if not graph.storage.exists(uri):
        return []
    ds = lance.dataset(uri, storage_options=graph.storage_options)
    cands = sorted(
        (
            b
            for b, m in ds.branches.list().items()
            if b not in live and b != SCHEMA_APPLY_LOCK_BRANCH and now - float(m.get("create_at") or 0) >= grace
        ),
        key=lambda b: (-len(b), b),
    )
    if dry_run or not cands:
        return cands
    out = []
    with _lease.hold(graph.storage, graph.root, timeout_s=lease_timeout_s, owner=CLEANUP_ACTOR):
        still = set(graph.branches())
        for b in cands:
            if b in still:
                continue
            lance.dataset(uri, storage_options=graph.storage_options).branches.delete(b)
            out.append(b)
    return out
