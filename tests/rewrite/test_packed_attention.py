"""``fusions="ort"``: packed-QKV ``Attention`` without a bias (step ``attention_no_bias``).

onnxscript's ``AttentionFusion`` (Q, K and V ``MatMul``s of one input feeding a
``MultiHeadAttention`` -> one ``com.microsoft::Attention`` with the weights concatenated)
requires the MHA's bias input. Without biases (zero ones removed by ``AddByZero``, as in a
dynamo-exported Swin, or ``Linear(bias=False)``) it never matched; the guard adds the same
rule with the bias allowed to be missing. Outputs are compared in onnxruntime within a
tolerance (the contrib kernels round otherwise).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import OptimizePass, analyze
from onnx_symdims.rewrite._fusion_variants import attention_no_bias_rules
from tests.rewrite._rewrite_testing import feeds_for, proto, session

SIZES = [
    {"batch": 1, "seq": 1, "mem": 2},
    {"batch": 2, "seq": 5, "mem": 3},
    {"batch": 3, "seq": 7, "mem": 1},
    {"batch": 0, "seq": 3, "mem": 2},
    {"batch": 2, "seq": 0, "mem": 2},
]


def _floats(name: str, shape: tuple[int, ...], seed: int, values=None) -> str:
    rng = np.random.default_rng(seed)
    array = rng.standard_normal(shape) * 0.3 if values is None else np.full(shape, values)
    dims = ",".join(map(str, shape))
    return f"float[{dims}] {name} = {{{', '.join(f'{v:.4f}' for v in array.ravel())}}}"


def _block(
    bias: float | None = None,
    cross: bool = False,
    scale: float = 0.35355339,
    memory: str = "mem",
    value_size: int = 8,
) -> ir.Model:
    """One self-attention block as a BERT/Swin export writes it (hidden 16, 2 heads of 8).

    ``bias``: each projection gets ``Add(MatMul, b)`` with every element ``bias``.
    ``cross``: K and V project ``mem`` instead of ``x`` (nothing to pack), whose length
    is ``memory``. ``value_size``: the width of a head's value (the output is twice it).
    """
    kv = "mem" if cross else "x"
    adds = ""
    q, k, v = "q", "k", "v"
    if bias is not None:
        adds = "qb = Add(q, b)\n kb = Add(k, b)\n vb = Add(v, b)"
        q, k, v = "qb", "kb", "vb"
    initializers = ", ".join(
        [
            _floats("wq", (16, 16), 1),
            _floats("wk", (16, 16), 2),
            _floats("wv", (16, 2 * value_size), 3),
            *([_floats("b", (16,), 0, bias)] if bias is not None else []),
            "int64[4] s4 = {0, 0, 2, 8}",
            f"int64[4] s4v = {{0, 0, 2, {value_size}}}",
            f"int64[3] s3 = {{0, 0, {2 * value_size}}}",
            f"float scale = {{{scale}}}",
        ]
    )
    text = f"""<ir_version: 10, opset_import: ["" : 18]>
    g (float[batch, seq, 16] x, float[batch, {memory}, 16] mem)
        => (float[batch, seq, {2 * value_size}] y)
    <{initializers}>
    {{
        q = MatMul(x, wq)
        k = MatMul({kv}, wk)
        v = MatMul({kv}, wv)
        {adds}
        q4 = Reshape({q}, s4)
        k4 = Reshape({k}, s4)
        v4 = Reshape({v}, s4v)
        qt = Transpose<perm = [0, 2, 1, 3]>(q4)
        kt = Transpose<perm = [0, 2, 3, 1]>(k4)
        vt = Transpose<perm = [0, 2, 1, 3]>(v4)
        s = MatMul(qt, kt)
        sc = Mul(s, scale)
        p = Softmax<axis = -1>(sc)
        o = MatMul(p, vt)
        ot = Transpose<perm = [0, 2, 1, 3]>(o)
        y = Reshape(ot, s3)
    }}"""
    return ir.from_onnx_text(text)


def _contrib(m: ir.Model) -> list[str]:
    return [n.op_type for n in m.graph if n.domain == "com.microsoft"]


def _assert_close(before, after, sizes=SIZES) -> None:
    reference, fused = session(before), session(after)
    for k, binding in enumerate(sizes):
        feeds = feeds_for(before, binding, seed=k)
        for a, e in zip(fused.run(None, feeds), reference.run(None, feeds)):
            assert a.shape == e.shape, binding
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5, err_msg=str(binding))


def _fusions(result) -> dict[str, int]:
    return {k: n for k, n in result.fired.items() if k.startswith("fusion.") and n}


@pytest.mark.parametrize("bias", [None, 0.0], ids=["no_bias", "zero_bias"])
@pytest.mark.parametrize("scale", [0.35355339, 0.5], ids=["default_scale", "scale_0.5"])
def test_packed_attention_fires_without_a_bias(bias, scale):
    """Swin's case: zero biases (``AddByZero`` removes them) or none; one ``Attention``
    with the packed ``[16, 48]`` weights replaces the three ``MatMul``s and the MHA."""
    m = _block(bias=bias, scale=scale)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert _fusions(result) == {
        "fusion.sdpa": 1,
        "fusion.mha2": 1,
        "fusion.attention_no_bias": 1,
    }, result.fired
    assert not result.diagnostics
    assert [n.op_type for n in m.graph if n.op_type != "Constant"] == ["Attention"]
    (attention,) = (n for n in m.graph if n.op_type == "Attention")
    assert attention.attributes["qkv_hidden_sizes"].as_ints() == (16, 16, 16)
    assert len(attention.inputs) == 2  # input and packed weights: no bias
    assert attention.inputs[1].shape == ir.Shape([16, 48])
    _assert_close(before, m)


def test_a_nonzero_bias_is_onnxscripts_own_attention_fusion():
    m = _block(bias=0.25)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    fired = _fusions(result)
    assert fired["fusion.mha_bias"] == 1 and fired["fusion.attention"] == 1
    assert "fusion.attention_no_bias" not in fired
    assert _contrib(m) == ["Attention"]
    _assert_close(before, m)


def test_cross_attention_is_not_packed():
    """K and V read another input than Q: the MHA stays, the MatMuls too."""
    m = _block(cross=True)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    fired = _fusions(result)
    assert fired.get("fusion.mha2") == 1
    assert "fusion.attention_no_bias" not in fired and "fusion.attention" not in fired
    assert _contrib(m) == ["MultiHeadAttention"]
    _assert_close(before, m)


# The rule alone, on a MultiHeadAttention as onnxscript's MHA fusions write it.
SLICED = """<ir_version: 10, opset_import: ["" : 18, "com.microsoft" : 1]>
g (float[batch, seq, 16] x) => (float[batch, seq, 16] y)
<{w}, int64[1] z = {{0}}, int64[1] e1 = {{16}}, int64[1] e2 = {{32}}, int64[1] e3 = {{48}},
 int64[1] ax = {{2}}>
{{
    p = MatMul(x, w)
    q = Slice(p, z, e1, ax)
    k = Slice(p, e1, e2, ax)
    v = Slice(p, e2, e3, ax)
    y = com.microsoft.MultiHeadAttention<num_heads = 2{attributes}>(q, k, v)
}}"""


def _sliced(attributes: str = "") -> ir.Model:
    m = ir.from_onnx_text(SLICED.format(w=_floats("w", (16, 48), 4), attributes=attributes))
    analyze(m)  # the shapes the guard's steps see
    return m


@pytest.mark.parametrize("attributes", ["", ", scale = 0.5"])
def test_rule_packs_a_sliced_projection(attributes):
    m = _sliced(attributes)
    before = proto(m)
    assert attention_no_bias_rules().apply_to_model(m) == 1
    assert _contrib(m) == ["Attention"]
    assert not any(n.op_type in ("MatMul", "Slice") for n in m.graph)
    _assert_close(before, m, [{"batch": 2, "seq": 3}, {"batch": 1, "seq": 1}])


@pytest.mark.parametrize(
    "attributes", [", unidirectional = 1", ", mask_filter_value = -100.0"]
)
def test_rule_declines_attributes_the_rewrite_would_drop(attributes):
    """``Attention`` gets ``num_heads``, ``qkv_hidden_sizes`` and ``scale`` only."""
    m = _sliced(attributes)
    assert attention_no_bias_rules().apply_to_model(m) == 0
    assert _contrib(m) == ["MultiHeadAttention"]
