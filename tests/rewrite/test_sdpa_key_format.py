"""``fusions="ort"``: an attention whose key is given sequence first (SDPA ``key_format="BSHd"``).

onnxscript's cross-attention ``MultiHeadAttention`` rule reads an SDPA's key as
``[B, H, Skv, Dh]`` whatever its ``key_format``. A key transposed straight from
``[B, Skv, H, Dh]`` to ``[B, H, Dh, Skv]`` (one ``Transpose<perm=[0,2,3,1]>``) passed its
shape check when ``Skv == H`` (Perceiver's decoder: 8 latents, 8 heads), and the fused
attention mixed heads and positions (outputs off by 2 % of their scale). The guard now
gives every SDPA key heads first before the MHA rules run. Compared in onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import feeds_for, proto, session


def _floats(name: str, shape: tuple[int, ...], seed: int) -> str:
    array = np.random.default_rng(seed).standard_normal(shape) * 0.3
    dims = ",".join(map(str, shape))
    return f"float[{dims}] {name} = {{{', '.join(f'{v:.4f}' for v in array.ravel())}}}"


def _cross_attention(memory: str) -> ir.Model:
    """Queries of ``x`` attend to ``memory`` positions of ``mem``: 2 heads, keys of 8,
    values of 4 (a value size of its own: only the cross-attention rule takes it)."""
    initializers = ", ".join(
        [
            _floats("wq", (16, 16), 1),
            _floats("wk", (16, 16), 2),
            _floats("wv", (16, 8), 3),
            "int64[4] s4 = {0, 0, 2, 8}",
            "int64[4] s4v = {0, 0, 2, 4}",
            "int64[3] s3 = {0, 0, 8}",
            "float scale = {0.35355339}",
        ]
    )
    return ir.from_onnx_text(f"""<ir_version: 10, opset_import: ["" : 18]>
    g (float[batch, seq, 16] x, float[batch, {memory}, 16] mem) => (float[batch, seq, 8] y)
    <{initializers}>
    {{
        q = MatMul(x, wq)
        k = MatMul(mem, wk)
        v = MatMul(mem, wv)
        q4 = Reshape(q, s4)
        k4 = Reshape(k, s4)
        v4 = Reshape(v, s4v)
        qt = Transpose<perm = [0, 2, 1, 3]>(q4)
        kt = Transpose<perm = [0, 2, 3, 1]>(k4)
        vt = Transpose<perm = [0, 2, 1, 3]>(v4)
        s = MatMul(qt, kt)
        sc = Mul(s, scale)
        p = Softmax<axis = -1>(sc)
        o = MatMul(p, vt)
        ot = Transpose<perm = [0, 2, 1, 3]>(o)
        y = Reshape(ot, s3)
    }}""")


@pytest.mark.parametrize("memory", ["2", "3", "mem_len"])
def test_a_key_given_sequence_first_is_fused_right(memory):
    """Two memory positions and two heads: the case the MHA rule took for heads first."""
    m = _cross_attention(memory)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.sdpa"] == 1
    assert [n.op_type for n in m.graph if n.domain == "com.microsoft"] == [
        "MultiHeadAttention"
    ]
    reference, fused = session(before), session(m)
    for k, sizes in enumerate(
        [{"batch": 1, "seq": 1, "mem_len": 2}, {"batch": 2, "seq": 5, "mem_len": 3},
         {"batch": 0, "seq": 3, "mem_len": 2}, {"batch": 2, "seq": 0, "mem_len": 1}]
    ):
        feeds = feeds_for(before, sizes, seed=k)
        (expected,), (actual,) = reference.run(None, feeds), fused.run(None, feeds)
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5, err_msg=str(sizes))
