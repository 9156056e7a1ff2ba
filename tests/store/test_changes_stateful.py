"""I25, model-based: the change feed replayed onto the first snapshot gives every later snapshot.

The write-API state machine of ``test_integrity_stateful`` (appends, merges, overwrites with and
without cascade, deletes that cascade to edges, multi-type loads, on main and a branch) plus
optimize and loads that crash at a protocol step and are then recovered (rolled forward or
back). After every step, for each branch, the feed of every type for each new graph version is
applied to the rows the feed has built so far; an insert of a present id, a delete or preimage
of an absent or different row, or a postimage without its preimage fails (so each row of a
commit appears exactly once), and the result must equal the snapshot at that version."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import changes, failpoints, writes

from .test_integrity_stateful import BRANCHES, COMPANIES, PEOPLE, C, IntegrityMachine, P, W, branches, names

TYPES = (P, C, W)
CRASH_STEPS = (
    "after_sidecar",
    "after_table_commit#1",
    "after_all_commits",
    "after_publish",
    "after_commit_row",
    "after_index_sidecar",
    "after_index_commit#1",
)
META = {changes.CHANGE_TYPE, changes.COMMIT_VERSION, changes.COMMIT_TIMESTAMP, changes.GRAPH_COMMIT_ID}


class Crash(BaseException):
    """A simulated crash: no ``except Exception`` handler of the write path sees it."""


def apply_version(state: dict[str, dict], rows: list[dict], where: str) -> None:
    """Apply one graph version's feed rows of one type to ``state`` (id -> row), strictly."""
    pre: set[str] = set()
    for r in rows:
        kind = r[changes.CHANGE_TYPE]
        row = {k: v for k, v in r.items() if k not in META}
        if kind in (changes.DELETE, changes.UPDATE_PREIMAGE):
            assert state.get(row["id"]) == row, f"{where}: {kind} of {row} but the feed holds {state.get(row['id'])}"
            del state[row["id"]]
            if kind == changes.UPDATE_PREIMAGE:
                pre.add(row["id"])
    for r in rows:
        kind = r[changes.CHANGE_TYPE]
        row = {k: v for k, v in r.items() if k not in META}
        if kind == changes.INSERT:
            assert row["id"] not in state, f"{where}: insert of {row['id']} already present"
            state[row["id"]] = row
        elif kind == changes.UPDATE_POSTIMAGE:
            assert row["id"] in pre, f"{where}: postimage of {row['id']} without a preimage"
            pre.discard(row["id"])
            state[row["id"]] = row
    assert not pre, f"{where}: preimages without postimages: {pre}"


class ChangeFeedMachine(IntegrityMachine):
    @initialize()
    def start(self) -> None:
        super().start()
        self.fed = {b: (self.graph.snapshot(b).version, {t: {} for t in TYPES}) for b in BRANCHES}

    @rule(branch=branches)
    def optimize(self, branch):
        self.graph.optimize(branch, min_fragments=1)

    @rule(
        who=names,
        firm=st.sampled_from(COMPANIES),
        step=st.sampled_from(CRASH_STEPS),
        two=st.booleans(),
        branch=branches,
    )
    def crash_and_recover(self, who, firm, step, two, branch):
        """A merge of people (and, if ``two``, a new company in the same load) that crashes at
        ``step``; recovery then rolls it forward or back, and the model follows what it did."""
        m = self.models[branch]
        who = list(dict.fromkeys(who))
        tables = {P: [{"id": n, "name": n, "age": 77} for n in who]}
        landed = m.copy()
        landed.people.update({n: 77 for n in who})
        if two and firm not in m.companies:
            tables[C] = [{"id": firm, "name": firm}]
            landed.companies.add(firm)
        staged = [self._stage(k, rows, "merge", branch) for k, rows in tables.items()]
        name, _, n = step.partition("#")

        def hit(s: str, i: int = 0) -> None:
            if s == name and (not n or i == int(n)):
                raise Crash(step)

        real = failpoints.hit
        failpoints.hit = hit
        try:
            writes.commit_load(self.graph, branch, staged, validate=make_validator(self.graph))
        except Crash:
            pass
        finally:
            failpoints.hit = real
        self.graph.recover()
        snap = self.graph.snapshot(branch)
        people = {r["id"]: r["age"] for r in self.graph.read_table(P, snap).to_pylist()}
        firms = {r["id"] for r in self.graph.read_table(C, snap).to_pylist()}
        if people == landed.people and firms == landed.companies:
            self.models[branch] = landed
        else:
            assert people == m.people and firms == m.companies, f"{step}: neither rolled forward nor back"

    @invariant()
    def feed_replays_every_snapshot(self):
        if not hasattr(self, "fed"):
            return
        for branch in BRANCHES:
            last, state = self.fed[branch]
            head = self.graph.snapshot(branch).version
            if head == last:
                continue
            rng = changes.FeedRange(branch, last + 1, head)
            by_version: dict[tuple[str, int], list[dict]] = {}
            for key in TYPES:
                t = changes.changes_table(self.graph.root, key, rng)
                for r in [] if t is None else t.to_pylist():
                    by_version.setdefault((key, r[changes.COMMIT_VERSION]), []).append(r)
            for v in range(last + 1, head + 1):
                snap = self.graph.snapshot(branch, v)
                for key in TYPES:
                    apply_version(state[key], by_version.get((key, v), []), f"{branch} v{v} {key}")
                    actual = {r["id"]: r for r in self.graph.read_table(key, snap).to_pylist()}
                    assert state[key] == actual, f"{branch} v{v} {key}: replayed feed differs from the snapshot"
            self.fed[branch] = (head, state)


ChangeFeedMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_I25_change_feed_replays_every_snapshot = ChangeFeedMachine.TestCase
__all__ = ["PEOPLE"]
