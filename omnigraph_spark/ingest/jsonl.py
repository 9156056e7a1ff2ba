"""The engine's JSONL envelope, read into the same rows :class:`RowConverter` produces.

Record forms (``load_jsonl_reader``): ``{"type": T, "data": {...}}`` for a node and
``{"edge": E, "from": s, "to": d, "data": {...}}`` for an edge. ``type`` is checked before
``edge``; the edge name resolves exactly, then case-insensitively; ``data`` is optional and
unknown keys inside it are ignored, as in the engine.

Why reuse RowConverter: JSON values are first turned into a loosely typed Arrow column
(int64 / float64 / string / list...) with the engine's literal rules, but *strictly* — a value
of the wrong JSON type is a :class:`TypeMismatchError` naming the record, where the engine
would store null. The converter then applies the same casts and rules as for a DataFrame, so
both paths agree by construction.

Literal rules: Date takes an integer (days since the epoch, i32) or a literal string; DateTime
an integer (ms since the epoch) or a literal string; F32 and Vector components are JSON numbers
rounded to float32, as the engine does (JSON numbers are decimal text; there is no "exact" f32
reading of 0.1). Blob values are not supported yet.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidRecordError, MissingColumnError, TypeMismatchError, UnknownTypeError, UnsupportedValueError
from ..schema.catalog import Catalog, PropType, TypeDef
from .casts import first_true
from .convert import RowConverter
from .temporal import parse_date_strings, parse_datetime_strings

_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)
_U64_MAX = (1 << 64) - 1


def parse_record(
    obj_or_line: str | bytes | dict[str, Any], catalog: Catalog, record_no: int
) -> tuple[TypeDef, dict[str, Any]]:
    """One JSONL record -> ``(typedef, record)``.

    For a node the record is its ``data``; for an edge it is ``data`` plus ``"from"`` and
    ``"to"`` (overriding same-named keys in ``data``, which the engine ignores anyway).
    ``record_no`` is used in messages (the engine counts from 1)."""
    if isinstance(obj_or_line, (str, bytes)):
        try:
            value = json.loads(obj_or_line)
        except ValueError as e:
            raise InvalidRecordError(f"invalid JSON at record {record_no}: {e}", record=record_no) from e
    else:
        value = obj_or_line
    if not isinstance(value, dict):
        raise InvalidRecordError(f"record {record_no}: expected 'type' or 'edge' field", record=record_no)
    data = value.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidRecordError(
            f"record {record_no}: 'data' must be a JSON object, got {type(data).__name__}", record=record_no
        )
    type_name = value.get("type")
    if isinstance(type_name, str):
        node = catalog.nodes.get(type_name)
        if node is None:
            raise UnknownTypeError(
                f"record {record_no}: unknown node type '{type_name}'", record=record_no, type=type_name
            )
        return node, dict(data)
    edge_name = value.get("edge")
    if isinstance(edge_name, str):
        edge = catalog.lookup_edge(edge_name)
        if edge is None:
            raise UnknownTypeError(
                f"record {record_no}: unknown edge type '{edge_name}'", record=record_no, type=edge_name
            )
        record = dict(data)
        for end in ("from", "to"):
            end_value = value.get(end)
            if not isinstance(end_value, str):
                raise MissingColumnError(
                    f"record {record_no}: edge missing '{end}'", record=record_no, column=end, table=edge.table_key
                )
            record[end] = end_value
        return edge, record
    raise InvalidRecordError(f"record {record_no}: expected 'type' or 'edge' field", record=record_no)


class _Column:
    """Builds one input column from JSON values, naming the record on a bad value."""

    def __init__(self, label: str, name: str, ptype: PropType | None, first_record_no: int):
        self.label, self.name, self.ptype, self.first = label, name, ptype, first_record_no

    def bad(self, i: int, value: Any, expected: str) -> TypeMismatchError:
        rec = self.first + i
        return TypeMismatchError(
            f"{self.label} column '{self.name}' record {rec}: expected {expected}, got {json.dumps(value)}",
            table=self.label,
            column=self.name,
            row=rec,
            value=json.dumps(value),
        )

    def build(self, values: Sequence[Any]) -> pa.Array:
        t = self.ptype
        if t is None:  # id / from / to
            return self.scalars(values, "String")
        if t.scalar == "Blob":
            for i, v in enumerate(values):
                if v is not None:
                    raise UnsupportedValueError(
                        f"{self.label} column '{self.name}' record {self.first + i}: Blob values "
                        f"are not supported by the connector yet",
                        table=self.label,
                        column=self.name,
                        row=self.first + i,
                    )
            return pa.nulls(len(values), pa.null())
        if t.list or t.scalar == "Vector":
            return self.lists(values, "Vector" if t.scalar == "Vector" else t.scalar)
        return self.scalars(values, t.scalar)

    def lists(self, values: Sequence[Any], scalar: str) -> pa.Array:
        offsets, flat, owner, mask = [0], [], [], []
        for i, v in enumerate(values):
            if v is None:
                mask.append(True)
            elif isinstance(v, list):
                mask.append(False)
                flat.extend(v)
                owner.extend([i] * len(v))
            else:
                raise self.bad(i, v, "a JSON array")
            offsets.append(len(flat))
        elem = "F64" if scalar == "Vector" else scalar
        try:
            items = self.scalars(flat, elem, allow_null=scalar != "Vector")
        except TypeMismatchError as e:  # re-point at the record holding the element
            j = e.context.get("row", self.first) - self.first
            raise self.bad(owner[j], values[owner[j]], f"a JSON array of {elem} values") from e
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, mask=pa.array(mask, pa.bool_()))

    def scalars(self, values: Sequence[Any], scalar: str, allow_null: bool = True) -> pa.Array:
        if scalar == "String":
            self._require(values, lambda v: isinstance(v, str), "a JSON string", allow_null)
            return pa.array(values, pa.string())
        if scalar == "Bool":
            self._require(values, lambda v: isinstance(v, bool), "a JSON boolean", allow_null)
            return pa.array(values, pa.bool_())
        if scalar in ("I32", "I64", "U32", "U64"):
            lo = 0 if scalar.startswith("U") else _I64[0]
            hi = _U64_MAX if scalar.startswith("U") else _I64[1]
            self._require(values, lambda v: _is_int(v) and lo <= v <= hi, f"a JSON integer within {scalar}", allow_null)
            big = any(v is not None and v > _I64[1] for v in values)
            return pa.array(values, pa.uint64() if big else pa.int64())
        if scalar in ("F32", "F64"):
            self._require(
                values,
                lambda v: _is_number(v) and (not _is_int(v) or abs(v) <= 1 << 53),
                "a JSON number (integers exact in F64)",
                allow_null,
            )
            out = pa.array([None if v is None else float(v) for v in values], pa.float64())
            if scalar == "F32":
                f32 = pc.cast(out, pa.float32(), safe=False)
                i = first_true(pc.and_(pc.is_inf(f32), pc.invert(pc.is_inf(out))))
                if i >= 0:
                    raise self.bad(i, values[i], "a JSON number within F32 range")
                return f32
            return out
        if scalar in ("Date", "DateTime"):
            return self._temporal(values, scalar, allow_null)
        raise UnsupportedValueError(
            f"{self.label} column '{self.name}': unsupported type {scalar}", table=self.label, column=self.name
        )

    def _require(self, values: Sequence[Any], ok, expected: str, allow_null: bool) -> None:
        for i, v in enumerate(values):
            if v is None:
                if not allow_null:
                    raise self.bad(i, v, expected)
            elif not ok(v):
                raise self.bad(i, v, expected)

    def _temporal(self, values: Sequence[Any], scalar: str, allow_null: bool) -> pa.Array:
        is_date = scalar == "Date"
        rng = _I32 if is_date else _I64
        self._require(
            values,
            lambda v: isinstance(v, str) or (_is_int(v) and rng[0] <= v <= rng[1]),
            f"an integer ({'days' if is_date else 'ms'} since the epoch, in range) or a {scalar} literal string",
            allow_null,
        )
        ints = pa.array([v if _is_int(v) else None for v in values], pa.int64())
        texts = pa.array([v if isinstance(v, str) else None for v in values], pa.string())
        parsed, bad = (parse_date_strings if is_date else parse_datetime_strings)(texts)
        i = first_true(bad)
        if i >= 0:
            raise self.bad(i, values[i], f"a valid {scalar} literal")
        target = pa.date32() if is_date else pa.date64()
        from_ints = pc.cast(pc.cast(ints, pa.int32() if is_date else pa.int64()), target)
        return pc.if_else(ints.is_valid(), from_ints, parsed)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def records_to_batch(
    typedef: TypeDef, records: list[dict[str, Any]], table_schema: pa.Schema | None = None, *, first_record_no: int = 0
) -> pa.RecordBatch:
    """Records of one type (from :func:`parse_record`) -> a batch in the table's schema.

    Rows are numbered ``first_record_no + index`` in errors. Keys of a record that are not
    columns of the type are ignored, as the engine ignores unknown keys in ``data``."""
    label = f"{typedef.kind} {typedef.name}"
    names: list[str] = ["id", "from", "to"] if typedef.is_edge else ["id"]
    names += [p.name for p in typedef.properties]
    columns: dict[str, pa.Array] = {}
    for name in names:
        if not any(name in r for r in records):
            continue  # absent everywhere: RowConverter decides (null column or missing)
        prop = typedef.prop(name)
        col = _Column(label, name, prop.type if prop else None, first_record_no)
        columns[name] = col.build([r.get(name) for r in records])
    if columns:
        batch = pa.RecordBatch.from_pydict(columns)
    else:  # keep the row count with no columns at all
        batch = pa.RecordBatch.from_arrays([pa.nulls(len(records))], names=["_"]).drop_columns(["_"])
    return RowConverter(typedef, table_schema).convert(batch, row_offset=first_record_no, where="JSONL record numbers")
