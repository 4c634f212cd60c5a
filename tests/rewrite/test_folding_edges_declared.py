"""The folder reads the shapes the model proves, not declared ones onnxruntime does not check.

With ``symbol_ranges``, ``optimize`` infers the final shapes over the graph outputs'
declared shapes, decides an ``If`` whose condition the ranges prove, and folds again.
That fold read the declared shapes: onnxruntime does not check a declared output shape
(it warns), so a ``NonZero`` output declared ``[1, 3]`` runs with four nonzeros, and
``Shape`` of it was folded to ``[1, 3]`` (found by hand). The rounds never read declared
output shapes; neither does this fold now. Nor does the folder read a weight's shape from
a stale ``value_info``.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite import optimize
from tests.rewrite._rewrite_testing import model, proto, run

DECLARED_NONZERO = """
    g (float[N] x, float[M] z) => (int64[1, 3] y, int64[2] s, float[M] w) {
        nz = NonZero(x)
        y = Identity(nz)
        s = Shape(nz)
        ms = Shape(z)
        zero = Constant<value = int64[1] {0}>()
        cond = Greater(ms, zero)
        w = If(cond) <
            then_branch = g1 () => (float[M] t) { t = Neg(z) },
            else_branch = g2 () => (float[M] e) { e = Identity(z) }
        >
    }
"""


def test_shape_of_an_output_declared_wrongly_is_not_folded_after_a_decided_if():
    m = model(DECLARED_NONZERO)
    before = proto(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = optimize(m, symbol_ranges={"M": (1, 10)})
    after = proto(result)
    kinds = [n.op_type for n in after.graph.node]
    assert "If" not in kinds  # the ranges decided it
    assert "Shape" in kinds
    feeds = {"x": np.array([0, 1, 1, 1, 1], np.float32), "z": np.ones(2, np.float32)}
    expected = run(before, feeds)
    assert expected[1].tolist() == [1, 4]  # onnxruntime runs it: the declaration is false
    for a, e in zip(run(after, feeds), expected, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)


def test_shape_of_a_weight_with_a_stale_value_info_is_its_tensors():
    """onnx-ir loads a weight's ``value_info`` onto it; the folder's ``Shape`` read it.

    A ``value_info`` declaring ``[5]`` for a ``[3]`` weight (onnxruntime computes from
    the tensor: ``[3]``) made ``Shape(w)`` fold to ``[5]`` (found by hand).
    """
    m = model(
        """g (float[N] x) => (int64[1] s, float[3] y) <float[3] w = {1.0, 2.0, 3.0}> {
            s = Shape(w)
            y = Neg(w)
        }"""
    )
    m.graph.initializers["w"].shape = ir.Shape([5])  # as a stale value_info loads
    before = proto(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = proto(optimize(m))
    feeds = {"x": np.zeros(2, np.float32)}
    expected = run(before, feeds)
    assert expected[0].tolist() == [3]
    for a, e in zip(run(after, feeds), expected, strict=True):
        np.testing.assert_array_equal(a, e)
