"""The commit graph (``_graph_commits.lance``), actors, and the recovery audit dataset (§F).

A graph commit row says "the publish of __manifest version N on branch B happened, after
commit P". Rows are appended after the publish; the head is refreshed right before each append
so commits parent correctly on commits other writers appended.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass

import lance
import pyarrow as pa
from ulid import ULID

from ..errors import CommitNotFoundError
from . import tables
from .layout import MAIN, RootPaths

RECOVERY_ACTOR = "omnigraph:recovery"


def new_ulid() -> str:
    return str(ULID())


def now_us() -> int:
    return time.time_ns() // 1000


def commit_graph_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("graph_commit_id", pa.string(), False),
            pa.field("manifest_branch", pa.string(), True),
            pa.field("manifest_version", pa.uint64(), False),
            pa.field("parent_commit_id", pa.string(), True),
            pa.field("merged_parent_commit_id", pa.string(), True),
            pa.field("created_at", pa.timestamp("us"), False),
        ]
    )


def actor_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("graph_commit_id", pa.string(), False),
            pa.field("actor_id", pa.string(), False),
            pa.field("created_at", pa.timestamp("us"), False),
        ]
    )


def recoveries_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("graph_commit_id", pa.string(), False),
            pa.field("recovery_kind", pa.string(), False),
            pa.field("recovery_for_actor", pa.string(), True),
            pa.field("operation_id", pa.string(), False),
            pa.field("sidecar_writer_kind", pa.string(), False),
            pa.field("per_table_outcomes_json", pa.string(), False),
            pa.field("created_at", pa.timestamp("us"), False),
        ]
    )


@dataclass(frozen=True)
class GraphCommit:
    graph_commit_id: str
    manifest_branch: str | None
    manifest_version: int
    parent_commit_id: str | None
    merged_parent_commit_id: str | None
    created_at_us: int
    actor_id: str | None = None

    @property
    def branch(self) -> str:
        return self.manifest_branch or MAIN


def init(root: str, manifest_version: int, storage_options: dict[str, str] | None = None) -> GraphCommit:
    paths = RootPaths(root)
    genesis = GraphCommit(new_ulid(), None, manifest_version, None, None, now_us())
    tables.write_new(paths.commits, _commit_table([genesis]), storage_options)
    tables.write_new(paths.actors, pa.Table.from_batches([], schema=actor_schema()), storage_options)
    return genesis


def _commit_table(rows: list[GraphCommit]) -> pa.Table:
    return pa.table(
        {
            "graph_commit_id": [r.graph_commit_id for r in rows],
            "manifest_branch": [r.manifest_branch for r in rows],
            "manifest_version": pa.array([r.manifest_version for r in rows], pa.uint64()),
            "parent_commit_id": [r.parent_commit_id for r in rows],
            "merged_parent_commit_id": [r.merged_parent_commit_id for r in rows],
            "created_at": pa.array([r.created_at_us for r in rows], pa.timestamp("us")),
        },
        schema=commit_graph_schema(),
    )


def _open(uri: str, branch: str, storage_options) -> lance.LanceDataset:
    return tables.open_dataset(uri, branch=None if branch == MAIN else branch, storage_options=storage_options)


def _append(ds: lance.LanceDataset, tbl: pa.Table) -> None:
    frags = lance.fragment.write_fragments(tbl, ds, schema=tbl.schema, mode="append")
    # Commit-graph appends may rebase over each other: rows are independent facts.
    lance.LanceDataset.commit(ds, lance.LanceOperation.Append(frags), read_version=ds.version)


def list_commits(
    root: str, branch: str = MAIN, storage_options: dict[str, str] | None = None, with_actors: bool = True
) -> list[GraphCommit]:
    """All commit rows visible on ``branch``'s lineage, oldest first (head order)."""
    paths = RootPaths(root)
    ds = _open(paths.commits, branch, storage_options)
    rows = ds.to_table().to_pylist()
    actors: dict[str, str] = {}
    if with_actors:
        try:
            for a in tables.open_dataset(paths.actors, storage_options=storage_options).to_table().to_pylist():
                actors[a["graph_commit_id"]] = a["actor_id"]
        except Exception:  # actors are optional metadata
            actors = {}
    out = [
        GraphCommit(
            r["graph_commit_id"],
            r["manifest_branch"],
            int(r["manifest_version"]),
            r["parent_commit_id"],
            r["merged_parent_commit_id"],
            _ts_us(r["created_at"]),
            actors.get(r["graph_commit_id"]),
        )
        for r in rows
    ]
    out.sort(key=lambda c: (c.manifest_version, c.created_at_us, c.graph_commit_id))
    return out


def _ts_us(v) -> int:
    if isinstance(v, int):
        return v

    return (
        int((v - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
        if v.tzinfo is None
        else int(v.timestamp() * 1_000_000)
    )


def head(root: str, branch: str = MAIN, storage_options: dict[str, str] | None = None) -> GraphCommit | None:
    commits = list_commits(root, branch, storage_options, with_actors=False)
    return commits[-1] if commits else None


def append(
    root: str,
    branch: str,
    manifest_version: int,
    actor: str | None = None,
    storage_options: dict[str, str] | None = None,
    merged_parent: str | None = None,
) -> GraphCommit:
    """Append a commit row for a publish, parented on the freshly read head (§F.1)."""
    paths = RootPaths(root)
    ds = _open(paths.commits, branch, storage_options)
    parent = head(root, branch, storage_options)
    row = GraphCommit(
        new_ulid(),
        None if branch == MAIN else branch,
        manifest_version,
        parent.graph_commit_id if parent else None,
        merged_parent,
        now_us(),
        actor,
    )
    _append(ds, _commit_table([row]))
    if actor:
        ads = tables.open_dataset(paths.actors, storage_options=storage_options)
        _append(
            ads,
            pa.table(
                {
                    "graph_commit_id": [row.graph_commit_id],
                    "actor_id": [actor],
                    "created_at": pa.array([row.created_at_us], pa.timestamp("us")),
                },
                schema=actor_schema(),
            ),
        )
    return row


def exists(root: str, branch: str, commit_id: str, storage_options: dict[str, str] | None = None) -> bool:
    """Whether ``branch``'s lineage has the commit row ``commit_id`` (one filtered count)."""
    ds = _open(RootPaths(root).commits, branch, storage_options)
    return ds.count_rows(filter="graph_commit_id = '" + commit_id.replace("'", "''") + "'") > 0


def find(root: str, commit_id: str, branches: list[str], storage_options: dict[str, str] | None = None) -> GraphCommit:
    """A commit by id: main's lineage first, then each branch's (§D.5)."""
    for b in [MAIN] + [x for x in branches if x != MAIN]:
        for c in list_commits(root, b, storage_options, with_actors=False):
            if c.graph_commit_id == commit_id:
                return c
    raise CommitNotFoundError(f"commit '{commit_id}' not found", commit=commit_id)


def append_recovery_audit(
    root: str,
    *,
    graph_commit_id: str,
    kind: str,
    actor: str | None,
    operation_id: str,
    writer_kind: str,
    outcomes: list[dict],
    storage_options: dict[str, str] | None = None,
) -> None:
    paths = RootPaths(root)
    tbl = pa.table(
        {
            "graph_commit_id": [graph_commit_id],
            "recovery_kind": [kind],
            "recovery_for_actor": [actor],
            "operation_id": [operation_id],
            "sidecar_writer_kind": [writer_kind],
            "per_table_outcomes_json": [json.dumps(outcomes, separators=(",", ":"))],
            "created_at": pa.array([now_us()], pa.timestamp("us")),
        },
        schema=recoveries_schema(),
    )
    try:
        ds = tables.open_dataset(paths.recoveries, storage_options=storage_options)
    except Exception:
        tables.write_new(paths.recoveries, tbl, storage_options)
        return
    _append(ds, tbl)


def list_recovery_audits(root: str, storage_options: dict[str, str] | None = None) -> list[dict]:
    try:
        ds = tables.open_dataset(RootPaths(root).recoveries, storage_options=storage_options)
    except Exception:
        return []
    return ds.to_table().to_pylist()
