"""Edges met by helper-82's soundness hunt (stop 44), kept as regressions.

Each case is a path the hunt drove and found sound but no other test runs: sequences
whose length or elements come from a runtime value, a ``TopK`` size shared through one
``K`` over empty inputs, a sequence that shrinks in a ``Loop``, and ``ConcatFromSequence``
at the ends of its axis range. onnxruntime is the oracle except where it departs from the
spec (said where it does).
"""

from __future__ import annotations

import numpy as np
import onnx.parser
import onnx.reference

from onnx_symdims import expr
from tests.ops._ort_oracle import check_runs, infer_graph, run_ort


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


SPLIT_BY_RUNTIME_SIZES = """
g (float[N, M] x, int64[K] sizes) => (n, first, joined) {
  parts = SplitToSequence<axis=1>(x, sizes)
  n = SequenceLength(parts)
  zero = Constant<value = int64 {0}>()
  first = SequenceAt(parts, zero)
  joined = ConcatFromSequence<axis=1>(parts)
}
"""


def test_split_to_sequence_by_runtime_sizes_has_one_chunk_per_size():
    """``len(split)`` chunks (the spec), the first of a fresh width, rejoined to ``x``.

    onnxruntime departs for an empty ``split``: it splits as without one (``M`` chunks of
    1) where the spec requires the sizes to sum to ``M`` (so only ``M = 0`` is valid,
    with no chunk); the reference evaluator gives no chunk. Those runs are not checked.
    """
    result = infer_graph(SPLIT_BY_RUNTIME_SIZES)
    assert result.elements("n") == ["K"]
    assert result.dims("first")[0] == expr.sym("N")
    assert result.context.is_generated(result.dims("first")[1].name)
    assert result.shape("joined") == ["N", "M"]
    feeds = [{"x": f32(2, 3), "sizes": i64(1, 2)}, {"x": f32(1, 4), "sizes": i64(0, 4)}]
    feeds += [{"x": f32(3, 2), "sizes": i64(2)}, {"x": f32(0, 5), "sizes": i64(3, 0, 2)}]
    check_runs(result, feeds)
    for feed in feeds:
        assert run_ort(result, {}, feed)["n"] == len(feed["sizes"])

    empty = {"x": f32(2, 3), "sizes": i64()}
    assert run_ort(result, {}, empty)["n"] == 3  # onnxruntime: as without split
    length_only = """<ir_version: 10, opset_import: ["" : 21]>
g (float[N, M] x, int64[K] sizes) => (n) {
  parts = SplitToSequence<axis=1>(x, sizes)
  n = SequenceLength(parts)
}"""
    reference = onnx.reference.ReferenceEvaluator(onnx.parser.parse_model(length_only))
    assert reference.run(None, empty)[0] == 0


def test_topk_sharing_one_k_stays_bounded_with_empty_inputs():
    """Both TopK read one ``K``: one symbol bounded by both axes, also where the other
    axis is 0 (onnxruntime checks ``K <= axis`` for an empty input too)."""
    result = infer_graph("""
g (float[N, M] x, float[P] z, int64[1] k) => (v, w) {
  v, i = TopK(x, k)
  w, j = TopK<axis=0>(z, k)
}
""")
    (k,) = result.dims("w")
    assert result.dims("v") == (expr.sym("N"), k)
    assert result.context.is_generated(k.name)
    feeds = [
        {"x": f32(n, m), "z": f32(p), "k": i64(kk)}
        for n, m, p, kk in ((0, 3, 2, 2), (2, 1, 4, 1), (0, 2, 2, 0), (1, 0, 0, 0))
    ]
    check_runs(result, feeds)


def test_loop_erasing_from_a_sequence_keeps_only_the_element_shape():
    """One element fewer per iteration: the elements keep ``[1, K]``, the length and the
    rejoined size are not the split's any more."""
    result = infer_graph("""
g (int64 M, float[N, K] x) => (acc, n, first, joined) {
  s0 = SplitToSequence<axis=0>(x)
  acc = Loop(M, , s0) <body = body(int64 i, bool c, sin) => (bool co, sout) {
     co = Constant<value = bool {1}>()
     sout = SequenceErase(sin)
  }>
  n = SequenceLength(acc)
  zero = Constant<value = int64 {0}>()
  first = SequenceAt(acc, zero)
  joined = ConcatFromSequence<axis=0>(acc)
}
""")
    assert result.shape("acc") == [1, "K"]
    assert result.elements("n") is None
    assert result.shape("first") == [1, "K"]
    rows, cols = result.dims("joined")
    assert result.context.is_generated(rows.name) and cols == expr.sym("K")
    feeds = [{"M": i64(m).reshape(()), "x": f32(n, 2)} for m, n in ((0, 3), (1, 3), (2, 3))]
    check_runs(result, feeds)


def test_concat_from_sequence_axis_range_grows_with_new_axis():
    """``new_axis=1`` takes axes in ``[-r - 1, r]`` for elements of rank ``r``; without it
    ``[-r, r - 1]``; outside them the node is malformed (onnxruntime fails too)."""
    template = """
g (float[N, M] x) => (y) {{
  parts = SplitToSequence<axis=1, keepdims=0>(x)
  y = ConcatFromSequence<axis={axis}, new_axis={new_axis}>(parts)
}}
"""
    expected = {(1, 1): ["N", "M"], (-2, 1): ["M", "N"], (0, 0): ["M*N"], (-1, 0): ["M*N"]}
    for (axis, new_axis), shape in expected.items():
        result = infer_graph(template.format(axis=axis, new_axis=new_axis))
        assert result.shape("y") == shape, (axis, new_axis)
        check_runs(result, [{"x": f32(2, 3)}, {"x": f32(1, 1)}])
    for axis, new_axis in ((2, 1), (-3, 1), (1, 0), (-2, 0)):
        result = infer_graph(template.format(axis=axis, new_axis=new_axis))
        assert result.errors and "out of range" in result.errors[0], (axis, new_axis)
