"""Store-level commands (no Spark): init, status, log, branch create|list|delete, recover."""

from __future__ import annotations

import argparse

from ..graph import Graph
from .codes import EXIT_RECOVERY_PENDING, UsageError
from .output import Output, table, us_to_iso


def add_parsers(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "init",
        parents=[common],
        help="create a graph from a .pg schema",
        description="Create a graph root exactly as `omnigraph init` does. Refuses an existing graph.",
    )
    p.add_argument("uri", metavar="URI", help="graph root (a directory path or an object-store URI)")
    p.add_argument("--schema", required=True, metavar="FILE", help="the .pg schema file")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser(
        "status",
        parents=[common],
        help="tables, versions, row counts, branches, pending recovery",
        description="Show one branch's snapshot: every table with its row count and pinned "
        "version, the branches, and pending recovery sidecars (exit 3 if any).",
    )
    p.add_argument("uri", metavar="URI")
    p.add_argument("--branch", default="main")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "log",
        parents=[common],
        help="graph commits of a branch, newest first",
        description="Graph commits of a branch's lineage, newest first.",
    )
    p.add_argument("uri", metavar="URI")
    p.add_argument("--branch", default="main")
    p.add_argument("-n", "--limit", type=int, default=None, metavar="N", help="show at most N commits")
    p.set_defaults(func=cmd_log)

    p = sub.add_parser(
        "branch",
        help="create, list or delete branches",
        description="Graph branches (zero-copy: tables fork on first write).",
    )
    bsub = p.add_subparsers(dest="branch_command", metavar="ACTION")
    bsub.required = True
    b = bsub.add_parser("list", parents=[common], help="list branches")
    b.add_argument("uri", metavar="URI")
    b.set_defaults(func=cmd_branch_list)
    b = bsub.add_parser("create", parents=[common], help="create a branch at another branch's head")
    b.add_argument("uri", metavar="URI")
    b.add_argument("name", metavar="NAME")
    b.add_argument(
        "--from", dest="from_branch", default="main", metavar="BRANCH", help="branch to fork from (default: main)"
    )
    b.set_defaults(func=cmd_branch_create)
    b = bsub.add_parser("delete", parents=[common], help="delete a branch (not main)")
    b.add_argument("uri", metavar="URI")
    b.add_argument("name", metavar="NAME")
    b.set_defaults(func=cmd_branch_delete)

    p = sub.add_parser(
        "recover",
        parents=[common],
        help="resolve pending recovery sidecars",
        description="Run the recovery sweep (what the engine does when it opens a graph): "
        "roll each interrupted commit forward or back. Exit 3 if sidecars remain.",
    )
    p.add_argument("uri", metavar="URI")
    p.add_argument(
        "--roll-forward-only",
        action="store_true",
        help="only roll forward; defer rollbacks (what a writer does before it commits)",
    )
    p.set_defaults(func=cmd_recover)


# -- init -------------------------------------------------------------------------------------


def cmd_init(args, out: Output) -> int:
    with open(args.schema, encoding="utf-8") as f:
        text = f.read()
    g = Graph.init(args.uri, text)
    snap = g.snapshot()
    genesis = g.log()[-1]
    data = {
        "root": g.root,
        "branch": snap.branch,
        "version": snap.version,
        "commit_id": genesis.graph_commit_id,
        "tables": sorted(snap.tables),
    }

    def human(d) -> list[str]:
        return [
            f"initialised graph {d['root']} (graph v{d['version']}, commit {d['commit_id']})",
            f"tables: {', '.join(d['tables'])}",
        ]

    out.emit(data, human)
    return 0


# -- status -----------------------------------------------------------------------------------


def _table_order(key: str):
    return (not key.startswith("node:"), key)


def status_data(g: Graph, branch: str) -> dict:
    st = g.status(branch)
    head = g.log(st["branch"])
    st["head_commit"] = head[-1].graph_commit_id if head else None
    st["total_rows"] = sum(t["row_count"] for t in st["tables"].values())
    st["tables"] = {k: st["tables"][k] for k in sorted(st["tables"], key=_table_order)}
    return st


def cmd_status(args, out: Output) -> int:
    g = Graph.open(args.uri)
    data = status_data(g, args.branch)

    def human(d) -> list[str]:
        lines = [
            f"graph {d['root']}",
            f"branch {d['branch']} at graph v{d['version']}, head commit {d['head_commit'] or '-'}",
            "",
        ]
        rows = [(k, t["row_count"], t["version"], t["branch"], t["path"]) for k, t in d["tables"].items()]
        lines += table(rows, ["TABLE", "ROWS", "VERSION", "LINEAGE", "PATH"], "lrrll")
        lines += ["", f"branches: {', '.join(d['branches'])}"]
        if d["pending_sidecars"]:
            lines.append(f"pending recovery sidecars ({len(d['pending_sidecars'])}):")
            lines += [f"  {p}" for p in d["pending_sidecars"]]
            lines.append(f"run `omnigraph-spark recover {args.uri}` to resolve them")
        else:
            lines.append("pending recovery sidecars: none")
        return lines

    out.emit(data, human)
    return EXIT_RECOVERY_PENDING if data["pending_sidecars"] else 0


# -- log --------------------------------------------------------------------------------------


def cmd_log(args, out: Output) -> int:
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be >= 1")
    g = Graph.open(args.uri)
    commits = list(reversed(g.log(args.branch)))
    if args.limit:
        commits = commits[: args.limit]
    data = [
        {
            "commit_id": c.graph_commit_id,
            "branch": c.branch,
            "version": c.manifest_version,
            "parent": c.parent_commit_id,
            "merged_parent": c.merged_parent_commit_id,
            "created_at": us_to_iso(c.created_at_us),
            "created_at_us": c.created_at_us,
            "actor": c.actor_id,
        }
        for c in commits
    ]

    def human(d) -> list[str]:
        rows = [(c["commit_id"], c["version"], c["branch"], c["created_at"], c["actor"]) for c in d]
        return table(rows, ["COMMIT", "VERSION", "BRANCH", "CREATED (UTC)", "ACTOR"], "lrlll")

    out.emit(data, human)
    return 0


# -- branch -----------------------------------------------------------------------------------


def cmd_branch_list(args, out: Output) -> int:
    g = Graph.open(args.uri)
    data = []
    for b in g.branches():
        snap = g.snapshot(b)
        data.append(
            {
                "branch": b,
                "version": snap.version,
                "owned_tables": sorted(k for k, t in snap.tables.items() if t.branch == b),
            }
        )

    def human(d) -> list[str]:
        return table(
            [(x["branch"], x["version"], len(x["owned_tables"])) for x in d],
            ["BRANCH", "GRAPH VERSION", "OWNED TABLES"],
            "lrr",
        )

    out.emit(data, human)
    return 0


def cmd_branch_create(args, out: Output) -> int:
    g = Graph.open(args.uri)
    g.create_branch(args.name, args.from_branch)
    snap = g.snapshot(args.name)
    data = {"branch": snap.branch, "from": args.from_branch, "version": snap.version}
    out.emit(data, lambda d: [f"created branch {d['branch']} from {d['from']} (graph v{d['version']})"])
    return 0


def cmd_branch_delete(args, out: Output) -> int:
    g = Graph.open(args.uri)
    g.delete_branch(args.name)
    out.emit({"deleted": args.name}, lambda d: [f"deleted branch {d['deleted']}"])
    return 0


# -- recover ----------------------------------------------------------------------------------


def cmd_recover(args, out: Output) -> int:
    g = Graph.open(args.uri)
    before = g.pending_sidecars()
    outcomes = g.recover(mode="roll_forward_only" if args.roll_forward_only else "full") if before else []
    remaining = g.pending_sidecars()
    data = {"pending_before": before, "outcomes": outcomes, "pending_after": remaining}

    def human(d) -> list[str]:
        if not d["pending_before"]:
            return ["nothing to recover: no pending recovery sidecars"]
        lines = table(
            [
                (o.operation_id, o.writer_kind, o.action, ", ".join(f"{t[0]}:{t[1]}" for t in o.tables))
                for o in d["outcomes"]
            ],
            ["OPERATION", "WRITER", "ACTION", "TABLES"],
        )
        lines.append(
            f"{len(d['pending_after'])} sidecar(s) still pending"
            if d["pending_after"]
            else "recovered: no pending sidecars left"
        )
        return lines

    out.emit(data, human)
    return EXIT_RECOVERY_PENDING if remaining else 0
