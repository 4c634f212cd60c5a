"""Elementwise ops: broadcasting rules, dtypes, value propagation through arithmetic."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.shapes import NodeContext, ShapesContext
from tests.engine._engine_testing import assert_verified, dims, errors, infer

a, b, n = expr.sym("a"), expr.sym("b"), expr.sym("n")


def _node_ctx() -> NodeContext:
    ctx = NodeContext(ShapesContext())
    ctx.reset(ir.node("Add", [], name="add", num_outputs=1), 21)
    return ctx


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        ((a, 1), (1, b), (a, b)),  # 1 yields to the other side
        ((a, 3), (3,), (a, 3)),  # rank extension
        ((n,), (4,), (4,)),  # n must be 1 or 4: the output is 4 either way
        ((4,), (n,), (4,)),
        ((n,), (0,), (0,)),  # zero-size dims broadcast like any int
        ((a,), (b,), (expr.broadcast(a, b),)),  # never a guess
        ((a,), (a,), (a,)),
        ((), (a, 2), (a, 2)),
    ],
)
def test_broadcast_rules(x, y, expected):
    assert _node_ctx().broadcast_shapes(x, y) == expected


def test_broadcast_with_unknown_rank_is_unknown():
    assert _node_ctx().broadcast_shapes((a,), None) is None


def test_broadcast_of_an_int_against_a_symbol_records_no_equality():
    ctx = _node_ctx()
    ctx.broadcast_shapes((n,), (4,))
    assert ctx.ctx.constraints_size() == 0  # n may be 1


def test_broadcast_of_different_ints_fails_the_node():
    m, result = infer("g (float[3] x, float[4] y) => (z) { z = Add(x, y) }")
    assert dims(m, "z") is None
    assert any("cannot broadcast" in e for e in errors(result))


@pytest.mark.parametrize(
    ("op", "dtype"),
    [("Add", "FLOAT"), ("Pow", "FLOAT"), ("Greater", "BOOL"), ("Equal", "BOOL")],
)
def test_binary_shape_and_dtype(op, dtype):
    m, _ = infer(f"g (float[a, 1, 5] x, float[b, 1] y) => (z) {{ z = {op}(x, y) }}")
    assert dims(m, "z") == ["a", "b", 5]
    assert m.graph.node(0).outputs[0].dtype.name == dtype
    assert_verified(m)


def test_symbolic_broadcast_term_is_written():
    m, _ = infer("g (float[a] x, float[b] y) => (z) { z = Mul(x, y) }")
    assert dims(m, "z") == ["broadcast(a,b)"]


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("Relu", ["a", 0, 3]),
        ("Sigmoid", ["a", 0, 3]),
        ("Not", ["a", 0, 3]),
        ("IsNaN", ["a", 0, 3]),
    ],
)
def test_unary_keeps_shape_including_zero_size(op, expected):
    dtype = "bool" if op == "Not" else "float"
    m, _ = infer(f"g ({dtype}[a, 0, 3] x) => (y) {{ y = {op}(x) }}")
    assert dims(m, "y") == expected


def test_variadic_where_clip_dropout():
    m, _ = infer(
        """g (float[a, 1] x, float[1, b] y, float[b] w, bool[a, b] c) => (s, wh, cl, d, mask) {
            s = Sum(x, y, w)
            wh = Where(c, x, y)
            cl = Clip(x)
            d, mask = Dropout(y)
        }"""
    )
    assert dims(m, "s") == ["a", "b"]
    assert dims(m, "wh") == ["a", "b"]
    assert dims(m, "cl") == ["a", 1]
    assert dims(m, "mask") == [1, "b"]
    assert m.graph.node(3).outputs[1].dtype == ir.DataType.BOOL
    assert_verified(m)


def test_legacy_broadcast_attribute_before_opset_7():
    m, _ = infer(
        "g (float[a, 3, 4] x, float[3] y) => (z) { z = Add<broadcast=1, axis=1>(x, y) }",
        opset=6,
    )
    assert dims(m, "z") == ["a", 3, 4]


# ----------------------------------------------------------------------------------------
# Values as shape through arithmetic
# ----------------------------------------------------------------------------------------
def _value(body: str, name: str = "v"):
    m, result = infer(body)
    assert not errors(result), errors(result)
    return m, result.context.value_as_shape(name)


SHAPE_HEADER = """g (float[a, b, 8] x) => (v) <int64 z = {0}, int64 one = {1}, int64 two = {2},
    int64 m3 = {-3}, int64 k = {-7}, int64[3] neg = {-1, -1, -1}> {
    s = Shape(x)
    sa = Gather(s, z)
    sb = Gather(s, one)
"""


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("v = Add(sa, sb)", (a + b,)),
        ("v = Sub(sa, one)", (a - 1,)),
        ("v = Mul(s, two)", (2 * a, 2 * b, 16)),
        ("v = Div(s, two)", (a // 2, b // 2, 4)),  # dims >= 0: truncation == floor
        ("v = Div(k, two)", (-3,)),  # onnxruntime truncates toward zero
        ("v = Mod(sa, two)", (a % 2,)),
        ("v = Mod<fmod=1>(k, two)", (-1,)),  # C fmod: sign of the dividend
        ("v = Mod(k, two)", (1,)),  # sign of the divisor
        ("v = Neg(sa)", (-a,)),
        ("v = Max(sa, one)", (expr.dmax(a, 1),)),
        ("v = Min(s, two)", (expr.dmin(a, 2), expr.dmin(b, 2), 2)),
        ("v = Abs(m3)", (3,)),
    ],
)
def test_arithmetic_on_shape_values(line, value):
    _, got = _value(SHAPE_HEADER + line + "\n}")
    assert got == value


def test_division_of_a_possibly_negative_value_truncates():
    # a-b may be negative, where truncation and floor differ: the result must be exact.
    _, (got,) = _value(SHAPE_HEADER + "d = Sub(sa, sb)\n v = Div(d, two)\n}")
    for x in range(5):
        for y in range(5):
            assert expr.evaluate(got, {"a": x, "b": y}) == int((x - y) / 2)


def test_division_by_a_symbol_of_a_possibly_negative_value_is_unknown():
    _, got = _value(SHAPE_HEADER + "d = Sub(sa, sb)\n v = Div(d, sa)\n}")
    assert got is None


def test_where_equal_pattern_from_pytorch_expand():
    """``where(shape == -1, 1, shape)``: exporters write this before Expand."""
    _, got = _value(
        SHAPE_HEADER
        + """e = Equal(s, neg)
        v = Where(e, one, s)
        }"""
    )
    # a, b >= 0 are provably != -1: the comparison folds, the Where picks s.
    assert got == (a, b, 8)


def test_values_flow_into_a_reshape():
    m, _ = infer(
        """g (float[a, b, 8] x) => (y) <int64 z = {0}, int64 one = {1}, int64[1] axes = {0},
        int64 two = {2}, int64[1] four = {4}> {
            s = Shape(x)
            sb = Gather(s, one)
            sa = Gather(s, z)
            half = Mul(sb, two)
            t0 = Unsqueeze(sa, axes)
            t1 = Unsqueeze(half, axes)
            t = Concat<axis=0>(t0, t1, four)
            y = Reshape(x, t)
        }"""
    )
    assert dims(m, "y") == ["a", "2*b", 4]
    assert_verified(m)


def test_broadcast_with_a_dim_that_is_one_whenever_the_symbol_is_one():
    # broadcast(s, min(64, s)) is s in every valid run: s <= 64 gives equal dims, s == 1
    # gives 1 on both sides, s > 64 cannot run. Independent symbols stay a term.
    s, t = expr.sym("s"), expr.sym("t")
    ctx = _node_ctx()
    assert ctx.broadcast_shapes((s,), (expr.dmin(64, s),)) == (s,)
    assert ctx.broadcast_shapes((expr.dmin(64, s),), (s,)) == (s,)
    assert ctx.broadcast_shapes((s,), (s * t,)) == (expr.broadcast(s, s * t),)  # t may differ


@pytest.mark.parametrize("dividend", ["sa", "d", "neg3"])
def test_integer_division_truncates_for_every_sign(dividend):
    """``(x - 1) / 2`` as exported by torch is exact for x = 0 too (truncation)."""
    _, (element,) = _value(
        SHAPE_HEADER
        + f"""d = Sub(sa, one)
        neg3 = Sub(one, sa)
        v = Div({dividend}, two)
        }}"""
    )
    for size in range(9):
        source = {"sa": size, "d": size - 1, "neg3": 1 - size}[dividend]
        assert expr.evaluate(element, {"a": size}) == int(source / 2)
