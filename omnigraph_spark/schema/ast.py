"""AST of a .pg schema, after parsing, desugaring and interface resolution.

Why immutable dataclasses with source positions: the engine's AST carries no positions, so its
semantic errors cannot say where they are. Ours keeps the 1-based line/column of every
declaration, property, annotation and constraint so a :class:`SchemaError` can point at it.
Equality of :class:`PropType` ignores nothing: it mirrors the engine's derived ``PartialEq``,
which interface resolution relies on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

SCALAR_NAMES = ("String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime",
                "Blob")
NUMERIC_SCALARS = frozenset({"I32", "I64", "U32", "U64", "F32", "F64"})
CONSTRAINT_NAMES = ("key", "unique", "index", "range", "check")


@dataclass(frozen=True)
class Pos:
    """A 1-based source position."""

    line: int
    column: int


NO_POS = Pos(0, 0)


@dataclass(frozen=True)
class PropType:
    """``scalar`` is a name from SCALAR_NAMES or ``"Vector"`` (then ``vector_dim`` is set).
    Enums are ``scalar="String"`` with sorted, de-duplicated ``enum_values``."""

    scalar: str
    nullable: bool = False
    list: bool = False
    enum_values: Optional[Tuple[str, ...]] = None
    vector_dim: Optional[int] = None

    @property
    def is_vector(self) -> bool:
        return self.scalar == "Vector"

    @property
    def is_numeric(self) -> bool:
        return self.scalar in NUMERIC_SCALARS

    def scalar_display(self) -> str:
        return f"Vector({self.vector_dim})" if self.is_vector else self.scalar

    def display_name(self) -> str:
        """The engine's ``PropType::display_name`` (used in interface and constraint errors)."""
        base = ("enum(" + ", ".join(self.enum_values) + ")" if self.enum_values is not None
                else self.scalar_display())
        if self.list:
            base = f"[{base}]"
        return base + ("?" if self.nullable else "")


@dataclass(frozen=True)
class Annotation:
    """``@name`` or ``@name(value, k=v, ...)``. ``value`` is the decoded string literal, or the
    raw text of an identifier/number/bool argument. ``kwargs`` is sorted by key, last write
    wins (the engine stores them in a BTreeMap)."""

    name: str
    value: Optional[str] = None
    kwargs: Tuple[Tuple[str, str], ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)

    def kwarg(self, key: str) -> Optional[str]:
        for k, v in self.kwargs:
            if k == key:
                return v
        return None


@dataclass(frozen=True)
class Bound:
    """A @range bound: ``kind`` is "Integer" (i64) or "Float" (f64)."""

    kind: str
    value: Union[int, float]


@dataclass(frozen=True)
class KeyConstraint:
    columns: Tuple[str, ...]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Key"


@dataclass(frozen=True)
class UniqueConstraint:
    columns: Tuple[str, ...]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Unique"


@dataclass(frozen=True)
class IndexConstraint:
    columns: Tuple[str, ...]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Index"


@dataclass(frozen=True)
class RangeConstraint:
    property: str
    min: Optional[Bound]
    max: Optional[Bound]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Range"


@dataclass(frozen=True)
class CheckConstraint:
    property: str
    pattern: str
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Check"


Constraint = Union[KeyConstraint, UniqueConstraint, IndexConstraint, RangeConstraint,
                   CheckConstraint]


@dataclass(frozen=True)
class Cardinality:
    min: int = 0
    max: Optional[int] = None


@dataclass(frozen=True)
class PropDecl:
    name: str
    prop_type: PropType
    annotations: Tuple[Annotation, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)


@dataclass(frozen=True)
class InterfaceDecl:
    name: str
    properties: Tuple[PropDecl, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "interface"


@dataclass(frozen=True)
class NodeDecl:
    name: str
    annotations: Tuple[Annotation, ...] = ()
    implements: Tuple[str, ...] = ()
    properties: Tuple[PropDecl, ...] = ()
    constraints: Tuple[Constraint, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)
    implements_pos: Tuple[Pos, ...] = field(default=(), compare=False)
    kind: str = "node"


@dataclass(frozen=True)
class EdgeDecl:
    name: str
    from_type: str
    to_type: str
    cardinality: Cardinality = Cardinality()
    annotations: Tuple[Annotation, ...] = ()
    properties: Tuple[PropDecl, ...] = ()
    constraints: Tuple[Constraint, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)
    from_pos: Pos = field(default=NO_POS, compare=False)
    to_pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "edge"


Decl = Union[InterfaceDecl, NodeDecl, EdgeDecl]


@dataclass(frozen=True)
class SchemaFile:
    declarations: Tuple[Decl, ...] = ()

    def interfaces(self) -> Tuple[InterfaceDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, InterfaceDecl))

    def nodes(self) -> Tuple[NodeDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, NodeDecl))

    def edges(self) -> Tuple[EdgeDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, EdgeDecl))
