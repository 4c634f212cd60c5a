"""``fusions="ort"``: a fused attention's ``attention_bias`` gets the shape the kernel accepts.

onnxruntime's ``MultiHeadAttention`` broadcasts no bias; the subgraph it replaces did.
The guard keeps a bias proven ``[B|1, N|1, S, total]``, broadcasts one explicitly with an
``Expand`` when that is sound, and undoes the fusion otherwise
(``onnx_symdims/rewrite/_attention_bias.py``).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import feeds_for, model, ops, proto, session

# What torch's scaled_dot_product_attention exports to: onnxscript fuses it into one
# MultiHeadAttention (steps sdpa and mha2). Keys and values have T rows.
SDPA = """
    g (float[B, S, 8] q, float[B, T, 8] k, float[B, T, 8] v, float[{mask}] mask)
        => (float[B, S, 8] y) {{
        heads = Constant<value_ints = [0, 0, 2, 4]>()
        flat = Constant<value_ints = [0, 0, 8]>()
        q4 = Reshape(q, heads)
        k4 = Reshape(k, heads)
        v4 = Reshape(v, heads)
        qt = Transpose<perm = [0, 2, 1, 3]>(q4)
        kt = Transpose<perm = [0, 2, 3, 1]>(k4)
        vt = Transpose<perm = [0, 2, 1, 3]>(v4)
        scores = MatMul(qt, kt)
        scale = Constant<value_float = 0.5>()
        scaled = Mul(scores, scale)
        masked = Add(scaled, mask)
        p = Softmax<axis = -1>(masked)
        o = MatMul(p, vt)
        ot = Transpose<perm = [0, 2, 1, 3]>(o)
        y = Reshape(ot, flat)
    }}
"""

#: Sizes incl. empty batch, query and keys, one query row, one key (the mask's M is
#: its own length: where it is neither 1 nor T the original fails, and is skipped).
SIZES = [
    {"B": 2, "S": 3, "T": 3, "M": 3},
    {"B": 1, "S": 1, "T": 4, "M": 1},
    {"B": 2, "S": 3, "T": 1, "M": 1},
    {"B": 1, "S": 2, "T": 5, "M": 5},
    {"B": 0, "S": 2, "T": 2, "M": 2},
    {"B": 1, "S": 0, "T": 3, "M": 3},
    {"B": 1, "S": 2, "T": 0, "M": 0},
]


def _fused_matches_original(before, m) -> int:
    """Runs both on :data:`SIZES`; returns how many sizes the original ran on."""
    ran = 0
    for sizes in SIZES:
        feeds = feeds_for(before, sizes)
        try:
            expected = session(before).run(None, feeds)[0]
        except Exception:  # a mask length the original refuses
            continue
        ran += 1
        (actual,) = session(m).run(None, feeds)
        assert actual.shape == expected.shape, sizes
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=str(sizes))
    return ran


@pytest.mark.parametrize(
    ("mask", "expands"),
    [
        ("B, 1, S, T", 0),  # the kernel's shape already
        ("B, 1, S, 1", 1),  # a padding mask: broadcast over the keys
        ("1, 1, S, 1", 1),
        ("B, 1, 1, T", 1),  # broadcast over the queries
        ("S, T", 1),  # rank 2 (onnxscript's rewrite makes it [1, 1, S, T])
        # Any other length M: every run of the original has M == T or M == 1 (the
        # softmax is multiplied by values of T rows), what Expand to T gives.
        ("B, 1, S, M", 1),
    ],
)
def test_the_bias_is_broadcast_to_the_kernels_shape(mask, expands):
    m = model(SDPA.format(mask=mask))
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert ops(m).count("MultiHeadAttention") == 1, result.diagnostics
    assert ops(m).count("Expand") == expands
    assert _fused_matches_original(before, m) >= 5


# A stand-in for an attention subgraph whose fusion the guard must refuse: y has the
# shape the fused node gives; the step below replaces it by MultiHeadAttention.
STAND_IN = """
    g (float[B, S, 8] q, float[B, T, 8] k, float[B, {value}, 8] v, float[{bias}] bias,
       float[B, 2, P, 4] past_k, float[B, 2, P, 4] past_v) => (float[B, S, 8] y) {{
        y = Relu(q)
    }}
"""


def _mha_step(model, with_past):
    """Replaces the stand-in by ``MultiHeadAttention(q, k, v, attention_bias=bias, ...)``."""
    q, k, v, bias, past_k, past_v = model.graph.inputs
    old = model.graph.outputs[0]
    past = [past_k, past_v] if with_past else []
    mha = ir.node(
        "MultiHeadAttention",
        [q, k, v, None, None, bias, *past],
        attributes={"num_heads": 2},
        domain="com.microsoft",
    )
    model.graph.append(mha)
    old.replace_all_uses_with(mha.outputs[0], replace_graph_outputs=True)
    mha.outputs[0].name, old.name = old.name, "y_old"
    mha.outputs[0].shape, mha.outputs[0].type = old.shape, old.type
    model.opset_imports["com.microsoft"] = 1
    return 1


@pytest.fixture
def stand_in_fusion(monkeypatch):
    from onnxscript.rewriter.ort_fusions import _core

    from onnx_symdims.rewrite import _guard

    def use(with_past=False):
        monkeypatch.setattr(_guard, "_ORT_FUSE_STEPS", (("mha_stand_in", "mha_step", {}),))
        monkeypatch.setattr(
            _core, "mha_step", lambda m: _mha_step(m, with_past), raising=False
        )

    return use


@pytest.mark.parametrize(
    ("bias", "value", "with_past", "kept"),
    [
        ("B, 1, S, T", "T", False, True),
        ("B, 1, S, 1", "T", False, True),  # broadcast by an Expand
        ("B, 2, S, T", "T", False, True),  # the heads
        # dim 2 is R: no Expand makes it the query's length in every run
        ("B, 1, R, T", "T", False, False),
        # dim 0 or 1 neither 1 nor the batch or heads: the kernel refuses it
        ("R, 1, S, T", "T", False, False),
        ("B, 3, S, T", "T", False, False),
        # keys and values of lengths not proven equal: the kernel requires them equal,
        # the replaced subgraph only broadcast(T, bias length) == value length
        ("B, 1, S, 1", "M", False, False),
        ("B, 1, S, total", "T", True, True),  # a key cache in the node: total is P + T
        ("B, 1, S, 1", "T", True, False),  # the total P+T is a sum no Shape reads
    ],
)
def test_a_bias_no_expand_can_fit_is_refused(stand_in_fusion, bias, value, with_past, kept):
    stand_in_fusion(with_past)
    m = model(STAND_IN.format(bias=bias, value=value))
    if "total" in bias:  # ONNX text has no expressions: P + T is set after parsing
        m.graph.inputs[3].shape = ir.Shape(["B", 1, "S", "P + T"])
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert ("fusion.mha_stand_in" in result.fired) == kept, result.diagnostics
    if not kept:
        assert any("attention_bias not proven" in d for d in result.diagnostics)
        assert "MultiHeadAttention" not in ops(m)
