"""max/min of floor quotients: dropped arguments and one spelling of a floored extremum.

``min((H-1)//3, H//3)`` is ``(H-1)//3`` and ``max(h-1, 0)//8 + 1`` is ``max(h+7, 8)//8``
for *every* integer (negative ones too): checked against brute-force evaluation of the
expression as built, operation by operation, with Python's own ``//``, ``max`` and ``min``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_symdims.expr import (
    Scope,
    add,
    dmax,
    dmin,
    evaluate,
    floordiv,
    mul,
    parse_dim,
    simplify_expression,
    sym,
    to_onnx,
)
from onnx_symdims.expr._floor_bounds import difference_bounds
from tests.expr.test_properties import PROPERTY_SETTINGS

VALUES = range(-40, 41)

shifts = st.integers(-9, 9)
divisors = st.integers(1, 7)
coefficients = st.integers(1, 3)


def _floor_affine(c: int, a: int, e: int, p: int):
    """``c*((h+a)//e) + p`` built with the algebra, and the same as a Python function."""
    built = add(mul(c, floordiv(add(sym("h"), a), e)), p)
    return built, lambda h: c * ((h + a) // e) + p


@PROPERTY_SETTINGS
@given(
    st.lists(st.tuples(st.integers(-3, 3), shifts), min_size=1, max_size=4),
    divisors,
    st.integers(-2, 2),
)
def test_difference_bounds_hold_and_are_reached(group, d, slope):
    built = mul(slope, sym("h"))
    for c, a in group:
        built = add(built, mul(c, floordiv(add(sym("h"), a), d)))
    bounds = difference_bounds(built, 0)
    values = [evaluate(built, {"h": h}) for h in VALUES]
    if bounds is None:
        return
    lo, hi = bounds
    assert all(lo <= v <= hi for v in values)
    assert lo in values and hi in values  # exact over a period, and 81 values span many


@PROPERTY_SETTINGS
@given(
    st.sampled_from([dmax, dmin]),
    st.tuples(coefficients, shifts, divisors, shifts),
    st.tuples(coefficients, shifts, divisors, shifts),
)
def test_an_extremum_of_floor_quotients_keeps_its_value(op, first, second):
    x, fx = _floor_affine(*first)
    y, fy = _floor_affine(*second)
    pick = max if op is dmax else min
    built = op(x, y)
    assert op(y, x) is built  # one form whatever the order
    for h in VALUES:
        assert evaluate(built, {"h": h}) == pick(fx(h), fy(h))


@PROPERTY_SETTINGS
@given(
    st.sampled_from([dmax, dmin]),
    st.tuples(coefficients, shifts, divisors, shifts),
    st.integers(-12, 12),
    shifts,
    divisors,
    divisors,
)
def test_a_floored_extremum_keeps_its_value(op, inner, bound, k, d, d2):
    g, fg = _floor_affine(*inner)
    pick = max if op is dmax else min
    for numerator, f in (
        (op(g, bound), lambda h: pick(fg(h), bound)),
        (op(add(sym("h"), inner[1]), bound), lambda h: pick(h + inner[1], bound)),
    ):
        built = floordiv(floordiv(add(numerator, k), d), d2)
        assert parse_dim(to_onnx(built)) is built
        for h in VALUES:
            assert evaluate(built, {"h": h}) == (f(h) + k) // d // d2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ceil_mode MaxPool, kernel 2, stride 3 (attack5 pool_ops_dynamo)
        ("min((H-1)//3,H//3)+1", "(2+H)//3"),
        ("max((H-1)//3,H//3)", "H//3"),
        ("max(h//2,(h+1)//2)", "(1+h)//2"),
        ("min(4*((seq_len+3)//4),seq_len)", "seq_len"),
        ("64*min(4*((seq_len+3)//4),seq_len)//seq_len", 64),
        ("min(2*(h//2),h-1)", "h-1"),
        ("max(2*(h//2),h)", "h"),
        # one spelling of a floored max: ceil-mode pooling, conv and a max of quotients
        ("max(height-1,0)//8+1", "(8^7+height)//8"),
        ("max((height+7)//4,2)//2", "(8^7+height)//8"),
        ("max((height+31)//4,8)//8", "(32^31+height)//32"),
        ("max(height+7,8)//16", "(8^7+height)//16"),
        (
            "max(height-1,0)//8+(max(height-1,0)//8)*(max(width-1,0)//8)+max(width-1,0)//8+1",
            "((8^7+height)//8)*((8^7+width)//8)",
        ),
        ("max(3-h,0)//2", "(0^3-h)//2"),
    ],
)
def test_seen_in_the_corpora(text, expected):
    assert simplify_expression(text) == expected


def test_a_difference_that_is_not_bounded_keeps_both():
    # 3*(h//2) - h grows without bound both ways: neither bounds the other everywhere.
    assert simplify_expression("min(3*(h//2),h)") == "h&3*(h//2)"


# Found by tests/fuzz/test_differential.py (seed 382): comparing two arguments built their
# difference with the ring, which folded it into a new extremum, which compared its
# arguments again, without end. The difference is now taken term by term.
_FUZZ_382 = """
  <
     ir_version: 10,
     opset_import: ["" : 18]
  >
  fuzz (float[K] x0) => (float[] v39, float[] v43)
     <int64[1] c7 =  {2}, int64[1] c20 =  {0}>
  {
     [n2] c1 = Constant <value: tensor = int64[1] {2}> ()
     [n4] c3 = Constant <value_ints: ints = [2]> ()
     [n6] v5 = Shape <end: int = 1, start: int = 0> (c3)
     [n9] v8 = Sub (v5, c7)
     [n11] c10 = Constant <value: tensor = int64[1] {-1}> ()
     [n13] c12 = Constant <value: tensor = int64[1] {-2}> ()
     [n15] v14 = Slice (x0, c1, v8, c10, c12)
     [n17] c16 = Constant <value_ints: ints = [1]> ()
     [n19] c18 = Constant <value_ints: ints = [0]> ()
     [n22] c21 = Constant <value_ints: ints = [-1]> ()
     [n24] v23 = Slice (v14, c16, c18, c20, c21)
     [n26] v25 = NonZero (x0)
     [n28] v27 = Transpose <perm: ints = [1, 0]> (v25)
     [n30] v29 = GatherND (x0, v27)
     [n32] c31 = Constant <value: tensor = int64[1] {1}> ()
     [n34] c33 = Constant <value: tensor = int64[1] {9223372036854775807}> ()
     [n36] c35 = Constant <value: tensor = int64[1] {0}> ()
     [n38] v37 = Slice (v23, c31, c33, c35)
     [n40] v39 = Concat <axis: int = 0> (v37, v23)
     [n42] c41 = Constant <value: tensor = int64[2] {2,1}> ()
     [n44] v43 = Unsqueeze (v37, c41)
  }
"""


def test_comparing_arguments_does_not_build_new_extrema():
    import onnx_ir as ir

    import onnx_symdims

    model = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(_FUZZ_382))
    assert model.graph.outputs[0].shape is not None


@PROPERTY_SETTINGS
@given(
    st.sampled_from([dmax, dmin]),
    shifts,
    st.integers(-12, 12),
    divisors,
    st.integers(-3, 3),
    st.integers(-3, 3),
    shifts,
)
def test_a_case_split_on_a_shifted_symbol_proves_only_what_holds(op, c, k, d, x, y, z):
    # Scope proofs split on min(s+c, k) / max(s+c, k): the spelling of a floored extremum.
    h = sym("h")
    candidate = add(add(mul(x, floordiv(op(add(h, c), k), d)), mul(y, floordiv(h, d))), z)
    if Scope(nonnegative=True).prove_nonneg(candidate):
        assert all(evaluate(candidate, {"h": v}) >= 0 for v in range(81))


def test_a_case_split_on_a_shifted_symbol():
    scope = Scope(nonnegative=True)
    assert scope.prove_nonneg(parse_dim("(h+3)//4 - max(h+3,4)//4 + 1"))
    assert not scope.prove_nonneg(parse_dim("(h+3)//4 - max(h+3,4)//4"))  # -1 at h = 0
