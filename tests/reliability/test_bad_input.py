"""Bad input: one table of inputs that must be refused with a typed error, graph unchanged.

Every row gives (layer, what, expected code, words the message must contain). After the
failed call the graph must be exactly as before: the same ``__manifest`` version on every
branch, the same visible rows in every table, and no new file except staged data files /
planning forks that nothing references and ``cleanup`` reclaims (I10).

Layers: ``spark`` = ``df.write.format("omnigraph")`` on the shared session (one row per place a
check runs in Spark: option parsing, planning, executor conversion, driver validation; the error
is unwrapped with ``unwrap_error``), ``writer`` = the same data source writer driven in this
process (construct on the driver, ``write`` per partition, ``commit``/``abort``: every check,
without the scheduler's cost), ``graph_io`` = ``write_graph`` / ``load_jsonl``, ``store`` = the same
converter + validator + commit without Spark (where Spark adds nothing), ``state`` = a graph
whose on-disk state must stop every write (a fresh copy per row; the mutation is made first).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import OmnigraphError
from omnigraph_spark.spark.error_tags import unwrap_error
from omnigraph_spark.spark.options import WriteOptions
from omnigraph_spark.spark.staging import convert_and_stage
from omnigraph_spark.spark.writer import commit_staged
from omnigraph_spark.store import sidecar as _sidecar
from omnigraph_spark.store import writes
from omnigraph_spark.store.sidecar import Sidecar, SidecarPin

from .helpers import STATS, tree_files

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

SCHEMA = """
node Person {
    name: String @key
    email: String? @unique
    age: I32?
    score: I64?
    level: enum(low, mid, high)?
    code: String?
    @check(code, "^[A-Z]{3}$")
    @range(age, 0..150)
}

node Company {
    name: String @key
    sector: String
    founded: Date?
}

edge Knows: Person -> Person {
    since: Date?
}

edge Manages: Person -> Person @card(0..1)

edge WorksAt: Person -> Company
"""

P = "name string, age int"


# -- the graph ------------------------------------------------------------------------------


def store_load(g: Graph, frames: dict[str, pa.Table], mode: str = "append", branch: str = "main"):
    """The executor's converter + stage and the driver's validator + commit, without Spark."""
    staged = []
    opts = WriteOptions(path=g.root, type=None, branch=branch, write_mode=mode)
    try:
        for name, tbl in frames.items():
            td = g.catalog.resolve(name)
            t = writes.prepare_target(g, branch, td.table_key, mode)
            staged.append(convert_and_stage(t, td, tbl.to_batches(), "store"))
    except BaseException:
        writes.abort(staged)
        raise
    return commit_staged(g, branch, staged, opts)


@pytest.fixture(scope="module")
def base_root(tmp_path_factory) -> str:
    """Ann, Ben (ages 30, 40), Acme, Ann-knows->Ben, Ann-manages->Ben; branch ``feature``."""
    root = str(tmp_path_factory.mktemp("bad-input") / "graph")
    g = Graph.init(root, SCHEMA)
    store_load(
        g,
        {
            "Person": pa.table(
                {"name": ["Ann", "Ben"], "age": pa.array([30, 40], pa.int32()), "email": ["a@x", "b@x"]}
            ),
            "Company": pa.table({"name": ["Acme"], "sector": ["tools"]}),
            "Knows": pa.table({"from": ["Ann"], "to": ["Ben"]}),
            "Manages": pa.table({"from": ["Ann"], "to": ["Ben"]}),
        },
    )
    g.create_branch("feature")
    return root


def graph_state(root: str) -> dict | None:
    """Branch -> manifest version, and every visible row of every table, per branch."""
    if not os.path.exists(root):
        return None
    mds = lance.dataset(root + "/__manifest")
    out = {"versions": {"main": mds.version}, "rows": {}}
    for b in mds.branches.list():
        out["versions"][b] = mds.checkout_version((b, None)).version
    g = Graph.open(root)
    for b in ("main", "feature"):
        snap = g.snapshot(b)
        for key in snap.tables:
            rows = g.read_table(key, snap).to_pylist()
            out["rows"][(b, key)] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def assert_unchanged(root: str, state_before, files_before: dict[str, int]) -> None:
    assert graph_state(root) == state_before, "the failed call changed the graph"
    if state_before is None:
        assert not os.path.exists(root), "a failed call created a graph root"
        return
    files_after = tree_files(root)
    changed = {
        f
        for f in files_before
        if f in files_after and files_after[f] != files_before[f] and not f.startswith("__recovery/")
    }
    assert not changed, f"files changed: {sorted(changed)}"
    new = sorted(set(files_after) - set(files_before))
    assert not [f for f in new if "_omnigraph_spark/staging" in f], "staging journal left behind"
    if not new:
        return
    # what is left must be reclaimable orphans: unreferenced staged data files, or planning forks
    reclaim = set()
    try:
        report = Graph.open(root).cleanup(keep_versions=10**6, orphan_grace_s=0, dry_run=True)
    except OmnigraphError as e:
        # cleanup itself refuses next to a corrupt / too-new sidecar (I9: operator review first);
        # then every new file must at least be a data file no version of its table references
        assert e.code in ("SIDECAR_CORRUPT", "UNSUPPORTED_FORMAT"), e
        bad = [f for f in new if not _unreferenced_data_file(root, f)]
        assert not bad, f"new files that are not unreferenced staged data: {bad}"
        return
    for t in report.tables:
        for f in t.orphan_files:
            reclaim.add(f"{t.table_path}/{f}")
        for fork in t.forks_removed:
            reclaim.add(("fork", t.table_path, fork))

    def reclaimable(f: str) -> bool:
        if f in reclaim:
            return True
        parts = f.split("/")
        table = "/".join(parts[:2])
        for x in reclaim:
            if isinstance(x, tuple) and x[1] == table:
                fork = x[2]
                if f.startswith(f"{table}/tree/{fork}/") or f.startswith(f"{table}/_refs/branches/"):
                    return True
        return False

    bad = [f for f in new if not reclaimable(f)]
    assert not bad, f"new files that cleanup would not reclaim: {bad}"


def _unreferenced_data_file(root: str, rel: str) -> bool:
    parts = rel.split("/")
    if len(parts) < 4 or parts[0] not in ("nodes", "edges") or parts[-2] != "data" or not rel.endswith(".lance"):
        return False
    ds = lance.dataset(f"{root}/{parts[0]}/{parts[1]}")
    lineages = [ds] + [ds.checkout_version((b, None)) for b in ds.branches.list()]
    for lin in lineages:
        for v in lin.versions():
            for frag in lin.checkout_version(v["version"]).get_fragments():
                if any(df.path == parts[-1] for df in frag.metadata.files):
                    return False
    return True


# -- the table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    layer: str  # spark | graph_io | store | state
    code: str
    words: tuple[str, ...]
    call: Callable  # (ctx) -> None; must raise
    mutate: Callable | None = None  # (root) -> None, "state" rows only


_DDL = {"string": ("StringType", pa.string()), "int": ("IntegerType", pa.int32()), "bigint": ("LongType", pa.int64())}


def _writer_lifecycle(ctx, frame, schema, type_, mode, root_key, opts):
    """What Spark does around the data source writer, in this process: construct it on the
    driver (options, graph, type, planning), ``write`` one message per partition (the
    executors' conversion and staging), then ``commit`` (load-wide validation, the commit) or
    ``abort``. Used for the rows where the Spark scheduler adds nothing but time."""
    from pyspark.sql import types as T

    from omnigraph_spark.spark.writer import OmnigraphWriter

    cols = [c.strip().split(" ", 1) for c in schema.split(",")]
    struct = T.StructType([T.StructField(n.strip("`"), getattr(T, _DDL[t.strip()][0])()) for n, t in cols])
    arrow = pa.schema([(n.strip("`"), _DDL[t.strip()][1]) for n, t in cols])
    options = {"path": ctx.path(root_key), **opts}
    if type_ is not None:
        options["type"] = type_
    w = OmnigraphWriter(options, struct, mode == "overwrite")
    half = (len(frame) + 1) // 2
    parts = [frame[:half], frame[half:]] if len(frame) > 1 else [frame]
    msgs = []
    try:
        for rows in parts:
            msgs.append(
                w.write(
                    iter(pa.Table.from_pylist([dict(zip(arrow.names, r)) for r in rows], schema=arrow).to_batches())
                )
            )
    except BaseException:
        w.abort(msgs)
        raise
    w.commit(msgs)


def df_write(frame, schema, type_="Person", mode="append", root_key="root", **opts):
    """``df.write.format("omnigraph")`` on the shared session (layer "spark"), or the same writer
    driven in this process (layer "writer")."""

    def call(ctx):
        if ctx.layer == "writer":
            return _writer_lifecycle(ctx, frame, schema, type_, mode, root_key, opts)
        df = ctx.spark.createDataFrame(frame, schema)
        if len(frame) > 1:
            df = df.repartition(2)
        w = df.write.format("omnigraph").mode(mode)
        if type_ is not None:
            w = w.option("type", type_)
        for k, v in opts.items():
            w = w.option(k, v)
        w.save(ctx.path(root_key))

    return call


def st(frames, mode="append", branch="main"):
    return lambda ctx: store_load(Graph.open(ctx.root), {k: pa.table(v) for k, v in frames.items()}, mode, branch)


def valid_store_write(ctx):
    store_load(Graph.open(ctx.root), {"Person": pa.table({"name": ["Zed"]})})


def wg(frames, **kw):
    def call(ctx):
        from omnigraph_spark.spark.graph_io import write_graph

        write_graph(ctx.root, {k: ctx.spark.createDataFrame(*v) for k, v in frames.items()}, **kw)

    return call


def jl(text, **kw):
    def call(ctx):
        from omnigraph_spark.spark.graph_io import load_jsonl

        p = ctx.tmp / "input.jsonl"
        p.write_text(text)
        load_jsonl(ctx.spark, ctx.root, str(p), **kw)

    return call


# state mutations (made on a fresh copy before the call)


def set_stamp(root):
    ds = lance.dataset(root + "/__manifest")
    ds.update_schema_metadata({"omnigraph:internal_schema_version": "4"})


def put_sidecar(text):
    def mutate(root):
        d = Path(root) / "__recovery"
        d.mkdir(exist_ok=True)
        (d / "01JZ3K5V7Q8R9S0T1V2W3X4Y5Z.json").write_text(text)

    return mutate


def pending_rollback_sidecar(root):
    """A sidecar whose tables never moved: the write-path heal cannot roll it forward."""
    g = Graph.open(root)
    t = g.snapshot().tables["node:Person"]
    _sidecar.write(
        g.storage,
        root,
        Sidecar.new("main", "crashed", "Load", [SidecarPin("node:Person", t.base_path, t.version, t.version + 1)]),
    )


def lock_branch(root):
    ds = lance.dataset(root + "/__manifest")
    ds.create_branch("__schema_apply_lock__", ds.version)


def break_contract(root):
    p = Path(root) / "__schema_state.json"
    st_ = json.loads(p.read_text())
    st_["schema_ir_hash"] = "sha256:" + "0" * 64
    p.write_text(json.dumps(st_))


def auto_cleanup(root):
    g = Graph.open(root)
    t = g.snapshot().tables["node:Person"]
    lance.dataset(t.base_path).update_config({"lance.auto_cleanup.interval": "1"})


S = lambda *a: tuple(a)  # noqa: E731

CASES = [
    # -- spark: df.write (planning on the driver, conversion on executors, validation in commit)
    Case(
        "wrong-type-string-for-int",
        "spark",
        "TYPE_MISMATCH",
        S("age", "I32"),
        df_write([("Cy", "abc")], "name string, age string"),
    ),
    Case(
        "int32-overflow",
        "writer",
        "TYPE_MISMATCH",
        S("age", "1099511627776"),
        df_write([("Cy", 2**40)], "name string, age bigint"),
    ),
    Case("null-in-key-column", "spark", "NULL_VIOLATION", S("name", "null"), df_write([(None, 1), ("Dee", 2)], P)),
    Case(
        "null-in-required-column",
        "writer",
        "NULL_VIOLATION",
        S(
            "sector",
        ),
        df_write([("Bar", None)], "name string, sector string", type_="Company"),
    ),
    Case(
        "missing-required-column",
        "writer",
        "MISSING_COLUMN",
        S(
            "sector",
        ),
        df_write([("Bar",)], "name string", type_="Company"),
    ),
    Case(
        "duplicate-key-in-one-load",
        "spark",
        "KEY_CONFLICT",
        S("Cy", "name"),  # I17: append is a strict insert
        df_write([("Cy", 1), ("Cy", 2)], P),
    ),
    Case(
        "duplicate-unique-in-one-load",
        "writer",
        "UNIQUE_VIOLATION",
        S("email", "c@x"),
        df_write([("Cy", "c@x"), ("Di", "c@x")], "name string, email string"),
    ),
    Case(
        "duplicate-ids-in-merge",
        "writer",
        "UNIQUE_VIOLATION",
        S(
            "Ann",
        ),
        df_write([("Ann", 1), ("Ann", 2)], P, writeMode="merge"),
    ),
    Case(
        "dangling-edge",
        "spark",
        "DANGLING_EDGE",
        S(
            "Nobody",
        ),
        df_write([("Ann", "Nobody")], "`from` string, `to` string", type_="Knows"),
    ),
    Case(
        "cardinality",
        "writer",
        "CARDINALITY_VIOLATION",
        S("Ann", "Manages"),
        df_write([("Ann", "Ann")], "`from` string, `to` string", type_="Manages"),
    ),
    Case(
        "bad-enum",
        "spark",
        "CONSTRAINT_VIOLATION",
        S("level", "ultra"),
        df_write([("Cy", "ultra")], "name string, level string"),
    ),
    Case(
        "check-regex",
        "writer",
        "CONSTRAINT_VIOLATION",
        S("code", "abcd"),
        df_write([("Cy", "abcd")], "name string, code string"),
    ),
    Case("range", "writer", "CONSTRAINT_VIOLATION", S("age", "200"), df_write([("Cy", 200)], P)),
    Case(
        "bad-date",
        "writer",
        "TYPE_MISMATCH",
        S("founded", "2024-13-45"),
        df_write([("Bar", "x", "2024-13-45")], "name string, sector string, founded string", type_="Company"),
    ),
    Case(
        "key-id-mismatch", "writer", "KEY_ID_MISMATCH", S("X", "Cy"), df_write([("X", "Cy")], "id string, name string")
    ),
    Case(
        "endpoint-given-twice",
        "writer",
        "DUPLICATE_COLUMN",
        S("from", "src"),
        df_write([("Ann", "Ann", "Ben")], "`from` string, src string, `to` string", type_="Knows"),
    ),
    Case(
        "unknown-column",
        "writer",
        "UNKNOWN_COLUMN",
        S(
            "shoe",
        ),
        df_write([("Cy", "x")], "name string, shoe string"),
    ),
    Case(
        "unknown-type",
        "writer",
        "UNKNOWN_TYPE",
        S(
            "Nope",
        ),
        df_write([("Cy", 1)], P, type_="Nope"),
    ),
    Case(
        "type-dotdot-path",
        "spark",
        "UNKNOWN_TYPE",
        S(
            "../x",
        ),
        df_write([("Cy", 1)], P, type_="../x"),
    ),
    Case(
        "type-absolute-path",
        "writer",
        "UNKNOWN_TYPE",
        S(
            "/etc",
        ),
        df_write([("Cy", 1)], P, type_="/etc"),
    ),
    Case(
        "type-table-key-escape",
        "writer",
        "UNKNOWN_TYPE",
        S(
            "node:../../x",
        ),
        df_write([("Cy", 1)], P, type_="node:../../x"),
    ),
    Case("branch-dotdot", "spark", "OPTION_INVALID", S("branch", "../x"), df_write([("Cy", 1)], P, branch="../x")),
    Case("branch-absolute", "writer", "OPTION_INVALID", S("branch", "/etc"), df_write([("Cy", 1)], P, branch="/etc")),
    Case(
        "branch-embedded-dotdot",
        "writer",
        "OPTION_INVALID",
        S("branch", "a/../../b"),
        df_write([("Cy", 1)], P, branch="a/../../b"),
    ),
    Case("branch-bad-chars", "writer", "OPTION_INVALID", S("branch", "a b"), df_write([("Cy", 1)], P, branch="a b")),
    Case(
        "branch-lock-name",
        "writer",
        "OPTION_INVALID",
        S("branch", "__schema_apply_lock__"),
        df_write([("Cy", 1)], P, branch="__schema_apply_lock__"),
    ),
    Case(
        "branch-not-found",
        "spark",
        "BRANCH_NOT_FOUND",
        S(
            "nope",
        ),
        df_write([("Cy", 1)], P, branch="nope"),
    ),
    Case(
        "missing-graph",
        "spark",
        "GRAPH_NOT_FOUND",
        S(
            "missing",
        ),
        df_write([("Cy", 1)], P, root_key="missing"),
    ),
    Case(
        "missing-type-option",
        "writer",
        "OPTION_INVALID",
        S(
            "type",
        ),
        df_write([("Cy", 1)], P, type_=None),
    ),
    Case(
        "unknown-option",
        "spark",
        "OPTION_INVALID",
        S(
            "fooBar",
        ),
        df_write([("Cy", 1)], P, fooBar="1"),
    ),
    Case(
        "contradictory-save-mode",
        "spark",
        "OPTION_INVALID",
        S("overwrite", "writeMode"),
        df_write([("Cy", 1)], P, mode="overwrite", writeMode="append"),
    ),
    Case(
        "bad-write-mode",
        "writer",
        "OPTION_INVALID",
        S("writeMode", "upsert"),
        df_write([("Cy", 1)], P, writeMode="upsert"),
    ),
    Case(
        "txn-version-not-int",
        "writer",
        "OPTION_INVALID",
        S("txnVersion", "abc"),
        df_write([("Cy", 1)], P, txnAppId="app", txnVersion="abc"),
    ),
    Case(
        "txn-version-negative",
        "writer",
        "OPTION_INVALID",
        S("txnVersion", "-1"),
        df_write([("Cy", 1)], P, txnAppId="app", txnVersion="-1"),
    ),
    Case(
        "txn-app-without-version",
        "writer",
        "OPTION_INVALID",
        S("txnAppId", "txnVersion"),
        df_write([("Cy", 1)], P, txnAppId="app"),
    ),
    Case(
        "max-rows-per-file-zero",
        "writer",
        "OPTION_INVALID",
        S("maxRowsPerFile", "0"),
        df_write([("Cy", 1)], P, maxRowsPerFile="0"),
    ),
    Case(
        "lease-timeout-not-number",
        "writer",
        "OPTION_INVALID",
        S("commitLeaseTimeout", "soon"),
        df_write([("Cy", 1)], P, commitLeaseTimeout="soon"),
    ),
    Case(
        "empty-storage-key",
        "writer",
        "OPTION_INVALID",
        S(
            "storage.",
        ),
        df_write([("Cy", 1)], P, **{"storage.": "x"}),
    ),
    # -- graph_io: multi-type and JSONL loads
    Case(
        "write-graph-dangling-across-load",
        "graph_io",
        "DANGLING_EDGE",
        S(
            "Ghost",
        ),
        wg({"Person": ([("Cy", 1)], P), "Knows": ([("Cy", "Ghost")], "`from` string, `to` string")}),
    ),
    Case(
        "write-graph-type-twice",
        "graph_io",
        "OPTION_INVALID",
        S("Person", "twice"),
        wg({"Person": ([("Cy", 1)], P), "node:Person": ([("Di", 1)], P)}),
    ),
    Case(
        "write-graph-reserved-option",
        "graph_io",
        "OPTION_INVALID",
        S(
            "branch",
        ),
        wg({"Person": ([("Cy", 1)], P)}, options={"branch": "feature"}),
    ),
    Case(
        "write-graph-bad-branch",
        "graph_io",
        "OPTION_INVALID",
        S("branch", ".."),
        wg({"Person": ([("Cy", 1)], P)}, branch=".."),
    ),
    Case(
        "jsonl-invalid-json",
        "graph_io",
        "INVALID_RECORD",
        S("line 2", "record 2"),
        jl('{"type": "Person", "data": {"name": "Cy"}}\n{"type": "Person", "data": {\n'),
    ),
    Case(
        "jsonl-unknown-type",
        "graph_io",
        "UNKNOWN_TYPE",
        S(
            "Robot",
        ),
        jl('{"type": "Robot", "data": {"name": "R2"}}\n'),
    ),
    Case(
        "jsonl-empty-input",
        "graph_io",
        "OPTION_INVALID",
        S(
            "no JSONL records",
        ),
        jl("\n\n"),
    ),
    Case(
        "jsonl-dangling-edge",
        "graph_io",
        "DANGLING_EDGE",
        S(
            "Ghost",
        ),
        jl('{"type": "Person", "data": {"name": "Cy"}}\n{"edge": "Knows", "from": "Cy", "to": "Ghost"}\n'),
    ),
    # -- store: the converter and validator without Spark
    Case(
        "uint64-overflow-into-i64",
        "store",
        "TYPE_MISMATCH",
        S("score", "9223372036854775808"),
        st({"Person": {"name": ["Cy"], "score": pa.array([2**63], pa.uint64())}}),
    ),
    Case(
        "float-into-int",
        "store",
        "TYPE_MISMATCH",
        S(
            "age",
        ),
        st({"Person": {"name": ["Cy"], "age": pa.array([1.5], pa.float64())}}),
    ),
    Case(
        "null-edge-endpoint",
        "store",
        "NULL_VIOLATION",
        S(
            "src",
        ),
        st({"Knows": {"from": pa.array([None], pa.string()), "to": ["Ben"]}}),
    ),
    Case(
        "edge-unknown-property",
        "store",
        "UNKNOWN_COLUMN",
        S(
            "weight",
        ),
        st({"Knows": {"from": ["Ann"], "to": ["Ben"], "weight": [1]}}),
    ),
    Case(
        "dangling-edge-on-branch",
        "store",
        "DANGLING_EDGE",
        S(
            "Nobody",
        ),
        st({"Knows": {"from": ["Ann"], "to": ["Nobody"]}}, branch="feature"),
    ),
    Case(
        "overwrite-nodes-strands-nothing-but-dup",
        "store",
        "UNIQUE_VIOLATION",
        S(
            "Ann",
        ),
        st({"Person": {"name": ["Ann", "Ann"]}}, mode="overwrite"),
    ),
    # -- state: on-disk conditions that must stop every write
    Case(
        "wrong-manifest-stamp",
        "state",
        "UNSUPPORTED_FORMAT",
        S(
            "4",
        ),
        valid_store_write,
        set_stamp,
    ),
    Case(
        "corrupt-sidecar-present",
        "state",
        "SIDECAR_CORRUPT",
        S("01JZ3K5V7Q8R9S0T1V2W3X4Y5Z", "not valid JSON"),
        valid_store_write,
        put_sidecar("{not json"),
    ),
    Case(
        "sidecar-from-the-future",
        "state",
        "UNSUPPORTED_FORMAT",
        S(
            "schema_version=3",
        ),
        valid_store_write,
        put_sidecar(json.dumps({"schema_version": 3, "tables": []})),
    ),
    Case(
        "sidecar-needs-rollback",
        "state",
        "RECOVERY_PENDING",
        S(
            "recover",
        ),
        valid_store_write,
        pending_rollback_sidecar,
    ),
    Case(
        "schema-apply-lock-branch",
        "state",
        "SCHEMA_APPLY_LOCKED",
        S(
            "__schema_apply_lock__",
        ),
        valid_store_write,
        lock_branch,
    ),
    Case(
        "schema-contract-broken",
        "state",
        "SCHEMA_CONTRACT",
        S("schema contract", "__schema_state.json"),
        valid_store_write,
        break_contract,
    ),
    Case(
        "auto-cleanup-config",
        "state",
        "AUTO_CLEANUP_CONFIG",
        S("auto_cleanup", "node:Person"),
        valid_store_write,
        auto_cleanup,
    ),
    Case(
        "spark-write-over-corrupt-sidecar",
        "state",
        "SIDECAR_CORRUPT",
        S(
            "not valid JSON",
        ),
        df_write([("Cy", 1)], P),
        put_sidecar("{not json"),
    ),
    Case(
        "spark-write-under-schema-lock",
        "state",
        "SCHEMA_APPLY_LOCKED",
        S(
            "__schema_apply_lock__",
        ),
        df_write([("Cy", 1)], P),
        lock_branch,
    ),
]


class Ctx:
    def __init__(self, root: str, spark, tmp: Path, layer: str):
        self.root, self.spark, self.tmp, self.layer = root, spark, tmp, layer

    def path(self, key: str) -> str:
        return self.root if key == "root" else str(self.tmp / "no-such-graph")


def test_table_size():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


def _params():
    for c in CASES:
        needs_spark = c.layer in ("spark", "graph_io") or c.id.startswith("spark-")
        yield pytest.param(c, id=f"{c.layer}:{c.id}", marks=[pytest.mark.spark] if needs_spark else [])


@pytest.mark.parametrize("case", list(_params()))
def test_bad_input(request, base_root, tmp_path, case: Case):
    """I1, I10: a refused input leaves the graph unchanged; the error is typed and says what is wrong."""
    spark = (
        request.getfixturevalue("spark")
        if case.layer in ("spark", "graph_io") or case.id.startswith("spark-")
        else None
    )
    root = base_root
    if case.mutate is not None:
        root = str(tmp_path / "graph")
        shutil.copytree(base_root, root, symlinks=True)
        case.mutate(root)
    ctx = Ctx(root, spark, tmp_path, "spark" if case.id.startswith("spark-") else case.layer)
    target = ctx.path("missing") if case.id == "missing-graph" else root
    unopenable = case.id in ("wrong-manifest-stamp", "schema-contract-broken")
    before = None if unopenable else graph_state(target)
    files = tree_files(target) if os.path.exists(target) else {}
    STATS["bad_inputs"] += 1
    with pytest.raises(Exception) as ei:
        case.call(ctx)
    err = unwrap_error(ei.value)
    assert isinstance(err, OmnigraphError), f"untyped error: {ei.value!r}"[:3000]
    assert err.code == case.code, str(err)
    msg = str(err).lower()
    missing = [w for w in case.words if w.lower() not in msg]
    assert not missing, f"message does not name {missing}: {err}"
    if unopenable:
        # the graph cannot be opened by design: compare raw bytes of the root instead
        assert tree_files(target) == files
    else:
        assert_unchanged(target, before, files)
    if case.id in ("corrupt-sidecar-present", "spark-write-over-corrupt-sidecar", "sidecar-from-the-future"):
        assert (Path(root) / "__recovery" / "01JZ3K5V7Q8R9S0T1V2W3X4Y5Z.json").exists()  # I9: never deleted
