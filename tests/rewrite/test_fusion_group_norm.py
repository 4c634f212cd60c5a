"""``fusions="ort"`` never writes ``com.microsoft::GroupNorm``: onnxruntime has no CPU kernel.

onnxscript's ``instance_to_group_normalization`` rules turn a group normalization written
as ``InstanceNormalization`` over a reshape to groups (what torch's ``GroupNorm`` exports
to at opset 18) into ``GroupNorm``, which onnxruntime (1.32) runs on GPU only. The guard
leaves those rules out; the other rules of the same step (``FusedMatMul``) still run.
onnxruntime on CPU is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import model, ops, proto, session

#: Two groups of two channels normalized by ``InstanceNormalization`` over the reshape
#: to groups, then the per-channel scale and bias; beside it a ``MatMul`` of a transposed
#: input, which the same onnxscript step fuses into ``FusedMatMul``.
_GROUP_NORM = """
g (float[2, 4, 3, 3] x, float[2, 4, 3, 5] z, float[2, 4, 3, 6] w)
    => (float[2, 4, 3, 3] y, float[2, 4, 5, 6] p)
<float[2] ones = {1, 1}, float[2] zeros = {0, 0}, int64[3] groups = {0, 2, -1},
 int64[4] back = {2, 4, 3, 3}, float[4, 1, 1] scale = {1, 2, 3, 4},
 float[4, 1, 1] bias = {0, 1, 0, 1}>
{
    a = Reshape(x, groups)
    n = InstanceNormalization<epsilon = 0.001>(a, ones, zeros)
    r = Reshape(n, back)
    m = Mul(r, scale)
    y = Add(m, bias)
    zt = Transpose<perm = [0, 1, 3, 2]>(z)
    p = MatMul(zt, w)
}
"""


@pytest.mark.parametrize("verify", [False, True])
def test_group_norm_is_not_fused_and_fused_matmul_still_is(verify):
    """Without the output check the model returned did not load on CPU (``GroupNorm``
    has no implementation there); with it the whole ``ort_patterns`` step was undone, so
    the ``FusedMatMul`` beside it was lost too."""
    m = model(_GROUP_NORM)
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=verify)(m)
    assert "GroupNorm" not in ops(m)
    assert "InstanceNormalization" in ops(m)
    assert "FusedMatMul" in ops(m)
    assert not [d for d in result.diagnostics if "undone" in d]
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((2, 4, 3, 3)).astype(np.float32),
        "z": rng.standard_normal((2, 4, 3, 5)).astype(np.float32),
        "w": rng.standard_normal((2, 4, 3, 6)).astype(np.float32),
    }
    expected = session(before).run(None, feeds)
    actual = session(m).run(None, feeds)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
