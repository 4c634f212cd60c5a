"""``fusions="onnx"`` and ONNX's ``RotaryEmbedding-23``: caches of the input's batch.

Without ``position_ids`` the spec asks for caches of ``(batch_size, sequence_length,
head_size / 2)``; onnxscript's rule passed ``Cos(freqs)`` of ``[1, S, D/2]`` (positions
shared by the batch, as gemma2 and GPT-NeoX exports compute them) beside a batch of
``B``. Ours expands them to the batch. onnxruntime is the oracle.
"""

from __future__ import annotations

from importlib.metadata import version

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass, analyze
from tests.rewrite._rewrite_testing import model, proto, session

#: onnxscript before 0.7 writes its ONNX-op rotary fusion in a form onnxruntime refuses
#: (the guard undoes it: sound, but nothing to test here); measured with 0.5.0.
_OLD_ONNXSCRIPT = tuple(int(p) for p in version("onnxscript").split(".")[:2]) < (0, 7)

_INV_FREQ = ", ".join(f"{1 / 10000 ** (i / 4):.6f}" for i in range(4))


def _rope(positions: str) -> str:
    """``x * cos + rotate_half(x) * sin`` of ``freqs = positions * inv_freq``.

    onnxscript's pattern reads two ``Slice``s and an ``Unsqueeze``d cos: ``xh``, a third
    slice, keeps our ``SlicesToSplit`` from making the halves a ``Split``, and ``c4`` and
    ``s4`` as outputs keep the ``Unsqueeze`` that our ``DropLeadingOnesBeforeBroadcast`` drops.
    """
    return f"""
    g (float[B, 2, S, 8] x, {positions}) => (float[B, 2, S, 8] y, float[B, 2, S, 2] xh,
        float[{"1" if positions.endswith("[S] p") else "B"}, 1, S, 8] c4,
        float[{"1" if positions.endswith("[S] p") else "B"}, 1, S, 8] s4)
    <float[4] inv_freq = {{{_INV_FREQ}}}, int64[1] one = {{1}}, int64[1] zero = {{0}}, int64[1] two = {{2}},
     int64[1] four = {{4}}, int64[1] three = {{3}}, int64[1] big = {{9223372036854775807}},
     int64[2] axes = {{0, 2}}>
    {{
        pu = Unsqueeze(p, {"axes" if positions.endswith("[S] p") else "two"})
        pf = Cast<to=1>(pu)
        freqs = Mul(pf, inv_freq)
        emb = Concat<axis=-1>(freqs, freqs)
        c = Cos(emb)
        s = Sin(emb)
        c4 = Unsqueeze(c, one)
        s4 = Unsqueeze(s, one)
        x1 = Slice(x, zero, four, three, one)
        x2 = Slice(x, four, big, three, one)
        nx2 = Neg(x2)
        rot = Concat<axis=-1>(nx2, x1)
        a = Mul(x, c4)
        b = Mul(rot, s4)
        y = Add(a, b)
        xh = Slice(x, zero, two, three, one)
    }}
    """


@pytest.mark.skipif(_OLD_ONNXSCRIPT, reason="onnxscript < 0.7 fuses it into a refused form")
@pytest.mark.parametrize(
    "positions", ["int64[S] p", "int64[B, S] p"], ids=["shared", "per_batch"]
)
@pytest.mark.parametrize("verify", [True, False])
def test_caches_have_the_batch_of_the_input(positions, verify):
    """The caches given to ``RotaryEmbedding`` are proven ``[B, S, 4]`` (the spec's
    shape without position ids), and the outputs are the original's, batch 0 too.
    onnxruntime refused onnxscript's ``[1, S, 4]`` caches at batch 2: the output check
    undid the fusion, and without it the model returned did not run."""
    text = _rope(positions)
    m = model(text, opset=23)
    before = proto(m)
    result = OptimizePass(fusions="onnx", verify_fusions=verify)(m)
    assert result.fired["fusion.RotaryEmbedding"] == 1, result.diagnostics
    (rope,) = [n for n in m.graph if n.op_type == "RotaryEmbedding"]
    facts = analyze(m)
    for cache in rope.inputs[1:3]:
        assert [str(d) for d in facts.shape(cache)] == ["B", "S", "4"]
    rng = np.random.default_rng(0)
    for b, s in ((2, 3), (1, 1), (3, 2), (0, 2), (2, 0)):
        shape = (s,) if "B" not in positions else (b, s)
        feeds = {
            "x": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
            "p": rng.integers(0, 30, shape).astype(np.int64),
        }
        expected = session(before).run(None, feeds)
        actual = session(m).run(None, feeds)
        for a, e in zip(actual, expected, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
