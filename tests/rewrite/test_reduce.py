"""ReduceDropsKeptAxesPass: a reshape that drops a reduction's kept axes, folded into it.

Firing cases run before and after in onnxruntime (empty batch included); declining cases
name their reason.
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import ReduceDropsKeptAxesPass, analyze
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    cleanup,
    model,
    ops,
    proto,
)

SIZES = [{"N": 0}, {"N": 1}, {"N": 3}]

FIRES = {
    # mobilenet/convnet: x.mean([2, 3], keepdim=True).view(N, C)
    "global_pool_then_view": (
        """
        g (float[N, 8, 5, 6] x) => (float[N, 8] y) {
            axes = Constant<value = int64[2] {2, 3}>()
            m = ReduceMean<keepdims = 1>(x, axes)
            s = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(m, s)
        }
        """,
        18,
        "ReduceMean",
    ),
    "attribute_axes_then_squeeze": (
        """
        g (float[N, 8, 5] x) => (float[N, 5] y) {
            m = ReduceSum<axes = [-2]>(x)
            y = Squeeze<axes = [1]>(m)
        }
        """,
        11,
        "ReduceSum",
    ),
    "all_axes_then_flatten_of_a_scalar_like": (
        """
        g (float[N, 3] x) => (float[1, 1] y) {
            m = ReduceMax(x)
            y = Flatten<axis = 0>(m)
        }
        """,
        18,
        None,  # [1, 1] is not the reduced shape without its axes ([]): declines
    ),
}


@pytest.mark.parametrize("case", [k for k, v in FIRES.items() if v[2] is not None])
def test_reduce_absorbs_the_reshape(case):
    body, opset, op = FIRES[case]
    m = model(body, opset=opset)
    before = proto(m)
    rewrite = ReduceDropsKeptAxesPass(analyze(m))
    rewrite(m)
    cleanup(m)
    assert rewrite.fired == {"reduce_drops_kept_axes": 1}
    assert ops(m) == [op]
    reduce = next(n for n in m.graph if n.op_type == op)
    assert reduce.attributes["keepdims"].as_int() == 0
    # N == 0 for the global pool too: ReduceMean over non-empty axes of an empty batch.
    sizes = SIZES if op == "ReduceMean" else SIZES[1:]
    assert_equivalent(before, m, sizes)


DECLINES = {
    "keeps a 1 the reshape does not drop": (
        FIRES["all_axes_then_flatten_of_a_scalar_like"][0],
        18,
        "the reshape does not only drop the reduced axes",
    ),
    "reshape also merges kept axes": (
        """
        g (float[N, 8, 5, 6] x) => (float[N, 40] y) {
            axes = Constant<value = int64[1] {3}>()
            m = ReduceMean(x, axes)
            s = Constant<value = int64[2] {-1, 40}>()
            y = Reshape(m, s)
        }
        """,
        18,
        "the reshape does not only drop the reduced axes",
    ),
    "axes computed at run time": (
        """
        g (float[N, 8, 5] x, int64[1] axes) => (float[?, ?] y) {
            m = ReduceMean(x, axes)
            s = Constant<value = int64[2] {-1, 5}>()
            y = Reshape(m, s)
        }
        """,
        18,
        "the axes are not proven constant",
    ),
    "empty axes are a no-op": (
        """
        g (float[N, 8] x) => (float[N, 8] y) {
            m = ReduceMean<noop_with_empty_axes = 1>(x)
            s = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(m, s)
        }
        """,
        18,
        "empty axes with noop_with_empty_axes",
    ),
    "the reduction has another use": (
        """
        g (float[N, 8, 5] x) => (float[N, 8] y, float[N, 8, 1] m) {
            axes = Constant<value = int64[1] {2}>()
            m = ReduceMean(x, axes)
            s = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(m, s)
        }
        """,
        18,
        "the reduction has other uses or is a graph output",
    ),
}


@pytest.mark.parametrize("case", list(DECLINES))
def test_reduce_declines_with_reason(case):
    body, opset, reason = DECLINES[case]
    m = model(body, opset=opset)
    rewrite = ReduceDropsKeptAxesPass(analyze(m))
    rewrite(m)
    assert not rewrite.fired
    assert reason in rewrite.declined


def test_a_reshape_that_reorders_the_kept_dims_declines():
    """``[4, 8, 1, 1] -> [8, 4]``: as many dims as the reduction keeps, not the same ones
    (found by a mutation audit: no test compared the kept dims themselves)."""
    body = """
        g (float[4, 8, 5, 6] x) => (float[8, 4] y) {
            axes = Constant<value = int64[2] {2, 3}>()
            m = ReduceMean<keepdims = 1>(x, axes)
            s = Constant<value = int64[2] {8, 4}>()
            y = Reshape(m, s)
        }
    """
    before, m, rewrite = apply_pass(ReduceDropsKeptAxesPass, body)
    assert not rewrite.fired
    assert rewrite.declined["the reshape does not only drop the reduced axes"] == 1
    assert_equivalent(before, m, [{}])
