"""Recovery sidecars: ``__recovery/<ULID>.json`` in the engine's exact JSON shape (§H.1).

A sidecar is the serialised value of a write's intent: which tables it will commit, from which
pinned version to which. It is written before the first table commit and deleted after the
commit row, so a crash anywhere in between leaves enough on disk to finish or undo the write.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass

from ..errors import CorruptSidecarError, UnsupportedFormatError
from .commits import new_ulid, now_us
from .fs import RootStorage
from .layout import MAIN, RootPaths, join

log = logging.getLogger(__name__)

SIDECAR_SCHEMA_VERSION = 2
WRITER_KINDS = ("Mutation", "Load", "SchemaApply", "BranchMerge", "EnsureIndices", "Optimize")
_TABLE_DIR = re.compile(r"(?:^|/)((?:nodes|edges)/[0-9a-f]{16})/?$")


@dataclass(frozen=True)
class SidecarPin:
    table_key: str
    table_path: str  # full dataset URI (root + "/" + nodes/<h16>), never with /tree/
    expected_version: int
    post_commit_pin: int
    confirmed_version: int | None = None
    table_branch: str | None = None

    @property
    def table_dir(self) -> str | None:
        """The table's path relative to its graph root (``nodes/<h16>``), or None if the pinned
        URI does not end in one."""
        m = _TABLE_DIR.search(self.table_path)
        return m.group(1) if m else None

    def to_obj(self) -> dict:
        o = {
            "table_key": self.table_key,
            "table_path": self.table_path,
            "expected_version": self.expected_version,
            "post_commit_pin": self.post_commit_pin,
        }
        if self.confirmed_version is not None:
            o["confirmed_version"] = self.confirmed_version
        if self.table_branch is not None:
            o["table_branch"] = self.table_branch
        return o


@dataclass(frozen=True)
class Sidecar:
    operation_id: str
    branch: str | None  # None = main
    actor_id: str | None
    writer_kind: str
    tables: tuple[SidecarPin, ...]
    started_at: str = "0"
    schema_version: int = SIDECAR_SCHEMA_VERSION
    merge_source_commit_id: str | None = None
    additional_registrations: tuple[dict, ...] = ()
    tombstones: tuple[dict, ...] = ()

    @classmethod
    def new(cls, branch: str, actor: str | None, writer_kind: str, pins: list[SidecarPin]) -> Sidecar:
        return cls(
            operation_id=new_ulid(),
            branch=None if branch == MAIN else branch,
            actor_id=actor,
            writer_kind=writer_kind,
            tables=tuple(pins),
            started_at=str(now_us()),
        )

    @property
    def graph_branch(self) -> str:
        return self.branch or MAIN

    def localized(self, root: str) -> Sidecar:
        """This sidecar with every pin pointing at the table under ``root``.

        Pins are full dataset URIs (§H.1), so a graph copied or mounted elsewhere (a backup,
        ``/dbfs/x`` vs ``dbfs:/x``) carries pins naming the *old* location; healing through them
        would restore another graph's tables (interop D5). The ``nodes|edges/<hash>`` tail
        names the table; we resolve it under the root being opened and say so when it differs.
        """
        pins = []
        for pin in self.tables:
            local = join(root, pin.table_dir) if pin.table_dir else pin.table_path
            if local != pin.table_path:
                log.warning(
                    "recovery sidecar %s pins %s at %s; using the table under this root instead: %s",
                    self.operation_id,
                    pin.table_key,
                    pin.table_path,
                    local,
                )
                pin = dataclasses.replace(pin, table_path=local)
            pins.append(pin)
        return dataclasses.replace(self, tables=tuple(pins))

    def to_json(self) -> str:
        o = {
            "schema_version": self.schema_version,
            "operation_id": self.operation_id,
            "started_at": self.started_at,
            "branch": self.branch,
            "actor_id": self.actor_id,
            "writer_kind": self.writer_kind,
            "tables": [p.to_obj() for p in self.tables],
        }
        if self.merge_source_commit_id is not None:
            o["merge_source_commit_id"] = self.merge_source_commit_id
        if self.additional_registrations:
            o["additional_registrations"] = list(self.additional_registrations)
        if self.tombstones:
            o["tombstones"] = list(self.tombstones)
        return json.dumps(o, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, where: str) -> Sidecar:
        try:
            o = json.loads(text)
        except json.JSONDecodeError as e:
            raise CorruptSidecarError(
                f"recovery sidecar at '{where}' is not valid JSON ({e}); operator review "
                "required: it was left in place",
                path=where,
            ) from e
        if not isinstance(o, dict):
            raise CorruptSidecarError(f"recovery sidecar at '{where}' is not a JSON object", path=where)
        sv = o.get("schema_version")
        if isinstance(sv, int) and sv > SIDECAR_SCHEMA_VERSION:
            raise UnsupportedFormatError(
                f"recovery sidecar at '{where}' declares schema_version={sv}, newer than the maximum this "
                f"build supports (schema_version={SIDECAR_SCHEMA_VERSION}); refusing to interpret it",
                path=where,
                schema_version=sv,
            )
        try:
            pins = tuple(
                SidecarPin(
                    p["table_key"],
                    p["table_path"],
                    int(p["expected_version"]),
                    int(p["post_commit_pin"]),
                    p.get("confirmed_version"),
                    p.get("table_branch"),
                )
                for p in o["tables"]
            )
            kind = o["writer_kind"]
            if kind not in WRITER_KINDS:
                raise ValueError(f"unknown writer_kind {kind!r}")
            if not isinstance(sv, int) or sv < 1:
                raise ValueError(f"bad schema_version {sv!r}")
            return cls(
                operation_id=o["operation_id"],
                branch=o["branch"],
                actor_id=o["actor_id"],
                writer_kind=kind,
                tables=pins,
                started_at=str(o.get("started_at", "0")),
                schema_version=sv,
                merge_source_commit_id=o.get("merge_source_commit_id"),
                additional_registrations=tuple(o.get("additional_registrations") or ()),
                tombstones=tuple(o.get("tombstones") or ()),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptSidecarError(
                f"recovery sidecar at '{where}' does not match the sidecar schema ({e!r}); "
                "operator review required: it was left in place",
                path=where,
            ) from e


def write(storage: RootStorage, root: str, sidecar: Sidecar) -> str:
    path = RootPaths(root).sidecar(sidecar.operation_id)
    storage.write_text(path, sidecar.to_json())
    return path


def delete(storage: RootStorage, root: str, operation_id: str) -> bool:
    return storage.delete(RootPaths(root).sidecar(operation_id))


def list_paths(storage: RootStorage, root: str) -> list[str]:
    """Sidecar paths in ULID (name) order; non-.json names are skipped, as the engine does."""
    d = RootPaths(root).recovery_dir
    return [f"{d}/{n}" for n in storage.list_dir(d) if n.endswith(".json")]


def read(storage: RootStorage, root: str, path: str) -> Sidecar | None:
    """The pending sidecar at ``path``, pins localized under ``root``; None if it was resolved
    (deleted) meanwhile. Raises CorruptSidecarError / UnsupportedFormatError."""
    try:
        text = storage.read_text(path)
    except FileNotFoundError:
        return None
    return Sidecar.from_json(text, path).localized(root)


def read_all(storage: RootStorage, root: str) -> list[Sidecar]:
    """Every pending sidecar in ULID order, pins localized under ``root``."""
    return [sc for sc in (read(storage, root, p) for p in list_paths(storage, root)) if sc is not None]
