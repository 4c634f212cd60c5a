"""``should_fold``: onnxscript's folder evaluates only what numpy computes as onnxruntime does.

Each case runs ``optimize`` and onnxruntime on the model before and after: a node the
policy keeps must still be there and the outputs equal bit for bit; a node it allows is
folded. ``exact_floats=False`` folds and fuses everything onnxscript would.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims.rewrite._folding import kept_float_weight_nodes, should_fold
from tests.rewrite._rewrite_testing import model, ops, proto, session

# x * exp(c) of a constant c: numpy's exp and onnxruntime's vectorized one round
# differently (on 4,096 values, 1,640 differ in the last bit), so a folded exp(c) changes
# the output's last bits.
_rng = np.random.default_rng(7)
_C = ", ".join(f"{v:.6f}" for v in _rng.standard_normal(64) * 5)
EXP_OF_CONSTANT = f"""
    g (float[N, 64] x) => (float[N, 64] y) {{
        c = Constant<value = float[64] {{{_C}}}>()
        e = Exp(c)
        y = Mul(x, e)
    }}
"""


def _run(m: ir.Model, x: np.ndarray) -> np.ndarray:
    return session(proto(m)).run(None, {"x": x})[0]


def test_float_exp_of_a_constant_is_kept_and_outputs_stay_bit_for_bit():
    before = model(EXP_OF_CONSTANT)
    x = _rng.standard_normal((3, 64)).astype(np.float32)
    expected = _run(before, x)
    after = onnx_symdims.optimize(model(EXP_OF_CONSTANT))
    assert ops(after) == ["Exp", "Mul"]
    np.testing.assert_array_equal(_run(after, x), expected)


def test_numpy_and_onnxruntime_compute_the_exp_differently():
    """The reason for the policy: a folded ``exp(c)`` is not what onnxruntime computes."""
    m = model(EXP_OF_CONSTANT)
    (exp,) = (n for n in m.graph if n.op_type == "Exp")
    m.graph.outputs.append(exp.outputs[0])
    c = ir.convenience.get_const_tensor(exp.inputs[0]).numpy()
    by_onnxruntime = session(proto(m)).run(None, {"x": np.zeros((1, 64), np.float32)})[1]
    assert not np.array_equal(by_onnxruntime, np.exp(c))
    np.testing.assert_allclose(by_onnxruntime, np.exp(c), rtol=1e-6)


def test_float_exp_of_a_constant_is_folded_without_exact_floats():
    after = onnx_symdims.optimize(model(EXP_OF_CONSTANT), exact_floats=False)
    assert ops(after) == ["Mul"]


def _node(op: str, *arrays, **attributes) -> ir.Node:
    inputs = []
    for i, a in enumerate(arrays):
        value = ir.Value(name=f"c{i}")
        value.const_value = ir.tensor(np.asarray(a))
        inputs.append(value)
    return ir.node(op, inputs, attributes=attributes)


F = np.array([1.5, -2.0], np.float32)
I64 = np.array([3, 4], np.int64)
H = np.array([0.7153, 0.6025], np.float16)


@pytest.mark.parametrize(
    ("node", "expected", "why"),
    [
        (_node("MatMul", np.eye(2, dtype=np.float32), F), False, "summation order"),
        (_node("Exp", F), False, "libm vs vectorized exp"),
        (_node("ReduceSum", F), False, "summation order"),
        (_node("Pow", F, np.float32(2)), False, "x*x fast path vs pow"),
        (_node("Softmax", F), False, "exp and sum"),
        (_node("Add", F, F), None, "correctly rounded"),
        (_node("Div", F, F), None, "correctly rounded"),
        (_node("Sqrt", F), None, "correctly rounded"),
        (_node("Transpose", F), None, "data movement"),
        (_node("Less", F, F), None, "comparison"),
        (_node("Cast", F, to=ir.DataType.INT64), None, "finite, in range"),
        (
            _node("Cast", np.array([np.inf], np.float32), to=ir.DataType.INT64),
            False,
            "inf to int is undefined",
        ),
        (
            _node("Cast", np.array([3e10], np.float32), to=ir.DataType.INT32),
            False,
            "out of int32's range",
        ),
        (
            _node("Cast", F, to=ir.DataType.FLOAT16),
            False,
            "onnxruntime's CPU provider drops this rounding before a float16 Mul or Add",
        ),
        (_node("Cast", H, to=ir.DataType.FLOAT), None, "float16 to float is exact"),
        (_node("Mul", H, H), False, "onnxruntime computes float16 chains in float"),
        (_node("Transpose", H), None, "data movement"),
        (_node("Neg", H), None, "no rounding"),
        (_node("MatMul", np.eye(2, dtype=np.int64), I64), None, "integers wrap alike"),
        (_node("Mul", I64, I64), None, "integers"),
        (_node("Unique", I64, sorted=0), False, "the reference sorts anyway"),
        (_node("Unique", I64, sorted=1), None, "sorted, as the reference"),
        (
            _node("Slice", I64, [1], [np.iinfo(np.int64).max], [0], [-1]),
            False,
            "negative step, end INT64_MAX: onnxruntime departs from the spec",
        ),
        (_node("Slice", I64, [1], [-2], [0], [-1]), None, "negative step, end in range"),
        (_node("Slice", I64, [0], [1]), None, "positive step"),
        (
            _node("Pow", np.array([3], np.int64), np.array([39], np.int64)),
            False,
            "onnxruntime's integer Pow goes through a double: 3**39 is not exact there",
        ),
        (_node("Pow", np.array([3, -5], np.int64), np.int64(33)), False, "beyond 2**53"),
        (
            _node("Pow", np.array([2], np.int64), np.array([53], np.int64)),
            None,
            "2**53 is a double",
        ),
        (
            _node("Pow", np.array([99], np.int32), np.array([4], np.int32)),
            None,
            "an int32 result is exact in a double",
        ),
        (
            _node("Pow", np.array([99], np.int32), np.array([8], np.int32)),
            False,
            "beyond int32: onnxruntime's cast from double saturates, numpy wraps",
        ),
        (
            _node("ReduceSum", np.array([2**53 + 1, 0], np.int64)),
            False,
            "onnxruntime sums integers in double: 2**53 there",
        ),
        (
            _node("ReduceSum", np.array([2**30, 2**30, 3], np.int32)),
            False,
            "beyond int32: onnxruntime saturates, numpy wraps",
        ),
        (
            _node("ReduceProd", np.array([100000, 100000, 3], np.int32)),
            False,
            "beyond int32",
        ),
        (_node("ReduceSumSquare", np.array([2**27, 2**27], np.int64)), False, "2**55"),
        (_node("ReduceLogSum", np.array([1, 2], np.int64)), False, "logarithm of ints"),
        (_node("ReduceSum", np.array([2**52, -(2**52)], np.int64)), None, "within 2**53"),
        (_node("ReduceProd", np.array([0, 7, 3], np.int32)), None, "small"),
        (_node("ReduceMax", np.array([2**62, 1], np.int64)), None, "no arithmetic"),
        (
            _node("Einsum", np.array([2**53 + 1, 2], np.int64), equation="i->"),
            False,
            "onnxruntime sums the dropped index in double",
        ),
        (
            _node("Einsum", np.array([2**30, 2**30, 3], np.int32), equation="i->"),
            False,
            "beyond int32: saturates there, wraps in numpy",
        ),
        (
            _node("Einsum", I64, I64, equation="i,i->"),
            None,
            "small: exact",
        ),
        (
            _node("Pow", np.array([-1, 0, 1], np.int64), np.int64(10**9)),
            None,
            "0, 1 and -1 to any power",
        ),
    ],
)
def test_should_fold(node, expected, why):
    assert should_fold(node) is expected, why


# The scale of an expanded attention in float16: computed in float, cast to float16.
HALF_SCALE = """
    g (float16[N, 8] x) => (float16[N, 8] y) {
        s = Constant<value = float[1] {0.59460354}>()
        h = Cast<to = 10>(s)
        y = Mul(x, h)
    }
"""


def test_a_cast_to_float16_of_a_constant_is_kept_and_outputs_stay_bit_for_bit():
    """onnxruntime departs from the spec here; ``optimize`` keeps what it runs.

    The spec rounds the cast to float16 (0.5947) and multiplies in float16. The CPU
    provider has no float16 ``Mul``: it wraps the ``Mul`` in casts to and from float and
    drops the ``float -> float16 -> float`` pair that makes, so it multiplies by the
    unrounded 0.59460354. Folding the cast would give the spec's result, not the
    original model's in onnxruntime, so the cast stays (where onnxruntime follows the
    spec, keeping it changes nothing either).
    """
    x = np.random.default_rng(3).random((24, 8)).astype(np.float16)
    before = model(HALF_SCALE)
    expected = _run(before, x)
    after = onnx_symdims.optimize(model(HALF_SCALE))
    assert ops(after) == ["Cast", "Mul"]
    np.testing.assert_array_equal(_run(after, x), expected)
    by_the_spec = x * np.float16(0.59460354)
    if not np.array_equal(expected, by_the_spec):  # the departure, as described above
        in_float = (x.astype(np.float32) * np.float32(0.59460354)).astype(np.float16)
        np.testing.assert_array_equal(expected, in_float)


# A BatchNormalization after a Conv, weights as initializers: onnxscript fuses its scale
# and shift into the Conv's weights, which reassociates the float math.
CONV_BN = """
    g (float[N, 2, 5, 5] x) => (float[N, 2, 3, 3] y)
      <float[2, 2, 3, 3] w = {
            0.3, -0.7, 0.11, 0.52, -0.9, 0.13, 0.77, -0.31, 0.29,
            -0.45, 0.61, 0.07, -0.83, 0.35, 0.94, -0.18, 0.56, -0.62,
            0.71, 0.23, -0.57, 0.41, -0.09, 0.86, -0.27, 0.64, 0.15,
            0.38, -0.74, 0.19, 0.92, -0.36, 0.05, -0.68, 0.47, 0.81},
       float[2] scale = {1.37, 0.59}, float[2] bias = {0.21, -0.44},
       float[2] mean = {0.13, -0.26}, float[2] var = {0.7, 1.9}> {
        c = Conv(x, w)
        y = BatchNormalization(c, scale, bias, mean, var)
    }
"""


def test_batch_normalization_is_fused_into_the_conv_only_without_exact_floats():
    exact = onnx_symdims.optimize(model(CONV_BN))
    assert ops(exact) == ["Conv", "BatchNormalization"]
    x = _rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(_run(exact, x), _run(model(CONV_BN), x))
    assert ops(onnx_symdims.optimize(model(CONV_BN), exact_floats=False)) == ["Conv"]


# LayerNormalization of a weight, then a projection by another weight: DeBERTa-v2's
# relative position embeddings. Peers fold both (onnxruntime's kernels on the machine
# that optimizes); the exact policy keeps them, and says how many.
WEIGHT_MATH = """
    g (float[N, 2] x) => (float[N, 2] y)
      <float[2] s = {1., 1.}, float[2] b = {0., 0.}, float[2, 2] w = {1., 2., 3., 4.},
       float[2, 2] v = {0.5, 0.25, 0.125, 2.0}> {
        n = LayerNormalization(w, s, b)
        p = MatMul(n, v)
        t = Transpose(p)
        q = Add(s, b)
        z = MatMul(x, t)
        y = Add(z, q)
    }
"""

# A Loop whose inputs are all constants, its body reading the graph input x from the
# outer scope: neither the Loop nor the Exp of its output computes from weights alone.
LOOP_READING_AN_INPUT = """
    g (float[N] x) => (float[2, N] y) {
        m = Constant <value_int = 2> ()
        c = Constant <value = bool {1}> ()
        a0 = Constant <value = float[1] {0.5}> ()
        a, s = Loop (m, c, a0) <body = b (int64 i, bool ci, float[1] ai) => (bool co, float[1] ao, float[N] so) {
            co = Identity(ci)
            ao = Identity(ai)
            so = Identity(x)
        }>
        y = Exp(s)
    }
"""


@pytest.mark.parametrize(
    ("text", "expected", "why"),
    [
        (WEIGHT_MATH, 3, "LayerNormalization, the MatMul and the Transpose of their result"),
        (EXP_OF_CONSTANT, 1, "the Exp of a Constant"),
        (
            WEIGHT_MATH.replace("(float[N, 2] x)", "(float[N, 2] x, float[2, 2] w)"),
            0,
            "an initializer that is a graph input is no weight: feeds replace it",
        ),
        (
            WEIGHT_MATH.replace("LayerNormalization(w, s, b)", "Mul(w, s)").replace(
                "MatMul(n, v)", "Sub(n, v)"
            ),
            0,
            "exact math only (the folder folds it)",
        ),
        (
            WEIGHT_MATH.replace("p = MatMul(n, v)", "p = MatMul(n, x)"),
            1,
            "the MatMul reads a graph input; only the LayerNormalization counts",
        ),
        (
            LOOP_READING_AN_INPUT,
            0,
            "the Loop's inputs are weights but its body reads x: nothing from weights alone",
        ),
    ],
)
def test_kept_float_weight_nodes(text, expected, why):
    m = onnx_symdims.infer_symbolic_shapes(model(text))  # the types it reads, as in optimize
    assert kept_float_weight_nodes(m.graph) == expected, why


def test_optimize_reports_the_float_math_it_keeps_and_inexact_floats_folds_it():
    x = _rng.standard_normal((3, 2)).astype(np.float32)
    expected = _run(model(WEIGHT_MATH), x)
    kept = onnx_symdims.rewrite.OptimizePass()(model(WEIGHT_MATH))
    assert kept.kept_float_nodes == 3
    np.testing.assert_array_equal(_run(kept.model, x), expected)
    folded = onnx_symdims.rewrite.OptimizePass(exact_floats=False)(model(WEIGHT_MATH))
    assert folded.kept_float_nodes == 0
    assert ops(folded.model) == ["MatMul", "Add"]
    np.testing.assert_allclose(_run(folded.model, x), expected, rtol=1e-5)


def test_a_runtime_op_on_weights_is_not_counted():
    """No folder here evaluates a ``com.microsoft`` op: neither it nor what reads it counts."""
    m = onnx_symdims.infer_symbolic_shapes(model(WEIGHT_MATH))
    (norm,) = (n for n in m.graph if n.op_type == "LayerNormalization")
    norm.domain = "com.microsoft"
    m.opset_imports["com.microsoft"] = 1
    assert kept_float_weight_nodes(m.graph) == 0


# 3**39 (int64): numpy's exact power is ...267, onnxruntime's std::pow on doubles ...256.
INT_POW = """
    g (int64[N] x) => (int64[N] y) {
        a = Constant<value = int64[1] {3}>()
        b = Constant<value = int64[1] {39}>()
        p = Pow(a, b)
        y = Add(x, p)
    }
"""


def test_an_int64_pow_beyond_two_to_the_53_is_kept_as_onnxruntime_computes_it():
    x = np.arange(3, dtype=np.int64)
    before = model(INT_POW)
    expected = session(before).run(None, {"x": x})[0]
    after = onnx_symdims.optimize(model(INT_POW))
    assert "Pow" in ops(after)
    np.testing.assert_array_equal(session(after).run(None, {"x": x})[0], expected)


def test_an_int64_pow_of_a_computed_value_beyond_two_to_the_53_is_not_published():
    text = """
        g (int64[N] x) => (int64[N] y) {
            s = Shape(x)
            z = Sub(s, s)
            a = Constant<value = int64[1] {99}>()
            b = Constant<value = int64[1] {8}>()
            a2 = Add(a, z)
            p = Pow(a2, b)
            y = Add(x, p)
        }
    """
    x = np.arange(3, dtype=np.int64)
    expected = session(model(text)).run(None, {"x": x})[0]
    after = onnx_symdims.optimize(model(text))
    np.testing.assert_array_equal(session(after).run(None, {"x": x})[0], expected)


# onnxruntime reduces integers in double and saturates the cast back; numpy (the
# folder's reference) wraps: the folded product was -64771072, onnxruntime's 2**31 - 1.
WRAPPING_PRODUCT = """
    g (float[N] x) => (int32[N] y) {
        a = Constant<value = int32[3] {100000, 100000, 3}>()
        r = ReduceProd<keepdims = 0>(a)
        s = Shape(x)
        e = Expand(r, s)
        c = Cast<to = 6>(s)
        y = Add(e, c)
    }
"""


def test_an_integer_reduction_beyond_its_type_is_kept_as_onnxruntime_computes_it():
    x = np.zeros(3, np.float32)
    before = model(WRAPPING_PRODUCT)
    expected = session(before).run(None, {"x": x})[0]
    after = onnx_symdims.optimize(model(WRAPPING_PRODUCT))
    assert "ReduceProd" in ops(after)
    np.testing.assert_array_equal(session(after).run(None, {"x": x})[0], expected)


def test_inexact_floats_without_onnxruntime_still_keep_integers_exact(monkeypatch):
    """Floats may round otherwise when numpy folds them; integers never do."""
    from onnx_symdims.rewrite import _pipeline

    monkeypatch.setattr(_pipeline, "onnxruntime_available", lambda: False)
    x = np.zeros(3, np.float32)
    before = model(WRAPPING_PRODUCT)
    expected = session(before).run(None, {"x": x})[0]
    after = onnx_symdims.optimize(model(WRAPPING_PRODUCT), exact_floats=False)
    assert "ReduceProd" in ops(after)
    np.testing.assert_array_equal(session(after).run(None, {"x": x})[0], expected)


@pytest.mark.parametrize("size", [8192, 8193])
def test_integer_reductions_over_large_constants_are_left_unread(size):
    # Small elements, exact in double: read and left to the folder up to its input limit;
    # beyond, declined without turning the constant into a Python list.
    data = ir.Value(name="c", const_value=ir.tensor(np.ones(size, np.int64), name="c"))
    data.dtype = ir.DataType.INT64
    node = ir.Node("", "ReduceSum", [data], num_outputs=1)
    assert should_fold(node) is (None if size <= 8192 else False)
