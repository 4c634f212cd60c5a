"""``fusions="ort"`` and rotary embeddings: onnxscript's rotary steps are left out.

onnxscript's ``rotary_embedding`` step writes a private ``RotaryEmbedding`` that only its
``cos_sin_cache`` step turns into onnxruntime's, and that step sizes one cos/sin cache per
``inv_freq`` from the first rope's position ids, reused by every rope of that
``inv_freq``: a key rope whose positions run past the query's reads out of range, and at
batch 0 onnxruntime's kernel refuses the cache. The steps are left out; the attention
fusions around a rotation are kept. onnxruntime is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import model, proto, session
from tests.rewrite.test_packed_attention import _floats
from tests.rewrite.test_pipeline import _HAS_SDPA_VIA_MHA


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


@pytest.mark.skipif(not _HAS_SDPA_VIA_MHA, reason="this onnxscript does not fuse it")
@pytest.mark.parametrize("verify", [True, False])
def test_attention_after_a_rotation_still_fuses(verify):
    """A private ``RotaryEmbedding`` left unfinished was checked with the steps after it
    and undone with them: the ``SDPA`` -> ``MultiHeadAttention`` fusions were lost too."""
    m = model(_rotary_attention())
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=verify)(m)
    fired = {k for k, n in result.fired.items() if k.startswith("fusion.") and n}
    assert "fusion.sdpa" in fired and "fusion.rotary_embedding" not in fired
    assert "MultiHeadAttention" in {n.op_type for n in m.graph if n.domain == "com.microsoft"}
    assert not [d for d in result.diagnostics if "undone" in d]
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


def _rope(name: str, x: str, pos: str) -> str:
    """``x`` rotated by ``rotate_half`` with the cos and sin of ``inv_freq @ pos``, as
    onnxscript's ``cos_sin_cache`` rule matches it."""
    return f"""
        {name}_pu = Unsqueeze({pos}, one)
        {name}_pf = Cast<to=1>({name}_pu)
        {name}_fr = MatMul(inv_freq, {name}_pf)
        {name}_ft = Transpose<perm=[0,2,1]>({name}_fr)
        {name}_emb = Concat<axis=-1>({name}_ft, {name}_ft)
        {name}_c = Cos({name}_emb)
        {name}_s = Sin({name}_emb)
        {name}_c4 = Unsqueeze({name}_c, one)
        {name}_s4 = Unsqueeze({name}_s, one)
        {name}_x1 = Slice({x}, zero, four, three, one)
        {name}_x2 = Slice({x}, four, big, three, one)
        {name}_nx2 = Neg({name}_x2)
        {name}_rot = Concat<axis=-1>({name}_nx2, {name}_x1)
        {name}_a = Mul({x}, {name}_c4)
        {name}_b = Mul({name}_rot, {name}_s4)
        {name} = Add({name}_a, {name}_b)
        {name}_h = Slice({x}, zero, two, three, one)
    """


@pytest.mark.parametrize("verify", [True, False])
def test_ropes_of_one_inv_freq_at_other_positions_keep_their_outputs(verify):
    """Query at positions ``p1``, key at ``p2 = p1 + 7`` (as behind a KV cache). onnxscript
    fused both into ``RotaryEmbedding`` nodes sharing a cache of ``S`` rows built from
    ``p1``: the key's rotation failed ("position_ids value 7 ... out of range"), and at
    batch 0 both did. ``*_h``, a third slice, keeps the rotation's two slices from becoming
    one ``Split`` (onnxscript's pattern reads the slices)."""
    inv_freq = ", ".join(f"{1 / 10000 ** (i / 4):.6f}" for i in range(4))
    text = f"""
    g (float[B, 2, S, 8] q, float[B, 2, S, 8] k, int64[B, S] p1, int64[B, S] p2)
        => (float[B, 2, S, 8] qr, float[B, 2, S, 8] kr, float[B, 2, S, 2] qr_h,
            float[B, 2, S, 2] kr_h)
    <float[1, 4, 1] inv_freq = {{{inv_freq}}}, int64[1] one = {{1}}, int64[1] zero = {{0}},
     int64[1] two = {{2}}, int64[1] four = {{4}}, int64[1] three = {{3}},
     int64[1] big = {{9223372036854775807}}>
    {{ {_rope("qr", "q", "p1")} {_rope("kr", "k", "p2")} }}
    """
    m = model(text)
    before = proto(m)
    OptimizePass(fusions="ort", verify_fusions=verify)(m)
    assert not [n for n in m.graph if n.op_type == "RotaryEmbedding"]
    rng = np.random.default_rng(0)
    for b, s in ((2, 3), (1, 1), (0, 3), (2, 0)):
        positions = np.broadcast_to(np.arange(s, dtype=np.int64), (b, s))
        feeds = {
            "q": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
            "k": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
            "p1": positions.copy(),
            "p2": positions + 7,
        }
        expected = session(before).run(None, feeds)
        actual = session(m).run(None, feeds)
        for a, e in zip(actual, expected, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
