"""AST -> schema IR (plain dicts in serde field order), canonicalised like ``build_schema_ir``.

Why dicts and not dataclasses: the IR's only jobs are to be serialised byte-exactly and to
feed :meth:`Catalog.from_ir`; dict insertion order *is* the serde struct field order, so the
JSON writers in :mod:`.jsonfmt` need no schema.

Also here: the hash (sha256 of the compact form), ``__schema_state.json`` text, and
:func:`normalize_ir`, which re-shapes a parsed ``_schema.ir.json`` the way serde would when
the engine deserialises and re-serialises it before hashing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SchemaContractError, SchemaError
from .ast import (
    Annotation,
    Bound,
    CheckConstraint,
    Constraint,
    EdgeDecl,
    IndexConstraint,
    InterfaceDecl,
    KeyConstraint,
    NodeDecl,
    Pos,
    PropDecl,
    PropType,
    RangeConstraint,
    SchemaFile,
    UniqueConstraint,
)
from .hashing import prop_id as _prop_id
from .hashing import type_id as _type_id
from .jsonfmt import rust_debug_f64, to_compact, to_pretty

IR_VERSION = 1
STATE_FORMAT_VERSION = 1
SCHEMA_IDENTITY_VERSION = 1

IR = dict[str, Any]


def _err(message: str, pos: Pos, rule: str) -> SchemaError:
    if pos.line:
        return SchemaError(message, line=pos.line, column=pos.column, rule=rule)
    return SchemaError(message, rule=rule)


# --- canonical pieces ------------------------------------------------------------------------


def annotation_ir(a: Annotation) -> dict[str, Any]:
    out: dict[str, Any] = {"name": a.name, "value": a.value}
    if a.kwargs:  # skip_serializing_if = "BTreeMap::is_empty"
        out["kwargs"] = {k: v for k, v in sorted(a.kwargs)}
    return out


def _annotation_order(a: Annotation) -> tuple[str, bool, str]:
    # Option<String> ordering: None < Some(_); stable sort keeps kwargs-only ties in order.
    return (a.name, a.value is not None, a.value or "")


def canonical_annotations(anns: Sequence[Annotation]) -> list[dict[str, Any]]:
    return [annotation_ir(a) for a in sorted(anns, key=_annotation_order)]


def prop_type_ir(t: PropType) -> dict[str, Any]:
    scalar: Any = {"Vector": t.vector_dim} if t.is_vector else t.scalar
    enum = sorted(set(t.enum_values)) if t.enum_values is not None else None
    return {"scalar": scalar, "nullable": t.nullable, "list": t.list, "enum_values": enum}


def _canonical_properties(kind: str, owner: str, props: Sequence[PropDecl]) -> list[dict[str, Any]]:
    seen: dict[int, str] = {}
    out: list[dict[str, Any]] = []
    for p in props:
        pid = _prop_id(kind, owner, p.name)
        previous = seen.get(pid)
        if previous is not None:
            what = (
                f"duplicate property '{p.name}' on {kind} {owner}"
                if previous == p.name
                else f"property id collision on {kind} {owner}: '{previous}' and '{p.name}'"
            )
            raise _err(f"{what} (both hash to property id {pid})", p.pos, "prop_id_collision")
        seen[pid] = p.name
        out.append(
            {
                "name": p.name,
                "prop_id": pid,
                "prop_type": prop_type_ir(p.prop_type),
                "annotations": canonical_annotations(p.annotations),
            }
        )
    out.sort(key=lambda d: d["name"])
    return out


def bound_ir(b: Bound | None) -> dict[str, Any] | None:
    if b is None:
        return None
    return {b.kind: int(b.value) if b.kind == "Integer" else float(b.value)}


def _bound_debug(b: Bound | None) -> str:
    """Rust ``{:?}`` of ``Option<ConstraintBound>``."""
    if b is None:
        return "None"
    inner = str(int(b.value)) if b.kind == "Integer" else rust_debug_f64(float(b.value))
    return f"Some({b.kind}({inner}))"


def constraint_ir(c: Constraint) -> tuple[str, dict[str, Any]]:
    """(sort key, IR) of one constraint; column lists are sorted first."""
    if isinstance(c, (KeyConstraint, UniqueConstraint, IndexConstraint)):
        cols = sorted(c.columns)
        return f"{c.kind.lower()}:{','.join(cols)}", {c.kind: cols}
    if isinstance(c, RangeConstraint):
        key = f"range:{c.property}:{_bound_debug(c.min)}:{_bound_debug(c.max)}"
        return key, {"Range": {"property": c.property, "min": bound_ir(c.min), "max": bound_ir(c.max)}}
    assert isinstance(c, CheckConstraint)
    return (f"check:{c.property}:{c.pattern}", {"Check": {"property": c.property, "pattern": c.pattern}})


def canonical_constraints(cs: Sequence[Constraint]) -> list[dict[str, Any]]:
    keyed = [constraint_ir(c) for c in cs]
    keyed.sort(key=lambda kv: kv[0])  # stable, like sort_by_key
    return [ir for _, ir in keyed]


# --- build -----------------------------------------------------------------------------------


def build_ir(schema: SchemaFile) -> IR:
    """The engine's ``build_schema_ir``: ids, collision checks (type ids across all kinds in
    declaration order, property ids per owner), canonical sorting."""
    seen_types: dict[int, tuple[str, str]] = {}
    interfaces, nodes, edges = [], [], []
    for d in schema.declarations:
        tid = _type_id(d.kind, d.name)
        prev = seen_types.get(tid)
        if prev is not None:
            what = (
                f"duplicate {d.kind} type {d.name}"
                if prev == (d.kind, d.name)
                else f"type id collision: {prev[0]} '{prev[1]}' and {d.kind} '{d.name}'"
            )
            raise _err(f"{what} (both hash to type id {tid})", d.pos, "type_id_collision")
        seen_types[tid] = (d.kind, d.name)
        props = _canonical_properties(d.kind, d.name, d.properties)
        if isinstance(d, InterfaceDecl):
            interfaces.append({"name": d.name, "type_id": tid, "properties": props})
        elif isinstance(d, NodeDecl):
            nodes.append(
                {
                    "name": d.name,
                    "type_id": tid,
                    "annotations": canonical_annotations(d.annotations),
                    "implements": sorted(set(d.implements)),
                    "properties": props,
                    "constraints": canonical_constraints(d.constraints),
                }
            )
        else:
            assert isinstance(d, EdgeDecl)
            edges.append(
                {
                    "name": d.name,
                    "type_id": tid,
                    "from_type": d.from_type,
                    "to_type": d.to_type,
                    "cardinality": {"min": d.cardinality.min, "max": d.cardinality.max},
                    "annotations": canonical_annotations(d.annotations),
                    "properties": props,
                    "constraints": canonical_constraints(d.constraints),
                }
            )
    for group in (interfaces, nodes, edges):
        group.sort(key=lambda x: x["name"])  # type: ignore[arg-type, return-value]  # names are strings
    return {"ir_version": IR_VERSION, "interfaces": interfaces, "nodes": nodes, "edges": edges}


# --- text forms ------------------------------------------------------------------------------


def ir_pretty_json(ir: Mapping[str, Any]) -> str:
    return to_pretty(ir)


def ir_compact_json(ir: Mapping[str, Any]) -> str:
    return to_compact(ir)


def ir_hash(ir: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the compact serialisation (the engine's ``schema_ir_hash``)."""
    return "sha256:" + hashlib.sha256(to_compact(ir).encode("utf-8")).hexdigest()


def state_json(schema_ir_hash: str) -> str:
    """``__schema_state.json`` content (pretty, no trailing newline)."""
    return to_pretty(
        {
            "format_version": STATE_FORMAT_VERSION,
            "schema_ir_hash": schema_ir_hash,
            "schema_identity_version": SCHEMA_IDENTITY_VERSION,
        }
    )


# --- re-shaping an IR file like serde would ----------------------------------------------------


def _need(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise SchemaContractError(f"{where}: expected a JSON object, found {type(obj).__name__}")
    if key not in obj:
        raise SchemaContractError(f"{where}: missing field `{key}`")
    return obj[key]


def _u32(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 0xFFFFFFFF:
        raise SchemaContractError(f"{where}: expected u32, found {v!r}")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise SchemaContractError(f"{where}: expected a string, found {v!r}")
    return v


def _opt_str(v: Any, where: str) -> str | None:
    return None if v is None else _str(v, where)


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise SchemaContractError(f"{where}: expected a bool, found {v!r}")
    return v


def _list(v: Any, where: str) -> list:
    if not isinstance(v, list):
        raise SchemaContractError(f"{where}: expected an array, found {v!r}")
    return v


def _norm_annotation(a: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": _str(_need(a, "name", where), where + ".name"),
        "value": _opt_str(a.get("value"), where + ".value"),
    }
    kw = a.get("kwargs") or {}
    if not isinstance(kw, dict):
        raise SchemaContractError(f"{where}.kwargs: expected an object")
    if kw:
        out["kwargs"] = {k: _str(kw[k], f"{where}.kwargs.{k}") for k in sorted(kw)}
    return out


def _norm_prop_type(t: Any, where: str) -> dict[str, Any]:
    scalar = _need(t, "scalar", where)
    if isinstance(scalar, dict):
        scalar = {"Vector": _u32(_need(scalar, "Vector", where + ".scalar"), where + ".scalar")}
    else:
        _str(scalar, where + ".scalar")
    enum = t.get("enum_values")
    enum = None if enum is None else [_str(v, where) for v in _list(enum, where + ".enum_values")]
    return {
        "scalar": scalar,
        "nullable": _bool(_need(t, "nullable", where), where + ".nullable"),
        "list": _bool(_need(t, "list", where), where + ".list"),
        "enum_values": enum,
    }


def _norm_props(ps: Any, where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, p in enumerate(_list(ps, where)):
        w = f"{where}[{i}]"
        out.append(
            {
                "name": _str(_need(p, "name", w), w),
                "prop_id": _u32(_need(p, "prop_id", w), w + ".prop_id"),
                "prop_type": _norm_prop_type(_need(p, "prop_type", w), w + ".prop_type"),
                "annotations": [
                    _norm_annotation(a, f"{w}.annotations[{j}]")
                    for j, a in enumerate(_list(_need(p, "annotations", w), w))
                ],
            }
        )
    return out


def _norm_bound(b: Any, where: str) -> dict[str, Any] | None:
    if b is None:
        return None
    if isinstance(b, dict) and len(b) == 1 and "Integer" in b and isinstance(b["Integer"], int):
        return {"Integer": int(b["Integer"])}
    if (
        isinstance(b, dict)
        and len(b) == 1
        and "Float" in b
        and isinstance(b["Float"], (int, float))
        and not isinstance(b["Float"], bool)
    ):
        return {"Float": float(b["Float"])}
    raise SchemaContractError(f'{where}: expected {{"Integer": i64}} or {{"Float": f64}}')


def _norm_constraint(c: Any, where: str) -> dict[str, Any]:
    if not isinstance(c, dict) or len(c) != 1:
        raise SchemaContractError(f"{where}: expected a one-key constraint object")
    ((kind, val),) = c.items()
    if kind in ("Key", "Unique", "Index"):
        return {kind: [_str(x, where) for x in _list(val, where)]}
    if kind == "Range":
        return {
            "Range": {
                "property": _str(_need(val, "property", where), where),
                "min": _norm_bound(val.get("min"), where + ".min"),
                "max": _norm_bound(val.get("max"), where + ".max"),
            }
        }
    if kind == "Check":
        return {
            "Check": {
                "property": _str(_need(val, "property", where), where),
                "pattern": _str(_need(val, "pattern", where), where),
            }
        }
    raise SchemaContractError(f"{where}: unknown constraint variant `{kind}`")


def _annotations_of(d: Any, w: str) -> list[dict[str, Any]]:
    return [_norm_annotation(a, f"{w}.annotations[{j}]") for j, a in enumerate(_list(_need(d, "annotations", w), w))]


def _constraints_of(d: Any, w: str) -> list[dict[str, Any]]:
    return [_norm_constraint(c, f"{w}.constraints[{j}]") for j, c in enumerate(_list(_need(d, "constraints", w), w))]


def normalize_ir(doc: Any) -> IR:
    """Deserialise-then-serialise semantics of serde for ``SchemaIR``: fields re-ordered to
    struct order, unknown fields dropped, empty ``kwargs`` omitted, Float bounds as f64.
    The engine does *not* re-sort anything here, so neither do we."""
    out: IR = {"ir_version": _u32(_need(doc, "ir_version", "ir"), "ir.ir_version")}
    out["interfaces"] = [
        {
            "name": _str(_need(d, "name", f"interfaces[{i}]"), "name"),
            "type_id": _u32(_need(d, "type_id", f"interfaces[{i}]"), "type_id"),
            "properties": _norm_props(_need(d, "properties", f"interfaces[{i}]"), f"interfaces[{i}].properties"),
        }
        for i, d in enumerate(_list(_need(doc, "interfaces", "ir"), "ir.interfaces"))
    ]
    nodes = []
    for i, d in enumerate(_list(_need(doc, "nodes", "ir"), "ir.nodes")):
        w = f"nodes[{i}]"
        nodes.append(
            {
                "name": _str(_need(d, "name", w), w),
                "type_id": _u32(_need(d, "type_id", w), w),
                "annotations": _annotations_of(d, w),
                "implements": [_str(x, w) for x in _list(_need(d, "implements", w), w)],
                "properties": _norm_props(_need(d, "properties", w), w + ".properties"),
                "constraints": _constraints_of(d, w),
            }
        )
    out["nodes"] = nodes
    edges = []
    for i, d in enumerate(_list(_need(doc, "edges", "ir"), "ir.edges")):
        w = f"edges[{i}]"
        card = _need(d, "cardinality", w)
        _need(card, "min", w + ".cardinality")
        mx = card.get("max")  # serde: a missing Option field is None
        edges.append(
            {
                "name": _str(_need(d, "name", w), w),
                "type_id": _u32(_need(d, "type_id", w), w),
                "from_type": _str(_need(d, "from_type", w), w),
                "to_type": _str(_need(d, "to_type", w), w),
                "cardinality": {
                    "min": _u32(_need(card, "min", w + ".cardinality"), w),
                    "max": None if mx is None else _u32(mx, w),
                },
                "annotations": _annotations_of(d, w),
                "properties": _norm_props(_need(d, "properties", w), w + ".properties"),
                "constraints": _constraints_of(d, w),
            }
        )
    out["edges"] = edges
    return out


def parse_ir_text(text: str) -> IR:
    """Parse ``_schema.ir.json`` text into the normalised IR."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise SchemaContractError(f"_schema.ir.json is not valid JSON: {e}") from e
    return normalize_ir(doc)


def ir_hash_of_text(text: str) -> str:
    """The hash the engine computes for an existing IR file: parse, re-serialise compact,
    sha256 (``validate_persisted_schema_contract``)."""
    return ir_hash(parse_ir_text(text))
