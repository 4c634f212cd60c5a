"""``fusions="ort"`` near misses: fusions that keep every shape and pass the output check.

The output check (``rewrite/_fusion_check.py``) runs the fused model on random inputs whose
integers are 0 or 1 with the first of each row 1: a mask that hides no whole row. Each test
here builds an input the check never draws, on which the fusion as onnxscript ships it
changes an output, and asserts the guard's variant declines it; onnxruntime is the oracle.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import onnx_symdims.rewrite._fusion_variants as variants
import onnx_symdims.rewrite._guard as guard
from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import proto, session
from tests.rewrite.test_packed_attention import _floats
from tests.rewrite.test_pipeline import _HAS_SDPA_VIA_MHA

#: The attention fusions as onnxscript 0.7 matches them (0.5, the floors, fuses none of
#: these graphs: there is nothing to decline).
needs_attention_fusions = pytest.mark.skipif(
    not _HAS_SDPA_VIA_MHA, reason="this onnxscript does not fuse these attention graphs"
)
#: onnxscript's ONNX-op fusions (RMSNormalization, GQA at opset 23; not in 0.5).
needs_onnx_fusions = pytest.mark.skipif(
    guard._onnx_steps() is None, reason="this onnxscript has no ONNX-op fusions"
)


def _fusions(result) -> dict[str, int]:
    return {k: n for k, n in result.fired.items() if k.startswith("fusion.") and n}


def _masked_attention(fill: str, doubled: bool = False) -> ir.Model:
    """Cross-attention (2 heads of 8) behind an HF padding mask ``Where(m, 0, fill)``,
    with the NaN zeroing the torch exporter writes for a boolean mask. ``doubled``: the
    mask added to itself (two masks combined)."""
    initializers = ", ".join(
        [
            _floats("wq", (16, 16), 1),
            _floats("wk", (16, 16), 2),
            _floats("wv", (16, 16), 3),
            "int64[4] s4 = {0, 0, 2, 8}",
            "int64[3] s3 = {0, 0, 16}",
            "int64[2] axes = {1, 2}",
            "float scale = {0.35355339}",
            "float zero = {0.0}",
            f"float fill = {{{fill}}}",
        ]
    )
    return ir.from_onnx_text(f"""<ir_version: 10, opset_import: ["" : 18]>
    g (float[batch, seq, 16] x, float[batch, mem, 16] kv, int64[batch, mem] am)
        => (float[batch, seq, 16] y)
    <{initializers}>
    {{
        q = MatMul(x, wq)
        k = MatMul(kv, wk)
        v = MatMul(kv, wv)
        q4 = Reshape(q, s4)
        k4 = Reshape(k, s4)
        v4 = Reshape(v, s4)
        qt = Transpose<perm = [0, 2, 1, 3]>(q4)
        kt = Transpose<perm = [0, 2, 3, 1]>(k4)
        vt = Transpose<perm = [0, 2, 1, 3]>(v4)
        s = MatMul(qt, kt)
        sc = Mul(s, scale)
        keep = Cast<to = 9>(am)
        bias2 = Where(keep, zero, fill)
        bias1 = Unsqueeze(bias2, axes)
        bias = {"Add(bias1, bias1)" if doubled else "Identity(bias1)"}
        sm = Add(sc, bias)
        p = Softmax<axis = -1>(sm)
        nan = IsNaN(p)
        pz = Where(nan, zero, p)
        o = MatMul(pz, vt)
        ot = Transpose<perm = [0, 2, 1, 3]>(o)
        y = Reshape(ot, s3)
    }}""")


def _padding_feeds() -> dict[str, np.ndarray]:
    """Two sequences, the second all padding (every key of its queries hidden)."""
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((2, 3, 16)).astype(np.float32),
        "kv": rng.standard_normal((2, 4, 16)).astype(np.float32),
        "am": np.array([[1, 1, 0, 0], [0, 0, 0, 0]], np.int64),
    }


def test_sdpa_declines_nan_zeroing_behind_an_infinite_mask():
    """With ``fill = -inf`` the all-padding row's weights are NaN and the original zeroes
    them (output 0); onnxruntime's ``MultiHeadAttention`` gives NaN there. onnxscript's
    SDPA rule drops the zeroing (the output check, hiding no whole row, kept it)."""
    m = _masked_attention("-inf")
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert "fusion.sdpa" not in _fusions(result)
    feeds = _padding_feeds()
    [expected] = session(before).run(None, feeds)
    [actual] = session(m).run(None, feeds)
    assert np.isfinite(expected).all() and not expected[1].any()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


@needs_attention_fusions
@pytest.mark.parametrize("fill", ["-3.4028235e+38", "-10000.0"])
def test_sdpa_fuses_nan_zeroing_behind_a_finite_mask(fill):
    """HF's mask ``Where(m, 0, finfo.min)``: proven finite, no row of weights is NaN for
    finite scores; the attention fuses and the all-padding row agrees."""
    m = _masked_attention(fill)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert _fusions(result) == {"fusion.sdpa": 1, "fusion.mha2": 1}, result.fired
    feeds = _padding_feeds()
    [expected] = session(before).run(None, feeds)
    [actual] = session(m).run(None, feeds)
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def test_sdpa_declines_nan_zeroing_behind_a_sum_of_finite_masks():
    """Two ``finfo.min`` masks added overflow to ``-inf``: arithmetic is not proven
    finite, the fusion declines and the all-padding row stays 0."""
    m = _masked_attention("-3.4028235e+38", doubled=True)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert "fusion.sdpa" not in _fusions(result)
    feeds = _padding_feeds()
    [expected] = session(before).run(None, feeds)
    [actual] = session(m).run(None, feeds)
    assert np.isfinite(expected).all() and not expected[1].any()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def _rms_norm(input_type: str, scale_type: str, cast_back: bool) -> ir.Model:
    """Llama's RMSNorm at opset 23: ``x`` cast to float, normalized, (cast back,) scaled."""
    back = "n2 = Cast<to = 10>(n)" if cast_back else "n2 = Identity(n)"
    return ir.from_onnx_text(f"""<ir_version: 10, opset_import: ["" : 23]>
    g ({input_type}[B, S, 8] x) => ({scale_type}[B, S, 8] y)
    <{scale_type}[8] gamma = {{1, 2, 3, 4, 5, 6, 7, 8}}, float two = {{2.0}},
     float eps = {{1e-3}}, int64[1] axes = {{-1}}>
    {{
        xc = Cast<to = 1>(x)
        sq = Pow(xc, two)
        ms = ReduceMean<keepdims = 1, noop_with_empty_axes = 0>(sq, axes)
        mse = Add(ms, eps)
        r = Sqrt(mse)
        rr = Reciprocal(r)
        n = Mul(xc, rr)
        {back}
        y = Mul(n2, gamma)
    }}""")


@needs_onnx_fusions
@pytest.mark.parametrize(
    ("input_type", "scale_type", "cast_back", "fused"),
    [
        ("float16", "float", False, False),  # the schema allows it, ONNX's body does not
        ("float16", "float16", True, True),
        ("float", "float", False, True),
    ],
)
def test_onnx_rms_normalization_only_for_one_element_type(
    input_type, scale_type, cast_back, fused
):
    """``RMSNormalization(x: float16, scale: float)``: onnx.checker and onnxruntime reject
    it (ONNX's function body multiplies a float16 by a float). Without the output check
    (``verify_fusions=False``) the model returned did not load; the guard's copy of the
    rule declines an input and scale of other element types."""
    m = _rms_norm(input_type, scale_type, cast_back)
    before = proto(m)
    result = OptimizePass(fusions="onnx", verify_fusions=False)(m)
    assert ("fusion.RMSNormalization" in _fusions(result)) == fused, result.fired
    onnx.checker.check_model(proto(m), full_check=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8)).astype(
        {"float": np.float32, "float16": np.float16}[input_type]
    )
    [expected] = session(before).run(None, {"x": x})
    [actual] = session(m).run(None, {"x": x})
    np.testing.assert_allclose(actual, expected, rtol=2e-3, atol=1e-3)


@needs_onnx_fusions
def test_a_fusion_that_changes_an_element_type_is_undone(monkeypatch):
    """onnxscript's own ``RMSNormalization`` rule (the guard's copy switched off) on a
    float16 input and a float scale: every shape holds, the fused node computes float16
    where the graph output is float. Without the output check the type guard undoes it."""
    monkeypatch.setattr(variants, "rms_normalization_of_one_type", lambda: None)
    m = _rms_norm("float16", "float", cast_back=False)
    result = OptimizePass(fusions="onnx", verify_fusions=False)(m)
    assert not _fusions(result)
    assert (
        "fusions 'onnx.RMSNormalization' undone: an element type changed (output 'y': "
        "declared type FLOAT but inferred FLOAT16)" in result.diagnostics
    )
    onnx.checker.check_model(proto(m), full_check=True)


def test_mha_scale_declines_a_multi_head_attention_with_a_bias():
    """``MultiHeadAttention(q * 0.5, k, v, bias)`` (one already in the model): the kernel
    adds the query's bias after the ``Mul``, so moving the 0.5 into ``scale`` scales the
    bias too. With ``verify_fusions=False`` onnxscript's rule gave outputs off by 10 %
    of their scale; the guard's copy declines a bias."""
    bias = _floats("bias", (48,), 1)
    m = ir.from_onnx_text(f"""<ir_version: 10, opset_import: ["" : 18, "com.microsoft": 1]>
    g (float[B, S, 16] q, float[B, T, 16] k, float[B, T, 16] v) => (float[B, S, 16] y)
    <{bias}, float s = {{0.5}}>
    {{
        qs = Mul(q, s)
        y = com.microsoft.MultiHeadAttention<num_heads = 2>(qs, k, v, bias)
    }}""")
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert "fusion.mha_scale" not in _fusions(result)
    rng = np.random.default_rng(0)
    feeds = {
        "q": rng.standard_normal((2, 3, 16)).astype(np.float32),
        "k": rng.standard_normal((2, 4, 16)).astype(np.float32),
        "v": rng.standard_normal((2, 4, 16)).astype(np.float32),
    }
    [expected] = session(before).run(None, feeds)
    [actual] = session(m).run(None, feeds)
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("element_type", "divisor", "transposed", "fused"),
    [
        ("int32", "2", False, False),  # onnxruntime has no integer FusedMatMul
        ("int32", "2", True, False),
        ("float", "1e-39", False, False),  # alpha = 1e39: inf as a float32
        ("double", "3", False, False),  # a float32 alpha = 1/3 is not a double's 1/3
        ("double", "0.25", True, True),
        ("float", "3", True, True),
    ],
)
def test_fused_matmul_only_for_float_operands_and_a_representable_alpha(
    element_type, divisor, transposed, fused
):
    """onnxscript's ``FusedMatMul`` rules (step ``ort_patterns``) fused ``MatMul`` of any
    element type into a model onnxruntime refuses, and wrote ``alpha = 1 / c`` as a float32
    that is ``inf`` for a tiny ``c``; with ``verify_fusions=False`` nothing undid it."""
    product = (
        "xt = Transpose<perm = [0, 2, 1]>(x)\n m = MatMul(xt, w)"
        if transposed
        else ("m = MatMul(x, w)")
    )
    x_shape = "[B, 4, 3]" if transposed else "[B, 3, 4]"
    m = ir.from_onnx_text(f"""<ir_version: 10, opset_import: ["" : 18]>
    g ({element_type}{x_shape} x, {element_type}[B, 4, 5] w) => ({element_type}[B, 3, 5] y)
    <{element_type} c = {{{divisor}}}>
    {{
        {product}
        y = Div(m, c)
    }}""")
    before = proto(m)
    OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert ("FusedMatMul" in [n.op_type for n in m.graph]) == fused
    rng = np.random.default_rng(0)
    numpy_type = {"int32": np.int32, "float": np.float32, "double": np.float64}[element_type]
    feeds = {
        "x": rng.integers(-9, 9, (2, *((4, 3) if transposed else (3, 4)))).astype(numpy_type),
        "w": rng.integers(-9, 9, (2, 4, 5)).astype(numpy_type),
    }
    [expected] = session(before).run(None, feeds)
    [actual] = session(m).run(None, feeds)
    if element_type == "float":
        np.testing.assert_allclose(actual, expected, rtol=1e-6)
    else:
        np.testing.assert_array_equal(actual, expected)


def test_a_fused_node_of_an_element_type_its_schema_refuses_is_undone():
    """A double ``Add`` + ``LayerNormalization``: onnxscript fuses it into a
    ``SkipLayerNormalization``, whose onnxruntime schema takes float, float16 and
    bfloat16 only; with ``verify_fusions=False`` the model returned did not load."""
    m = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 18]>
    g (double[B, S, 8] x, double[B, S, 8] skip) => (double[B, S, 8] y, double[B, S, 8] z)
    <double[8] gamma = {1, 2, 3, 4, 5, 6, 7, 8}, double[8] beta = {0, 1, 0, 1, 0, 1, 0, 1}>
    {
        z = Add(x, skip)
        y = LayerNormalization<axis = -1, epsilon = 0.001>(z, gamma, beta)
    }""")
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert not _fusions(result)
    assert any("(DOUBLE) takes an element type" in d for d in result.diagnostics)
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal((2, 3, 8)) for name in ("x", "skip")}
    for a, e in zip(session(m).run(None, feeds), session(before).run(None, feeds)):
        np.testing.assert_array_equal(a, e)


def _repeated_kv_attention(attributes: str) -> ir.Model:
    """Opset 23 ``Attention`` of 4 query heads over a key/value cache of 2 heads, each
    repeated twice (``Unsqueeze``, ``Expand``, ``Reshape``), the cache also an output."""
    attention = f"Attention<{attributes}>" if attributes else "Attention"
    return ir.from_onnx_text(f"""<ir_version: 10, opset_import: ["" : 23]>
    g (float[B, 4, S, 8] q, float[B, 2, S, 8] k, float[B, 2, S, 8] v,
       float[B, 2, P, 8] past_k, float[B, 2, P, 8] past_v)
        => (float[B, 4, S, 8] y, float[B, 2, T, 8] ck, float[B, 2, T, 8] cv)
    <int64 two = {{2}}, int64[2] repeat = {{2, 2}}, int64[1] heads = {{4}}>
    {{
        ck = Concat<axis = -2>(past_k, k)
        cv = Concat<axis = -2>(past_v, v)
        uk = Unsqueeze(ck, two)
        uv = Unsqueeze(cv, two)
        b = Shape<start = 0, end = 1>(ck)
        rest = Shape<start = 2>(ck)
        expanded = Concat<axis = 0>(b, repeat, rest)
        ek = Expand(uk, expanded)
        ev = Expand(uv, expanded)
        merged = Concat<axis = 0>(b, heads, rest)
        rk = Reshape(ek, merged)
        rv = Reshape(ev, merged)
        y = {attention}(q, rk, rv)
    }}""")


@needs_onnx_fusions
@pytest.mark.parametrize(
    ("attributes", "fused"),
    [
        ("is_causal = 1", False),  # top-left causal over the keys, bottom-right with a past
        ("q_num_heads = 4, kv_num_heads = 4", False),  # 4 kv heads: the repeated ones
        ("", True),
    ],
)
def test_onnx_gqa_keeps_the_attention(attributes, fused):
    """onnxscript's ONNX GQA fusion moves the cache into ``Attention(..., past_key,
    past_value)`` and copies the attributes: with ``is_causal=1`` onnxruntime's outputs
    then differ by their own scale, with ``kv_num_heads`` of the repeated heads it fails;
    with ``verify_fusions=False`` nothing undid either."""
    m = _repeated_kv_attention(attributes)
    before = proto(m)
    result = OptimizePass(fusions="onnx", verify_fusions=False)(m)
    assert ("fusion.GQA" in _fusions(result)) == fused, result.fired
    rng = np.random.default_rng(0)
    sizes = {"q": (2, 4, 3, 8), "k": (2, 2, 3, 8), "v": (2, 2, 3, 8)}
    sizes |= {"past_k": (2, 2, 4, 8), "past_v": (2, 2, 4, 8)}
    feeds = {
        name: rng.standard_normal(shape).astype(np.float32) for name, shape in sizes.items()
    }
    for a, e in zip(session(m).run(None, feeds), session(before).run(None, feeds)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_the_output_check_feeds_a_scalar_boolean_input(monkeypatch):
    """A model with a scalar ``bool`` input (a flag choosing a branch): the check fed it
    as ``numpy.bool``, which onnxruntime refuses, so it skipped the model ("runs at
    none of the bindings") and kept a step that changes the outputs."""

    def wrong(model: ir.Model) -> int:  # Sigmoid -> Tanh: same shapes, other values
        for node in model.graph:
            if node.op_type == "Sigmoid":
                node.op_type = "Tanh"
                return 1
        return 0

    steps = [("wrong", wrong), ("cleanup", lambda model: None)]
    monkeypatch.setattr(guard, "_ort_steps", lambda cleanup: steps)
    m = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 18]>
    g (float[n, 4] x, bool flag) => (float[n, 4] y) {
        s = Sigmoid(x)
        r = Neg(s)
        y = Where(flag, s, r)
    }""")
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert any(
        d.startswith("fusions 'ort.wrong' undone: output 'y'") for d in result.diagnostics
    )
    feeds = {
        "x": np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4),
        "flag": np.array(True),
    }
    np.testing.assert_array_equal(
        session(m).run(None, feeds)[0], session(before).run(None, feeds)[0]
    )


def test_the_new_node_checks_reach_into_subgraphs():
    """onnxscript's rewriter fuses inside an ``If`` branch; the guard's checks of new
    nodes read the main graph only: a ``FusedMatMul`` of a transposed matrix by a vector
    (which onnxruntime computes otherwise) stayed in the branch with
    ``verify_fusions=False`` and changed the output."""
    m = ir.from_onnx_text("""<ir_version: 10, opset_import: ["" : 18]>
    g (float[1, K, 4] x, float[K] w, bool flag) => (float[1, 4] y) {
        y = If(flag) <
            then_branch = t () => (float[1, 4] ty) {
                xt = Transpose<perm = [0, 2, 1]>(x)
                ty = MatMul(xt, w)
            },
            else_branch = e () => (float[1, 4] ey) {
                xe = Transpose<perm = [0, 2, 1]>(x)
                ey = MatMul(xe, w)
            }
        >
    }""")
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert any("is a FusedMatMul with an operand" in d for d in result.diagnostics)
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    feeds = {"x": x, "w": np.ones(3, np.float32), "flag": np.array(True)}
    np.testing.assert_array_equal(
        session(m).run(None, feeds)[0], session(before).run(None, feeds)[0]
    )


def test_bias_gelu_only_for_a_bias_as_long_as_the_last_axis():
    """``Gelu(x + bias)`` with ``x: [B, n]`` and 8 biases: ``Add`` broadcasts ``n = 1``,
    onnxruntime's ``BiasGelu`` requires ``n == 8`` (the fused model failed at ``n = 1``
    with ``verify_fusions=False``). The guard's copy of the rule asks the dims proven
    equal."""
    text = """<ir_version: 10, opset_import: ["" : 20]>
    g (float[B, {n}] x) => (float[B, 8] y) <float[8] bias = {{1, 2, 3, 4, 5, 6, 7, 8}}> {{
        xb = Add(x, bias)
        y = Gelu(xb)
    }}"""
    m = ir.from_onnx_text(text.format(n="n"))
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert "fusion.bias_gelu" not in _fusions(result)
    x = np.linspace(-2, 2, 2, dtype=np.float32).reshape(2, 1)
    np.testing.assert_array_equal(
        session(m).run(None, {"x": x})[0], session(before).run(None, {"x": x})[0]
    )
    fixed = ir.from_onnx_text(text.format(n="8"))
    assert _fusions(OptimizePass(fusions="ort", verify_fusions=False)(fixed)) == {
        "fusion.bias_gelu": 1
    }
