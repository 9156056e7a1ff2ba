"""Shared pieces of the interop suite: our store-level JSONL load, row normalisation to the
engine's export shape, and raw reads of the datasets both sides write."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import lance
import pyarrow as pa

from omnigraph_spark import Graph
from omnigraph_spark.ingest.jsonl import parse_record, records_to_batch
from omnigraph_spark.spark.graph_io import iter_json_values
from omnigraph_spark.store import commits as _commits
from omnigraph_spark.store import writes

FIXTURE_NAMES = ("test", "search", "signals")

#: Parameters for every query of the fixture .gq files (ours: test.gq and search.gq come from
#: the engine's fixtures; signals has none, so SIGNALS_GQ below is written here).
QUERY_PARAMS: dict[str, dict[str, dict]] = {
    "test": {
        "get_person": {"name": "Alice"},
        "adults": {},
        "friends_of": {"name": "Alice"},
        "employees_of": {"company": "Acme"},
        "friends_of_friends": {"name": "Alice"},
        "unemployed": {},
        "friend_counts": {},
        "top_by_age": {},
        "total_people": {},
        "age_stats": {},
        "top_connected": {},
    },
    "search": {
        "text_search": {"q": "learning"},
        "fuzzy_search": {"q": "lerning"},
        "phrase_search": {"q": "machine learning"},
        "vector_search": {"q": [0.1, 0.2, 0.3, 0.4]},
        "bm25_search": {"q": "learning"},
        "hybrid_search": {"vq": [0.1, 0.2, 0.3, 0.4], "tq": "learning"},
        "rrf_two_fts": {"q": "learning"},
        "rrf_two_vectors": {"q1": [0.1, 0.2, 0.3, 0.4], "q2": [0.5, 0.6, 0.7, 0.8]},
    },
    "signals": {
        "strong_signals": {},
        "mentions_of": {"slug": "cs3"},
        "builders": {},
        "signal_count": {},
        "funded": {},
    },
}

SIGNALS_GQ = """
query strong_signals() {
    match {
        $s: Signal
        $s.strength = "strong"
    }
    return { $s.slug, $s.title, $s.observed }
}

query mentions_of($slug: String) {
    match {
        $t: Tech { slug: $slug }
        $s mentions $t
    }
    return { $s.slug }
}

query builders() {
    match {
        $c: Company
        $c builds $t
    }
    return { $c.name, count($t) as techs }
}

query signal_count() {
    match { $s: Signal }
    return { count($s) as total }
}

query funded() {
    match {
        $a: Company
        $a fundedBy $b
    }
    return { $a.slug, $b.slug }
}
"""


def query_file(fixtures_dir: Path, name: str, tmp_path: Path) -> Path:
    if name == "signals":
        p = tmp_path / "signals.gq"
        p.write_text(SIGNALS_GQ)
        return p
    return fixtures_dir / f"{name}.gq"


# -- our side -------------------------------------------------------------------------------
def read_records(path) -> list[dict]:
    text = Path(path).read_text()
    return [v for _, _, v in iter_json_values(text)]


def store_load_jsonl(graph: Graph, path, mode: str = "append", branch: str = "main", actor: str | None = None):
    """Load an engine-envelope JSONL file with the store-level writer, as ONE commit."""
    per_type: dict[str, tuple[object, list[dict]]] = {}
    for n, value in enumerate(read_records(path), start=1):
        td, rec = parse_record(value, graph.catalog, n)
        per_type.setdefault(td.table_key, (td, []))[1].append(rec)
    staged = []
    for key in sorted(per_type):
        td, recs = per_type[key]
        target = writes.prepare_target(graph, branch, key, mode)
        staged.append(writes.stage(target, [records_to_batch(td, recs, target.schema)]))
    return writes.commit_load(graph, branch, staged, actor=actor)


def _json_ready(tbl: pa.Table) -> pa.Table:
    """Cast temporal columns to the integers the engine's JSON export writes (Date32 -> days,
    Date64 -> ms)."""
    cols, fields = [], []
    for f, c in zip(tbl.schema, tbl.columns):
        if pa.types.is_date32(f.type):
            c, f = c.cast(pa.int32()), pa.field(f.name, pa.int32(), f.nullable)
        elif pa.types.is_date64(f.type):
            c, f = c.cast(pa.int64()), pa.field(f.name, pa.int64(), f.nullable)
        cols.append(c)
        fields.append(f)
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def our_rows(graph: Graph, snapshot=None) -> dict[str, list[dict]]:
    """Every row of every table of a snapshot, in the engine's export shape flattened: nodes
    ``{id, props}``, edges ``{id, src, dst, props}``."""
    snap = snapshot or graph.snapshot()
    out = {}
    for key in sorted(snap.tables):
        out[key] = sort_rows(_json_ready(graph.read_table(key, snap)).to_pylist())
    return out


def export_rows(records: Iterable[dict]) -> dict[str, list[dict]]:
    """The engine's ``omnigraph export`` JSONL, per table key, flattened like ``our_rows``."""
    out: dict[str, list[dict]] = {}
    for r in records:
        if "type" in r:
            out.setdefault(f"node:{r['type']}", []).append(dict(r["data"]))
        else:
            data = dict(r["data"])
            row = {"id": data.pop("id"), "src": r["from"], "dst": r["to"], **data}
            out.setdefault(f"edge:{r['edge']}", []).append(row)
    return {k: sort_rows(v) for k, v in out.items()}


def canon(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=canon)


def without_edge_ids(rows: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Edge ids are fresh ULIDs on both sides: compare edges by their content."""
    return {
        k: sort_rows([{c: v for c, v in r.items() if c != "id"} if k.startswith("edge:") else r for r in rows_])
        for k, rows_ in rows.items()
    }


def nonempty(rows: dict[str, list[dict]]) -> dict[str, list[dict]]:
    return {k: v for k, v in rows.items() if v}


# -- raw datasets ---------------------------------------------------------------------------
def manifest_rows(root: str, branch: str | None = None, version: int | None = None) -> list[dict]:
    ds = lance.dataset(f"{root}/__manifest", version=version)
    if branch:
        ds = ds.checkout_version((branch, None))
    return sorted(ds.to_table().to_pylist(), key=lambda r: r["object_id"])


def manifest_version(root: str) -> int:
    return lance.dataset(f"{root}/__manifest").version


def recovery_audits(root: str) -> list[dict]:
    return _commits.list_recovery_audits(root)


def pending_sidecars(root: str) -> list[str]:
    d = os.path.join(root, "__recovery")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def copy_graph(src: str, dst: str) -> str:
    """Copy a graph root, re-pointing pending sidecars at the copy.

    Sidecars hold full table URIs and the engine heals through them verbatim: left alone, the
    engine would restore the ORIGINAL graph's tables and publish versions the copy lacks
    (docs/interop.md, D5). We localize pins ourselves; the engine does not.
    """
    shutil.copytree(src, dst, symlinks=True)
    rec = os.path.join(dst, "__recovery")
    for name in os.listdir(rec) if os.path.isdir(rec) else []:
        path = os.path.join(rec, name)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(f'"table_path": "{src.rstrip("/")}/', f'"table_path": "{dst.rstrip("/")}/'))
    return dst


def table_dirs(root: str) -> list[str]:
    return sorted(
        f"{kind}/{name}"
        for kind in ("nodes", "edges")
        if os.path.isdir(os.path.join(root, kind))
        for name in os.listdir(os.path.join(root, kind))
    )


def snapshot_tables(snap) -> dict[str, tuple]:
    """Our snapshot in the engine's ``snapshot --json`` terms."""
    return {
        k: (t.table_path, t.version, None if t.branch == "main" else t.branch, t.row_count)
        for k, t in snap.tables.items()
    }


def engine_snapshot_tables(payload: dict) -> dict[str, tuple]:
    return {
        t["table_key"]: (t["table_path"], t["table_version"], t["table_branch"], t["row_count"])
        for t in payload["tables"]
    }


def our_commits(graph: Graph, branch: str = "main") -> dict[str, dict]:
    return {
        c.graph_commit_id: {
            "manifest_branch": c.manifest_branch,
            "manifest_version": c.manifest_version,
            "parent_commit_id": c.parent_commit_id,
            "merged_parent_commit_id": c.merged_parent_commit_id,
            "actor_id": c.actor_id,
            "created_at": c.created_at_us,
        }
        for c in graph.log(branch)
    }


def engine_commits(payload: list[dict]) -> dict[str, dict]:
    return {
        c["graph_commit_id"]: {
            k: c[k]
            for k in (
                "manifest_branch",
                "manifest_version",
                "parent_commit_id",
                "merged_parent_commit_id",
                "actor_id",
                "created_at",
            )
        }
        for c in payload
    }
