"""``read_graph``: every node and edge table of ONE snapshot as Spark DataFrames.

Why one snapshot: reading types one by one at each branch head could mix versions if a writer
commits in between (edges pointing at nodes the node read does not have yet). ``read_graph``
resolves the snapshot once, on the driver, and reads every type at that manifest version, so
all DataFrames (and every later action on them) see the same graph state.

Example::

    g = read_graph(spark, "/data/graph")
    g.nodes["Person"].show()
    from graphframes import GraphFrame
    gf = GraphFrame(g.vertices(), g.edges_df())
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..graph import Graph, Snapshot
from ..store.layout import MAIN
from .jvm_read import ShimSession, load_table

log = logging.getLogger(__name__)

ID_SEPARATOR = ":"


@dataclass(frozen=True)
class GraphFrames:
    """The DataFrames of one snapshot. ``nodes``/``edges`` map type names to full tables."""

    snapshot: Snapshot
    nodes: Mapping[str, DataFrame]
    edges: Mapping[str, DataFrame]
    edge_endpoints: Mapping[str, tuple]  # edge type -> (from node type, to node type)

    def vertices(self, qualify_ids: bool = False) -> DataFrame:
        """All nodes as one ``(id, type)`` DataFrame (the shape GraphFrames expects).

        Node ids are unique per type only; with ``qualify_ids`` they become ``Type:id`` (and
        :meth:`edges_df` must then be called with ``qualify_ids=True`` too)."""
        spark = SparkSession.active()
        frames = []
        for name in sorted(self.nodes):
            idc = F.concat(F.lit(name + ID_SEPARATOR), F.col("id")) if qualify_ids else F.col("id")
            frames.append(self.nodes[name].select(idc.alias("id"), F.lit(name).alias("type")))
        return _union(spark, frames, "id STRING, type STRING")

    def edges_df(self, qualify_ids: bool = False) -> DataFrame:
        """All edges as one ``(src, dst, id, type)`` DataFrame."""
        spark = SparkSession.active()
        frames = []
        for name in sorted(self.edges):
            src, dst = F.col("src"), F.col("dst")
            if qualify_ids:
                f, t = self.edge_endpoints[name]
                src = F.concat(F.lit(f + ID_SEPARATOR), src)
                dst = F.concat(F.lit(t + ID_SEPARATOR), dst)
            frames.append(
                self.edges[name].select(src.alias("src"), dst.alias("dst"), F.col("id"), F.lit(name).alias("type"))
            )
        return _union(spark, frames, "src STRING, dst STRING, id STRING, type STRING")


def _union(spark: SparkSession, frames, empty_schema: str) -> DataFrame:
    if not frames:
        return spark.createDataFrame([], empty_schema)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def read_graph(
    spark: SparkSession,
    uri: str,
    branch: str = MAIN,
    version: int | None = None,
    commit: str | None = None,
    timestamp: None | str | dt.datetime = None,
    storage_options: dict[str, str] | None = None,
    engine: str = "auto",
) -> GraphFrames:
    """Driver: resolve one snapshot (head of ``branch``, a manifest ``version``, a graph
    ``commit`` id, or the latest commit at or before ``timestamp``) and return every type at
    it. Nothing is read until an action runs; every action reads the same pinned versions.

    ``engine`` picks each table's scan as in :func:`~omnigraph_spark.spark.jvm_read.read_table`
    (``auto``: the JVM path for the tables it can read).

    Raises:
        GraphNotFoundError, CommitNotFoundError, BranchNotFoundError, OptionError,
        JvmReadUnavailableError (``engine="jvm"`` only).
    """
    graph = Graph.open(uri, storage_options)
    shim = ShimSession(spark)  # the JVM path's probe and parallelism: asked once for every table
    snap = graph.snapshot(branch, version, commit=commit, timestamp=timestamp)
    for path in graph.pending_sidecars():
        log.warning("graph %s has a pending recovery sidecar %s: reading the published snapshot only", graph.root, path)

    def load(key: str) -> DataFrame:
        return load_table(
            spark, graph, snap, graph.catalog.resolve(key), storage_options=storage_options, engine=engine, shim=shim
        )

    cat = graph.catalog
    nodes = {n: load(f"node:{n}") for n in sorted(cat.nodes)}
    edges = {e: load(f"edge:{e}") for e in sorted(cat.edges)}
    ends = {e: (cat.edges[e].from_type, cat.edges[e].to_type) for e in cat.edges}
    log.info(
        "read_graph %s: branch %s manifest v%d (commit %s), %d node and %d edge types",
        graph.root,
        snap.branch,
        snap.version,
        snap.commit_id,
        len(nodes),
        len(edges),
    )
    return GraphFrames(snap, nodes, edges, ends)


__all__ = ["read_graph", "GraphFrames"]
