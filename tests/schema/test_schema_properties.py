"""Property tests: IR invariants over generated schemas (hypothesis)."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnigraph_spark.schema import compile_schema, fnv1a_32, ir_hash_of_text
from omnigraph_spark.schema.jsonfmt import rust_debug_f64, serde_f64

TYPE_NAMES = st.from_regex(r"\A[A-Z][A-Za-z0-9_]{0,6}\Z")
PROP_NAMES = st.from_regex(r"\A[a-z_][A-Za-z0-9_]{0,6}\Z").filter(lambda s: not s.startswith(("true", "false")))
SCALARS = ["String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime", "Blob"]
WS = st.sampled_from([" ", "\n", "\t", "  ", " /* c */ ", " // c\n"])


@st.composite
def prop_types(draw):
    kind = draw(st.sampled_from(["scalar", "scalar", "list", "enum", "vector"]))
    if kind == "scalar":
        t = draw(st.sampled_from(SCALARS))
    elif kind == "list":
        t = "[" + draw(st.sampled_from([s for s in SCALARS if s != "Blob"])) + "]"
    elif kind == "enum":
        vals = draw(st.lists(st.from_regex(r"\A[A-Za-z0-9_\-]{1,4}\Z"), min_size=1, max_size=4, unique=True))
        t = "enum(" + ", ".join(vals) + ")"
    else:
        t = f"Vector({draw(st.integers(1, 4096))})"
    return t + ("?" if draw(st.booleans()) else "")


@st.composite
def schemas(draw):
    """(declarations, rendered text): nodes with properties, optional @key, edges between
    declared nodes."""
    names = draw(st.lists(TYPE_NAMES, min_size=1, max_size=5, unique=True))
    n_nodes = draw(st.integers(1, len(names)))
    nodes, edges = names[:n_nodes], names[n_nodes:]
    decls = []
    for n in nodes:
        props = draw(st.lists(st.tuples(PROP_NAMES, prop_types()), max_size=5, unique_by=lambda p: p[0]))
        lines = [f"{p}: {t}" for p, t in props]
        keyable = [p for p, t in props if t in ("String", "I32", "I64", "U32", "U64", "Bool", "Date")]
        if keyable and draw(st.booleans()):
            lines.append(f"@key({', '.join(draw(st.permutations(keyable))[:2])})")
        if props and draw(st.booleans()):
            lines[0] += ' @description("d") @zz'
        decls.append(("node", n, lines))
    for e in edges:
        props = draw(st.lists(st.tuples(PROP_NAMES, prop_types()), max_size=3, unique_by=lambda p: p[0]))
        f, t = draw(st.sampled_from(nodes)), draw(st.sampled_from(nodes))
        card = draw(st.sampled_from(["", " @card(0..1)", " @card(1..)"]))
        decls.append(("edge", f"{e}: {f} -> {t}{card}", [f"{p}: {ty}" for p, ty in props]))
    return decls, draw(st.randoms(use_true_random=False))


def render(decls, rnd, ws=" "):
    out = []
    for kind, head, lines in decls:
        body = ("{" + ws + (ws.join(lines)) + ws + "}") if (kind == "node" or lines) else ""
        out.append(f"{kind} {head} {body}")
    return "\n".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas(), WS)
def test_ir_invariants(sch, ws):
    decls, rnd = sch
    c = compile_schema(render(decls, rnd, ws))
    ir = c.ir
    # the three text forms agree, and re-hashing an IR file gives the same hash
    assert json.loads(c.ir_pretty_json()) == json.loads(c.ir_compact_json()) == ir
    assert ir_hash_of_text(c.ir_pretty_json()) == c.ir_hash() == ir_hash_of_text(c.ir_compact_json())
    for group, kind in (("nodes", "node"), ("edges", "edge")):
        names = [t["name"] for t in ir[group]]
        assert names == sorted(names)
        for t in ir[group]:
            assert t["type_id"] == fnv1a_32(f"{kind}:{t['name']}")
            pnames = [p["name"] for p in t["properties"]]
            assert pnames == sorted(pnames)
            for p in t["properties"]:
                assert p["prop_id"] == fnv1a_32(f"{kind}:{t['name']}:{p['name']}")
                ev = p["prop_type"]["enum_values"]
                assert ev is None or ev == sorted(set(ev))
            for con in t["constraints"]:
                ((k, v),) = con.items()
                if k in ("Key", "Unique", "Index"):
                    assert v == sorted(v)
    cat = c.catalog()
    for t in cat.types():
        cols = [f.name for f in t.arrow_schema()]
        sys_cols = ["id", "src", "dst"] if t.is_edge else ["id"]
        assert cols == sys_cols + sorted(p.name for p in t.properties)


@settings(max_examples=40, deadline=None)
@given(schemas())
def test_hash_ignores_declaration_and_property_order(sch):
    decls, rnd = sch
    shuffled = [(k, h, rnd.sample(lines, len(lines))) for k, h, lines in decls]
    rnd.shuffle(shuffled)
    assert compile_schema(render(decls, rnd)).ir_hash() == compile_schema(render(shuffled, rnd, "\n")).ir_hash()


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_renderings_round_trip(x):
    for text in (serde_f64(x), rust_debug_f64(x)):
        y = float(text)
        assert y == x and math.copysign(1, y) == math.copysign(1, x)
    assert json.loads(serde_f64(x)) == x


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_serde_form_is_shortest(x):
    """Same significant digits as Python's shortest repr (zmij and repr are both shortest)."""

    def digits(t: str) -> str:
        mant = t.lower().lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
        return mant or "0"

    assert digits(serde_f64(x)) == digits(repr(x))
