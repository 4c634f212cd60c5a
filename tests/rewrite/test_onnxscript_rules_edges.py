"""onnxscript's default rules that ``optimize`` keeps, on inputs where their premise barely fails.

Each graph is optimized by the whole pipeline and run before and after in onnxruntime
(graph optimizations off) with NaN, infinities and signed zeros among the inputs; the
outputs must stay identical. Found by hand: ``ScatterAllStatic`` replaced a
``ScatterND`` whose indices cover the whole tensor by its updates whatever its
``reduction``, and ``ScatterND(x, [[0], …, [n-1]], u, reduction="add")`` is ``x + u``,
not ``u``.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import optimize
from tests.rewrite._rewrite_testing import model, proto, run

SPECIAL = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -1.5, 3.0, 0.25], np.float32)


def _optimized(m: ir.Model) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return proto(optimize(m))


def _assert_same(before: onnx.ModelProto, after: onnx.ModelProto, feeds: dict) -> None:
    for a, e in zip(run(after, feeds), run(before, feeds), strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_covering_every_row_with_a_reduction_is_kept(reduction):
    m = model(
        f"""g (float[4, 3] x, float[4, 3] u) => (float[4, 3] y) {{
            i = Constant<value = int64[4, 1] {{0, 1, 2, 3}}>()
            y = ScatterND<reduction = "{reduction}">(x, i, u)
        }}"""
    )
    before = proto(m)
    after = _optimized(m)
    assert [n.op_type for n in after.graph.node] == ["ScatterND"]
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((4, 3)).astype(np.float32) for k in ("x", "u")}
    _assert_same(before, after, feeds)


def test_scatter_nd_covering_every_row_without_reduction_is_its_updates():
    m = model(
        """g (float[4, 3] x, float[4, 3] u) => (float[4, 3] y) {
            i = Constant<value = int64[4, 1] {0, 1, 2, 3}>()
            y = ScatterND(x, i, u)
        }"""
    )
    after = _optimized(m)
    assert [n.op_type for n in after.graph.node if n.op_type != "Identity"] == []


#: (name, body over x: float[N]): the premise of an onnxscript rule barely fails.
EDGES = [
    # Max(Min(x, hi), lo) with lo > hi is lo everywhere; Clip(x, lo, hi) would give hi
    ("max_of_min_inverted", "a = Min(x, hi)\n y = Max(a, lo)", -1.0, 1.0),
    ("min_of_max_inverted", "a = Max(x, lo)\n y = Min(a, hi)", -1.0, 1.0),
    ("max_of_min", "a = Min(x, hi)\n y = Max(a, lo)", 1.0, -1.0),
    ("min_of_max", "a = Max(x, lo)\n y = Min(a, hi)", 1.0, -1.0),
    ("min_of_min", "a = Min(x, hi)\n y = Min(a, lo)", -1.0, 1.0),
    ("clip_of_relu_inverted", "a = Relu(x)\n y = Clip(a, lo, hi)", -0.5, -1.0),
    ("clip_of_relu", "a = Relu(x)\n y = Clip(a, lo, hi)", 1.0, -1.0),
]


@pytest.mark.parametrize(("name", "body", "hi", "lo"), EDGES, ids=[e[0] for e in EDGES])
def test_min_max_clip_fusions_keep_outputs_on_nan_inf_and_inverted_bounds(name, body, hi, lo):
    m = model(
        f"""g (float[N] x) => (float[N] y) {{
            hi = Constant<value = float {{{hi}}}>()
            lo = Constant<value = float {{{lo}}}>()
            {body}
        }}"""
    )
    before = proto(m)
    after = _optimized(m)
    for n in (0, 1, len(SPECIAL)):
        _assert_same(before, after, {"x": SPECIAL[:n]})


def test_an_initializer_that_is_also_an_input_stays_when_the_folder_drops_its_reader():
    """onnxscript's folder popped the initializer of a replaced node's input, input or not.

    ``Dropout(x, r)`` without ``training_mode`` is ``x`` (the folder replaces it); ``r``
    is an input whose initializer is its default (IR >= 4): without the initializer the
    optimized model required a feed for ``r`` where the original ran without one.
    """
    m = model(
        """g (float[N] x, float r) => (float[N] y) <float r = {0.5}> {
            y = Dropout(x, r)
        }"""
    )
    before = proto(m)
    after = _optimized(m)
    assert [i.name for i in after.graph.input] == ["x", "r"]
    assert [i.name for i in after.graph.initializer] == ["r"]
    _assert_same(before, after, {"x": SPECIAL})


#: (name, graph, feeds for the overridable inputs): onnxscript's pattern rules read an
#: initializer that is also a graph input as a constant, though a feed replaces it.
OVERRIDDEN = [
    (
        "conv_bias",
        """g (float[1, 1, N, 3] x, float[1] b) => (float[1, 1, N, 3] y) <float[1] b = {0.0}> {
            w = Constant<value = float[1, 1, 1, 1] {2.0}>()
            y = Conv(x, w, b)
        }""",
        {"b": np.array([5.0], np.float32)},
    ),
    (
        "gemm_bias",
        """g (float[N, 2] x, float[2] b) => (float[N, 2] y) <float[2] b = {0.0, 0.0}> {
            w = Constant<value = float[2, 2] {1.0, 2.0, 3.0, 4.0}>()
            y = Gemm(x, w, b)
        }""",
        {"b": np.array([1.0, 2.0], np.float32)},
    ),
    (
        "min_of_min",
        """g (float[N] x, float c) => (float[N] y) <float c = {0.0}> {
            d = Constant<value = float {1.0}>()
            a = Min(x, c)
            y = Min(a, d)
        }""",
        {"c": np.array(-5.0, np.float32)},
    ),
    (
        "min_of_max_to_clip",
        """g (float[N] x, float c) => (float[N] y) <float c = {1.0}> {
            d = Constant<value = float {-1.0}>()
            a = Max(x, d)
            y = Min(a, c)
        }""",
        {"c": np.array(-5.0, np.float32)},
    ),
    (
        "pad_into_conv",
        """g (float[1, 1, N, 3] x, int64[8] p) => (float[1, 1, ?, ?] y)
            <int64[8] p = {0, 0, 0, 0, 0, 0, 0, 0}> {
            a = Pad(x, p)
            w = Constant<value = float[1, 1, 1, 1] {2.0}>()
            y = Conv(a, w)
        }""",
        {"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)},
    ),
    (
        "scatter_nd_all_rows",
        """g (float[4] x, float[4] u, int64[4, 1] i) => (float[4] y)
            <int64[4, 1] i = {0, 1, 2, 3}> {
            y = ScatterND(x, i, u)
        }""",
        {"i": np.zeros((4, 1), np.int64)},
    ),
    (
        "unsqueeze_unsqueeze",
        """g (float[N, 2] x, int64[1] a) => (float[?, ?, ?, ?] y) <int64[1] a = {0}> {
            u = Unsqueeze(x, a)
            t = Constant<value = int64[1] {0}>()
            y = Unsqueeze(u, t)
        }""",
        {"a": np.array([2], np.int64)},
    ),
]


@pytest.mark.parametrize(
    ("name", "graph", "overrides"), OVERRIDDEN, ids=[c[0] for c in OVERRIDDEN]
)
def test_onnxscript_rules_do_not_read_an_overridable_initializer(name, graph, overrides):
    m = model(graph)
    before = proto(m)
    after = _optimized(m)
    assert {i.name for i in after.graph.initializer} >= set(overrides)
    rng = np.random.default_rng(0)
    for n in (1, 3):
        feeds = {}
        for value in before.graph.input:
            if value.name in overrides:
                continue
            dims = [d.dim_value or n for d in value.type.tensor_type.shape.dim]
            feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
        _assert_same(before, after, feeds)  # the defaults
        _assert_same(before, after, {**feeds, **overrides})  # fed other values


#: onnxscript's ``Reshape(MatMul(Reshape(a), [Reshape(]b[)]), c)`` -> ``MatMul(a, b)``
#: checks only that ``c`` is ``MatMul(a, b)``'s shape, never what the reshapes did: a
#: reshaped ``b`` multiplies other elements, and a batch axis the reshape of ``a`` adds
#: broadcasts against ``b``'s batch in another order (found by brute force over shapes).
MATMUL_RESHAPES = [
    (
        "reshaped_b",
        """g (float[2] a, float[2, 2] b) => (float[2] y) {
            sa = Constant<value = int64[2] {1, 2}>()
            sb = Constant<value = int64[3] {2, 2, 1}>()
            ra = Reshape(a, sa)
            rb = Reshape(b, sb)
            m = MatMul(ra, rb)
            sc = Constant<value = int64[1] {2}>()
            y = Reshape(m, sc)
        }""",
        ["Reshape", "Reshape", "MatMul", "Reshape"],
    ),
    (
        "batch_axes_of_a",
        """g (float[2, 1] a, float[2, 1, 1] b) => (float[2, 2, 1] y) {
            sa = Constant<value = int64[4] {2, 1, 1, 1}>()
            ra = Reshape(a, sa)
            m = MatMul(ra, b)
            sc = Constant<value = int64[3] {2, 2, 1}>()
            y = Reshape(m, sc)
        }""",
        ["Reshape", "MatMul", "Reshape"],
    ),
    (
        "rows_of_a_regrouped",  # sound: a matrix b multiplies each row of a alone
        """g (float[2, 3, 4] a, float[4, 5] b) => (float[2, 3, 5] y) {
            sa = Constant<value = int64[3] {3, 2, 4}>()
            ra = Reshape(a, sa)
            m = MatMul(ra, b)
            sc = Constant<value = int64[3] {2, 3, 5}>()
            y = Reshape(m, sc)
        }""",
        ["MatMul"],
    ),
]


@pytest.mark.parametrize(
    ("name", "graph", "ops"), MATMUL_RESHAPES, ids=[c[0] for c in MATMUL_RESHAPES]
)
def test_reshapes_around_matmul_go_only_when_they_keep_the_products(name, graph, ops):
    m = model(graph)
    before = proto(m)
    after = _optimized(m)
    assert [n.op_type for n in after.graph.node] == ops
    rng = np.random.default_rng(1)
    for _ in range(2):
        feeds = {
            v.name: rng.standard_normal(
                [d.dim_value for d in v.type.tensor_type.shape.dim]
            ).astype(np.float32)
            for v in before.graph.input
        }
        _assert_same(before, after, feeds)


#: (name, opset, graph): onnxscript's ``Min(Max(x, lo), hi)`` -> ``Clip(x, lo, hi)``
#: where ``Clip`` would not compute the same.
CLIP_FUSIONS = [
    (
        "bound_of_higher_rank",  # Max broadcasts x[N] to [1, N]; Clip keeps [N]
        18,
        """g (float[N] x) => (float[?, ?] y) {
            lo = Constant<value = float[1, 1] {-1.0}>()
            hi = Constant<value = float {1.0}>()
            a = Max(x, lo)
            y = Min(a, hi)
        }""",
    ),
    (
        "scalar_x",
        18,
        """g (float[N] v) => (float[?] y) {
            x = ReduceMax<keepdims = 0>(v)
            lo = Constant<value = float[1] {-1.0}>()
            hi = Constant<value = float {1.0}>()
            a = Max(x, lo)
            y = Min(a, hi)
        }""",
    ),
    (
        "nan_bound",  # Max(x, NaN) is NaN everywhere, Clip(x, NaN, 1) is not
        18,
        """g (float[N] x) => (float[N] y) {
            lo = Constant<value = float {nan}>()
            hi = Constant<value = float {1.0}>()
            a = Max(x, lo)
            y = Min(a, hi)
        }""",
    ),
    (
        "opset_10",  # Clip-6 takes min and max as attributes
        10,
        """g (float[N] x) => (float[N] y) {
            lo = Constant<value = float {-1.0}>()
            hi = Constant<value = float {1.0}>()
            a = Max(x, lo)
            y = Min(a, hi)
        }""",
    ),
]


@pytest.mark.parametrize(
    ("name", "opset", "graph"), CLIP_FUSIONS, ids=[c[0] for c in CLIP_FUSIONS]
)
def test_min_max_become_clip_only_where_clip_computes_the_same(name, opset, graph):
    m = model(graph, opset=opset)
    before = proto(m)
    after = _optimized(m)
    assert "Clip" not in [n.op_type for n in after.graph.node]
    for n in (1, 3, len(SPECIAL)):
        _assert_same(before, after, {before.graph.input[0].name: SPECIAL[:n]})


def test_min_max_still_become_clip_with_scalar_bounds():
    m = model(
        """g (float[N] x) => (float[N] y) {
            lo = Constant<value = float[1] {-1.0}>()
            hi = Constant<value = float {1.0}>()
            a = Max(x, lo)
            y = Min(a, hi)
        }"""
    )
    before = proto(m)
    after = _optimized(m)
    assert [n.op_type for n in after.graph.node] == ["Clip"]
    _assert_same(before, after, {"x": SPECIAL})


#: (name, opset, constant's element, Cast's to, output type): onnxscript's
#: ``Cast(ConstantOfShape(s, v), to)`` -> ``ConstantOfShape(s, to(v))``.
CAST_CONSTANT_OF_SHAPE = [
    ("to_float8", 19, "float[1] {3.5}", 17, "float8e4m3fn"),  # no such ConstantOfShape
    ("to_string", 18, "float[1] {3.5}", 8, "string"),  # optimize failed to serialize
    ("negative_to_uint8", 18, "float[1] {-3.7}", 2, "uint8"),  # numpy raised, then zeros
    ("wrapping_to_uint8", 18, "int64[1] {257}", 2, "uint8"),
    ("double_to_float", 18, "double[1] {0.1}", 1, "float"),
    ("to_int32", 18, "float[1] {-2.7}", 6, "int32"),  # truncated in both: folded
]


@pytest.mark.parametrize(
    ("name", "opset", "value", "to", "out"),
    CAST_CONSTANT_OF_SHAPE,
    ids=[c[0] for c in CAST_CONSTANT_OF_SHAPE],
)
def test_cast_of_constant_of_shape_folds_only_to_what_cast_computes(
    name, opset, value, to, out
):
    m = model(
        f"""g (float[N, M] x) => ({out}[N, M] y) {{
            s = Shape(x)
            a = ConstantOfShape<value = {value}>(s)
            y = Cast<to = {to}>(a)
        }}""",
        opset=opset,
    )
    before = proto(m)
    after = _optimized(m)
    ops = [n.op_type for n in after.graph.node]
    folded = name in ("double_to_float", "to_int32")
    assert ops == ["Shape", "ConstantOfShape"] + ([] if folded else ["Cast"])
    for shape in ((0, 2), (1, 1), (2, 3)):
        x = np.zeros(shape, np.float32)
        for a, e in zip(run(after, {"x": x}), run(before, {"x": x}), strict=True):
            assert a.dtype == e.dtype and a.shape == e.shape
            assert (
                a.tobytes() == e.tobytes() if a.dtype != object else a.tolist() == e.tolist()
            )


CONV_INTEGER_PAD = """g (uint8[1, 1, N, 3] x) => (int32[1, 1, ?, ?] y) {
    p = Constant<value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}>()
    a = Pad(x, p)
    w = Constant<value = uint8[1, 1, 2, 2] {1, 2, 3, 4}>()
    zp = Constant<value = uint8 {ZP}>()
    y = ConvInteger(a, w, zp)
}"""


@pytest.mark.parametrize("zero_point", [5, 0])
def test_a_pad_joins_conv_integer_only_without_a_zero_point(zero_point):
    """``ConvInteger`` pads with its ``x_zero_point``; ``Pad`` wrote zeros, shifted by it."""
    m = model(CONV_INTEGER_PAD.replace("ZP", str(zero_point)))
    before = proto(m)
    after = _optimized(m)
    fused = "Pad" not in [n.op_type for n in after.graph.node]
    assert fused == (zero_point == 0)
    for n in (1, 3):
        x = (np.arange(n * 3, dtype=np.uint8).reshape(1, 1, n, 3) * 3) % 11
        _assert_same(before, after, {"x": x})


#: (name, graph, sizes): nodes onnxscript's folder rewrote by its own partial evaluators.
FOLDER_EVALUATORS = [
    (
        # its Abs evaluator takes any value computed from a shape for non-negative:
        # Abs(dim - 5) became dim - 5
        "abs_of_a_dim_minus_five",
        """g (float[N, 2] x) => (int64[1] y) {
            s = Shape<end = 1>(x)
            c = Constant<value = int64[1] {-5}>()
            d = Add(s, c)
            y = Abs(d)
        }""",
        [0, 1, 7],
    ),
    (
        # its SplitToSequence evaluator squeezed with keepdims=0 though a split list is
        # given (keepdims is then ignored: onnxruntime keeps [N, 1])
        "split_to_sequence_keepdims_with_split",
        """g (float[N, 4] x) => (float[N, ?] y) {
            sp = Constant<value = int64[4] {1, 1, 1, 1}>()
            s = SplitToSequence<axis = 1, keepdims = 0>(x, sp)
            p = Constant<value = int64 {1}>()
            y = SequenceAt(s, p)
        }""",
        [0, 1, 3],
    ),
]


@pytest.mark.parametrize(
    ("name", "graph", "sizes"), FOLDER_EVALUATORS, ids=[c[0] for c in FOLDER_EVALUATORS]
)
def test_folder_evaluators_keep_outputs(name, graph, sizes):
    m = model(graph)
    before = proto(m)
    after = _optimized(m)
    for n in sizes:
        width = 4 if "4]" in graph else 2
        _assert_same(before, after, {"x": np.ones((n, width), np.float32)})


def test_an_empty_split_to_sequence_leaves_a_valid_model():
    """The evaluator made a ``Split`` of no outputs and a ``Concat`` of no inputs."""
    m = model(
        """g (float[N, 0] x) => (float[N, ?] y) {
            sp = Constant<value = int64 {2}>()
            s = SplitToSequence<axis = 1>(x, sp)
            y = ConcatFromSequence<axis = 1>(s)
        }"""
    )
    after = _optimized(m)
    onnx.checker.check_model(after)


#: (name, opset, graph, feeds, fused ops or None): onnxscript rules whose check read less
#: than the rewrite needs (found by hand, helper-64).
FUSED_EDGES = [
    (
        # before opset 11 Clip's bounds are attributes: Clip(Relu(x)) became Clip(x, 0),
        # dropping max=6 (and a Clip of two inputs is invalid there)
        "clip_of_relu_with_attribute_bounds",
        10,
        """g (float[N] x) => (float[N] y) {
            a = Relu(x)
            y = Clip<min = -1.0, max = 6.0>(a)
        }""",
        {"x": np.array([-3, -1, 0, 0.5, 2, 5, 7, 10], np.float32)},
        None,
    ),
    (
        # max(lo, 0) went through a float: 2**53 + 1 became 2**53
        "clip_of_relu_with_an_int64_bound_past_2_53",
        18,
        f"""g (int64[N] x) => (int64[N] y) {{
            lo = Constant<value = int64 {{{2**53 + 1}}}>()
            hi = Constant<value = int64 {{{2**60}}}>()
            a = Relu(x)
            y = Clip(a, lo, hi)
        }}""",
        {"x": np.array([2**53, 2**53 + 1, 2**53 + 2, 0, -5], np.int64)},
        None,
    ),
    (
        "clip_of_relu_with_a_small_int_bound",
        18,
        """g (int32[N] x) => (int32[N] y) {
            lo = Constant<value = int32 {3}>()
            a = Relu(x)
            y = Clip(a, lo)
        }""",
        {"x": np.array([2, 5, -5], np.int32)},
        ["Clip"],
    ),
    (
        # the range spans data.shape[0] (Shape<end=1>, Gather(-1)), 2 of t's 5 rows:
        # ScatterAllDynamic checked data.shape[-1] and replaced the [5, 3] result by u
        "scatter_of_a_range_over_a_sliced_shape",
        18,
        """g (float[A, B] data, float[B, C] t, float[A, C] u) => (float[B, C] y) {
            s = Shape<start = 0, end = 1>(data)
            ax = Constant<value = int64 {-1}>()
            dim = Gather<axis = 0>(s, ax)
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            rg = Range(zero, dim, one)
            m1 = Constant<value = int64[1] {-1}>()
            idx = Unsqueeze(rg, m1)
            y = ScatterND<reduction = "none">(t, idx, u)
        }""",
        {
            "data": np.ones((2, 5), np.float32),
            "t": np.arange(15, dtype=np.float32).reshape(5, 3),
            "u": -np.ones((2, 3), np.float32),
        },
        None,
    ),
    (
        "scatter_of_a_range_over_the_whole_shape",
        18,
        """g (float[B, A] data, float[B, C] t, float[B, C] u) => (float[B, C] y) {
            s = Shape<start = 0>(data)
            ax = Constant<value = int64 {0}>()
            dim = Gather<axis = 0>(s, ax)
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            rg = Range(zero, dim, one)
            m1 = Constant<value = int64[1] {-1}>()
            idx = Unsqueeze(rg, m1)
            y = ScatterND<reduction = "none">(t, idx, u)
        }""",
        {
            "data": np.ones((5, 2), np.float32),
            "t": np.arange(15, dtype=np.float32).reshape(5, 3),
            "u": -np.ones((5, 3), np.float32),
        },
        [],
    ),
    (
        # the folder's CastLike evaluator wrote a Cast without saturate=0: 1e6 became
        # 448 where CastLike gives NaN
        "cast_like_without_saturation",
        19,
        """g (float[N] x) => (float[N] y) {
            z = Constant<value = float[1] {0.0}>()
            t = Cast<to = 17>(z)
            c = CastLike<saturate = 0>(x, t)
            y = Cast<to = 1>(c)
        }""",
        {"x": np.array([1e6, -1e6, 1.0, 500.0], np.float32)},
        None,
    ),
    (
        # beta * 0 is NaN for beta = inf: RemoveOptionalBiasFromGemm dropped the NaN
        "gemm_of_a_zero_bias_with_an_infinite_beta",
        18,
        """g (float[2, 2] x) => (float[2, 2] y) {
            w = Constant<value = float[2, 2] {1, 2, 3, 4}>()
            b = Constant<value = float[2] {0.0, 0.0}>()
            y = Gemm<beta = inf>(x, w, b)
        }""",
        {"x": np.ones((2, 2), np.float32)},
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "opset", "graph", "feeds", "fused"), FUSED_EDGES, ids=[e[0] for e in FUSED_EDGES]
)
def test_onnxscript_rules_keep_outputs_where_their_checks_read_too_little(
    name, opset, graph, feeds, fused
):
    m = model(graph, opset)
    before = proto(m)
    after = _optimized(m)
    _assert_same(before, after, feeds)
    if fused is not None:
        assert [n.op_type for n in after.graph.node if n.op_type != "Identity"] == fused


def test_a_pad_of_opset_2_before_a_conv_leaves_the_other_rules_running(caplog):
    """FuseConvPad read the pads from Pad's second input: IndexError stopped the round."""
    m = model(
        """g (float[1, 1, 5, 5] x) => (float[1, 1, A, B] y) {
            w = Constant<value = float[1, 1, 3, 3] {1, 2, 3, 4, 5, 6, 7, 8, 9}>()
            p = Pad<pads = [0, 0, 1, 1, 0, 0, 1, 1]>(x)
            y = Conv(p, w)
        }""",
        10,
    )
    before = proto(m)
    with caplog.at_level("WARNING"):
        after = _optimized(m)
    assert "rules stopped" not in caplog.text
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    _assert_same(before, after, {"x": x})


def test_an_if_whose_branch_lists_a_value_twice_keeps_its_output_names():
    """The folder's If evaluator renamed t to z for both outputs: graph output y became z."""
    m = model(
        """g (float[N] x) => (float[N] y, float[N] z) {
            c = Constant<value = bool {1}>()
            y, z = If(c) <
                then_branch = th () => (float[N] t, float[N] t) { t = Abs(x) },
                else_branch = el () => (float[N] o2, float[N] o3) {
                    o2 = Neg(x)
                    o3 = Neg(x)
                }
            >
        }"""
    )
    after = _optimized(m)
    assert [o.name for o in after.graph.output] == ["y", "z"]
    x = np.array([1.0, -2.0, 3.0], np.float32)
    y, z = run(after, {"x": x})
    np.testing.assert_array_equal(y, np.abs(x))
    np.testing.assert_array_equal(z, np.abs(x))


@pytest.mark.parametrize("exact_floats", [True, False])
def test_a_cast_of_constants_to_or_from_strings_is_left(exact_floats):
    """numpy spells bool True as "True" (onnxruntime "1"); the folded tensor did not serialize."""
    m = model(
        """g (float[N] x) => (string[2] y, float[2] z) {
            a = Constant<value = bool[2] {1, 0}>()
            y = Cast<to = 8>(a)
            z = Cast<to = 1>(y)
        }"""
    )
    before = proto(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = proto(optimize(m, exact_floats=exact_floats))
    feeds = {"x": np.ones(2, np.float32)}
    for a, e in zip(run(after, feeds), run(before, feeds), strict=True):
        assert a.dtype == e.dtype and a.tolist() == e.tolist()


STRING_NODES = [
    ("concat", "y = Concat<axis = 0>(a, a)", "string[6]"),
    ("reshape", "s = Constant<value = int64[2] {3, 1}>()\n y = Reshape(a, s)", "string[3, 1]"),
    ("gather", "i = Constant<value = int64[1] {1}>()\n y = Gather(a, i)", "string[1]"),
    ("unique", "y = Unique(a)", "string[2]"),
    ("size", "y = Size(a)", "int64"),
]


@pytest.mark.parametrize("exact_floats", [True, False])
@pytest.mark.parametrize(
    ("name", "body", "out"), STRING_NODES, ids=[c[0] for c in STRING_NODES]
)
def test_string_constants_leave_a_model_that_serializes(name, body, out, exact_floats):
    """The folder stored numpy byte strings it could not serialize (optimize raised)."""
    m = model(
        f"""g (float[N] x) => ({out} y) {{
            a = Constant<value = string[3] {{"b", "a", "b"}}>()
            {body}
        }}"""
    )
    before = proto(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = proto(optimize(m, exact_floats=exact_floats))
    feeds = {"x": np.ones(2, np.float32)}
    for a, e in zip(run(after, feeds), run(before, feeds), strict=True):
        assert np.asarray(a).tolist() == np.asarray(e).tolist()
    if name == "size":
        assert "Size" not in [n.op_type for n in after.graph.node]


@pytest.mark.parametrize("trans", ["transB = 1", ""])
def test_gemm_becomes_matmul_add_only_without_transposes(trans):
    """The ort fusions' Gemm -> MatMul + Add ignored transB: with a square b every shape
    held and only the output check in onnxruntime undid it (not run here)."""
    attributes = ", ".join(a for a in ("alpha = 1.0", "beta = 1.0", trans) if a)
    m = model(
        f"""g (float[2, 3, 4] a, float[4, 4] b) => (float[2, 3, 4] y) {{
            s1 = Constant<value = int64[2] {{-1, 4}}>()
            ra = Reshape(a, s1)
            c = Constant<value = float[4] {{0.5, 1, 2, 3}}>()
            g = Gemm<{attributes}>(ra, b, c)
            s3 = Constant<value = int64[3] {{2, 3, 4}}>()
            y = Reshape(g, s3)
        }}"""
    )
    before = proto(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = proto(optimize(m, fusions="ort", verify_fusions=False))
    ops = [n.op_type for n in after.graph.node]
    assert ("Gemm" in ops) == bool(trans)
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "b": rng.standard_normal((4, 4)).astype(np.float32),
    }
    for a, e in zip(run(after, feeds), run(before, feeds), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_a_reshaped_shape_keeps_its_rank_through_the_folders_gather():
    """The folder gave Reshape(Shape(x), [2, 1]) the value [N, 3] and folded Gather(r, [1])
    to the vector [3]; the model computes [[3]]."""
    m = model(
        """g (float[N, 3] x) => (int64[1, 1] y) {
            s = Shape(x)
            t = Constant<value = int64[2] {2, 1}>()
            r = Reshape(s, t)
            i = Constant<value = int64[1] {1}>()
            y = Gather<axis = 0>(r, i)
        }"""
    )
    before = proto(m)
    after = _optimized(m)
    for n in (0, 1, 4):
        _assert_same(before, after, {"x": np.ones((n, 3), np.float32)})


def test_a_rule_does_not_overwrite_an_initializer_of_the_name_it_picks():
    """FuseSuccessiveMin wrote its bound as x_min over the model's own x_min initializer,
    which the Add still read: onnxruntime refused the model."""
    m = model(
        """g (float[8] x) => (float[8] y, float[8] z) <float[8] x_min = {1, 2, 3, 4, 5, 6, 7, 8}> {
            c1 = Constant<value = float {5.0}>()
            c2 = Constant<value = float {1.0}>()
            a = Min(x, c1)
            y = Min(a, c2)
            z = Add(x_min, x)
        }"""
    )
    before = proto(m)
    after = _optimized(m)
    _assert_same(before, after, {"x": SPECIAL[:8].copy()})


def test_a_scatter_over_a_symbolic_first_dim_leaves_the_other_rules_running(caplog):
    """ScatterAllStatic ranged over data.shape[0]: a symbolic N raised TypeError and
    stopped every rule of the round (the Min(Min) fusion beside it too)."""
    m = model(
        """g (float[N, 3] x, float[N, 3] u) => (float[N, 3] y, float[N, 3] z) {
            i = Constant<value = int64[2, 1] {0, 1}>()
            y = ScatterND(x, i, u)
            c1 = Constant<value = float {5.0}>()
            c2 = Constant<value = float {1.0}>()
            a = Min(x, c1)
            z = Min(a, c2)
        }"""
    )
    before = proto(m)
    with caplog.at_level("WARNING"):
        after = _optimized(m)
    assert "rules stopped" not in caplog.text
    feeds = {"x": SPECIAL[:6].reshape(2, 3).copy(), "u": np.zeros((2, 3), np.float32)}
    _assert_same(before, after, feeds)


@pytest.mark.parametrize("kernel", ["K", "3"])
def test_auto_pad_with_a_symbolic_kernel_leaves_the_other_rules_running(kernel, caplog):
    """NormalizePadFormatConv computed pads from the weight's symbolic dims: TypeError
    stopped every rule of the round."""
    m = model(
        f"""g (float[1, 1, 5, 5] x, float[1, 1, {kernel}, {kernel}] w) => (float[1, 1, 5, 5] y) {{
            y = Conv<auto_pad = "SAME_UPPER">(x, w)
        }}"""
    )
    before = proto(m)
    with caplog.at_level("WARNING"):
        after = _optimized(m)
    assert "rules stopped" not in caplog.text
    [conv] = after.graph.node
    auto_pad = [a.s for a in conv.attribute if a.name == "auto_pad"]
    assert auto_pad == ([b"SAME_UPPER"] if kernel == "K" else [b"NOTSET"])
    feeds = {
        "x": np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5),
        "w": np.ones((1, 1, 3, 3), np.float32),
    }
    _assert_same(before, after, feeds)
