"""Parse .pg text into the AST, the way the engine's ``parse_schema`` front half does.

Steps (engine order, so the first error reported is the engine's first error):
1. grammar (lark LALR) -> :class:`SchemaSyntaxError` with 1-based line/column;
2. per declaration, in source order, the checks the engine makes while building its AST
   (cardinality numbers, constraint arguments, vector dimensions, list of Blob, duplicate enum
   values, string escapes);
3. desugaring of argument-less ``@key``/``@unique``/``@index`` on properties into constraints
   (the annotation stays on the property too);
4. interface resolution (copy missing properties into implementing nodes, desugar them, check
   the type of properties a node already has).

Why a few checks live here rather than in the grammar: the engine's PEG grammar has no sign on
most numbers and forbids ``@key(``-style annotations with a negative lookahead; an LALR grammar
cannot say either, so the grammar is slightly looser and :func:`_syntax_error` restores the
engine's verdict at the offending token.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import SchemaError, SchemaSyntaxError
from .ast import (
    CONSTRAINT_NAMES,
    Annotation,
    Bound,
    Cardinality,
    CheckConstraint,
    Constraint,
    Decl,
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

log = logging.getLogger(__name__)

_U32_MAX = 2**32 - 1
_I32_MAX = 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_CONSTRAINT_NAME_RE = re.compile(r"(key|unique|index|range|check)[^a-z]*\($")

# Human names for terminals in "expected ..." messages.
_TERMINAL_NAMES = {
    "TYPE_NAME": "type name",
    "IDENT": "identifier",
    "ENUM_VALUE": "enum value",
    "STRING": "string literal",
    "FLOAT": "float",
    "INT": "integer",
    "TRUE": "true",
    "FALSE": "false",
    "DOTDOT": "'..'",
    "QMARK": "'?'",
    "AT": "'@'",
    "CARD": "'@card'",
    "CONSTRAINT_START": "'@key(' / '@unique(' / '@index(' / '@range(' / '@check('",
    "BASE_TYPE": "scalar type",
    "$END": "end of input",
}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    """The compiled grammar (cached: building the LALR tables is slow)."""
    text = (Path(__file__).with_name("grammar.lark")).read_text(encoding="utf-8")
    return Lark(text, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False)


# --- errors ----------------------------------------------------------------------------------


def _end_pos(source: str) -> Pos:
    lines = source.split("\n")
    return Pos(len(lines), len(lines[-1]) + 1)


def _tok_pos(tok: Token) -> Pos:
    return Pos(tok.line or 0, tok.column or 0)


def _tree_pos(tree: Tree) -> Pos:
    meta = tree.meta
    return Pos(getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


def _syntax_error(message: str, pos: Pos, rule: str = "syntax") -> SchemaSyntaxError:
    return SchemaSyntaxError(message, line=pos.line, column=pos.column, rule=rule)


def _error(message: str, pos: Pos | None, rule: str) -> SchemaError:
    if pos is None or pos.line == 0:
        return SchemaError(message, rule=rule)
    return SchemaError(message, line=pos.line, column=pos.column, rule=rule)


def _describe_expected(expected: Sequence[str]) -> str:
    names = sorted({_TERMINAL_NAMES.get(t, repr(_anon(t))) for t in expected})
    return ", ".join(names)


def _anon(terminal: str) -> str:
    """Lark names anonymous string terminals like ``LBRACE``; show the text instead."""
    try:
        pattern = _lark().get_terminal(terminal).pattern
        return pattern.value if pattern.type == "str" else terminal
    except KeyError:
        return terminal


def _translate(source: str, err: UnexpectedInput) -> SchemaSyntaxError:
    if isinstance(err, UnexpectedCharacters):
        pos = Pos(err.line, err.column)
        ch = source[err.pos_in_stream] if err.pos_in_stream < len(source) else ""  # type: ignore[index, operator]  # set for UnexpectedCharacters
        msg = f"unexpected character {ch!r}"
        if err.allowed:
            msg += f"; expected {_describe_expected(sorted(err.allowed))}"
        return _syntax_error(msg, pos)
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "$END":
            pos, found = _end_pos(source), "end of input"
        else:
            pos, found = _tok_pos(tok), repr(str(tok))
            start = tok.start_pos or 0
            for kw in ("true", "false"):
                if tok.type == "IDENT" and source[max(0, start - len(kw)) : start] == kw:
                    # PEG quirk: in an argument list the engine reads the literal first, so
                    # an identifier like `true_x` can never be an argument there.
                    return _syntax_error(
                        f"'{kw}{tok}' cannot be used as an argument: an identifier starting "
                        f"with '{kw}' is read as the literal {kw}",
                        Pos(pos.line, pos.column - len(kw)),
                    )
        return _syntax_error(f"unexpected {found}; expected {_describe_expected(sorted(err.expected))}", pos)
    if isinstance(err, UnexpectedEOF):
        return _syntax_error(
            f"unexpected end of input; expected {_describe_expected(sorted(err.expected))}", _end_pos(source)
        )
    return _syntax_error(str(err), Pos(getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1))


# --- string literals -------------------------------------------------------------------------

_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def decode_string_literal(raw: str, pos: Pos) -> str:
    """Strip the quotes (when present) and decode ``\\" \\\\ \\n \\r \\t``; anything else after a
    backslash is an error, as in the engine. Unquoted raw text (an identifier or number used
    as an argument) passes through unchanged."""
    inner = raw[1:-1] if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"' else raw
    out: list[str] = []
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(inner):
            raise _syntax_error("unterminated escape sequence", pos, rule="string_escape")
        nxt = inner[i + 1]
        if nxt not in _ESCAPES:
            raise _syntax_error(f"unsupported escape sequence: \\{nxt}", pos, rule="string_escape")
        out.append(_ESCAPES[nxt])
        i += 2
    return "".join(out)


# --- tree -> AST -----------------------------------------------------------------------------


def _tokens(tree: Tree) -> list[Token]:
    return [c for c in tree.children if isinstance(c, Token)]


def _subtrees(tree: Tree, name: str) -> list[Tree]:
    return [c for c in tree.children if isinstance(c, Tree) and c.data == name]


def _unsigned(tok: Token, what: str) -> str:
    """The engine's grammar has no sign here; reject ``-`` like its parser would."""
    if str(tok).startswith("-"):
        raise _syntax_error(f"unexpected '-' in {what}; a negative number is not allowed here", _tok_pos(tok))
    return str(tok)


def _literal_text(tree: Tree, what: str) -> tuple[str, Token]:
    tok = tree.children[0]
    assert isinstance(tok, Token)
    if tok.type in ("INT", "FLOAT"):
        _unsigned(tok, what)
    return str(tok), tok


def _annotation(tree: Tree) -> Annotation:
    first = tree.children[0]
    assert isinstance(first, Token)
    pos = _tok_pos(first)  # the "@" (or "@card")
    head = tree.children[1] if first.type == "AT" else first
    assert isinstance(head, Token)
    name = "card" if head.type == "CARD" else str(head)
    args = _subtrees(tree, "annotation_args")
    if not args:
        return Annotation(name, None, (), pos)
    if name in CONSTRAINT_NAMES:
        # `@key(...)` is never an annotation in the engine's grammar (negative lookahead);
        # reaching here means it stood where no body constraint may stand.
        raise _syntax_error(f"@{name}(...) is a body constraint and is only allowed inside a node or edge body", pos)
    value: str | None = None
    kwargs: dict[str, str] = {}
    for item in args[0].children:
        if not isinstance(item, Tree):
            continue
        if item.data == "literal":
            raw, tok = _literal_text(item, "annotation argument")
            value = decode_string_literal(raw, _tok_pos(tok))
        elif item.data == "ident_arg":
            value = str(item.children[0])
        elif item.data == "annotation_kwarg":
            key_tok, lit = item.children
            raw, tok = _literal_text(lit, "annotation argument")
            kwargs[str(key_tok)] = decode_string_literal(raw, _tok_pos(tok))
    return Annotation(name, value, tuple(sorted(kwargs.items())), pos)


def _prop_type(type_ref: Tree) -> PropType:
    core = type_ref.children[0]
    nullable = any(isinstance(c, Token) and c.type == "QMARK" for c in type_ref.children)
    if isinstance(core, Token):  # only via base_type alias, kept as tree; defensive
        return PropType(str(core), nullable)
    pos = _tree_pos(core)
    if core.data == "base_type":
        return PropType(str(core.children[0]), nullable)
    if core.data == "list_type":
        base = str(core.children[0])
        if base == "Blob":
            raise _error("list of Blob is not supported", pos, "list_of_blob")
        return PropType(base, nullable, list=True)
    if core.data == "vector_type":
        tok = core.children[0]
        text = _unsigned(tok, "Vector dimension")  # type: ignore[arg-type]  # the grammar's dimension is a token
        dim = int(text)
        if dim > _U32_MAX:
            raise _error(f"invalid Vector dimension: {text} is too large", pos, "vector_dim")
        if dim == 0:
            raise _error("Vector dimension must be greater than zero", pos, "vector_dim")
        if dim > _I32_MAX:
            raise _error(f"Vector dimension {dim} exceeds maximum supported {_I32_MAX}", pos, "vector_dim")
        return PropType("Vector", nullable, vector_dim=dim)
    if core.data == "enum_type":
        values = [str(t) for t in _tokens(core)]
        if len(set(values)) != len(values):
            dups = sorted({v for v in values if values.count(v) > 1})
            raise _error(f"enum type cannot include duplicate values ({', '.join(dups)})", pos, "enum_duplicate")
        return PropType("String", nullable, enum_values=tuple(sorted(values)))
    raise _syntax_error(f"unexpected type rule {core.data}", pos)


def _prop_decl(tree: Tree) -> PropDecl:
    name_tok = tree.children[0]
    assert isinstance(name_tok, Token)
    type_ref = _subtrees(tree, "type_ref")[0]
    annotations = tuple(_annotation(a) for a in _subtrees(tree, "annotation"))
    return PropDecl(str(name_tok), _prop_type(type_ref), annotations, _tok_pos(name_tok))


def _bound(tok: Token) -> Bound:
    """Integer when the text fits an i64, else f64 (the engine tries i64 first, so an
    overflowing integer silently becomes a Float)."""
    text = str(tok)
    if tok.type == "INT":
        n = int(text)
        if _I64_MIN <= n <= _I64_MAX:
            return Bound("Integer", n)
    return Bound("Float", float(text))


def _arg_ident(arg: Tree) -> str | None:
    return str(arg.children[0]) if arg.data == "ident_arg" else None


def _check_literal_args(args: Sequence[Tree]) -> None:
    for arg in args:
        if arg.data == "literal":
            _literal_text(arg, "constraint argument")


def _body_constraint(tree: Tree) -> Constraint:
    head = tree.children[0]
    assert isinstance(head, Token)
    pos = _tok_pos(head)
    m = _CONSTRAINT_NAME_RE.search(re.sub(r"/\*[\s\S]*?\*/|//[^\n]*", "", str(head)))
    name = m.group(1) if m else ""
    args = [c for c in tree.children if isinstance(c, Tree)]
    _check_literal_args(args)

    def ident(arg: Tree) -> str:
        got = _arg_ident(arg)
        if got is None:
            raise _error(f"expected property name in @{name} constraint", _tree_pos(arg), "constraint_args")
        return got

    if name in ("key", "unique", "index"):
        cols = tuple(ident(a) for a in args)
        cls = {"key": KeyConstraint, "unique": UniqueConstraint, "index": IndexConstraint}[name]
        return cls(cols, pos)  # type: ignore[return-value]  # one of the three constraint classes
    if name == "range":
        if len(args) < 2:
            raise _error("@range requires property name and bounds: @range(prop, min..max)", pos, "constraint_args")
        prop = ident(args[0])
        if args[1].data != "range_bound":
            raise _error(
                f"expected range bounds (min..max) in @range constraint on '{prop}'",
                _tree_pos(args[1]),
                "constraint_args",
            )
        # The engine assigns bounds in order of appearance, so `..5` yields min=5, max=None.
        nums = [t for t in _tokens(args[1]) if t.type in ("INT", "FLOAT")]
        lo = _bound(nums[0]) if nums else None
        hi = _bound(nums[1]) if len(nums) > 1 else None
        return RangeConstraint(prop, lo, hi, pos)
    if name == "check":
        if len(args) < 2:
            raise _error('@check requires property name and pattern: @check(prop, "regex")', pos, "constraint_args")
        prop = ident(args[0])
        arg = args[1]
        tok = arg.children[0] if arg.data == "literal" else None
        if not isinstance(tok, Token) or tok.type != "STRING":
            raise _error(
                f"expected string argument in @check constraint on '{prop}'", _tree_pos(arg), "constraint_args"
            )
        return CheckConstraint(prop, decode_string_literal(str(tok), _tok_pos(tok)), pos)
    raise _syntax_error(f"unknown constraint: {head}", pos)


def _cardinality(tree: Tree) -> Cardinality:
    nums = [t for t in _tokens(tree) if t.type == "INT"]
    pos = _tree_pos(tree)
    lo_text = _unsigned(nums[0], "@card")
    lo = int(lo_text)
    if lo > _U32_MAX:
        raise _error(f"invalid cardinality min: {lo_text}", pos, "card_range")
    hi: int | None = None
    if len(nums) > 1:
        hi_text = _unsigned(nums[1], "@card")
        hi = int(hi_text)
        if hi > _U32_MAX:
            raise _error(f"invalid cardinality max: {hi_text}", pos, "card_range")
        if lo > hi:
            raise _error(f"cardinality min ({lo}) exceeds max ({hi})", pos, "card_min_max")
    return Cardinality(lo, hi)


def _body(items: Sequence[Tree]) -> tuple[list[PropDecl], list[Constraint]]:
    props: list[PropDecl] = []
    constraints: list[Constraint] = []
    for item in items:
        if item.data == "prop_decl":
            props.append(_prop_decl(item))
        elif item.data == "body_constraint":
            constraints.append(_body_constraint(item))
    return props, constraints


def desugar_property_constraints(props: Sequence[PropDecl]) -> list[Constraint]:
    """Argument-less @key/@unique/@index on a property -> a one-column constraint."""
    out: list[Constraint] = []
    for p in props:
        for a in p.annotations:
            if a.value is not None:
                continue
            if a.name == "key":
                out.append(KeyConstraint((p.name,), a.pos))
            elif a.name == "unique":
                out.append(UniqueConstraint((p.name,), a.pos))
            elif a.name == "index":
                out.append(IndexConstraint((p.name,), a.pos))
    return out


def _decl(tree: Tree) -> Decl:
    name_tok = tree.children[0]
    assert isinstance(name_tok, Token)
    pos = _tok_pos(name_tok)
    kids = [c for c in tree.children if isinstance(c, Tree)]
    if tree.data == "interface_decl":
        props = [_prop_decl(k) for k in kids if k.data == "prop_decl"]
        return InterfaceDecl(str(name_tok), tuple(props), pos)
    if tree.data == "node_decl":
        annotations = [_annotation(k) for k in kids if k.data == "annotation"]
        impl: list[Token] = []
        for k in kids:
            if k.data == "implements_clause":
                impl = _tokens(k)
        props, constraints = _body([k for k in kids if k.data in ("prop_decl", "body_constraint")])
        constraints += desugar_property_constraints(props)
        return NodeDecl(
            str(name_tok),
            tuple(annotations),
            tuple(str(t) for t in impl),
            tuple(props),
            tuple(constraints),
            pos,
            tuple(_tok_pos(t) for t in impl),
        )
    # edge_decl
    names = _tokens(tree)
    card = Cardinality()
    annotations, items = [], []
    for k in kids:
        if k.data == "cardinality":
            card = _cardinality(k)
        elif k.data == "annotation":
            annotations.append(_annotation(k))
        elif k.data == "edge_body":
            items = [c for c in k.children if isinstance(c, Tree)]
    props, constraints = _body(items)
    constraints += desugar_property_constraints(props)
    return EdgeDecl(
        str(names[0]),
        str(names[1]),
        str(names[2]),
        card,
        tuple(annotations),
        tuple(props),
        tuple(constraints),
        pos,
        _tok_pos(names[1]),
        _tok_pos(names[2]),
    )


# --- interface resolution --------------------------------------------------------------------


def resolve_interfaces(node: NodeDecl, interfaces: dict[str, InterfaceDecl]) -> NodeDecl:
    """Inject interface properties a node lacks (desugaring their @key/@unique/@index);
    a property the node already declares must have exactly the interface's type."""
    props = list(node.properties)
    constraints = list(node.constraints)
    for i, iface_name in enumerate(node.implements):
        where = node.implements_pos[i] if i < len(node.implements_pos) else node.pos
        iface = interfaces.get(iface_name)
        if iface is None:
            raise _error(f"node {node.name} implements unknown interface '{iface_name}'", where, "unknown_interface")
        for ip in iface.properties:
            existing = next((p for p in props if p.name == ip.name), None)
            if existing is None:
                props.append(ip)
                constraints += desugar_property_constraints([ip])
            elif existing.prop_type != ip.prop_type:
                raise _error(
                    f"node {node.name} property '{ip.name}' has type "
                    f"{existing.prop_type.display_name()} but interface {iface_name} declares "
                    f"it as {ip.prop_type.display_name()}",
                    existing.pos,
                    "interface_type_conflict",
                )
    return NodeDecl(
        node.name, node.annotations, node.implements, tuple(props), tuple(constraints), node.pos, node.implements_pos
    )


def parse_schema(source: str) -> SchemaFile:
    """Grammar + AST checks + desugaring + interface resolution (no annotation/constraint
    validation: see :mod:`.validate`)."""
    try:
        tree = _lark().parse(source)
    except UnexpectedInput as e:
        raise _translate(source, e) from None
    decls: list[Decl] = [_decl(t) for t in tree.children if isinstance(t, Tree)]
    # Later interfaces with the same name win, like the engine's HashMap collect.
    interfaces = {d.name: d for d in decls if isinstance(d, InterfaceDecl)}
    resolved = [resolve_interfaces(d, interfaces) if isinstance(d, NodeDecl) else d for d in decls]
    log.debug("parsed schema: %d declarations", len(resolved))
    return SchemaFile(tuple(resolved))
