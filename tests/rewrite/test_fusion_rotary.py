"""``fusions="ort"`` with a rotary embedding onnxscript cannot finish fusing.

onnxscript's ``rotary_embedding`` step writes a private ``RotaryEmbedding`` that only its
``cos_sin_cache`` step turns into onnxruntime's, when the cos and sin are computed as it
expects. Here they are graph inputs: the private node stays, and is undone on its own;
the attention fusions after it are kept. onnxruntime is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import model, proto, session
from tests.rewrite.test_packed_attention import _floats


def _rotary_attention() -> str:
    """Self-attention (2 heads of 8) whose query is rotated by ``rotate_half`` with the
    cos and sin given as inputs. ``qh``, a third slice of the query, keeps the rotation's
    two slices from becoming one ``Split`` (they no longer partition the axis)."""
    initializers = ", ".join(
        [
            _floats("wq", (16, 16), 1),
            _floats("wk", (16, 16), 2),
            _floats("wv", (16, 16), 3),
            "int64[4] s4 = {0, 0, 2, 8}",
            "int64[3] s3 = {0, 0, 16}",
            "float scale = {0.35355339}",
            "int64[1] zero = {0}",
            "int64[1] one = {1}",
            "int64[1] two = {2}",
            "int64[1] three = {3}",
            "int64[1] four = {4}",
            "int64[1] big = {9223372036854775807}",
        ]
    )
    return f"""
    g (float[B, S, 16] x, float[B, 1, S, 8] cos, float[B, 1, S, 8] sin)
        => (float[B, S, 16] y, float[B, 2, S, 2] qh)
    <{initializers}>
    {{
        q = MatMul(x, wq)
        k = MatMul(x, wk)
        v = MatMul(x, wv)
        q4 = Reshape(q, s4)
        k4 = Reshape(k, s4)
        v4 = Reshape(v, s4)
        qt = Transpose<perm = [0, 2, 1, 3]>(q4)
        kt = Transpose<perm = [0, 2, 3, 1]>(k4)
        vt = Transpose<perm = [0, 2, 1, 3]>(v4)
        x1 = Slice(qt, zero, four, three, one)
        x2 = Slice(qt, four, big, three, one)
        qh = Slice(qt, zero, two, three, one)
        nx2 = Neg(x2)
        rot = Concat<axis = -1>(nx2, x1)
        qa = Mul(qt, cos)
        qb = Mul(rot, sin)
        qr = Add(qa, qb)
        s = MatMul(qr, kt)
        sc = Mul(s, scale)
        w = Softmax<axis = -1>(sc)
        a = MatMul(w, vt)
        at = Transpose<perm = [0, 2, 1, 3]>(a)
        y = Reshape(at, s3)
    }}
    """


@pytest.mark.parametrize("verify", [True, False])
def test_an_unfinished_rotary_fusion_is_undone_alone(verify):
    """The private ``RotaryEmbedding`` was checked with the steps after it up to the end
    and undone with them: the ``SDPA`` -> ``MultiHeadAttention`` fusions were lost too."""
    m = model(_rotary_attention())
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=verify)(m)
    fired = {k for k, n in result.fired.items() if k.startswith("fusion.") and n}
    assert "fusion.sdpa" in fired and "fusion.rotary_embedding" not in fired
    assert "MultiHeadAttention" in {n.op_type for n in m.graph if n.domain == "com.microsoft"}
    (undone,) = [d for d in result.diagnostics if "undone" in d]
    assert "'ort.rotary_embedding' undone: nodes of onnxscript's private" in undone
    assert not any(n.domain.startswith("ai.onnxruntime._fusion") for n in m.graph)
    rng = np.random.default_rng(0)
    for b, s in ((2, 3), (1, 1)):
        feeds = {
            "x": rng.standard_normal((b, s, 16)).astype(np.float32),
            "cos": rng.standard_normal((b, 1, s, 8)).astype(np.float32),
            "sin": rng.standard_normal((b, 1, s, 8)).astype(np.float32),
        }
        expected = session(before).run(None, feeds)
        actual = session(m).run(None, feeds)
        for a, e in zip(actual, expected, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
