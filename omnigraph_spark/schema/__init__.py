"""The Omnigraph schema language: ``.pg`` text -> validated IR, its JSON, hash and catalog.

``compile_schema`` reproduces what ``omnigraph init`` does with ``_schema.pg`` (engine 0.7.2):
parse, desugar, resolve interfaces, validate, build the canonical IR, then run the catalog
checks. The outputs (``_schema.ir.json``, ``__schema_state.json``) are byte-identical to the
engine's. Pure: no I/O. Imports only :mod:`omnigraph_spark.errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SchemaContractError
from .ast import SchemaFile
from .hashing import dataset_path, fnv1a_32, fnv1a_64_hex
from .ir import (
    build_ir,
    ir_compact_json,
    ir_hash,
    ir_hash_of_text,
    ir_pretty_json,
    normalize_ir,
    parse_ir_text,
    state_json,
)
from .parser import parse_schema
from .validate import validate_annotations, validate_catalog, validate_constraints

log = logging.getLogger(__name__)

__all__ = [
    "CompiledSchema",
    "compile_schema",
    "load_ir",
    "ir_hash_of_text",
    "parse_schema",
    "fnv1a_32",
    "fnv1a_64_hex",
    "dataset_path",
    "normalize_ir",
    "build_ir",
    "state_json",
]


@dataclass(frozen=True)
class CompiledSchema:
    """A compiled schema. ``source`` is the verbatim ``.pg`` text (``""`` when built from an
    IR file); ``ir`` is the canonical IR as dicts in serde field order (treat as read-only)."""

    source: str
    ir: dict[str, Any] = field(repr=False)

    def ir_pretty_json(self) -> str:
        """``_schema.ir.json`` content (no trailing newline)."""
        return ir_pretty_json(self.ir)

    def ir_compact_json(self) -> str:
        return ir_compact_json(self.ir)

    def ir_hash(self) -> str:
        """``sha256:<hex>`` over the compact JSON, as stored in ``__schema_state.json``."""
        return ir_hash(self.ir)

    def state_json(self) -> str:
        """``__schema_state.json`` content (no trailing newline)."""
        return state_json(self.ir_hash())

    def catalog(self) -> Any:
        """The runtime catalog (built from the IR, like the engine). Imported lazily so that
        compiling a schema does not need pyarrow."""
        from .catalog import Catalog  # lazy: compiling a schema needs no pyarrow

        return Catalog.from_ir(self.ir)


def _positions(schema: SchemaFile) -> Mapping[str, Any]:
    pos: dict[str, Any] = {}
    for e in schema.edges():
        pos.setdefault(f"edge:{e.name}", e.pos)
        pos.setdefault(f"edge:{e.name}:from", e.from_pos)
        pos.setdefault(f"edge:{e.name}:to", e.to_pos)
    return pos


def compile_schema(source: str) -> CompiledSchema:
    """Compile ``.pg`` text. Raises :class:`~omnigraph_spark.errors.SchemaSyntaxError` for
    grammar errors and :class:`~omnigraph_spark.errors.SchemaError` for every other rule."""
    schema = parse_schema(source)
    validate_annotations(schema)
    validate_constraints(schema)
    ir = build_ir(schema)
    validate_catalog(ir, _positions(schema))
    log.debug("compiled schema: %d nodes, %d edges", len(ir["nodes"]), len(ir["edges"]))
    return CompiledSchema(source=source, ir=ir)


def load_ir(ir_json_text: str) -> CompiledSchema:
    """An existing ``_schema.ir.json`` as a :class:`CompiledSchema` (``source`` is empty).
    The IR is re-shaped as serde would on deserialisation, so ``ir_hash()`` equals the hash
    the engine computes for that file."""
    ir = parse_ir_text(ir_json_text)
    if ir["ir_version"] != 1:
        raise SchemaContractError(f"unsupported schema ir_version {ir['ir_version']} (expected 1)")
    validate_catalog(ir)
    return CompiledSchema(source="", ir=ir)
