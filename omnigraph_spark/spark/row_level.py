"""SQL ``UPDATE`` and ``MERGE INTO`` on a catalog table (docs/sql.md): the commit of one
row-level statement.

The shim's catalog table (``CatalogRowLevel``, Spark's ``SupportsDelta``) scans the type at ONE
manifest version of the branch (:func:`pin`), and its tasks hand the JVM sink every updated and
inserted row as a ``writeMode=merge`` write stages them, collecting the ``id`` of every updated
and deleted row. The bridge then commits the statement as ONE load of the planned merge write
plus a delete of the collected ids (node deletes cascade to edges, as ``DELETE FROM`` does), after
the checks here, which hold exactly because the commit refuses a table that moved since the
scan (``StagedTable.strict_base``: EXPECTED_VERSION_MISMATCH, nothing committed):

- a row the tasks refused for changing its ``id`` or a node's @key is KEY_CHANGE;
- an updated edge whose ``src`` or ``dst`` differs from the scanned row's is KEY_CHANGE;
- an inserted row (a staged id that is not an updated one) whose id is committed in the
  scanned snapshot is KEY_CONFLICT, worded as an append's (an INSERT clause is a strict insert).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import KeyChangeError
from ..graph import Graph
from ..ingest.checks import raise_key_conflict
from ..ingest.integrity import delete_keys, member
from ..schema.catalog import TypeDef
from ..store.id_probe import CommittedIds
from ..store.tables import read_staged_columns
from ..store.writes import StagedTable, WriteTarget

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowLevel:
    """What one statement's tasks collected, and the snapshot it scanned (the commit request's
    ``row_level`` field)."""

    command: str  # UPDATE, MERGE (Spark's RowLevelOperation.Command)
    version: int  # the manifest version the statement scanned
    table_version: int  # the type's table version in it
    updated: tuple[str, ...]
    deleted: tuple[str, ...]
    #: the first row a task refused: {"column", "id", "value"} (KEY_CHANGE)
    refused: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RowLevel:
        return cls(
            str(d["command"]),
            int(d["version"]),
            int(d["table_version"]),
            tuple(d.get("updated") or ()),
            tuple(d.get("deleted") or ()),
            d.get("refused"),
        )


def pin(graph: Graph, typedef: TypeDef, branch: str) -> dict[str, int]:
    """The snapshot a statement scans: the branch head's manifest version and the type's table
    version in it (the commit refuses the table if it moved past that version)."""
    snap = graph.snapshot(branch)
    return {"version": snap.version, "table_version": snap.table(typedef.table_key).version}


def _committed(ds, cols: Sequence[str], ids: pa.Array, storage_options: dict[str, str] | None) -> pa.Table:
    """The committed rows (``cols``) whose id is in ``ids``, in the scanned version ``ds``: found
    through the table's ``id`` index (I27), so reads and memory follow ``ids``, not the table."""
    return CommittedIds(ds, "id", storage_options).locate(ids, cols).select(list(cols))


def _key_change(typedef: TypeDef, command: str, column: str, row_id: str, old: Any, new: Any) -> KeyChangeError:
    return KeyChangeError(
        f"{command} of {typedef.kind} {typedef.name}: row id {row_id!r} would change its {column!r} "
        f"from {old!r} to {new!r}; {column!r} names the row (delete it and insert the new one); "
        "nothing was committed",
        table=typedef.table_key,
        column=column,
        value=row_id,
    )


def staged(
    graph: Graph, typedef: TypeDef, target: WriteTarget, got: Sequence[StagedTable], rl: RowLevel
) -> list[StagedTable]:
    """The statement's load: ``got`` (the merge rows the sink staged) and the delete of the
    collected ids, pinned to the scanned table version, after the checks of the module doc."""
    if rl.refused:
        r = rl.refused
        raise _key_change(typedef, rl.command, str(r["column"]), str(r["id"]), r.get("old"), r.get("value"))
    branch = target.branch
    snap = graph.snapshot(branch, rl.version)
    key = typedef.table_key
    cols = ["id", "src", "dst"] if typedef.is_edge else ["id"]
    frags = [f for s in got for f in s.fragments]
    rows = (
        read_staged_columns(got[0].stage_uri, frags, cols, graph.storage_options)
        if frags
        else pa.table({c: pa.array([], pa.string()) for c in cols})
    )
    updated = pa.array(rl.updated, pa.string())
    is_update = member(rows.column("id"), updated)
    if rows.num_rows:
        ds = graph.open_table(key, snap)
        inserted = pc.filter(rows.column("id"), pc.invert(is_update))
        taken = _committed(ds, ["id"], inserted, graph.storage_options).column("id")
        if len(taken):
            raise_key_conflict(typedef, pc.unique(taken), f"already committed on branch '{branch}'")
        if typedef.is_edge and len(updated):
            committed = _committed(ds, cols, updated, graph.storage_options)
            changed = rows.filter(is_update).join(committed, "id", right_suffix="_was")
            for c in ("src", "dst"):
                differs = pc.fill_null(pc.not_equal(changed.column(c), changed.column(f"{c}_was")), True)
                hit = changed.filter(differs)
                if hit.num_rows:
                    raise _key_change(
                        typedef,
                        rl.command,
                        c,
                        hit.column("id")[0].as_py(),
                        hit.column(f"{c}_was")[0].as_py(),
                        hit.column(c)[0].as_py(),
                    )
    out = [replace(s, base_version=rl.table_version, strict_base=True) for s in got]
    if rl.deleted:
        keys = delete_keys(typedef, pa.table({"id": pa.array(rl.deleted, pa.string())}))
        out.append(
            StagedTable(
                key,
                target.mode,
                target.stage_uri,
                rl.table_version,
                (),
                keys.num_rows,
                0,
                deletes=keys,
                strict_base=True,
            )
        )
    log.info(
        "%s of %s on %s at version %d: %d rows staged (%d updated), %d deleted",
        rl.command,
        key,
        branch,
        rl.version,
        rows.num_rows,
        len(rl.updated),
        len(rl.deleted),
    )
    return out
