"""The SQL catalog's answers: what the shim's ``OmnigraphCatalog`` asks the bridge (:mod:`.bridge`).

A catalog (``spark.sql.catalog.og = io.omnigraph.spark.OmnigraphCatalog``, option ``root``) holds
graphs as namespaces (``og.social`` is the graph at ``<root>/social``) and a graph's node and
edge types as tables (``og.social.Person``). The JVM class is a shell: every catalog question is
one request answered here, from the graph's schema and store, with the connector's typed errors;
its tables are the ``format("omnigraph")`` provider's, given the options :func:`table` answers.

==================  =============================================================================
request             answer
==================  =============================================================================
``list_graphs``     the graphs under the root (directories holding ``_schema.pg``)
``graph_exists``    whether the namespace names a graph
``list_types``      a graph's node then edge types
``table``           the provider options, column comments and table properties of one type
                    (``og.social.Person``, ``og.social.Person.branch_dev``), at a ``VERSION AS
                    OF`` (a manifest version, a branch or a graph commit id) or ``TIMESTAMP AS OF``
``create_graph``    ``CREATE NAMESPACE ... WITH PROPERTIES ('schema' = '<.pg text>')``
``drop_graph``      ``DROP NAMESPACE``: refuses a graph holding rows or branches unless cascade
``delete_where``    ``DELETE FROM ... WHERE``: the matching rows deleted as ONE graph commit,
                    node deletes cascading to their edges, exactly as ``writeMode=delete``
``procedure``       a procedure's description and parameters (namespace ``system``)
``call``            ``CALL og.system.<procedure>(...)``: optimize, cleanup, recover
==================  =============================================================================

Docs: docs/sql.md.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from ..errors import (
    AlreadyInitializedError,
    BranchNotFoundError,
    GraphNotEmptyError,
    GraphNotFoundError,
    OptionError,
    SqlUnsupportedError,
    UnknownTypeError,
)
from ..graph import Graph
from ..ingest.integrity import delete_keys
from ..schema.catalog import TypeDef
from ..store import lease as _lease
from ..store.fs import RootStorage
from ..store.layout import SCHEMA_PG, RootPaths, normalize_root
from ..store.writes import StagedTable, prepare_target
from . import filters as _filters
from .journal import Journal
from .options import DEFAULT_LEASE_TIMEOUT_S, STORAGE_PREFIX, WriteOptions
from .reader import column_kinds
from .row_level import pin as row_level_pin

log = logging.getLogger(__name__)

#: the requests this module answers (the bridge hands each to :func:`answer`)
OPS = frozenset(
    (
        "list_graphs",
        "graph_exists",
        "list_types",
        "table",
        "table_exists",
        "create_graph",
        "drop_graph",
        "delete_where",
        "row_level_pin",
        "procedure",
        "call",
    )
)
#: the identifier suffix that names a branch: ``og.social.Person.branch_dev``
BRANCH_PREFIX = "branch_"
#: a graph's name under the root: one path segment
_GRAPH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: CREATE NAMESPACE properties: the schema (text or a file), and what Spark adds itself
_CREATE_KEYS = ("schema", "schemaPath")
DROP_ACTOR = "drop_namespace"  # the owner a DROP NAMESPACE's commit lease names
_SPARK_NAMESPACE_KEYS = ("owner",)


@dataclass(frozen=True)
class CatalogOptions:
    """The catalog's own options (``spark.sql.catalog.<name>.<key>``), parsed once per request."""

    root: str
    storage_options: dict[str, str] | None = None
    #: seconds a DROP NAMESPACE waits for the graph's commit lease (the writers' default)
    commit_lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> CatalogOptions:
        root = None
        storage: dict[str, str] = {}
        lease = DEFAULT_LEASE_TIMEOUT_S
        for k, v in options.items():
            if k.lower() == "root":
                root = v
            elif k.lower() == "commitleasetimeout":
                try:
                    lease = float(v)
                except ValueError:
                    lease = -1.0
                if not lease > 0:
                    raise OptionError(
                        f"catalog option 'commitLeaseTimeout' must be a number of seconds > 0, got {v!r}",
                        option=k,
                        value=v,
                    )
            elif k.lower().startswith(STORAGE_PREFIX):
                storage[k[len(STORAGE_PREFIX) :]] = v
            else:
                raise OptionError(
                    f"catalog option '{k}' is unknown (allowed: root, commitLeaseTimeout, {STORAGE_PREFIX}<key>; "
                    "docs/sql.md)",
                    option=k,
                )
        if not root:
            raise OptionError(
                "catalog option 'root' is required: spark.sql.catalog.<name>.root, the directory or bucket "
                "prefix holding the graphs (docs/sql.md)",
                option="root",
            )
        return cls(normalize_root(root), storage or None, lease)

    def graph_uri(self, name: str) -> str:
        return f"{self.root}/{name}"

    def provider_options(self) -> dict[str, str]:
        """The storage options as ``format("omnigraph")`` options."""
        return {STORAGE_PREFIX + k: v for k, v in (self.storage_options or {}).items()}


def _storage(opts: CatalogOptions) -> RootStorage:
    return RootStorage(opts.root, opts.storage_options)


def list_graphs(opts: CatalogOptions) -> list[str]:
    """The graphs under the root: its directories (prefixes) that hold a ``_schema.pg``."""
    st = _storage(opts)
    return [n for n in st.list_subdirs(opts.root) if st.exists(RootPaths(opts.graph_uri(n)).file(SCHEMA_PG))]


def _graph_name(opts: CatalogOptions, namespace: Sequence[str]) -> str:
    """The graph a namespace names; GraphNotFoundError naming the graphs that exist otherwise."""
    if len(namespace) == 1 and _GRAPH_NAME.match(namespace[0]) and namespace[0] not in (".", ".."):
        return namespace[0]
    raise GraphNotFoundError(
        f"namespace '{'.'.join(namespace)}' is not a graph name: a graph is one name under the catalog root "
        f"'{opts.root}' (graphs: {', '.join(list_graphs(opts)) or 'none'})",
        graph=".".join(namespace),
        root=opts.root,
    )


def graph_exists(opts: CatalogOptions, namespace: Sequence[str]) -> bool:
    if len(namespace) != 1 or not _GRAPH_NAME.match(namespace[0]):
        return False
    return _storage(opts).exists(RootPaths(opts.graph_uri(namespace[0])).file(SCHEMA_PG))


def open_graph(opts: CatalogOptions, namespace: Sequence[str]) -> Graph:
    """The graph a namespace names, opened; GraphNotFoundError naming the graphs that exist."""
    name = _graph_name(opts, namespace)
    if not graph_exists(opts, namespace):
        raise GraphNotFoundError(
            f"no graph '{name}' under the catalog root '{opts.root}' "
            f"(graphs: {', '.join(list_graphs(opts)) or 'none'})",
            graph=name,
            root=opts.root,
        )
    return Graph.open(opts.graph_uri(name), opts.storage_options)


def list_types(opts: CatalogOptions, namespace: Sequence[str]) -> list[dict[str, str]]:
    """A graph's node types, then its edge types, each by name."""
    cat = open_graph(opts, namespace).catalog
    return [{"name": n, "kind": "node"} for n in sorted(cat.nodes)] + [
        {"name": e, "kind": "edge"} for e in sorted(cat.edges)
    ]


def _type(graph: Graph, name: str, graph_name: str) -> TypeDef:
    try:
        return graph.catalog.resolve(name)
    except UnknownTypeError:
        cat = graph.catalog
        raise UnknownTypeError(
            f"graph '{graph_name}' has no node or edge type '{name}' (nodes: {', '.join(sorted(cat.nodes)) or 'none'}; "
            f"edges: {', '.join(sorted(cat.edges)) or 'none'})",
            graph=graph_name,
            type=name,
        ) from None


def _branch(graph: Graph, branch: str, graph_name: str) -> str:
    branches = graph.branches()
    if branch not in branches:
        raise BranchNotFoundError(
            f"graph '{graph_name}' has no branch '{branch}' (branches: {', '.join(branches)})",
            graph=graph_name,
            branch=branch,
        )
    return branch


def resolve_identifier(
    opts: CatalogOptions, namespace: Sequence[str], name: str
) -> tuple[Graph, str, TypeDef, str | None]:
    """(graph, graph name, type, branch or None) of ``og.<graph>.<Type>`` or
    ``og.<graph>.<Type>.branch_<name>``; typed errors naming what exists."""
    branch = None
    if len(namespace) == 2 and name.startswith(BRANCH_PREFIX) and len(name) > len(BRANCH_PREFIX):
        namespace, name, branch = namespace[:1], namespace[1], name[len(BRANCH_PREFIX) :]
    graph = open_graph(opts, namespace)
    graph_name = namespace[0]
    typedef = _type(graph, name, graph_name)
    if branch is not None:
        _branch(graph, branch, graph_name)
    return graph, graph_name, typedef, branch


def _annotations(typedef: TypeDef, prop) -> list[str]:
    out = []
    if any(prop.name in k for k in typedef.keys):
        out.append("@key")
    if any(prop.name in u for u in typedef.uniques):
        out.append("@unique")
    if any(prop.name in i for i in typedef.indexes):
        out.append("@index")
    for r in typedef.ranges:
        if r.property == prop.name:
            out.append(f"@range({'' if r.min is None else r.min}..{'' if r.max is None else r.max})")
    for c in typedef.checks:
        if c.property == prop.name:
            out.append(f"@check({c.pattern!r})")
    return out


def column_comments(typedef: TypeDef) -> dict[str, str]:
    """What ``DESCRIBE TABLE`` shows per column: the schema's type (``?``: nullable), its
    annotations, nullability, and for system columns what they hold and how an INSERT fills them."""
    out: dict[str, str] = {}
    if typedef.is_edge:
        out["id"] = "edge id, not null (omit or NULL on INSERT: a fresh ULID)"
        out["src"] = f"edge source: a {typedef.from_type} id, not null"
        out["dst"] = f"edge target: a {typedef.to_type} id, not null"
    elif typedef.key_property:
        out["id"] = f"node id, not null: the @key '{typedef.key_property}' as text (omit or NULL on INSERT)"
    else:
        out["id"] = "node id, not null (omit or NULL on INSERT: a fresh ULID)"
    for p in typedef.properties:
        words = " ".join([p.type.describe(), *_annotations(typedef, p)])
        out[p.name] = f"{words}, {'nullable' if p.type.nullable else 'not null'}"
    return out


def _timestamp_iso(us: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)).isoformat()


def table(
    opts: CatalogOptions,
    namespace: Sequence[str],
    name: str,
    version: str | None = None,
    timestamp_us: int | None = None,
) -> dict[str, Any]:
    """One type as a catalog table: the ``format("omnigraph")`` options that read and write it
    (path, type, branch, ``VERSION AS OF``/``TIMESTAMP AS OF`` as version, branch, commit or
    timestampAsOf), the column comments and the table properties.

    ``VERSION AS OF``: digits are a manifest version, the name of one of the graph's branches
    reads that branch's head, anything else is a graph commit id."""
    graph, graph_name, typedef, branch = resolve_identifier(opts, namespace, name)
    options = {"path": graph.root, "type": typedef.name, **opts.provider_options()}
    if branch is not None:
        options["branch"] = branch
    if version is not None:
        v = version.strip()
        if v.isdigit():
            options["version"] = v
        elif v in graph.branches():
            if branch is not None and branch != v:
                raise OptionError(
                    f"VERSION AS OF '{v}' names a branch but the identifier names branch '{branch}'",
                    option="version",
                    value=v,
                )
            options["branch"] = v
        else:
            options["commit"] = v
    if timestamp_us is not None:
        options["timestampAsOf"] = _timestamp_iso(int(timestamp_us))
    props = {
        "omnigraph.graph": graph_name,
        "omnigraph.root": graph.root,
        "omnigraph.kind": typedef.kind,
        "omnigraph.branch": options.get("branch", "main"),
    }
    if typedef.key_property:
        props["omnigraph.key"] = typedef.key_property
    if typedef.is_edge:
        props["omnigraph.from"] = str(typedef.from_type)
        props["omnigraph.to"] = str(typedef.to_type)
    return {
        "name": typedef.name,
        "options": options,
        "comments": column_comments(typedef),
        "properties": props,
    }


def table_exists(opts: CatalogOptions, namespace: Sequence[str], name: str) -> bool:
    """Whether ``og.<graph>.<Type>`` (or ``...<Type>.branch_<b>``) names a type: False for a
    missing graph, type or branch; any other error is raised."""
    try:
        table(opts, namespace, name, None, None)
    except (GraphNotFoundError, UnknownTypeError, BranchNotFoundError):
        return False
    return True


def create_graph(opts: CatalogOptions, namespace: Sequence[str], properties: Mapping[str, str]) -> str:
    """``CREATE NAMESPACE og.<graph> WITH PROPERTIES ('schema' = '<.pg text>')`` (or
    ``'schemaPath'`` = a .pg file the driver reads): a new graph, as ``Graph.init``. Returns its root."""
    name = _graph_name(opts, namespace)
    given = {k: v for k, v in properties.items() if k not in _SPARK_NAMESPACE_KEYS}
    unknown = [k for k in given if k not in _CREATE_KEYS]
    if unknown or len(given) != 1:
        raise OptionError(
            f"CREATE NAMESPACE {'.'.join(namespace)}: give exactly one of the properties {list(_CREATE_KEYS)} "
            f"(the graph's .pg schema text, or a .pg file); got {sorted(given) or 'none'}",
            option=", ".join(unknown) or "schema",
        )
    if "schema" in given:
        text = given["schema"]
    else:
        try:
            with open(given["schemaPath"], encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise OptionError(
                f"CREATE NAMESPACE {name}: cannot read schemaPath '{given['schemaPath']}': {e}", option="schemaPath"
            ) from e
    uri = opts.graph_uri(name)
    if graph_exists(opts, namespace):
        raise AlreadyInitializedError(f"graph '{name}' already exists at '{uri}'", graph=name, root=uri)
    Graph.init(uri, text, opts.storage_options)
    log.info("catalog: created graph %s at %s", name, uri)
    return uri


def drop_graph(opts: CatalogOptions, namespace: Sequence[str], cascade: bool) -> bool:
    """``DROP NAMESPACE og.<graph> [CASCADE]``: delete the graph's directory, holding the
    graph's commit lease, so that no writer of this package is inside its commit window (a
    holder that stays past ``commitLeaseTimeout`` is LEASE_TIMEOUT naming it; a dead or
    expired holder's lease is broken as the writers break it, and CASCADE deletes its pending
    sidecar with the rest). Without cascade a graph holding rows on any branch, branches
    besides main or a pending recovery sidecar is refused (GRAPH_NOT_EMPTY, naming them),
    checked under the lease."""
    graph = open_graph(opts, namespace)
    name = namespace[0]
    storage = _storage(opts)
    with _lease.hold(
        graph.storage, graph.root, timeout_s=opts.commit_lease_timeout, owner=DROP_ACTOR, deletes_graph=True
    ):
        if not cascade:
            graph = Graph.open(graph.root, opts.storage_options)  # what committed before the lease
            branches = graph.branches()
            rows = {}
            for b in branches:
                for key, t in graph.snapshot(b).tables.items():
                    if t.row_count:
                        rows[f"{key}@{b}" if b != "main" else key] = t.row_count
            pending = graph.pending_sidecars()
            if rows or len(branches) > 1 or pending:
                what = [f"{k} ({n} rows)" for k, n in sorted(rows.items())]
                what += [f"branch {b}" for b in branches if b != "main"]
                what += [f"pending recovery sidecar {p}" for p in pending]
                raise GraphNotEmptyError(
                    f"graph '{name}' is not empty: {', '.join(what)}; "
                    "DROP NAMESPACE ... CASCADE deletes it with everything in it",
                    graph=name,
                    root=graph.root,
                )
        # The manifest first: a writer that takes the lease after this one finds no graph
        # (GRAPH_NOT_FOUND) instead of committing into a half-deleted one.
        storage.delete_tree(RootPaths(graph.root).manifest)
        storage.delete_tree(graph.root)
    log.info("catalog: dropped graph %s at %s", name, graph.root)
    return True


# -- DELETE FROM ... WHERE ----------------------------------------------------------------------


def _value(v: Mapping[str, Any] | None) -> Any:
    """A literal in spec/filters.json's typed form (what the JVM serialises); JSON null is None."""
    if v is None:
        return None
    ((kind, x),) = v.items()
    if kind == "date":
        return dt.date.fromisoformat(x)
    if kind in ("string", "int", "long", "bool", "double"):
        return x
    return SimpleNamespace(unrenderable=x)  # a literal no rule renders: the translation refuses it


def filter_from_json(f: Mapping[str, Any]) -> Any:
    """A filter in spec/filters.json's form as the duck-typed object :mod:`.filters` translates."""
    op = f["op"]
    cls = type(op, (SimpleNamespace,), {})
    if op in ("And", "Or"):
        return cls(left=filter_from_json(f["left"]), right=filter_from_json(f["right"]))
    if op == "Not":
        return cls(child=filter_from_json(f["child"]))
    fields: dict[str, Any] = {"attribute": (f.get("column"),)}  # no column: an op no rule reads
    if op == "In":
        fields["value"] = tuple(_value(v) for v in f["values"])
    elif "value" in f:
        fields["value"] = _value(f["value"])
    return cls(**fields)


def delete_condition(typedef: TypeDef, filters: Sequence[Mapping[str, Any]]) -> str | None:
    """The Lance SQL of a DELETE's WHERE (Spark's conjuncts), exact or refused: a condition the
    filter rules cannot evaluate exactly as Spark does is SQL_UNSUPPORTED, naming it (a delete must
    never remove a row Spark's WHERE would keep). None: every row."""
    kinds = column_kinds(typedef)
    conjuncts = []
    for f in filters:
        if f["op"] == "AlwaysTrue":
            continue
        if f["op"] == "AlwaysFalse":
            return "FALSE"
        sql = _filters.translate(filter_from_json(f), kinds)
        if sql is None:
            raise SqlUnsupportedError(
                f"DELETE FROM {typedef.name} WHERE: the condition {f} cannot be evaluated exactly by the "
                "connector (supported: comparisons, IN, IS [NOT] NULL, LIKE prefix/suffix/contains, AND, OR, "
                "NOT on id/src/dst and String, enum, Bool, I32, I64, U32, U64, Date properties; docs/sql.md). "
                "Delete with a DataFrame instead: df.write.format('omnigraph').option('writeMode', 'delete')",
                type=typedef.name,
            )
        conjuncts.append(sql)
    return _filters.combine(conjuncts)


def delete_where(
    opts: CatalogOptions, namespace: Sequence[str], name: str, filters: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``DELETE FROM og.<graph>.<Type> WHERE ...``: the ids of the matching rows, deleted as ONE
    graph commit by the connector's delete (``writeMode=delete``: a node delete cascades to its
    edges, an edge delete removes exactly those edges). The matching ids are read at the branch's
    head when the statement runs (after the target is pinned), then deleted exactly as a
    DataFrame delete of those ids is: same validation, same commit protocol (I1, I3)."""
    from .graph_io import finish_load  # cost: the write path's imports, only for a delete

    graph, _, typedef, branch = resolve_identifier(opts, namespace, name)
    branch = branch or "main"
    condition = delete_condition(typedef, filters)
    wopts = WriteOptions.from_options(
        {"path": graph.root, "type": typedef.name, "branch": branch, "writeMode": "delete", **opts.provider_options()}
    )
    target = prepare_target(graph, branch, typedef.table_key, "delete")
    ds = graph.open_table(typedef.table_key, graph.snapshot(branch))
    if condition == "FALSE":
        ids = pa.table({"id": pa.array([], pa.string())})
    else:
        ids = ds.to_table(columns=["id"], filter=condition)
    keys = delete_keys(typedef, ids)
    log.info("DELETE FROM %s on %s: %d rows match %s", typedef.table_key, branch, keys.num_rows, condition)
    staged = [
        StagedTable(
            target.table_key, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys
        )
    ]
    result = finish_load(graph, wopts, Journal.new(graph), lambda: staged)
    return {"manifest_version": result.manifest_version, "commit": result.graph_commit_id, "rows": keys.num_rows}


# -- CALL og.system.<procedure> -------------------------------------------------------------------

#: procedure -> what it does (DESCRIBE PROCEDURE)
PROCEDURE_DOCS = {
    "optimize": "Compact small fragments of a graph branch's tables as one graph commit (Graph.optimize)",
    "cleanup": "Remove old table versions by policy and the files of failed jobs (Graph.cleanup)",
    "recover": "Resolve pending recovery sidecars: roll forward or back (Graph.recover)",
}
#: procedure -> its parameters (name, Spark SQL type, required); the first is always the graph
PROCEDURES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "optimize": (("graph", "string", True), ("branch", "string", False), ("dry_run", "boolean", False)),
    "cleanup": (
        ("graph", "string", True),
        ("keep_versions", "int", False),
        ("older_than_seconds", "bigint", False),
        ("dry_run", "boolean", False),
    ),
    "recover": (("graph", "string", True),),
}


def procedure(namespace: Sequence[str], name: str) -> dict[str, Any]:
    """The procedure ``og.system.<name>``: its description and parameters."""
    if list(namespace) != ["system"] or name not in PROCEDURES:
        raise SqlUnsupportedError(
            f"no procedure '{'.'.join([*namespace, name])}' (procedures: "
            f"{', '.join('system.' + p for p in sorted(PROCEDURES))}; docs/sql.md)",
            procedure=".".join([*namespace, name]),
        )
    return {
        "description": PROCEDURE_DOCS[name],
        "parameters": [{"name": n, "type": t, "required": r} for n, t, r in PROCEDURES[name]],
    }


def call(opts: CatalogOptions, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``CALL og.system.<procedure>(graph => 'social', ...)``: the graph's maintenance and
    recovery, as the API and CLI run them. Returns one result row per table (optimize, cleanup),
    removed staging journal (cleanup) or sidecar resolved (recover), under the columns
    ``item, action, detail``."""
    procedure(["system"], name)  # the same refusal for an unknown one
    graph = open_graph(opts, [str(args.get("graph"))])
    rows: list[list[str]] = []
    if name == "optimize":
        report = graph.optimize(str(args.get("branch") or "main"), dry_run=bool(args.get("dry_run") or False))
        for t in report.tables:
            action = "compacted" if t.compacted else t.error and "failed" or t.skipped or "planned"
            rows.append(
                [
                    t.table_key,
                    action,
                    (
                        f"fragments {t.fragments_before} -> {t.fragments_after}, rows {t.rows}, "
                        f"version {t.version_before} -> {t.version_after}{f': {t.error}' if t.error else ''}"
                    ),
                ]
            )
    elif name == "cleanup":
        kw: dict[str, Any] = {"dry_run": bool(args.get("dry_run") or False)}
        if args.get("keep_versions") is not None:
            kw["keep_versions"] = int(args["keep_versions"])
        if args.get("older_than_seconds") is not None:
            kw["older_than"] = int(args["older_than_seconds"])
        cleaned = graph.cleanup(**kw)
        for c in cleaned.tables:
            rows.append(
                [
                    c.table_key,
                    "failed" if c.error else "cleaned",
                    (
                        f"versions removed {c.versions_removed}, orphan files {len(c.orphan_files)}"
                        f"{f': {c.error}' if c.error else ''}"
                    ),
                ]
            )
        rows += [[j, "staging journal removed", ""] for j in cleaned.staging_journals_removed]
    else:
        rows = [[o.operation_id, o.action, str(o.tables)] for o in graph.recover()]
    return {"columns": ["item", "action", "detail"], "rows": rows}


def answer(request: Mapping[str, Any]) -> Any:
    """One catalog request (its ``op`` in :data:`OPS`): the value the JVM catalog reads."""
    op = request["op"]
    opts = CatalogOptions.from_options(request.get("catalog") or {})
    ns = list(request.get("namespace") or [])
    if op == "list_graphs":
        return {"graphs": list_graphs(opts)}
    if op == "graph_exists":
        return {"exists": graph_exists(opts, ns)}
    if op == "list_types":
        return {"types": list_types(opts, ns), "root": opts.graph_uri(ns[0]) if ns else opts.root}
    if op == "table":
        return table(opts, ns, request["name"], request.get("version"), request.get("timestamp_us"))
    if op == "table_exists":
        return {"exists": table_exists(opts, ns, request["name"])}
    if op == "create_graph":
        return {"root": create_graph(opts, ns, request.get("properties") or {})}
    if op == "drop_graph":
        return {"dropped": drop_graph(opts, ns, bool(request.get("cascade")))}
    if op == "delete_where":
        return delete_where(opts, ns, request["name"], request.get("filters") or [])
    if op == "row_level_pin":
        graph, _, typedef, branch = resolve_identifier(opts, ns, request["name"])
        return row_level_pin(graph, typedef, branch or "main")
    if op == "procedure":
        return procedure(ns, request["name"])
    if op == "call":
        return call(opts, request["procedure"], request.get("args") or {})
    raise RuntimeError(f"unknown catalog request {op!r}")
