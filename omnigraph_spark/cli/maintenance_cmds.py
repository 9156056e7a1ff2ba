"""Maintenance commands (no Spark): optimize and cleanup, on top of ``store.maintenance``."""

from __future__ import annotations

import argparse
import datetime as dt
import re

from ..graph import Graph
from .codes import UsageError
from .output import Output, human_bytes, table

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> dt.timedelta:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` -> timedelta (argparse type; bad input is a usage error)."""
    m = _DURATION.match(text or "")
    if not m:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use a number and a unit s|m|h|d|w, e.g. 7d")
    return dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {n}")
    return n


def add_parsers(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "optimize",
        parents=[common],
        help="compact small fragments (one graph commit)",
        description="Compact small Lance fragments of a branch's tables and publish the compacted "
        "versions as one graph commit (like `omnigraph optimize`). Old versions stay "
        "readable until `cleanup`.",
    )
    p.add_argument("uri", metavar="URI")
    p.add_argument("--branch", default="main")
    p.add_argument("--dry-run", action="store_true", help="plan only: show what would be compacted")
    p.add_argument(
        "--target-rows",
        type=_positive_int,
        default=None,
        metavar="N",
        help="target rows per compacted fragment (default: 1048576)",
    )
    p.add_argument(
        "--min-fragments",
        type=_positive_int,
        default=None,
        metavar="N",
        help="compact a table only with at least N small fragments (default: 2)",
    )
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser(
        "cleanup",
        parents=[common],
        help="delete old table versions and orphaned files",
        description="Remove table versions outside the retention policy (time travel to them stops "
        "working), files of failed jobs and orphaned forks. Give --keep-versions, "
        "--older-than, or both (then a version must match both to go).",
    )
    p.add_argument("uri", metavar="URI")
    p.add_argument(
        "--keep-versions", type=_positive_int, default=None, metavar="N", help="keep the last N versions of every table"
    )
    p.add_argument(
        "--older-than",
        type=parse_duration,
        default=None,
        metavar="AGE",
        help="remove only versions older than AGE (e.g. 7d, 12h, 30m)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be removed; delete nothing")
    p.add_argument(
        "--orphan-grace",
        type=parse_duration,
        default=dt.timedelta(hours=1),
        metavar="AGE",
        help="leave unreferenced files younger than AGE alone (a running job may own them; default 1h)",
    )
    p.add_argument("--no-orphans", action="store_true", help="do not sweep unreferenced data files")
    p.add_argument(
        "--rejected-rows-path",
        default=None,
        metavar="PATH",
        help="first settle the quarantines crashed loads left under this rejectedRowsPath: publish "
        "those of committed loads, delete the others",
    )
    p.set_defaults(func=cmd_cleanup)


def cmd_optimize(args, out: Output) -> int:
    g = Graph.open(args.uri)
    kw = {"dry_run": args.dry_run}
    if args.target_rows is not None:
        kw["target_rows_per_fragment"] = args.target_rows
    if args.min_fragments is not None:
        kw["min_fragments"] = args.min_fragments
    report = g.optimize(args.branch, **kw)

    def human(r) -> list[str]:
        rows = [
            (
                t.table_key,
                f"{t.fragments_before} -> {t.fragments_after}" if not r.dry_run else t.fragments_before,
                t.small_fragments,
                f"v{t.version_before} -> v{t.version_after}" if t.compacted else f"v{t.version_before}",
                t.error or t.skipped or ("planned" if r.dry_run else "compacted" if t.compacted else "-"),
            )
            for t in r.tables
        ]
        lines = table(rows, ["TABLE", "FRAGMENTS", "SMALL", "VERSION", "RESULT"], "lrrll")
        if r.dry_run:
            lines.append("dry run: nothing changed")
        elif r.graph_commit_id:
            lines.append(f"published graph v{r.manifest_version} (commit {r.graph_commit_id}) in {r.seconds:.1f}s")
        else:
            lines.append(f"nothing to compact ({r.seconds:.1f}s)")
        for i in r.internal:
            if i.error:
                lines.append(f"internal dataset {i.dataset}: {i.error}")
        return lines

    out.emit(report, human)
    return 1 if report.errors else 0


def cmd_cleanup(args, out: Output) -> int:
    if args.keep_versions is None and args.older_than is None:
        raise UsageError("cleanup needs --keep-versions N, --older-than AGE, or both")
    g = Graph.open(args.uri)
    report = g.cleanup(
        keep_versions=args.keep_versions,
        older_than=args.older_than,
        dry_run=args.dry_run,
        orphan_grace_s=args.orphan_grace.total_seconds(),
        include_orphans=not args.no_orphans,
        rejected_rows_path=args.rejected_rows_path,
    )

    def human(r) -> list[str]:
        rows = [
            (
                t.table_key,
                t.versions_removed,
                len(t.orphan_files),
                len(t.forks_removed),
                human_bytes(t.bytes_removed),
                t.error or "",
            )
            for t in r.tables
        ]
        lines = table(rows, ["TABLE", "VERSIONS", "ORPHAN FILES", "FORKS", "BYTES", "ERROR"], "lrrrrl")
        verb = "would remove" if r.dry_run else "removed"
        lines.append(
            f"{verb} {r.versions_removed} table versions, {r.orphan_files} orphan files, "
            f"{human_bytes(r.bytes_removed)} in {r.seconds:.1f}s"
        )
        if r.staging_journals_removed:
            lines.append(f"{verb} {len(r.staging_journals_removed)} staging journals of killed loads")
        if r.id_indexes_removed:
            lines.append(f"{verb} {len(r.id_indexes_removed)} kept node-id indexes no load used lately")
        if r.dry_run:
            lines.append("dry run: nothing deleted")
        for k, e in r.errors.items():
            if not any(t.table_key == k for t in r.tables):
                lines.append(f"{k}: {e}")
        return lines

    out.emit(report, human)
    return 1 if report.errors else 0
