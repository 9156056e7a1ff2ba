"""The graph store's scale constants, measured through the store API (no Spark): what the cost
model in docs/scale.md is built from.

Sections (``--sections``, default all):

* ``publish``: one commit of ``--fragments`` staged fragments (e.g. 10,000 and 20,000) spread
  over ``--tables`` node tables; ``commit_load`` timed on a fresh copy of the staged graph
  (``--repeats``), split into the Lance commits of the tables, the ``__manifest`` publish and the
  commit-graph append; then the ``__manifest`` rows and bytes, each table's Lance manifest
  bytes (per fragment), and the time to open the snapshot and list every table's fragments
  (what a read plans from).
* ``history``: ``--commits`` small commits (each appends one fragment to two of ``--tables``
  tables, in turn, as a node + edge load does) on one graph; at each ``--checkpoints`` value:
  the time of a commit, of ``Graph.open`` + ``snapshot()`` and of reading the commit log, and
  the sizes of ``__manifest`` (rows, bytes, Lance fragments, versions) and
  ``_graph_commits.lance``; then one ``optimize`` and the same again.
* ``tables``: ``Graph.open`` + ``snapshot()`` and opening every table, for graphs of
  ``--table-counts`` tables.
* ``rows``: ``Graph.open`` + ``snapshot()`` against the rows of a compacted ``__manifest``
  (``--manifest-rows``, e.g. the 20,000 version rows of 10,000 two-table commits): the rows are
  published at once, as one fragment, as version rows of ``--tables`` tables (the Lance versions
  they name are not written: a snapshot open reads only the manifest).
* ``indexes``: the index step of a load (invariant I23) on tables of ``--index-nodes`` Item
  nodes (``id`` and a ``@key`` string ``item-%010d``) and three times as many edges (ULID
  ``id``, ``src``, ``dst``), written as Lance datasets in fragments of
  ``--index-fragment-rows`` rows (default 1M, a load's largest data file): the node
  table's BTree + INVERTED and the edge table's three BTrees built from scratch, each table
  alone and both at once (as a ``write_graph`` load does), in parts (``IndexJob.split``, the
  connector's build) and whole (one part per index, Lance's default parameters) in turn,
  ``--repeats`` times, the order of the two alternating. Per build: wall seconds, the child
  processes' CPU seconds and each child's peak RSS (VmHWM).

    .venv/bin/python -m benchmarks.store_scale --out benchmarks/out/store-scale.json
    .venv/bin/python -m benchmarks.store_scale --sections publish --fragments 10000,20000 --tables 10
    .venv/bin/python -m benchmarks.store_scale --sections indexes --index-nodes 1000000,2500000 --repeats 2

Results go to ``--out`` as JSON and a ``.md`` beside it; the machine may be shared, so the
load average is recorded at each section's start and end.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("benchmarks.store_scale")


# -- pure parts (tests/benchmarks/test_scale_bench.py) ----------------------------------------


def spread(total: int, parts: int) -> list[int]:
    """``total`` split over ``parts`` as evenly as possible (the first ones get the remainder)."""
    if parts < 1 or total < 0:
        raise ValueError(f"cannot spread {total} over {parts}")
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


def schema_of(tables: int) -> str:
    """A schema of ``tables`` node types ``T0`` ..; with two or more, edge types between
    consecutive pairs are not needed: every table is a node table (the store treats both alike)."""
    return "\n".join(f"node T{i} {{\n    name: String @key\n    qty: I64?\n}}" for i in range(tables))


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Least-squares ``y = a + b x``: intercept ``a`` and slope ``b``."""
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        raise ValueError("a line needs two distinct x values")
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"intercept": my - b * mx, "slope": b}


def tables_touched(commit: int, tables: int) -> list[int]:
    """The two tables the ``commit``-th history commit appends to (round robin)."""
    return sorted({(2 * commit) % tables, (2 * commit + 1) % tables})


# -- helpers --------------------------------------------------------------------------------------


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    xs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs)


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _batch(schema, start: int, n: int):
    import numpy as np
    import pyarrow as pa

    names = pa.array(np.char.add("k", np.arange(start, start + n).astype(str)))
    cols = {"id": names, "name": names, "qty": pa.array(np.arange(n), pa.int64())}
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def _stage(g, key: str, start: int, fragments: int, rows_per_fragment: int):
    from omnigraph_spark.store import writes

    target = writes.prepare_target(g, "main", key, "append", max_rows_per_file=rows_per_fragment)
    n = fragments * rows_per_fragment
    chunk = max(rows_per_fragment, 65536 // rows_per_fragment * rows_per_fragment)
    return writes.stage(target, (_batch(target.schema, start + s, min(chunk, n - s)) for s in range(0, n, chunk)))


class Phases:
    """Wall time of the commit's steps, by wrapping the store functions ``commit_load`` calls
    (Lance commit per table, manifest publish, commit-graph append) for one ``with`` block."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def timing(self) -> Iterator[Phases]:
        from omnigraph_spark.store import commits, manifest, tables

        wrapped = [
            (tables, "commit_operation", "lance_commits"),
            (manifest, "publish", "manifest_publish"),
            (commits, "append", "commit_graph_append"),
        ]
        saved = [(mod, name, getattr(mod, name)) for mod, name, _ in wrapped]
        for mod, name, label in wrapped:
            setattr(mod, name, self._wrap(getattr(mod, name), label))
        try:
            yield self
        finally:
            for mod, name, fn in saved:
                setattr(mod, name, fn)

    def _wrap(self, fn, label: str):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t0

        return timed


def _manifest_stats(root: Path) -> dict[str, Any]:
    import lance

    ds = lance.dataset(str(root / "__manifest"))
    commits = lance.dataset(str(root / "_graph_commits.lance"))
    m_bytes = _dir_bytes(root / "__manifest")
    data_bytes = _dir_bytes(root / "__manifest" / "data") if (root / "__manifest" / "data").exists() else 0
    return {
        "manifest_rows": ds.count_rows(),
        "manifest_fragments": len(ds.get_fragments()),
        "manifest_versions": len(ds.versions()),
        "manifest_bytes": m_bytes,
        "manifest_data_bytes": data_bytes,
        "commit_rows": commits.count_rows(),
        "commit_fragments": len(commits.get_fragments()),
        "commit_bytes": _dir_bytes(root / "_graph_commits.lance"),
    }


def _latest_lance_manifest_bytes(table_dir: Path) -> int:
    vs = sorted((table_dir / "_versions").glob("*.manifest"), key=lambda p: p.stat().st_mtime)
    return vs[-1].stat().st_size if vs else 0


def _open_cost(root: str, repeats: int) -> dict[str, float]:
    from omnigraph_spark import Graph

    def snap():
        return Graph.open(root).snapshot()

    def plan():
        g = Graph.open(root)
        s = g.snapshot()
        return sum(len(g.open_table(k, s).get_fragments()) for k in s.tables)

    return {
        "open_snapshot_s": round(_median_time(snap, repeats), 4),
        "open_snapshot_and_list_fragments_s": round(_median_time(plan, repeats), 4),
    }


# -- sections --------------------------------------------------------------------------------------


def bench_publish(
    work: Path, fragments: Sequence[int], tables: int, rows_per_fragment: int, repeats: int
) -> list[dict[str, Any]]:
    from omnigraph_spark import Graph
    from omnigraph_spark.store import writes

    out = []
    for total in fragments:
        root = work / f"publish-{total}"
        g = Graph.init(str(root), schema_of(tables))
        t0 = time.perf_counter()
        staged = [_stage(g, f"node:T{i}", 0, n, rows_per_fragment) for i, n in enumerate(spread(total, tables))]
        stage_s = time.perf_counter() - t0
        runs, phases = [], []
        for r in range(repeats):
            dst = work / f"publish-{total}-run{r}"
            shutil.copytree(root, dst)
            gc = Graph.open(str(dst))
            st = [dataclasses.replace(s, stage_uri=s.stage_uri.replace(str(root), str(dst), 1)) for s in staged]
            ph = Phases()
            with ph.timing():
                t0 = time.perf_counter()
                writes.commit_load(gc, "main", st)
                runs.append(time.perf_counter() - t0)
            phases.append(ph.seconds)
            if r < repeats - 1:
                shutil.rmtree(dst)
        snap = Graph.open(str(dst)).snapshot()
        lance_manifest = [
            _latest_lance_manifest_bytes(dst / snap.table(f"node:T{i}").table_path) for i in range(tables)
        ]
        row = {
            "fragments": total,
            "tables": tables,
            "rows": total * rows_per_fragment,
            "stage_s": round(stage_s, 1),
            "commit_load_s_median": round(statistics.median(runs), 3),
            "commit_load_s": [round(x, 3) for x in runs],
            "phases_s_median": {
                k: round(statistics.median(p.get(k, 0.0) for p in phases), 3)
                for k in ("lance_commits", "manifest_publish", "commit_graph_append")
            },
            "lance_manifest_bytes_per_table": lance_manifest,
            "lance_manifest_bytes_per_fragment": round(sum(lance_manifest) / total, 1),
            **_manifest_stats(dst),
            **_open_cost(str(dst), repeats),
        }
        out.append(row)
        log.info(
            "publish %d fragments over %d tables: commit_load %.3f s %s",
            total,
            tables,
            row["commit_load_s_median"],
            row["phases_s_median"],
        )
        shutil.rmtree(dst, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    return out


def bench_history(work: Path, commits: int, checkpoints: Sequence[int], tables: int, repeats: int) -> dict[str, Any]:
    from omnigraph_spark import Graph
    from omnigraph_spark.store import writes

    root = work / "history"
    g = Graph.init(str(root), schema_of(tables))
    points, recent = [], []
    marks = sorted(set(c for c in checkpoints if c <= commits) | {commits})
    for c in range(1, commits + 1):
        staged = [_stage(g, f"node:T{i}", c * 10, 1, 10) for i in tables_touched(c, tables)]
        t0 = time.perf_counter()
        writes.commit_load(g, "main", staged)
        recent = (recent + [time.perf_counter() - t0])[-10:]
        if c in marks:
            p = {
                "commits": c,
                "commit_s_median_last_10": round(statistics.median(recent), 4),
                **_manifest_stats(root),
                **_open_cost(str(root), repeats),
                "log_s": round(_median_time(lambda: Graph.open(str(root)).log(), repeats), 4),
            }
            points.append(p)
            log.info("history at %d commits: %s", c, p)
    t0 = time.perf_counter()
    Graph.open(str(root)).optimize()
    opt_s = time.perf_counter() - t0
    after = {
        "commits": commits,
        "optimize_s": round(opt_s, 2),
        **_manifest_stats(root),
        **_open_cost(str(root), repeats),
        "log_s": round(_median_time(lambda: Graph.open(str(root)).log(), repeats), 4),
    }
    staged = [_stage(g, f"node:T{i}", 10**9, 1, 10) for i in tables_touched(0, tables)]
    t0 = time.perf_counter()
    writes.commit_load(Graph.open(str(root)), "main", staged)
    after["commit_s_after_optimize"] = round(time.perf_counter() - t0, 4)
    log.info("history after optimize: %s", after)
    fits: dict[str, Any] = {}
    if len(points) >= 2:
        xs = [p["manifest_rows"] for p in points]
        for k in ("open_snapshot_s", "commit_s_median_last_10", "manifest_bytes", "manifest_data_bytes"):
            fits[f"{k}_per_manifest_row"] = fit_line(xs, [p[k] for p in points])
        fits["commit_bytes_per_commit"] = fit_line(
            [p["commit_rows"] for p in points], [p["commit_bytes"] for p in points]
        )
        fits["log_s_per_commit"] = fit_line([p["commit_rows"] for p in points], [p["log_s"] for p in points])
    shutil.rmtree(root, ignore_errors=True)
    return {"tables": tables, "tables_per_commit": 2, "points": points, "after_optimize": after, "fits": fits}


def bench_tables(work: Path, counts: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    from omnigraph_spark import Graph

    out = []
    for n in counts:
        root = work / f"tables-{n}"
        t0 = time.perf_counter()
        Graph.init(str(root), schema_of(n))
        init_s = time.perf_counter() - t0
        row = {
            "tables": n,
            "init_s": round(init_s, 2),
            **_open_cost(str(root), repeats),
            "manifest_rows": _manifest_stats(root)["manifest_rows"],
        }
        out.append(row)
        log.info("tables %d: %s", n, row)
        shutil.rmtree(root, ignore_errors=True)
    return out


def bench_rows(work: Path, counts: Sequence[int], tables: int, repeats: int) -> list[dict[str, Any]]:
    import lance

    from omnigraph_spark import Graph
    from omnigraph_spark.store import manifest

    out = []
    for n in counts:
        root = work / f"rows-{n}"
        Graph.init(str(root), schema_of(tables))
        rows = lance.dataset(str(root / "__manifest")).to_table().to_pylist()
        meta = {r["table_key"]: r["metadata"] for r in rows if r["object_type"] == manifest.OBJ_VERSION}
        have = len(rows)
        updates = [
            manifest.TableUpdate(f"node:T{i % tables}", 2 + i // tables, None, 10, meta[f"node:T{i % tables}"])
            for i in range(max(0, n - have))
        ]
        t0 = time.perf_counter()
        manifest.publish(str(root), "main", updates, {})
        pub_s = time.perf_counter() - t0
        st = _manifest_stats(root)
        row = {
            "manifest_rows": st["manifest_rows"],
            "manifest_fragments": st["manifest_fragments"],
            "publish_s": round(pub_s, 3),
            "manifest_data_bytes": st["manifest_data_bytes"],
            "data_bytes_per_row": round(st["manifest_data_bytes"] / st["manifest_rows"], 1),
            "open_snapshot_s": round(_median_time(lambda root=root: Graph.open(str(root)).snapshot(), repeats), 4),
        }
        out.append(row)
        log.info("rows %d: %s", n, row)
        shutil.rmtree(root, ignore_errors=True)
    return out


def _index_tables(work: Path, nodes: int, per_fragment: int) -> dict[str, str]:
    """A node and an edge table (Lance datasets, fragments of ``per_fragment`` rows) for
    ``bench_indexes``."""
    import lance
    import numpy as np
    import pyarrow as pa

    from omnigraph_spark.ingest.convert import fresh_ids

    def keys(i) -> pa.Array:
        return pa.array(np.char.add("item-", np.char.zfill(i.astype(str), 10)))

    def node_batches():
        for lo in range(0, nodes, per_fragment):
            k = keys(np.arange(lo, min(nodes, lo + per_fragment)))
            yield pa.record_batch({"id": k, "name": k})

    def edge_batches():
        for lo in range(0, 3 * nodes, per_fragment):
            i = np.arange(lo, min(3 * nodes, lo + per_fragment))
            yield pa.record_batch({"id": fresh_ids(len(i)), "src": keys(i // 3), "dst": keys((i * 7919 + 1) % nodes)})

    out = {}
    for name, gen in (("nodes", node_batches), ("edges", edge_batches)):
        first = next(gen())
        uri = str(work / f"index-{nodes}-{name}")
        lance.write_dataset(pa.RecordBatchReader.from_batches(first.schema, gen()), uri, max_rows_per_file=per_fragment)
        out[name] = uri
    return out


def _index_job(uri: str, split: bool):
    import lance

    from omnigraph_spark.store import indexes

    specs = {
        "nodes": (indexes.IndexSpec("id", indexes.BTREE), indexes.IndexSpec("name", indexes.INVERTED)),
        "edges": tuple(indexes.IndexSpec(c, indexes.BTREE) for c in ("id", "src", "dst")),
    }["nodes" if uri.endswith("nodes") else "edges"]
    ds = lance.dataset(uri)
    return indexes.IndexJob(uri, None, ds.version, tuple(indexes.plan(ds, specs)), split=split)


def bench_indexes(work: Path, sizes: Sequence[int], per_fragment: int, repeats: int) -> list[dict[str, Any]]:
    import resource
    from concurrent.futures import ThreadPoolExecutor

    from omnigraph_spark.store import indexes

    out = []
    for nodes in sizes:
        t0 = time.perf_counter()
        uris = _index_tables(work, nodes, per_fragment)
        row: dict[str, Any] = {
            "nodes": nodes,
            "edges": 3 * nodes,
            "fragment_rows": per_fragment,
            "write_s": round(time.perf_counter() - t0, 1),
        }
        runs: dict[str, list[dict[str, Any]]] = {}
        for r in range(repeats):
            # alternate the order of the two builds between repeats
            for mode in ("parts", "whole") if r % 2 == 0 else ("whole", "parts"):
                for which in ("nodes", "edges", "both"):
                    jobs = [
                        _index_job(uris[t], mode == "parts")
                        for t in (("nodes", "edges") if which == "both" else (which,))
                    ]
                    l0 = _load()
                    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = time.perf_counter()
                    with ThreadPoolExecutor(len(jobs)) as ex:
                        built = list(ex.map(indexes.build, jobs))
                    wall = time.perf_counter() - t0
                    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    got = {
                        "wall_s": round(wall, 2),
                        # the child processes' CPU seconds: steadier than wall time on a shared machine
                        "child_cpu_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
                        "child_peak_mb": [b.child_peak_mb for b in built],
                        "segments": sum(len(b.segments) for b in built),
                        "load": [l0, _load()],
                    }
                    runs.setdefault(f"{mode}_{which}", []).append(got)
                    log.info("indexes %d nodes, %s %s: %s", nodes, mode, which, got)
                    for u in uris.values():
                        shutil.rmtree(Path(u) / "_indices", ignore_errors=True)  # uncommitted segments
        row["runs"] = runs
        row["median_wall_s"] = {k: round(statistics.median(x["wall_s"] for x in v), 2) for k, v in runs.items()}
        row["median_child_cpu_s"] = {
            k: round(statistics.median(x["child_cpu_s"] for x in v), 2) for k, v in runs.items()
        }
        row["max_child_peak_mb"] = {
            k: max(max(p for p in x["child_peak_mb"] if p is not None) for x in v) for k, v in runs.items()
        }
        out.append(row)
        for u in uris.values():
            shutil.rmtree(u, ignore_errors=True)
    return out


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Store scale constants ({r['date']})",
        "",
        f"`{r['command']}`",
        "",
        f"Machine: {r['machine']}; load average {r['load_start']} at start, {r['load_end']} at end.",
        "",
    ]
    if r.get("publish"):
        lines += [
            "## One commit of many fragments",
            "",
            (
                "| fragments | tables | commit_load (s) | Lance commits (s) | manifest publish (s) | commit-graph "
                "append (s) | __manifest rows | __manifest bytes | Lance manifest bytes/fragment | open snapshot (s) "
                "| open + list fragments (s) |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in r["publish"]:
            ph = p["phases_s_median"]
            lines.append(
                f"| {p['fragments']:,} | {p['tables']} | {p['commit_load_s_median']} | {ph['lance_commits']} "
                f"| {ph['manifest_publish']} | {ph['commit_graph_append']} | {p['manifest_rows']} "
                f"| {p['manifest_bytes']:,} | {p['lance_manifest_bytes_per_fragment']} "
                f"| {p['open_snapshot_s']} | {p['open_snapshot_and_list_fragments_s']} |"
            )
    h = r.get("history")
    if h:
        lines += [
            "",
            f"## History: commits of 2 of {h['tables']} tables each",
            "",
            (
                "| commits | commit (s, median of last 10) | open snapshot (s) | open + list fragments (s) | log (s) "
                "| __manifest rows | fragments | versions | bytes | _graph_commits rows | bytes |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in h["points"] + [
            dict(
                h["after_optimize"],
                commits=f"{h['after_optimize']['commits']} + optimize",
                commit_s_median_last_10=h["after_optimize"]["commit_s_after_optimize"],
            )
        ]:
            lines.append(
                f"| {p['commits']} | {p['commit_s_median_last_10']} | {p['open_snapshot_s']} "
                f"| {p['open_snapshot_and_list_fragments_s']} | {p['log_s']} | {p['manifest_rows']:,} "
                f"| {p['manifest_fragments']} | {p['manifest_versions']} | {p['manifest_bytes']:,} "
                f"| {p['commit_rows']:,} | {p['commit_bytes']:,} |"
            )
        lines += [
            "",
            f"optimize: {h['after_optimize']['optimize_s']} s. Fits (y = intercept + slope x):",
            "",
            "```",
            json.dumps(h["fits"], indent=1),
            "```",
        ]
    if r.get("tables"):
        lines += [
            "",
            "## Snapshot open vs tables",
            "",
            "| tables | open snapshot (s) | open + every table (s) |",
            "|---|---|---|",
        ]
        for p in r["tables"]:
            lines.append(f"| {p['tables']} | {p['open_snapshot_s']} | {p['open_snapshot_and_list_fragments_s']} |")
    if r.get("rows"):
        lines += [
            "",
            "## Snapshot open vs rows of a compacted __manifest",
            "",
            "| __manifest rows | fragments | data bytes per row | open snapshot (s) |",
            "|---|---|---|---|",
        ]
        for p in r["rows"]:
            lines.append(
                f"| {p['manifest_rows']:,} | {p['manifest_fragments']} | {p['data_bytes_per_row']} "
                f"| {p['open_snapshot_s']} |"
            )
    if r.get("indexes"):
        lines += [
            "",
            "## The index step of a load: in parts vs whole",
            "",
            (
                "| nodes + edges | build | wall (s): nodes, edges, both | child CPU (s): nodes, edges, both "
                "| child peak MB: nodes, edges, both |"
            ),
            "|---|---|---|---|---|",
        ]
        for p in r["indexes"]:
            w, c, m = p["median_wall_s"], p["median_child_cpu_s"], p["max_child_peak_mb"]
            for mode in ("whole", "parts"):
                cells = [", ".join(str(x[f"{mode}_{t}"]) for t in ("nodes", "edges", "both")) for x in (w, c, m)]
                lines.append(f"| {p['nodes']:,} + {p['edges']:,} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", default="publish,history,tables,rows")
    p.add_argument("--fragments", default="10000,20000", help="publish: staged fragments per commit")
    p.add_argument("--tables", type=int, default=10, help="publish and history: tables in the graph")
    p.add_argument("--rows-per-fragment", type=int, default=10)
    p.add_argument("--commits", type=int, default=1000, help="history: commits")
    p.add_argument("--checkpoints", default="10,100,300,1000", help="history: measure after these commits")
    p.add_argument("--table-counts", default="1,10,100", help="tables: graphs of these many tables")
    p.add_argument("--manifest-rows", default="1000,10000,100000", help="rows: compacted __manifest sizes")
    p.add_argument("--index-nodes", default="1000000,2500000", help="indexes: node rows (edges: three times)")
    p.add_argument("--index-fragment-rows", type=int, default=1 << 20, help="indexes: rows per fragment")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    import platform

    import lance

    sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    ints = lambda s: [int(x) for x in s.split(",") if x.strip()]  # noqa: E731
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["store_scale"] + list(argv if argv is not None else os.sys.argv[1:])),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "pylance": lance.__version__},
        "load_start": _load(),
        "load_per_section": {},
    }
    with tempfile.TemporaryDirectory(prefix="store-scale-", dir=a.work) as d:
        work = Path(d)
        for s in sections:
            l0 = _load()
            if s == "publish":
                res["publish"] = bench_publish(work, ints(a.fragments), a.tables, a.rows_per_fragment, a.repeats)
            elif s == "history":
                res["history"] = bench_history(work, a.commits, ints(a.checkpoints), a.tables, a.repeats)
            elif s == "rows":
                res["rows"] = bench_rows(work, ints(a.manifest_rows), a.tables, a.repeats)
            elif s == "indexes":
                res["indexes"] = bench_indexes(work, ints(a.index_nodes), a.index_fragment_rows, a.repeats)
            elif s == "tables":
                res["tables"] = bench_tables(work, ints(a.table_counts), a.repeats)
            else:
                raise SystemExit(f"unknown section {s!r}")
            res["load_per_section"][s] = [l0, _load()]
    res["load_end"] = _load()
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=2))
        Path(a.out).with_suffix(".md").write_text(markdown(res))
    print(markdown(res))
    return res


if __name__ == "__main__":
    main()
