"""AST of a .pg schema, after parsing, desugaring and interface resolution.

Why immutable dataclasses with source positions: the engine's AST carries no positions, so its
semantic errors cannot say where they are. Ours keeps the 1-based line/column of every
declaration, property, annotation and constraint so a :class:`SchemaError` can point at it.
Equality of :class:`PropType` ignores nothing: it mirrors the engine's derived ``PartialEq``,
which interface resolution relies on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCALAR_NAMES = ("String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime", "Blob")
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
    enum_values: tuple[str, ...] | None = None
    vector_dim: int | None = None

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
        base = "enum(" + ", ".join(self.enum_values) + ")" if self.enum_values is not None else self.scalar_display()
        if self.list:
            base = f"[{base}]"
        return base + ("?" if self.nullable else "")


@dataclass(frozen=True)
class Annotation:
    """``@name`` or ``@name(value, k=v, ...)``. ``value`` is the decoded string literal, or the
    raw text of an identifier/number/bool argument. ``kwargs`` is sorted by key, last write
    wins (the engine stores them in a BTreeMap)."""

    name: str
    value: str | None = None
    kwargs: tuple[tuple[str, str], ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)

    def kwarg(self, key: str) -> str | None:
        for k, v in self.kwargs:
            if k == key:
                return v
        return None


@dataclass(frozen=True)
class Bound:
    """A @range bound: ``kind`` is "Integer" (i64) or "Float" (f64)."""

    kind: str
    value: int | float


@dataclass(frozen=True)
class KeyConstraint:
    columns: tuple[str, ...]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Key"


@dataclass(frozen=True)
class UniqueConstraint:
    columns: tuple[str, ...]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Unique"


@dataclass(frozen=True)
class IndexConstraint:
    columns: tuple[str, ...]
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Index"


@dataclass(frozen=True)
class RangeConstraint:
    property: str
    min: Bound | None
    max: Bound | None
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Range"


@dataclass(frozen=True)
class CheckConstraint:
    property: str
    pattern: str
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "Check"


Constraint = KeyConstraint | UniqueConstraint | IndexConstraint | RangeConstraint | CheckConstraint


@dataclass(frozen=True)
class Cardinality:
    min: int = 0
    max: int | None = None


@dataclass(frozen=True)
class PropDecl:
    name: str
    prop_type: PropType
    annotations: tuple[Annotation, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)


@dataclass(frozen=True)
class InterfaceDecl:
    name: str
    properties: tuple[PropDecl, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "interface"


@dataclass(frozen=True)
class NodeDecl:
    name: str
    annotations: tuple[Annotation, ...] = ()
    implements: tuple[str, ...] = ()
    properties: tuple[PropDecl, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)
    implements_pos: tuple[Pos, ...] = field(default=(), compare=False)
    kind: str = "node"


@dataclass(frozen=True)
class EdgeDecl:
    name: str
    from_type: str
    to_type: str
    cardinality: Cardinality = Cardinality()
    annotations: tuple[Annotation, ...] = ()
    properties: tuple[PropDecl, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    pos: Pos = field(default=NO_POS, compare=False)
    from_pos: Pos = field(default=NO_POS, compare=False)
    to_pos: Pos = field(default=NO_POS, compare=False)
    kind: str = "edge"


Decl = InterfaceDecl | NodeDecl | EdgeDecl


@dataclass(frozen=True)
class SchemaFile:
    declarations: tuple[Decl, ...] = ()

    def interfaces(self) -> tuple[InterfaceDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, InterfaceDecl))

    def nodes(self) -> tuple[NodeDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, NodeDecl))

    def edges(self) -> tuple[EdgeDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, EdgeDecl))
