"""Semantic rules of a .pg schema, as the engine applies them at ``omnigraph init``.

Three groups, run in the engine's order so the first error is the engine's first error:
1. :func:`validate_annotations` (``validate_schema_annotations``): where each annotation may
   appear, arity, duplicates, @embed source and kwargs;
2. :func:`validate_constraints` (``validate_constraints``): @key/@unique/@index/@range/@check
   targets and typing;
3. :func:`validate_catalog` (``build_catalog`` run on the IR): edge endpoints must be node
   types, edge names must stay distinct after lower-casing. It runs on the *IR*, i.e. in
   sorted name order, exactly as the engine does.

Errors are :class:`SchemaError` with the position of the offending annotation/constraint/
declaration and ``context['rule']`` naming the rule (stable, for tests and callers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SchemaError
from .ast import (
    Annotation,
    CheckConstraint,
    Constraint,
    EdgeDecl,
    IndexConstraint,
    KeyConstraint,
    NodeDecl,
    Pos,
    PropDecl,
    RangeConstraint,
    SchemaFile,
    UniqueConstraint,
)

# Rust's char::is_whitespace (Unicode White_Space), used by str::trim in the engine.
_RUST_WS = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_TYPE_LEVEL_FORBIDDEN = ("key", "unique", "index", "embed")
_EDGE_IMPLICIT = ("src", "dst")


def _err(message: str, pos: Pos | None, rule: str, **ctx: Any) -> SchemaError:
    if pos is None or not pos.line:
        return SchemaError(message, rule=rule, **ctx)
    return SchemaError(message, line=pos.line, column=pos.column, rule=rule, **ctx)


def _blank(s: str) -> bool:
    return not s.strip(_RUST_WS)


def _string_annotation(anns: Sequence[Annotation], name: str, target: str, fallback: Pos) -> None:
    """@description/@instruction: at most once, with a non-blank value."""
    seen = False
    for a in anns:
        if a.name != name:
            continue
        if seen:
            raise _err(f"{target} declares @{name} multiple times", a.pos, "annotation_duplicate")
        if a.value is None or _blank(a.value):
            raise _err(f"@{name} on {target} requires a non-empty value", a.pos, "annotation_value_required")
        seen = True


def _property_annotations(prop: PropDecl, owner: str, props: Sequence[PropDecl], is_edge: bool) -> None:
    t = prop.prop_type
    where = f"{owner}.{prop.name}"
    _string_annotation(prop.annotations, "description", f"property {where}", prop.pos)
    seen: dict[str, bool] = {}
    for a in prop.annotations:
        n = a.name
        if t.list and n in ("key", "unique", "index", "embed"):
            raise _err(f"@{n} is not supported on list property {where}", a.pos, "annotation_on_list")
        if t.is_vector and n in ("key", "unique"):
            raise _err(f"@{n} is not supported on vector property {where}", a.pos, "annotation_on_vector")
        if t.scalar == "Blob" and n in ("key", "unique", "index", "embed"):
            raise _err(f"@{n} is not supported on blob property {where}", a.pos, "annotation_on_blob")
        if n == "instruction":
            raise _err(
                f"@instruction is only supported on node and edge types (property {where})",
                a.pos,
                "instruction_on_property",
            )
        if is_edge and n in ("key", "embed"):
            raise _err(f"@{n} is not supported on edge properties (edge {where})", a.pos, "annotation_on_edge_property")
        if n in ("key", "unique", "index"):
            if a.value is not None:  # unreachable from the grammar; kept for parity
                raise _err(f"@{n} on {where} does not accept a value", a.pos, "annotation_arity")
            if seen.get(n):
                raise _err(f"property {where} declares @{n} multiple times", a.pos, "annotation_duplicate")
            seen[n] = True
        elif n == "embed":
            _embed(a, prop, owner, props, seen.get("embed", False))
            seen["embed"] = True


def _embed(a: Annotation, prop: PropDecl, owner: str, props: Sequence[PropDecl], seen: bool) -> None:
    where = f"{owner}.{prop.name}"
    if seen:
        raise _err(f"property {where} declares @embed multiple times", a.pos, "annotation_duplicate")
    if not prop.prop_type.is_vector:
        raise _err(f"@embed is only supported on vector properties ({where})", a.pos, "embed_target")
    if a.value is None:
        raise _err(f"@embed on {where} requires a source property name", a.pos, "embed_source")
    if _blank(a.value):
        raise _err(f"@embed on {where} requires a non-empty source property name", a.pos, "embed_source")
    src = next((p for p in props if p.name == a.value), None)
    if src is None:
        raise _err(f"@embed on {where} references unknown source property {a.value}", a.pos, "embed_source")
    if src.prop_type.list or src.prop_type.scalar != "String":
        raise _err(
            f"@embed source property {owner}.{a.value} must be String (found {src.prop_type.display_name()})",
            a.pos,
            "embed_source",
        )
    for key, _ in a.kwargs:  # sorted, like the engine's BTreeMap
        if key != "model":
            raise _err(
                f"@embed on {where} has unknown argument '{key}=' (only 'model' is supported)", a.pos, "embed_kwargs"
            )


def validate_annotations(schema: SchemaFile) -> None:
    """Annotation placement and arity for every node and edge (interfaces are not checked
    by the engine; their properties are checked once copied into a node)."""
    for d in schema.declarations:
        if isinstance(d, NodeDecl):
            for a in d.annotations:
                if a.name in _TYPE_LEVEL_FORBIDDEN:
                    raise _err(
                        f"@{a.name} is only supported on node properties or as body constraint (node {d.name})",
                        a.pos,
                        "annotation_on_type",
                    )
            _string_annotation(d.annotations, "description", f"node {d.name}", d.pos)
            _string_annotation(d.annotations, "instruction", f"node {d.name}", d.pos)
            for p in d.properties:
                _property_annotations(p, d.name, d.properties, False)
        elif isinstance(d, EdgeDecl):
            for a in d.annotations:
                if a.name in _TYPE_LEVEL_FORBIDDEN:
                    raise _err(f"@{a.name} is not supported on edges (edge {d.name})", a.pos, "annotation_on_type")
            _string_annotation(d.annotations, "description", f"edge {d.name}", d.pos)
            _string_annotation(d.annotations, "instruction", f"edge {d.name}", d.pos)
            for p in d.properties:
                _property_annotations(p, d.name, d.properties, True)


def _type_constraints(cs: Sequence[Constraint], props: Sequence[PropDecl], owner: str, is_edge: bool) -> None:
    by_name = {p.name: p for p in props}  # last declaration wins, like the engine's HashMap
    keys = 0
    for c in cs:
        if isinstance(c, KeyConstraint):
            if is_edge:
                raise _err(f"@key constraint is not supported on edges (edge {owner})", c.pos, "constraint_on_edge")
            keys += 1
            if keys > 1:
                raise _err(
                    f"node type {owner} has multiple @key constraints; only one is supported", c.pos, "key_multiple"
                )
            for col in c.columns:
                p = by_name.get(col)
                if p is None:
                    raise _err(f"@key on {owner} references unknown property '{col}'", c.pos, "unknown_property")
                t = p.prop_type
                if t.nullable:
                    raise _err(f"@key property {owner}.{col} cannot be nullable", c.pos, "key_type")
                for bad, flag in (("list", t.list), ("vector", t.is_vector), ("blob", t.scalar == "Blob")):
                    if flag:
                        raise _err(f"@key is not supported on {bad} property {owner}.{col}", c.pos, "key_type")
        elif isinstance(c, (UniqueConstraint, IndexConstraint)):
            label = "unique" if isinstance(c, UniqueConstraint) else "index"
            for col in c.columns:
                if is_edge and col in _EDGE_IMPLICIT:
                    continue
                p = by_name.get(col)
                if p is None:
                    raise _err(f"@{label} on {owner} references unknown property '{col}'", c.pos, "unknown_property")
                if label == "index" and p.prop_type.scalar == "Blob":
                    raise _err(f"@index is not supported on blob property {owner}.{col}", c.pos, "index_type")
        elif isinstance(c, (RangeConstraint, CheckConstraint)):
            label = "range" if isinstance(c, RangeConstraint) else "check"
            if is_edge:
                raise _err(f"@{label} constraint is not supported on edges (edge {owner})", c.pos, "constraint_on_edge")
            p = by_name.get(c.property)
            if p is None:
                raise _err(f"@{label} on {owner} references unknown property '{c.property}'", c.pos, "unknown_property")
            if label == "range" and not p.prop_type.is_numeric:
                raise _err(
                    f"@range on {owner}.{c.property} requires a numeric type, got {p.prop_type.display_name()}",
                    c.pos,
                    "range_type",
                )
            if label == "check" and p.prop_type.scalar != "String":
                raise _err(
                    f"@check on {owner}.{c.property} requires String type, got {p.prop_type.display_name()}",
                    c.pos,
                    "check_type",
                )


def validate_constraints(schema: SchemaFile) -> None:
    for d in schema.declarations:
        if isinstance(d, NodeDecl):
            _type_constraints(d.constraints, d.properties, d.name, False)
        elif isinstance(d, EdgeDecl):
            _type_constraints(d.constraints, d.properties, d.name, True)


def validate_catalog(ir: Mapping[str, Any], positions: Mapping[str, Pos] | None = None) -> None:
    """The checks of the engine's ``build_catalog`` that can still fail after the IR was
    built: edge endpoints must name node types, and edge names must not collide once
    lower-cased (edges are looked up case-insensitively). ``positions`` maps
    ``"edge:<Name>"``/``"edge:<Name>:from"``/``"edge:<Name>:to"`` to source positions."""
    pos = positions or {}
    nodes = {n["name"] for n in ir["nodes"]}
    folded: dict[str, str] = {}
    for e in ir["edges"]:
        name = e["name"]
        if e["from_type"] not in nodes:
            raise _err(
                f"edge {name} references unknown source type: {e['from_type']}",
                pos.get(f"edge:{name}:from"),
                "unknown_endpoint",
            )
        if e["to_type"] not in nodes:
            raise _err(
                f"edge {name} references unknown target type: {e['to_type']}",
                pos.get(f"edge:{name}:to"),
                "unknown_endpoint",
            )
        low = name.lower()
        other = folded.get(low)
        if other is not None and other != name:
            raise _err(
                f"edge name collision after case folding: '{name}' conflicts with '{other}'",
                pos.get(f"edge:{name}"),
                "edge_case_collision",
            )
        folded[low] = name
