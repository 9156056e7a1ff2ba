"""A Hypothesis state machine over the write API: random sequences of append, merge,
overwrite (with and without cascade), delete and multi-type loads over two node types and a
@card edge type, on main and a branch, each checked against an in-memory model after every
step: the rows equal the model's, ids are unique, no edge dangles, @card holds, and a refused
write changed nothing (I1, I17, I18). Spark-free (the store protocol plus the driver's
validator), bounded to about a minute."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from omnigraph_spark import Graph
from omnigraph_spark.errors import OmnigraphError
from omnigraph_spark.ingest.integrity import delete_keys
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import writes

SCHEMA = """
node Person {
    name: String @key
    age: I32?
}
node Company {
    name: String @key
}
edge WorksAt: Person -> Company @card(0..2)
"""
PEOPLE = ["ann", "bob", "cy", "dee", "eve"]
COMPANIES = ["acme", "init"]
EDGE_IDS = [f"w{i}" for i in range(6)]
BRANCHES = ["main", "feature"]
P, C, W = "node:Person", "node:Company", "edge:WorksAt"

names = st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=4)
firms = st.lists(st.sampled_from(COMPANIES), min_size=1, max_size=2)
edges = st.lists(
    st.tuples(st.sampled_from(EDGE_IDS), st.sampled_from(PEOPLE), st.sampled_from(COMPANIES)), min_size=1, max_size=3
)
branches = st.sampled_from(BRANCHES)


class Model:
    """One branch's expected rows."""

    def __init__(self) -> None:
        self.people: dict[str, int] = {}
        self.companies: set = set()
        self.edges: dict[str, tuple[str, str]] = {}

    def copy(self) -> Model:
        m = Model()
        m.people, m.companies, m.edges = dict(self.people), set(self.companies), dict(self.edges)
        return m


class IntegrityMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="og-stateful-")
        self.graph = Graph.init(f"{self.dir}/g", SCHEMA)
        self.graph.create_branch("feature")
        self.models = {b: Model() for b in BRANCHES}

    def teardown(self) -> None:
        if getattr(self, "dir", None):
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- running a load ---------------------------------------------------------------------

    def _stage(self, key: str, rows: list[dict], mode: str, branch: str):
        target = writes.prepare_target(self.graph, branch, key, mode)
        if mode == "delete":
            keys = delete_keys(self.graph.catalog.by_table_key(key), pa.Table.from_pylist(rows))
            return writes.StagedTable(
                key, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys
            )
        batch = pa.Table.from_pylist(rows, schema=target.schema).to_batches() if rows else []
        return writes.stage(target, batch)

    def _load(
        self,
        tables: dict[str, list[dict]],
        mode: str,
        branch: str,
        expected: Model | None,
        cascade: bool = False,
        codes: tuple[str, ...] = (),
    ) -> None:
        """Run one load; ``expected`` None: it must be refused (with one of ``codes``) and change
        nothing."""
        before = self.graph.snapshot(branch).version
        staged = [self._stage(k, rows, mode, branch) for k, rows in tables.items()]
        try:
            writes.commit_load(self.graph, branch, staged, validate=make_validator(self.graph, cascade=cascade))
        except OmnigraphError as e:
            writes.abort(staged)
            assert expected is None, f"refused unexpectedly: {e}"
            assert e.code in codes, f"{e.code} not in {codes}: {e}"
            assert self.graph.snapshot(branch).version == before  # a refused write changed nothing
            return
        assert expected is not None, f"{mode} {tables} on {branch} should have been refused ({codes})"
        self.models[branch] = expected

    # -- nodes ------------------------------------------------------------------------------

    @rule(who=names, age=st.integers(0, 99), mode=st.sampled_from(["append", "merge"]), branch=branches)
    def write_people(self, who, age, mode, branch):
        m = self.models[branch]
        repeated = len(set(who)) < len(who)
        exp = m.copy()
        ok = not repeated and (mode == "merge" or not set(who) & set(m.people))
        if ok:
            exp.people.update({n: age for n in who})
        self._load(
            {P: [{"id": n, "name": n, "age": age} for n in who]},
            mode,
            branch,
            exp if ok else None,
            codes=("KEY_CONFLICT", "UNIQUE_VIOLATION"),
        )

    @rule(who=st.lists(st.sampled_from(PEOPLE), max_size=4, unique=True), cascade=st.booleans(), branch=branches)
    def overwrite_people(self, who, cascade, branch):
        m = self.models[branch]
        orphans = {i for i, (s, _) in m.edges.items() if s not in who}
        exp = m.copy()
        exp.people = {n: 1 for n in who}
        exp.edges = {i: e for i, e in m.edges.items() if i not in orphans}
        ok = cascade or not orphans
        self._load(
            {P: [{"id": n, "name": n, "age": 1} for n in who]},
            "overwrite",
            branch,
            exp if ok else None,
            cascade=cascade,
            codes=("DANGLING_EDGE",),
        )

    @rule(who=names, branch=branches)
    def delete_people(self, who, branch):
        m = self.models[branch]
        exp = m.copy()
        for n in who:
            exp.people.pop(n, None)
        exp.edges = {i: (s, d) for i, (s, d) in m.edges.items() if s not in who}
        self._load({P: [{"name": n} for n in who]}, "delete", branch, exp)

    @rule(which=firms, mode=st.sampled_from(["append", "overwrite", "delete"]), cascade=st.booleans(), branch=branches)
    def write_companies(self, which, mode, cascade, branch):
        m = self.models[branch]
        exp = m.copy()
        rows = [{"id": c, "name": c} for c in which]
        codes: tuple[str, ...] = ()
        ok = True
        if mode == "append":
            ok = len(set(which)) == len(which) and not set(which) & m.companies
            exp.companies |= set(which)
            codes = ("KEY_CONFLICT",)
        elif mode == "overwrite":
            which = sorted(set(which))
            rows = [{"id": c, "name": c} for c in which]
            orphans = {i for i, (_, d) in m.edges.items() if d not in which}
            exp.companies = set(which)
            exp.edges = {i: e for i, e in m.edges.items() if i not in orphans}
            ok = cascade or not orphans
            codes = ("DANGLING_EDGE",)
        else:
            exp.companies -= set(which)
            exp.edges = {i: (s, d) for i, (s, d) in m.edges.items() if d not in which}
        self._load({C: rows}, mode, branch, exp if ok else None, cascade=cascade, codes=codes)

    # -- edges ------------------------------------------------------------------------------

    def _edges_expected(
        self, m: Model, new: list[tuple[str, str, str]], people: dict[str, int], companies: set
    ) -> tuple[bool, Model]:
        exp = m.copy()
        ids = [i for i, _, _ in new]
        ok = len(set(ids)) == len(ids) and not set(ids) & set(m.edges)
        ok = ok and all(s in people and d in companies for _, s, d in new)
        exp.edges.update({i: (s, d) for i, s, d in new})
        per_src: dict[str, int] = {}
        for s, _ in exp.edges.values():
            per_src[s] = per_src.get(s, 0) + 1
        return ok and max(per_src.values(), default=0) <= 2, exp

    @rule(new=edges, branch=branches)
    def append_edges(self, new, branch):
        m = self.models[branch]
        ok, exp = self._edges_expected(m, new, m.people, m.companies)
        self._load(
            {W: [{"id": i, "src": s, "dst": d} for i, s, d in new]},
            "append",
            branch,
            exp if ok else None,
            codes=("KEY_CONFLICT", "DANGLING_EDGE", "CARDINALITY_VIOLATION"),
        )

    @rule(
        pairs=st.lists(st.tuples(st.sampled_from(PEOPLE), st.sampled_from(COMPANIES)), min_size=1, max_size=3),
        branch=branches,
    )
    def delete_edges(self, pairs, branch):
        m = self.models[branch]
        exp = m.copy()
        exp.edges = {i: e for i, e in m.edges.items() if e not in set(pairs)}
        self._load({W: [{"src": s, "dst": d} for s, d in pairs]}, "delete", branch, exp)

    @rule(who=names, which=firms, new=edges, branch=branches)
    def write_graph_append(self, who, which, new, branch):
        """People, companies and edges in ONE commit: edges may name the load's own nodes."""
        m = self.models[branch]
        who_new = [n for n in dict.fromkeys(who) if n not in m.people]
        firms_new = [c for c in dict.fromkeys(which) if c not in m.companies]
        people = {**m.people, **{n: 5 for n in who_new}}
        ok, exp = self._edges_expected(m, new, people, m.companies | set(firms_new))
        exp.people, exp.companies = people, m.companies | set(firms_new)
        tables = {W: [{"id": i, "src": s, "dst": d} for i, s, d in new]}
        if who_new:
            tables[P] = [{"id": n, "name": n, "age": 5} for n in who_new]
        if firms_new:
            tables[C] = [{"id": c, "name": c} for c in firms_new]
        self._load(
            tables,
            "append",
            branch,
            exp if ok else None,
            codes=("KEY_CONFLICT", "DANGLING_EDGE", "CARDINALITY_VIOLATION"),
        )

    # -- the invariant ----------------------------------------------------------------------

    @invariant()
    def graph_equals_model(self):
        if not hasattr(self, "graph"):
            return
        for branch in BRANCHES:
            snap = self.graph.snapshot(branch)
            m = self.models[branch]
            people = self.graph.read_table(P, snap).to_pylist()
            firms_ = self.graph.read_table(C, snap).to_pylist()
            works = self.graph.read_table(W, snap).to_pylist()
            for rows in (people, firms_, works):
                assert len({r["id"] for r in rows}) == len(rows), f"duplicate ids on {branch}"
            assert {r["id"]: r["age"] for r in people} == m.people, branch
            assert {r["id"] for r in firms_} == m.companies, branch
            assert {r["id"]: (r["src"], r["dst"]) for r in works} == m.edges, branch
            ids = {r["id"] for r in people}, {r["id"] for r in firms_}
            assert all(r["src"] in ids[0] and r["dst"] in ids[1] for r in works), f"dangling edge on {branch}"
            per_src: dict[str, int] = {}
            for r in works:
                per_src[r["src"]] = per_src.get(r["src"], 0) + 1
            assert max(per_src.values(), default=0) <= 2, f"@card broken on {branch}"
            assert snap.tables[P].row_count == len(people) and snap.tables[W].row_count == len(works)


IntegrityMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_integrity_state_machine = IntegrityMachine.TestCase
