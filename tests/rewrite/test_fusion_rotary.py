"""``fusions="ort"`` and rotary embeddings: ours in place of onnxscript's rotary steps.

onnxscript's ``cos_sin_cache`` step sized one cos/sin cache per ``inv_freq`` from the
first rope's position ids, reused by every rope of that ``inv_freq``: a key rope whose
positions ran past the query's read out of range, and at batch 0 onnxruntime's kernel
refused the cache. Ours (``rewrite/_rotary.py``) gives each rope its own cos and sin as
the cache, one row per (batch, position). onnxruntime is the oracle, at batch 0 and 1,
sequence 0 and 1 too (the guard's output check draws none of these).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
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
    and undone with them: the ``SDPA`` -> ``MultiHeadAttention`` fusions were lost too.
    The cos and sin here are graph inputs, not proven ``Concat(c, c)``: no rotary fusion."""
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


SIZES = ((2, 3), (1, 1), (0, 3), (2, 0), (1, 5), (0, 1))


def _rope(name: str, x: str, pos: str) -> str:
    """``x`` rotated by ``rotate_half`` with the cos and sin of ``inv_freq @ pos``
    (``[B, S, 4]``, unsqueezed to ``[B, 1, S, 8]``), as Llama-style exports compute it."""
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
    """


_CONSTANTS = """int64[1] one = {1}, int64[1] zero = {0}, int64[1] two = {2},
     int64[1] four = {4}, int64[1] three = {3}, int64[1] big = {9223372036854775807}"""
_INV_FREQ = ", ".join(f"{1 / 10000 ** (i / 4):.6f}" for i in range(4))


def _two_ropes(third_slice: bool) -> str:
    """Query and key rotated at their own positions ``p1`` and ``p2``; ``third_slice``
    adds ``q[..., :2]`` as an output, which keeps the halves two ``Slice``s (else our
    ``SlicesToSplit`` makes them one ``Split``)."""
    extra = "q_h = Slice(q, zero, two, three, one)" if third_slice else ""
    extra_out = ", float[B, 2, S, 2] q_h" if third_slice else ""
    return f"""
    g (float[B, 2, S, 8] q, float[B, 2, S, 8] k, int64[B, S] p1, int64[B, S] p2)
        => (float[B, 2, S, 8] qr, float[B, 2, S, 8] kr{extra_out})
    <float[1, 4, 1] inv_freq = {{{_INV_FREQ}}}, {_CONSTANTS}>
    {{ {_rope("qr", "q", "p1")} {_rope("kr", "k", "p2")} {extra} }}
    """


def _check(before, m, feeds_of, sizes=SIZES, tolerance=1e-6) -> None:
    rng = np.random.default_rng(0)
    for b, s in sizes:
        feeds = feeds_of(rng, b, s)
        expected = session(before).run(None, feeds)
        actual = session(m).run(None, feeds)
        for a, e in zip(actual, expected, strict=True):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=tolerance)


def _two_rope_feeds(rng, b, s):
    """Positions of each row its own, past the sequence and negative too: the cache is
    the rope's own cos and sin, so no position needs to be in a range."""
    return {
        "q": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
        "k": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
        "p1": rng.integers(-3, 50, (b, s)).astype(np.int64),
        "p2": rng.integers(0, 9, (b, s)).astype(np.int64) + 7,
    }


@pytest.mark.parametrize("third_slice", [True, False], ids=["slices", "split"])
@pytest.mark.parametrize("verify", [True, False])
def test_ropes_at_their_own_positions_fuse_and_keep_their_outputs(verify, third_slice):
    """Query at positions ``p1``, key at ``p2`` (past the query's, as behind a KV cache).
    onnxscript fused both into nodes sharing a cache of ``S`` rows built from ``p1``: the
    key's rotation failed ("position_ids value 7 ... out of range"), and at batch 0 both
    did. Ours: one cache per rope's cos and sin, ``S`` zero rows more for batch 0."""
    m = model(_two_ropes(third_slice))
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=verify)(m)
    assert result.fired["fusion.rotary_embedding"] == 2
    assert [n.op_type for n in m.graph].count("RotaryEmbedding") == 2
    assert "Neg" not in [n.op_type for n in m.graph]
    assert not result.diagnostics
    _check(before, m, _two_rope_feeds)


def test_ropes_of_one_cos_share_one_cache():
    """Two ropes of the same cos and sin (query and key at the same positions) read one
    cache: its ``Cos``, ``Sin`` and ``Pad`` once."""
    text = _two_ropes(False)
    for part in ("c", "s"):
        text = text.replace(
            f"kr_{part}4 = Unsqueeze(kr_{part},", f"kr_{part}4 = Unsqueeze(qr_{part},"
        )
    m = model(text)
    before = proto(m)
    OptimizePass(fusions="ort")(m)
    kinds = [n.op_type for n in m.graph]
    assert kinds.count("RotaryEmbedding") == 2
    assert kinds.count("Cos") == 1 and kinds.count("Pad") == 2  # one for cos, one for sin
    _check(before, m, _two_rope_feeds)


def _shared_positions(unsqueezed: bool) -> str:
    """gemma2 / GPT-NeoX style: positions ``[1, S]`` shared by the batch; the cos is
    ``[1, S, 8]`` broadcast over batch and heads (our ``DropLeadingOnesBeforeBroadcast``
    removes the ``Unsqueeze`` such exports have), or ``[1, 1, S, 8]`` with it. ``x`` is a
    partial rotation's first 8 of 12 (its own halves are a ``Split``)."""
    cos = (
        "emb_c4 = Unsqueeze(emb_c, one)\n emb_s4 = Unsqueeze(emb_s, one)"
        if unsqueezed
        else ("emb_c4 = Identity(emb_c)\n emb_s4 = Identity(emb_s)")
    )
    return f"""
    g (float[B, 3, S, 12] q, int64[P] past) => (float[B, 3, S, 12] y)
    <float[4] inv_freq = {{{_INV_FREQ}}}, int64[2] axes = {{0, 2}}, int64[1] eight = {{8}},
     {_CONSTANTS}>
    {{
        seq = Shape<start=2, end=3>(q)
        sq = Squeeze(seq)
        zs = Squeeze(zero)
        os = Squeeze(one)
        ar = Range(zs, sq, os)
        pl = Shape(past)
        pls = Squeeze(pl)
        pos = Add(ar, pls)
        pu = Unsqueeze(pos, axes)
        pf = Cast<to=1>(pu)
        fr = Mul(pf, inv_freq)
        emb = Concat<axis=-1>(fr, fr)
        emb_c = Cos(emb)
        emb_s = Sin(emb)
        {cos}
        x = Slice(q, zero, eight, three, one)
        rest = Slice(q, eight, big, three, one)
        x1 = Slice(x, zero, four, three, one)
        x2 = Slice(x, four, big, three, one)
        nx2 = Neg(x2)
        rot = Concat<axis=-1>(nx2, x1)
        a = Mul(x, emb_c4)
        b = Mul(rot, emb_s4)
        r = Add(a, b)
        y = Concat<axis=-1>(r, rest)
    }}
    """


@pytest.mark.parametrize("unsqueezed", [True, False])
def test_positions_shared_by_the_batch_use_position_zero(unsqueezed):
    """A cos of one batch row: the cache is its ``[S, 4]`` half and the position ids
    ``[0]`` (onnxruntime reads row ``ids[0] + s`` for every batch), right at batch 0
    and an empty past too."""
    m = model(_shared_positions(unsqueezed))
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.rotary_embedding"] == 1, result.diagnostics
    assert "Pad" not in [n.op_type for n in m.graph]

    def feeds(rng, b, s):
        return {
            "q": rng.standard_normal((b, 3, s, 12)).astype(np.float32),
            "past": np.zeros(rng.integers(0, 6), np.int64),
        }

    _check(before, m, feeds)


def test_a_cos_not_of_one_half_is_not_fused():
    """``Cos(Concat(f, g))``: the two halves of the cos differ, onnxruntime's cache
    has one. Declined (the rotation stays as it was)."""
    text = _two_ropes(False).replace(
        "qr_emb = Concat<axis=-1>(qr_ft, qr_ft)", "qr_emb = Concat<axis=-1>(qr_ft, kr_ft)"
    )
    text = text.replace(
        '{_rope("qr", "q", "p1")} {_rope("kr", "k", "p2")}',
        '{_rope("kr", "k", "p2")} {_rope("qr", "q", "p1")}',
    )
    m = model(text)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.rotary_embedding"] == 1  # the key's alone
    _check(before, m, _two_rope_feeds, sizes=((2, 3), (0, 2)))


def test_a_cos_broadcast_over_the_sequence_is_not_fused():
    """A cos of ``[B, 1, 1, 8]`` (one position for every token) beside ``x`` of ``S``
    tokens: onnxruntime's cache would be read at ``S`` rows. Declined."""
    text = _two_ropes(False).replace("int64[B, S] p1", "int64[B, 1] p1")
    m = model(text)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.rotary_embedding"] == 1  # the key's alone

    def feeds(rng, b, s):
        f = _two_rope_feeds(rng, b, s)
        f["p1"] = f["p1"][:, :1] if s else np.zeros((b, 1), np.int64)
        return f

    _check(before, m, feeds, sizes=((2, 3), (1, 1), (0, 2)))


@pytest.mark.parametrize("opset, fused", [(13, 0), (14, 0), (15, 2)])
def test_a_cache_per_batch_row_needs_opset_15(opset, fused):
    """The per-batch cache reads ``Shape(f, start, end)`` (opset 15): at opset 14 a rule
    read the ``Shape`` without them and the model returned was invalid (found by fuzzing
    the fusion). Declined below 15."""
    m = model(_two_ropes(False), opset=opset)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.rotary_embedding"] == fused
    _check(before, m, _two_rope_feeds, sizes=((2, 3), (0, 2)))


def test_ropes_of_one_frequency_tensor_but_other_cos_keep_their_caches():
    """The query multiplied by ``Concat(f, f)`` itself (a "cos" that is no cosine), the
    key by ``Cos(Concat(f, f))``: both halves come from ``f``, their caches differ
    (``f`` and ``Cos(f)``); one cache keyed by ``f`` alone gave the key the query's."""
    text = _two_ropes(False).replace("qr_c4 = Unsqueeze(qr_c,", "qr_c4 = Unsqueeze(qr_emb,")
    for part in ("c", "s"):
        text = text.replace(
            f"kr_{part}4 = Unsqueeze(kr_{part},", f"kr_{part}4 = Unsqueeze(qr_{part},"
        )
    m = model(text)
    before = proto(m)
    assert OptimizePass(fusions="ort")(m).fired["fusion.rotary_embedding"] == 2
    _check(before, m, _two_rope_feeds)


def test_the_bundled_decoder_gets_a_rotary_embedding_per_rope():
    """The bundled tiny decoder (a Llama-style KV-cache export: position ids per batch
    row) gets its 4 ropes fused, outputs kept at batch 0 and 1, sequence 0 and 1 and
    an empty cache, at positions of any row of its own (negative too)."""
    m = ir.load(onnx_symdims.data_path("tiny_decoder.onnx"))
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.rotary_embedding"] == 4
    assert [n.op_type for n in m.graph].count("RotaryEmbedding") == 4
    original, fused = session(before), session(m)
    rng = np.random.default_rng(0)
    for b, s, past in ((2, 3, 4), (1, 1, 0), (0, 3, 2), (2, 0, 3), (3, 2, 0), (0, 1, 0)):
        sizes = {"batch": b, "seq_len": s, "past_seq_len": past, "total_seq_len": past + s}
        feeds = {}
        for spec in original.get_inputs():
            shape = [sizes.get(d, d) for d in spec.shape]
            if spec.name == "input_ids":
                feeds[spec.name] = rng.integers(0, 2, shape).astype(np.int64)
            elif spec.name == "attention_mask":
                feeds[spec.name] = np.ones(shape, np.int64)
            elif spec.name == "position_ids":
                feeds[spec.name] = rng.integers(-5, 40, shape).astype(np.int64)
            else:
                feeds[spec.name] = rng.standard_normal(shape).astype(np.float32)
        expected = original.run(None, feeds)
        actual = fused.run(None, feeds)
        for a, e in zip(actual, expected, strict=True):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
