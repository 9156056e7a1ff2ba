"""The catalog: node and edge types with Arrow schemas, built from the schema IR.

Why from the IR and not the AST: the engine builds its runtime catalog from ``_schema.ir.json``
(sorted properties, sorted key columns), so column order and the key property follow the IR.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import UnknownTypeError

SCALARS = ("String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime", "Blob")

_ARROW: dict[str, pa.DataType] = {
    "String": pa.string(),
    "Bool": pa.bool_(),
    "I32": pa.int32(),
    "I64": pa.int64(),
    "U32": pa.uint32(),
    "U64": pa.uint64(),
    "F32": pa.float32(),
    "F64": pa.float64(),
    "Date": pa.date32(),
    "DateTime": pa.date64(),  # the engine stores DateTime as Date64 (ms), not Timestamp
    "Blob": pa.large_binary(),  # compiler placeholder; real Blob tables take the dataset schema
}


@dataclass(frozen=True)
class PropType:
    scalar: str  # one of SCALARS, or "Vector"
    nullable: bool = False
    list: bool = False
    enum_values: tuple[str, ...] | None = None
    vector_dim: int | None = None

    @classmethod
    def from_ir(cls, ir: Mapping[str, Any]) -> PropType:
        scalar = ir["scalar"]
        dim = None
        if isinstance(scalar, dict):
            dim = int(scalar["Vector"])
            scalar = "Vector"
        enum = ir.get("enum_values")
        return cls(
            scalar=scalar,
            nullable=bool(ir["nullable"]),
            list=bool(ir["list"]),
            enum_values=tuple(enum) if enum is not None else None,
            vector_dim=dim,
        )

    def arrow_type(self) -> pa.DataType:
        if self.scalar == "Vector":
            base: pa.DataType = pa.list_(pa.field("item", pa.float32(), True), self.vector_dim)
        else:
            base = _ARROW[self.scalar]
        if self.list:
            return pa.list_(pa.field("item", base, True))
        return base

    @property
    def is_enum(self) -> bool:
        return self.enum_values is not None

    def describe(self) -> str:
        if self.scalar == "Vector":
            s = f"Vector({self.vector_dim})"
        elif self.is_enum:
            s = "enum(" + ", ".join(self.enum_values or ()) + ")"
        else:
            s = self.scalar
        if self.list:
            s = f"[{s}]"
        return s + ("?" if self.nullable else "")


@dataclass(frozen=True)
class Property:
    name: str
    prop_id: int
    type: PropType
    annotations: tuple[tuple[str, str | None], ...] = ()
    # From `@embed("source", model="...")`: the text property a vector is embedded from, and
    # the recorded model (the annotation's only kwarg). None when absent.
    embed_source: str | None = None
    embed_model: str | None = None

    def annotation(self, name: str) -> tuple[str, str | None] | None:
        for a in self.annotations:
            if a[0] == name:
                return a
        return None


@dataclass(frozen=True)
class RangeConstraint:
    property: str
    min: float | None
    max: float | None


@dataclass(frozen=True)
class CheckConstraint:
    property: str
    pattern: str


@dataclass(frozen=True)
class Cardinality:
    min: int = 0
    max: int | None = None


@dataclass(frozen=True)
class TypeDef:
    """A node or edge type. ``kind`` is "node" or "edge"."""

    kind: str
    name: str
    type_id: int
    properties: tuple[Property, ...]
    keys: tuple[tuple[str, ...], ...] = ()
    uniques: tuple[tuple[str, ...], ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()
    ranges: tuple[RangeConstraint, ...] = ()
    checks: tuple[CheckConstraint, ...] = ()
    from_type: str | None = None
    to_type: str | None = None
    cardinality: Cardinality = field(default_factory=Cardinality)
    annotations: tuple[tuple[str, str | None], ...] = ()
    implements: tuple[str, ...] = ()

    @property
    def table_key(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def is_edge(self) -> bool:
        return self.kind == "edge"

    @property
    def key_property(self) -> str | None:
        """The column the node id is taken from: the first column of the first @key, in the
        IR's sorted order (so ``@key(b, a)`` keys on ``a``, as the engine does)."""
        if self.kind != "node" or not self.keys:
            return None
        return self.keys[0][0]

    def prop(self, name: str) -> Property | None:
        for p in self.properties:
            if p.name == name:
                return p
        return None

    @property
    def system_columns(self) -> tuple[str, ...]:
        return ("id", "src", "dst") if self.is_edge else ("id",)

    def arrow_schema(self) -> pa.Schema:
        """The table's Arrow schema in the engine's column order: system columns, then the
        properties in IR (byte-sorted) order."""
        fields = [pa.field(c, pa.string(), False) for c in self.system_columns]
        fields += [pa.field(p.name, p.type.arrow_type(), p.type.nullable) for p in self.properties]
        return pa.schema(fields)

    @property
    def has_blob(self) -> bool:
        return any(p.type.scalar == "Blob" for p in self.properties)


def _constraints(ir_list: list[Any]):
    keys, uniques, indexes, ranges, checks = [], [], [], [], []
    for c in ir_list:
        ((kind, val),) = c.items()
        if kind == "Key":
            keys.append(tuple(val))
        elif kind == "Unique":
            uniques.append(tuple(val))
        elif kind == "Index":
            indexes.append(tuple(val))
        elif kind == "Range":

            def bound(b):
                if b is None:
                    return None
                ((_, v),) = b.items()
                return v

            ranges.append(RangeConstraint(val["property"], bound(val.get("min")), bound(val.get("max"))))
        elif kind == "Check":
            checks.append(CheckConstraint(val["property"], val["pattern"]))
    return tuple(keys), tuple(uniques), tuple(indexes), tuple(ranges), tuple(checks)


def _annotations(ir_list: list[Any]) -> tuple[tuple[str, str | None], ...]:
    return tuple((a["name"], a.get("value")) for a in ir_list)


def _embed(ir_annotations: list[Any]) -> tuple[str | None, str | None]:
    """The first @embed annotation's source and model (as the engine's catalog takes it)."""
    for a in ir_annotations:
        if a["name"] == "embed":
            if a.get("value") is None:
                return None, None
            return a["value"], (a.get("kwargs") or {}).get("model")
    return None, None


def _properties(ir_list: list[Any]) -> tuple[Property, ...]:
    return tuple(
        Property(
            p["name"],
            int(p["prop_id"]),
            PropType.from_ir(p["prop_type"]),
            _annotations(p.get("annotations", [])),
            *_embed(p.get("annotations", [])),
        )
        for p in ir_list
    )


@dataclass(frozen=True)
class Catalog:
    """All node and edge types of a schema, keyed by name."""

    nodes: Mapping[str, TypeDef]
    edges: Mapping[str, TypeDef]

    @classmethod
    def from_ir(cls, ir: Mapping[str, Any]) -> Catalog:
        nodes: dict[str, TypeDef] = {}
        for n in ir["nodes"]:
            k, u, i, r, c = _constraints(n.get("constraints", []))
            nodes[n["name"]] = TypeDef(
                "node",
                n["name"],
                int(n["type_id"]),
                _properties(n["properties"]),
                k,
                u,
                i,
                r,
                c,
                annotations=_annotations(n.get("annotations", [])),
                implements=tuple(n.get("implements", [])),
            )
        edges: dict[str, TypeDef] = {}
        for e in ir["edges"]:
            k, u, i, r, c = _constraints(e.get("constraints", []))
            card = e.get("cardinality") or {"min": 0, "max": None}
            edges[e["name"]] = TypeDef(
                "edge",
                e["name"],
                int(e["type_id"]),
                _properties(e["properties"]),
                k,
                u,
                i,
                r,
                c,
                from_type=e["from_type"],
                to_type=e["to_type"],
                cardinality=Cardinality(int(card["min"]), card.get("max")),
                annotations=_annotations(e.get("annotations", [])),
            )
        return cls(nodes=nodes, edges=edges)

    def types(self) -> list[TypeDef]:
        """Every type, nodes first, each group in name order."""
        return [self.nodes[n] for n in sorted(self.nodes)] + [self.edges[e] for e in sorted(self.edges)]

    def table_keys(self) -> list[str]:
        return [t.table_key for t in self.types()]

    def lookup_edge(self, name: str) -> TypeDef | None:
        """Exact name first, then case-insensitive (as the engine's loader resolves edges)."""
        if name in self.edges:
            return self.edges[name]
        low = name.lower()
        for e in self.edges.values():
            if e.name.lower() == low:
                return e
        return None

    def resolve(self, name: str) -> TypeDef:
        """A type by name (``Person``), or by table key (``node:Person``/``edge:Knows``)."""
        if name.startswith("node:"):
            t = self.nodes.get(name[5:])
        elif name.startswith("edge:"):
            t = self.lookup_edge(name[5:])
        else:
            t = self.nodes.get(name) or self.lookup_edge(name)
        if t is None:
            raise UnknownTypeError(
                f"unknown node or edge type '{name}' (known: {', '.join(sorted(self.nodes) + sorted(self.edges))})",
                type=name,
            )
        return t

    def by_table_key(self, key: str) -> TypeDef:
        return self.resolve(key)
