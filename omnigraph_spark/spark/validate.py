"""The load-wide validator: the rules no single task can check, run on the driver.

:func:`make_validator` builds the ``validate(snapshot, staged_by_key)`` callback
:func:`~omnigraph_spark.store.writes.commit_load` runs inside the commit lease, against the
fresh snapshot: uniqueness within the load, edge endpoints, ``@card``, strict appends (I17) and
integrity across writes (I18). A check proven by the staging tasks is skipped (I15); a check
that reads at least ``distributedCheckRows`` rows runs as Spark jobs (:mod:`.dist_checks`,
I21), with the same error.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UniqueViolationError
from ..graph import Graph, Snapshot
from ..ingest import (
    check_cardinality,
    check_endpoints,
    check_fresh_ids,
    check_unique,
    raise_key_conflict,
    shadowed_src_counts,
    src_counts,
    unique_groups,
)
from ..schema.catalog import Catalog, TypeDef
from ..store import side_files
from ..store import tables as _tables
from ..store.writes import (
    SRC_BOUND_PROP,
    Checked,
    EndsProof,
    IdSource,
    Replaced,
    StagedTable,
    proven_src_bound,
)
from . import bounded as _bounded
from .deletions import Bounded, InMemory
from .deletions import deletions as _deletions
from .dist_checks import DistChecks, committed_pin
from .dist_integrity import Distributed
from .memo import Once
from .parallel import run_checks

log = logging.getLogger(__name__)


def make_validator(
    graph: Graph, cascade: bool = False, dist: DistChecks | None = None, bounded_rows: int = 0
) -> Callable[..., object]:
    """A ``validate(snapshot, staged_by_key)`` callback for ``commit_load``.

    Runs on the driver, under the commit lease, against the fresh snapshot; it reads only the
    columns involved (ids, key/unique columns, src/dst) of the uncommitted fragments:

    * id and every @key / @unique group are unique within the load (merge: a duplicate id is an
      error, never last-wins);
    * edge endpoints exist in the snapshot's node table (committed; not when that node type is
      overwritten by this load) or among the load's staged nodes;
    * @card per source over committed + pending (merge shadows by id, overwrite counts pending).

    The endpoint and @card checks are skipped where the JVM staging tasks proved them for this
    very snapshot (``StagedTable.ends``, invariant I15); errors always come from these checks.
    It returns, per edge table with @card, the bound to record with the commit (I16).

    Integrity across writes: an append is a strict insert (I17: a committed or repeated id is a
    KEY_CONFLICT); no committed edge is left dangling (I18): a delete's rows and every edge
    incident to a deleted node, and with ``cascade`` every edge a node overwrite orphans, are
    returned as deletions for the same commit (a :class:`~..store.writes.Checked`); without
    ``cascade`` an orphaning overwrite is a DANGLING_EDGE naming each edge type and its count.

    With ``dist`` (option distributedCheckRows), a check that reads at least its threshold of
    staged + committed rows runs as Spark jobs instead (:mod:`.dist_checks`, invariant I21):
    the same error, the driver holds only counts and offenders. ``validate(snap, staged,
    distributed_only=True)`` runs only those, before the lease, memoising their outcomes under
    the exact versions and files they read; the validator inside the lease reuses an outcome
    only if its inputs did not move, else the check runs again. The parts of I18
    (:func:`~.deletions.deletions`) run each in memory or as Spark jobs (:mod:`.dist_integrity`)
    by the same rule; when one may run as Spark jobs, I18 runs before the lease too, so that its
    Spark-job parts are memoised alike (under the versions and files they read and the ids they
    were given); inside the lease the in-memory parts run again.

    A check that does not run as Spark jobs runs in bounded memory (:mod:`.bounded`, invariant
    I24) when it reads at least ``bounded_rows`` rows (0: never), and the strict-append and
    endpoint checks of a few staged rows against a committed table at least
    :data:`PROBE_RATIO` times larger probe that table's ``id`` index instead of reading it.
    """
    # the Spark-job checks: used only where spread() (or the caller) found dist set
    jobs = cast(DistChecks, dist)
    catalog: Catalog = graph.catalog
    so = graph.storage_options
    # a load's fingerprint files never change: compared once, for the checks before the lease
    # and inside it alike
    fingerprints = Once()

    def distinct(uris: tuple[str, ...]) -> bool:
        return fingerprints(uris, lambda: side_files.fingerprints_distinct(uris, so))

    # likewise the edge tasks' bucket-count files: added up once
    bucket_bounds = Once()

    def tasks_bound(proof: EndsProof) -> int:
        """The staging tasks' bound on any source's edges in the load (I15)."""
        if not proof.src_sketches:
            return proof.src_bound

        def summed() -> int:
            bound = proven_src_bound(proof, so)
            log.info(
                "the staging tasks' bucket counts bound a source's edges in the load at %d (their bounds summed: %d)",
                bound,
                proof.src_bound,
            )
            return bound

        return bucket_bounds((proof.src_sketches, proof.src_bound, proof.unsketched_bound), summed)

    def validate(
        snap: Snapshot, staged: Mapping[str, StagedTable], distributed_only: bool = False
    ) -> dict[str, dict[str, str]] | Checked:
        # Every read is lazy and shared (Once): the checks below run concurrently and each
        # reads what it needs, so Lance reads overlap other checks' hashing instead of all
        # reads running first. Each column set is still read once.
        once = Once()

        def staged_cols(key: str, cols: Sequence[str]) -> pa.Table:
            def read() -> pa.Table:
                s = staged[key]
                t = _read_staged(s, cols, so) if s.fragments else None
                if t is None:
                    schema = graph.open_table(key, snap).schema
                    t = pa.Table.from_batches([], schema=pa.schema([schema.field(c) for c in cols]))
                return t

            return once(("staged", key, tuple(cols)), read)

        def committed(key: str, cols: Sequence[str]) -> pa.Table:
            return once(("committed", key, tuple(cols)), lambda: _read_committed(graph, snap, key, cols))

        def recorded_bound(key: str) -> int | None:
            t = snap.table(key)
            if t.row_count == 0:  # no committed edge: no source has one
                return 0
            v = _tables.transaction_property(graph.open_table(key, snap), t.version, SRC_BOUND_PROP)
            return int(v) if v is not None and v.isdigit() else None

        facts: dict[str, dict[str, str]] = {}  # each check writes only its own table's entry

        def card_check(td: TypeDef, mode: str, proof: EndsProof | None, key: str, end_cols: list[str]) -> None:
            most = _card_of(
                td,
                mode,
                None if proof is None else tasks_bound(proof),
                staged_cols,
                key,
                end_cols,
                committed,
                lambda: recorded_bound(key),
            )
            if most is not None:
                facts[key] = {SRC_BOUND_PROP: str(most)}

        def card_bounded(td: TypeDef, mode: str, proof: EndsProof | None, key: str) -> None:
            """:func:`_card_of` in bounded memory (an append or overwrite; I24)."""
            s, card = staged[key], td.cardinality
            ds = table_of(key) if mode == "append" and snap.table(key).row_count else None
            old = [] if ds is None else [_bounded.committed_column(ds, "src")]
            new = _bounded.staged_column(s, "src", so)
            rows = s.rows + snap.table(key).row_count
            if card.max is not None and card.min <= 1:
                most = 0 if mode == "overwrite" else recorded_bound(key)
                proven = None if proof is None else tasks_bound(proof)
                if most is None and proven is not None:
                    most = _bounded.card_counts(td, old, rows, check=False)
                if most is not None:
                    load = proven if proven is not None else _bounded.card_counts(td, [new], s.rows, check=False)
                    if load + most <= card.max:
                        _card_proven(td, load + most)
                        facts[key] = {SRC_BOUND_PROP: str(load + most)}
                        return
            most = _bounded.card_counts(td, [new, *old], rows)
            if card.max is not None:
                facts[key] = {SRC_BOUND_PROP: str(most)}

        def card_merge_bounded(td: TypeDef, key: str) -> None:
            """:func:`_card_of` of a merge in bounded memory (I27): the committed sources a batch
            at a time, less the rows the merge replaces (its ids: bounded by the merge), plus the
            merge's own, counted bucket by bucket. A merge repeating an id is refused by its id
            check, which comes first, so its rows need no collapsing by id here."""
            s = staged[key]
            ds = table_of(key) if snap.table(key).row_count else None
            merged = staged_cols(key, ["id"]).column("id")

            def kept() -> Iterator[pa.Array]:
                if ds is None:
                    return
                for batch in ds.to_batches(columns=["id", "src"], batch_size=_bounded.SCAN_BATCH_ROWS):
                    keep = pc.invert(pc.fill_null(pc.is_in(batch.column("id"), value_set=merged), False))
                    yield pc.filter(batch.column("src"), keep)

            most = _bounded.card_counts(
                td, [_bounded.staged_column(s, "src", so), kept], s.rows + snap.table(key).row_count
            )
            if td.cardinality.max is not None:
                facts[key] = {SRC_BOUND_PROP: str(most)}

        def node_ids(type_name: str) -> pa.ChunkedArray:
            # the same object for both ends of X -> X edges (check_endpoints hashes it once)
            return once(("ids", type_name), lambda: _node_ids(type_name))

        def _node_ids(type_name: str) -> pa.ChunkedArray:
            key = f"node:{type_name}"
            parts: list[pa.ChunkedArray] = []
            if key in staged:
                parts.append(staged_cols(key, ["id"]).column("id"))
            if not (key in staged and staged[key].mode == "overwrite"):
                parts.append(committed(key, ["id"]).column("id"))
            chunks = [c for p in parts for c in p.chunks]
            return pa.chunked_array(chunks, pa.string())

        def big(rows: int) -> bool:
            """Without Spark jobs, does this check run in bounded memory (:mod:`.bounded`)?"""
            return bool(bounded_rows) and rows >= bounded_rows

        def table_of(key: str):
            return once(("table", key), lambda: graph.open_table(key, snap))

        def node_ids_of(nkey: str) -> _bounded.NodeIds:
            src = id_source(snap, staged, nkey)
            return _bounded.NodeIds(None if src.table is None else table_of(nkey), src.files)

        def schema_of(key: str) -> pa.Schema:
            return once(("schema", key), lambda: graph.open_table(key, snap).schema)

        def spread(rows: int, *keys_cols: tuple[str, Sequence[str]]) -> bool:
            """This check reads ``rows`` rows: run it as Spark jobs?"""
            return (
                dist is not None
                and dist.wants(rows)
                and all(dist.supports(schema_of(k), cols) for k, cols in keys_cols)
            )

        def ids_rows(type_name: str) -> int:
            nkey = f"node:{type_name}"
            n = staged[nkey].rows if nkey in staged else 0
            return n if nkey in staged and staged[nkey].mode == "overwrite" else n + snap.table(nkey).row_count

        def card_dist(td: TypeDef, mode: str, proof: EndsProof | None, key: str) -> None:
            card = td.cardinality
            if proof is not None and mode != "merge" and card.max is not None and card.min <= 1:
                most = 0 if mode == "overwrite" else recorded_bound(key)  # I15 + I16: no rows read
                bound = None if most is None else tasks_bound(proof) + most
                if bound is not None and bound <= card.max:
                    _card_proven(td, bound)
                    facts[key] = {SRC_BOUND_PROP: str(bound)}
                    return
            most = jobs.card(
                td, mode, staged[key], schema_of(key), None if mode == "overwrite" else committed_pin(snap, key)
            )
            if most is not None and card.max is not None:
                facts[key] = {SRC_BOUND_PROP: str(most)}

        # in the order a sequential run would raise; True: the check runs as Spark jobs
        checks: list[tuple[Callable[[], None], bool]] = []
        for key in sorted(staged):
            s = staged[key]
            td = catalog.by_table_key(key)
            if s.mode == "delete":  # resolved below (deletions, I18)
                continue
            groups = unique_groups(td)
            # append is a strict insert (I17): a repeated id is a KEY_CONFLICT, not a uniqueness slip
            strict = s.mode == "append" and not s.minted_ids
            id_by_key = _id_is_checked_key(td, groups)
            for cols, what in groups:
                conflict = strict and id_by_key and cols == (td.key_property,)
                spread_out = spread(s.rows, (key, cols))
                if spread_out:  # I21
                    exact = functools.partial(jobs.unique, td, s, schema_of(key), cols, what, conflict=conflict)
                elif big(s.rows):  # I24
                    exact = functools.partial(_bounded.unique, td, s, cols, what, so, conflict)
                else:
                    exact = functools.partial(_unique_of, td, staged_cols, key, cols, what, conflict=conflict)
                if s.key_hashes is not None and cols == (s.key_column,):  # the tasks' fingerprints (I15)
                    checks.append((functools.partial(_unique_fingerprinted, td, s, what, exact, distinct), spread_out))
                else:
                    checks.append((exact, spread_out))
            id_cols = ["id", "src", "dst"] if td.is_edge else ["id"]
            if not id_by_key and not s.minted_ids:
                what = "duplicate id in one load (merge never picks a winner)" if s.mode == "merge" else "id"
                if spread(s.rows, (key, ["id"])):
                    checks.append(
                        (functools.partial(jobs.unique, td, s, schema_of(key), ["id"], what, conflict=strict), True)
                    )
                elif big(s.rows):  # I24
                    checks.append((functools.partial(_bounded.unique, td, s, ["id"], what, so, strict), False))
                else:  # edges: read id, src and dst in one pass and check id on that table
                    checks.append(
                        (
                            functools.partial(
                                _unique_of, td, staged_cols, key, ["id"], what, read_cols=id_cols, conflict=strict
                            ),
                            False,
                        )
                    )
            committed_rows = snap.table(key).row_count
            if strict and committed_rows and not _fresh_proven(td, s, snap):
                if spread(s.rows + committed_rows, (key, ["id"])):
                    checks.append(
                        (
                            functools.partial(
                                jobs.fresh, td, s, schema_of(key), committed_pin(snap, key), committed_rows, snap.branch
                            ),
                            True,
                        )
                    )
                elif _probes(s.rows, committed_rows) or big(s.rows + committed_rows):  # I24
                    checks.append(
                        (
                            functools.partial(
                                _fresh_bounded, td, s, table_of, snap.branch, so, _probes(s.rows, committed_rows)
                            ),
                            False,
                        )
                    )
                else:
                    checks.append(
                        (functools.partial(_fresh_of, td, snap.branch, staged_cols, committed, key, id_cols), False)
                    )
            if not td.is_edge:
                continue
            # minted ids are all new: nothing to shadow, nothing to collapse, so no id column,
            # and a merge of them only inserts: to the counts it is an append
            end_cols = ["src", "dst"] if s.minted_ids else ["id", "src", "dst"]
            fkey, tkey = f"node:{td.from_type}", f"node:{td.to_type}"
            if not _ends_proven(td, s, snap, staged):
                if spread(
                    s.rows + ids_rows(td.from_type or "") + ids_rows(td.to_type or ""),
                    (key, ["src", "dst"]),
                    (fkey, ["id"]),
                    (tkey, ["id"]),
                ):
                    checks.append(
                        (
                            functools.partial(
                                jobs.endpoints,
                                td,
                                s,
                                schema_of(key),
                                id_source(snap, staged, fkey),
                                id_source(snap, staged, tkey),
                                schema_of(fkey),
                                schema_of(tkey),
                            ),
                            True,
                        )
                    )
                elif _probes(s.rows, _committed_ids(snap, staged, fkey) + _committed_ids(snap, staged, tkey)) or big(
                    s.rows + ids_rows(td.from_type or "") + ids_rows(td.to_type or "")
                ):  # I24
                    probe = _probes(s.rows, _committed_ids(snap, staged, fkey) + _committed_ids(snap, staged, tkey))
                    checks.append(
                        (
                            functools.partial(_endpoints_bounded, td, s, node_ids_of, fkey, tkey, so, probe),
                            False,
                        )
                    )
                else:
                    checks.append((functools.partial(_endpoints_of, td, staged_cols, key, end_cols, node_ids), False))
            card = td.cardinality
            if card.min > 0 or card.max is not None:
                mode = "append" if s.mode == "merge" and s.minted_ids else s.mode
                read = s.rows + (0 if mode == "overwrite" else committed_rows)
                if spread(read, (key, ["id", "src"] if mode == "merge" else ["src"])):
                    checks.append((functools.partial(card_dist, td, mode, s.ends, key), True))
                elif mode != "merge" and big(read):  # I24
                    checks.append((functools.partial(card_bounded, td, mode, s.ends, key), False))
                elif big(read):  # I27
                    checks.append((functools.partial(card_merge_bounded, td, key), False))
                else:
                    checks.append((functools.partial(card_check, td, mode, s.ends, key, end_cols), False))

        # a merge's commit deletes the committed rows it replaces: above the threshold the
        # executors find them and write the deletion files (on the table's own lineage: a
        # branch's first write forks the table inside the lease, so it is found there)
        merges = [
            key
            for key in sorted(staged)
            if staged[key].mode == "merge"
            and snap.table(key).row_count
            and snap.table(key).branch == snap.branch
            and spread(staged[key].rows + snap.table(key).row_count, (key, ["id"]))
        ]
        replaced: dict[str, Replaced] = {}

        def replace(key: str) -> None:
            replaced[key] = jobs.replaced(key, staged[key], schema_of(key), committed_pin(snap, key))

        def integrity() -> tuple[dict[str, pa.Array], dict[str, int]]:
            """I18, each part in memory, in bounded memory (I27) or as Spark jobs (I21) by the
            rows it reads."""
            in_memory = InMemory(committed, staged_cols)
            bounded = Bounded(table_of, staged_cols, so)
            spark_jobs = Distributed(dist, snap, staged, schema_of) if dist is not None else None

            def reader(rows: int, *keys_cols: tuple[str, Sequence[str]]) -> object:
                if spread(rows, *keys_cols):
                    return spark_jobs
                return bounded if big(rows) else in_memory

            return _deletions(catalog, snap, staged, cascade, reader)

        if distributed_only:
            if dist is not None:
                proofs: list[Callable[[], object]] = [c for c, spread_out in checks if spread_out]
                integrity_rows = _integrity_rows(catalog, snap, staged)
                if dist.wants(integrity_rows):
                    # its Spark-job parts memoise their answers; its in-memory parts, each under
                    # the threshold, run again inside the lease
                    proofs.append(integrity)
                passed = dist.prove(proofs)
                if passed and merges and not integrity_rows:
                    # only for a load that passed its checks and deletes nothing: the deletion
                    # files are written now, and a load that fails later leaves them to cleanup
                    dist.prove([functools.partial(replace, k) for k in merges])
            return facts
        run_checks([c for c, _ in checks])
        deletions, missing = integrity()
        for key in merges:
            if key not in deletions:
                replace(key)  # found before the lease unless the table moved since
        if deletions or missing or replaced:
            return Checked(facts, deletions, missing, replaced)
        return facts

    return validate


def _integrity_rows(catalog: Catalog, snap: Snapshot, staged: Mapping[str, StagedTable]) -> int:
    """At least the rows the largest part of I18 (:func:`~.deletions.deletions`) reads: the
    biggest committed table plus every staged row; 0 when the load neither deletes nor
    overwrites a node type (I18 has no part to run)."""
    if not any(
        s.mode == "delete" or s.deletes is not None or (s.mode == "overwrite" and not catalog.by_table_key(k).is_edge)
        for k, s in staged.items()
    ):
        return 0
    return max(snap.table(td.table_key).row_count for td in catalog.types()) + sum(s.rows for s in staged.values())


def _read_staged(s: StagedTable, cols: Sequence[str], storage_options) -> pa.Table:
    """Driver: ``cols`` of every staged row of ``s`` (the in-memory checks' only staged read)."""
    return _tables.read_staged_columns(s.stage_uri, s.fragments, list(cols), storage_options)


def _read_committed(graph: Graph, snap: Snapshot, key: str, cols: Sequence[str]) -> pa.Table:
    """Driver: ``cols`` of every committed row of ``key`` at the snapshot (the in-memory checks'
    only committed read)."""
    return graph.open_table(key, snap).to_table(columns=list(cols))


_INJECTIVE_KEY_TYPES = frozenset({"String", "I32", "I64", "U32", "U64"})


def _id_is_checked_key(td: TypeDef, groups: Sequence[tuple[tuple[str, ...], str]]) -> bool:
    """A keyed node's id is its @key value as text, an injective mapping for String and integer
    keys: the key's uniqueness check already proves the ids distinct (one hash pass, not two)."""
    key = td.key_property
    if td.is_edge or key is None or (key,) not in [cols for cols, _ in groups]:
        return False
    prop = next((p for p in td.properties if p.name == key), None)
    return prop is not None and not prop.type.list and prop.type.scalar in _INJECTIVE_KEY_TYPES


def id_source(snap: Snapshot, staged: Mapping[str, StagedTable], node_key: str) -> IdSource:
    """The ids node type ``node_key`` offers an endpoint check of a load staging ``staged`` on
    ``snap``: the committed table (unless the load overwrites it) plus the load's staged files.
    The same rule ``node_ids`` in :func:`make_validator` reads by."""
    s = staged.get(node_key)
    files = tuple(_tables.data_file_uris(s.stage_uri, s.fragments)) if s is not None else ()
    if s is not None and s.mode == "overwrite":
        return IdSource(None, files)
    t = snap.table(node_key)
    return IdSource((t.base_path, t.lance_branch, t.version), files)


def _ends_proven(td: TypeDef, s: StagedTable, snap: Snapshot, staged: Mapping[str, StagedTable]) -> bool:
    """The staging tasks found no dangling endpoint against exactly the ids this commit would
    check against (I15): the same committed versions, the same staged files."""
    p = s.ends
    ok = (
        p is not None
        and p.dangling == 0
        and p.src_ids == id_source(snap, staged, f"node:{td.from_type}")
        and p.dst_ids == id_source(snap, staged, f"node:{td.to_type}")
    )
    if p is not None:
        log.info(
            "%s endpoints: %s",
            td.table_key,
            "proven while staging"
            if ok
            else f"checked on the driver ({p.dangling} rows unproven or the node tables moved)",
        )
    return ok


def _fresh_proven(td: TypeDef, s: StagedTable, snap: Snapshot) -> bool:
    """The staging tasks found none of the append's ids among the committed ids of exactly
    the version this commit lands on (I17)."""
    p = s.fresh
    if p is None:
        return False
    t = snap.table(td.table_key)
    ok = p.conflicts == 0 and p.committed == IdSource((t.base_path, t.lance_branch, t.version))
    log.info(
        "%s strict append: %s",
        td.table_key,
        "no committed id, proven while staging"
        if ok
        else f"checked on the driver ({p.conflicts} conflicts found while staging or the table moved)",
    )
    return ok


#: a check of few staged rows probes a committed table at least this many times larger (its
#: ``id`` index, :mod:`..store.id_probe`) instead of reading its ids (I24)
PROBE_RATIO = 4


def _probes(staged_rows: int, committed_rows: int) -> bool:
    """Does a check of ``staged_rows`` against ``committed_rows`` probe the committed index?"""
    return 0 < staged_rows <= _bounded.PROBE_ROWS and committed_rows >= PROBE_RATIO * staged_rows


def _committed_ids(snap: Snapshot, staged: Mapping[str, StagedTable], node_key: str) -> int:
    """The committed rows of node type ``node_key`` an endpoint check reads (0: overwritten)."""
    s = staged.get(node_key)
    return 0 if s is not None and s.mode == "overwrite" else snap.table(node_key).row_count


def _fresh_bounded(td: TypeDef, s: StagedTable, table_of, branch: str, so, probe: bool) -> None:
    """Strict append (I17) in bounded memory (I24): the index probed, or both sides bucketed."""
    _bounded.fresh(td, s, table_of(td.table_key), branch, so, probe=probe)


def _endpoints_bounded(td: TypeDef, s: StagedTable, node_ids_of, fkey: str, tkey: str, so, probe: bool) -> None:
    """Endpoint existence in bounded memory (I24): the node tables' indexes probed, or the ends
    and the ids bucketed."""
    _bounded.endpoints(td, s, node_ids_of(fkey), node_ids_of(tkey), so, same=fkey == tkey, probe=probe)


def _fresh_of(td: TypeDef, branch: str, staged_cols, committed, key: str, read_cols: Sequence[str]) -> None:
    """Strict append (I17): no staged id is already committed (the id columns only)."""
    check_fresh_ids(td, staged_cols(key, read_cols).column("id"), committed(key, ["id"]).column("id"), branch=branch)


def _unique_fingerprinted(
    td: TypeDef, s: StagedTable, what: str, exact: Callable[[], None], distinct: Callable[[tuple[str, ...]], bool]
) -> None:
    """A single-column uniqueness rule: if no two of the staging tasks' fingerprints are equal
    (``distinct``: :func:`~..store.side_files.fingerprints_distinct`), no two values are (equal
    values always fingerprint alike); otherwise ``exact()`` decides and words any error (in
    memory or as Spark jobs, I21)."""
    try:
        proven = distinct(tuple(s.key_hashes or ()))
    except (OSError, ValueError) as e:  # e.g. cleanup took the journal of a load idle past its grace: no proof
        log.warning("%s %s: key fingerprints unreadable (%s); checking exactly", td.table_key, what, e)
    else:
        if proven:
            log.info("%s %s: %d values proven distinct by fingerprints", td.table_key, what, s.rows)
            return
    exact()


def _unique_of(
    td: TypeDef,
    staged_cols,
    key: str,
    cols: Sequence[str],
    what: str,
    read_cols: Sequence[str] | None = None,
    conflict: bool = False,
) -> None:
    """One uniqueness rule over the staged rows; ``conflict``: the rule proves an append's ids
    distinct, so a repeat is a KEY_CONFLICT naming every repeated id (I17)."""
    table = staged_cols(key, read_cols or cols)
    try:
        check_unique(td, table, list(cols), what=what)
    except UniqueViolationError:
        if not conflict:
            raise
        ids = pc.cast(table.column(cols[0]), pa.string())
        vc = pc.value_counts(ids.drop_null())
        raise_key_conflict(
            td, pc.filter(vc.field("values"), pc.greater(vc.field("counts"), 1)), "given more than once in this load"
        )


def _endpoints_of(td: TypeDef, staged_cols, key: str, end_cols: Sequence[str], node_ids) -> None:
    ends = staged_cols(key, end_cols)
    check_endpoints(
        td, ends.column("src"), ends.column("dst"), node_ids(td.from_type or ""), node_ids(td.to_type or "")
    )


def _most_per_src(src: pa.ChunkedArray) -> int:
    """The most edges any one source has in ``src`` (0 for none)."""
    counts = src_counts(src)["count"]
    return pc.max(counts).as_py() if len(counts) else 0


def _card_of(
    td: TypeDef,
    mode: str,
    proven: int | None,
    staged_cols,
    key: str,
    end_cols: Sequence[str],
    committed,
    recorded_bound: Callable[[], int | None],
) -> int | None:
    """Apply @card to one staged edge table; return an upper bound of the edges any source has
    in the version the commit creates (None: no @card max, nothing to record). ``proven``: the
    staging tasks' bound on any source's edges in the load (I15; None: none).

    The bound shortcut (a max, min <= 1 since a source with edges always has >= 1, not a
    merge): the load's own most edges per source (the staging tasks' bound, I15, else counted
    from the staged ``src``) plus the most any committed source has (append; overwrite counts
    none) cannot exceed the max, so no source can. The committed part is the bound recorded
    with the pinned version (I16); without one, it is counted only when the tasks' bound makes
    the count worth it. Otherwise every source is counted exactly."""
    card = td.cardinality
    if mode != "merge" and card.max is not None and card.min <= 1:
        most = 0 if mode == "overwrite" else recorded_bound()
        if most is None and proven is not None:
            most = _most_per_src(committed(key, ["src"]).column("src"))
        if most is not None:
            load = proven if proven is not None else _most_per_src(staged_cols(key, end_cols).column("src"))
            if load + most <= card.max:
                _card_proven(td, load + most)
                return load + most
    old_cols = {"append": ["src"], "merge": ["id", "src"]}.get(mode)  # overwrite: None
    most = _check_card(td, mode, staged_cols(key, end_cols), committed(key, old_cols) if old_cols else None)
    return most if card.max is not None else None


def _card_proven(td: TypeDef, bound: int) -> None:
    log.info(
        "%s @card: at most %d edges per source <= max %d, proven without counting",
        td.table_key,
        bound,
        td.cardinality.max,
    )


def _check_card(td: TypeDef, mode: str, ends: pa.Table, old: pa.Table | None) -> int | None:
    if old is not None and mode != "merge":  # append: committed + pending in one counting pass
        return check_cardinality(td, ends.column("src"), committed_src=old.column("src"))
    committed_counts = shadowed = None
    if old is not None:
        committed_counts = src_counts(old.column("src"))
        shadowed = shadowed_src_counts(old.column("id"), old.column("src"), ends.column("id"))
    return check_cardinality(
        td,
        ends.column("src"),
        committed_counts,
        overwrite=mode == "overwrite",
        shadowed_committed=shadowed,
        pending_ids=ends.column("id") if mode == "merge" else None,
    )


__all__ = ["make_validator", "id_source"]
