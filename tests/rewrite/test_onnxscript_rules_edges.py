"""onnxscript's default rules that ``optimize`` keeps, on inputs where their premise barely fails.

Each graph is optimized by the whole pipeline and run before and after in onnxruntime
(graph optimizations off) with NaN, infinities and signed zeros among the inputs; the
outputs must stay identical. Found by hand: ``ScatterAllStatic`` replaced a
``ScatterND`` whose indices cover the whole tensor by its updates whatever its
``reduction``, and ``ScatterND(x, [[0], …, [n-1]], u, reduction="add")`` is ``x + u``,
not ``u``.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import optimize
from tests.rewrite._rewrite_testing import model, proto, run

SPECIAL = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -1.5, 3.0, 0.25], np.float32)


def _optimized(m: ir.Model) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return proto(optimize(m))


def _assert_same(before: onnx.ModelProto, after: onnx.ModelProto, feeds: dict) -> None:
    for a, e in zip(run(after, feeds), run(before, feeds), strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_covering_every_row_with_a_reduction_is_kept(reduction):
    m = model(
        f"""g (float[4, 3] x, float[4, 3] u) => (float[4, 3] y) {{
            i = Constant<value = int64[4, 1] {{0, 1, 2, 3}}>()
            y = ScatterND<reduction = "{reduction}">(x, i, u)
        }}"""
    )
    before = proto(m)
    after = _optimized(m)
    assert [n.op_type for n in after.graph.node] == ["ScatterND"]
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((4, 3)).astype(np.float32) for k in ("x", "u")}
    _assert_same(before, after, feeds)


def test_scatter_nd_covering_every_row_without_reduction_is_its_updates():
    m = model(
        """g (float[4, 3] x, float[4, 3] u) => (float[4, 3] y) {
            i = Constant<value = int64[4, 1] {0, 1, 2, 3}>()
            y = ScatterND(x, i, u)
        }"""
    )
    after = _optimized(m)
    assert [n.op_type for n in after.graph.node if n.op_type != "Identity"] == []


#: (name, body over x: float[N]): the premise of an onnxscript rule barely fails.
EDGES = [
    # Max(Min(x, hi), lo) with lo > hi is lo everywhere; Clip(x, lo, hi) would give hi
    ("max_of_min_inverted", "a = Min(x, hi)\n y = Max(a, lo)", -1.0, 1.0),
    ("min_of_max_inverted", "a = Max(x, lo)\n y = Min(a, hi)", -1.0, 1.0),
    ("max_of_min", "a = Min(x, hi)\n y = Max(a, lo)", 1.0, -1.0),
    ("min_of_max", "a = Max(x, lo)\n y = Min(a, hi)", 1.0, -1.0),
    ("min_of_min", "a = Min(x, hi)\n y = Min(a, lo)", -1.0, 1.0),
    ("clip_of_relu_inverted", "a = Relu(x)\n y = Clip(a, lo, hi)", -0.5, -1.0),
    ("clip_of_relu", "a = Relu(x)\n y = Clip(a, lo, hi)", 1.0, -1.0),
]


@pytest.mark.parametrize(("name", "body", "hi", "lo"), EDGES, ids=[e[0] for e in EDGES])
def test_min_max_clip_fusions_keep_outputs_on_nan_inf_and_inverted_bounds(name, body, hi, lo):
    m = model(
        f"""g (float[N] x) => (float[N] y) {{
            hi = Constant<value = float {{{hi}}}>()
            lo = Constant<value = float {{{lo}}}>()
            {body}
        }}"""
    )
    before = proto(m)
    after = _optimized(m)
    for n in (0, 1, len(SPECIAL)):
        _assert_same(before, after, {"x": SPECIAL[:n]})
