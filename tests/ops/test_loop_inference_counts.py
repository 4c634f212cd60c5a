"""How many times Loop/Scan bodies are inferred, and that the fewer inferences infer the same.

A body is inferred once when its carried shapes do not change (the attempt is kept). When
they do, the round that reaches the fixed point is kept as the final inference when the
body's declared shapes changed nothing in it (``ShapesContext.declarations_used`` did not
move); otherwise probes drop the declarations and a final inference follows, as before.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.ops.control_flow import body_values
from onnx_symdims.passes import _inference
from onnx_symdims.shapes import ShapesContext, merge_declared_shape
from onnx_symdims.shapes._convert import IRDimWriter
from tests.ops._no_iteration import runtime_choice_without_iterations
from tests.ops._ort_oracle import check_runs, infer_graph


@pytest.fixture
def inferences(monkeypatch) -> collections.Counter:
    """Counts the inferences of each subgraph, by graph name."""
    counts: collections.Counter = collections.Counter()
    original = _inference.InferenceEngine.infer_subgraph

    def counting(self, graph, *args, **kwargs):
        counts[graph.name] += 1
        return original(self, graph, *args, **kwargs)

    monkeypatch.setattr(_inference.InferenceEngine, "infer_subgraph", counting)
    return counts


def _every_declaration_used(monkeypatch) -> None:
    """Makes every merge with a declared shape count as used: the probe-and-final path."""
    original = _inference.merge_declared_shape

    def merge(ctx, *args, **kwargs):
        merged = original(ctx, *args, **kwargs)
        ctx.declarations_used += 1
        return merged

    monkeypatch.setattr(_inference, "merge_declared_shape", merge)
    # Every declared shape goes through the merge (not the commit's fast path for one
    # the merge would only fill or keep).
    monkeypatch.setattr(_inference, "_declared_written", lambda *args: None)


def _annotations(result) -> list[tuple[str, str, str]]:
    """Every value of the model (bodies included) with its written type and shape."""
    return [(v.name, str(v.type), str(v.shape)) for v in body_values(result.model.graph)]


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def i64(v: int) -> np.ndarray:
    return np.array(v, np.int64)


# Grows by L columns per iteration, L iterations; the body declares shapes on every value,
# none of which says more than inference finds (B, or nothing).
GROWING_DECLARED = """
g (float[B, N] x, float[B, L] w) => (xf, ys) {
  s = Shape(w)
  one = Constant<value = int64 {1}>()
  M = Gather<axis=0>(s, one)
  xf, ys = Loop(M, , x) <body = body(int64 i, bool c, float[B, N] xin)
      => (bool co, float[B, ?] xo, float[B] yo) <float[B, ?] t, int64[1] ax> {
     co = Constant<value = bool {1}>()
     t = Relu(w)
     xo = Concat<axis=1>(xin, t)
     ax = Constant<value = int64[1] {1}>()
     yo = ReduceSum<keepdims=0>(xo, ax)
  }>
}
"""


def test_invariant_loop_body_is_inferred_once(inferences):
    result = infer_graph("""
g (int64 M, float[B, N] x) => (xf) {
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, float[B, N] xo) {
     co = Constant<value = bool {1}>()
     xo = Relu(xin)
  }>
}
""")
    assert result.shape("xf") == ["B", "N"]
    assert inferences == {"body": 1}


def test_growing_loop_is_inferred_twice_and_exact_against_onnxruntime(inferences):
    result = infer_graph(GROWING_DECLARED)
    # The attempt (first-iteration shapes, changed), then the widened round, kept.
    assert inferences == {"body": 2}
    b, grown = result.dims("xf")
    assert b == expr.sym("B")
    # L iterations (nothing stops the loop), each adding L columns.
    assert grown == expr.sym("N") + expr.sym("L") * expr.sym("L")
    count, per_iteration = result.dims("ys")  # L, and B unless L is 0
    assert count == expr.sym("L")
    assert runtime_choice_without_iterations(result, per_iteration, expr.sym("B"), count)
    # The body is annotated for every iteration, not with its first one (N+L).
    body = result.value("xf").producer().attributes["body"].value
    _, xo_dim = body.outputs[1].shape.dims
    carried = expr.sub(expr.parse_dim(xo_dim.value), expr.sym("L"))
    assert isinstance(carried, expr.DimExpr) and carried.is_symbol
    assert carried != expr.sym("N")
    assert result.errors == [] and result.warnings == []
    check_runs(
        result,
        [{"x": f32(b, n), "w": f32(b, k)} for b in (1, 2) for n in (0, 3) for k in (0, 1, 3)],
    )


def test_kept_round_infers_what_probes_and_a_final_inference_infer(monkeypatch, inferences):
    kept = infer_graph(GROWING_DECLARED)
    assert inferences == {"body": 2}
    inferences.clear()
    _every_declaration_used(monkeypatch)
    probed = infer_graph(GROWING_DECLARED)
    assert inferences == {"body": 3}  # attempt, probe, final
    assert _annotations(kept) == _annotations(probed)
    assert kept.shape("xf") == probed.shape("xf")
    assert kept.shape("ys") == probed.shape("ys")


def test_declaration_that_changes_something_takes_probes_and_a_final_inference(inferences):
    # K replaces the symbol NonZero mints: the declaration changes the facts downstream,
    # so a body inferred with it is not the probe (which drops it).
    result = infer_graph("""
g (float[N] x) => (xf) {
  xf = Loop(, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) <int64[1, K] nz> {
     co = Constant<value = bool {1}>()
     minus1 = Constant<value = int64[1] {-1}>()
     nz = NonZero(xin)
     flat = Reshape(nz, minus1)
     flatf = Cast<to=1>(flat)
     xo = Concat<axis=0>(xin, flatf)
  }>
}
""")
    assert inferences == {"body": 3}  # attempt, probe, final: no round wasted
    (final,) = result.dims("xf")
    assert isinstance(final, expr.DimExpr) and final.is_symbol


def test_dim_changing_after_widening_takes_one_more_round(inferences):
    result = infer_graph("""
g (int64 M, float[3] a, float[3] b) => (af, bf) {
  af, bf = Loop(M, , a, b) <body = body(int64 i, bool c, ain, bin) => (bool co, ao, bo) {
     co = Constant<value = bool {1}>()
     one = Constant<value = float[1] {1}>()
     ao = Identity(bin)
     bo = Concat<axis=0>(bin, one)
  }>
}
""")
    assert inferences == {"body": 3}  # attempt, a round widening a too, the kept round
    check_runs(result, [{"M": i64(m), "a": f32(3), "b": f32(3)} for m in (0, 1, 2, 4)])


def test_nested_loop_bodies_are_inferred_twice_per_outer_inference(inferences):
    result = infer_graph("""
g (int64 M, float[N] x) => (xf) {
  t = Constant<value = bool {1}>()
  xf = Loop(M, t, x) <body = outer(int64 i, bool c, float[N] xin) => (bool co, xo) {
     co = Identity(c)
     two = Constant<value = int64 {2}>()
     xo = Loop(two, , xin) <body = inner(int64 j, bool d, zin) => (bool do, zo) {
        do = Constant<value = bool {1}>()
        one = Constant<value = float[1] {1}>()
        zo = Concat<axis=0>(zin, one)
     }>
  }>
}
""")
    # Outer: attempt and kept round; inner, in each: attempt and kept round (was 3 x 3).
    assert inferences == {"outer": 2, "inner": 4}
    check_runs(result, [{"M": i64(m), "x": f32(n)} for m in (0, 1, 2) for n in (0, 2)])


def test_if_in_a_growing_loop_is_inferred_once_per_body_inference(inferences):
    result = infer_graph("""
g (int64 M, float[N] x) => (xf) {
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Constant<value = bool {1}>()
     two = Constant<value = int64 {2}>()
     early = Less(i, two)
     xo = If(early) <then_branch = t () => (a) {
                        one = Constant<value = float[1] {1}>()
                        a = Concat<axis=0>(xin, one)
                     },
                     else_branch = e () => (b) { b = Identity(xin) }>
  }>
}
""")
    assert inferences == {"body": 2, "t": 2, "e": 2}
    check_runs(result, [{"M": i64(m), "x": f32(n)} for m in (0, 1, 3) for n in (0, 2)])


def test_scan_with_growing_state_is_inferred_twice(inferences):
    result = infer_graph("""
g (float[N] s0, float[T, 2] xs) => (sf, ys) {
  sf, ys = Scan<num_scan_inputs=1, body = body(s, float[2] x) => (so, float[2] y) {
     so = Concat<axis=0>(s, x)
     y = Identity(x)
  }>(s0, xs)
}
""")
    assert inferences == {"body": 2}
    assert result.shape("sf") == ["N+2*T"]
    # No onnxruntime run: it preallocates Scan states and rejects a state that changes shape.


def _merge_uses(declared, inferred, *, policy="refine", anchor=False, minted=()) -> int:
    """How much ``declarations_used`` moves for one merge (dims: ints, texts, ``None``)."""
    ctx = ShapesContext()
    fresh = {name: ctx.new_symbol(name) for name in minted}
    dims = None
    if inferred is not None:
        dims = tuple(
            d if isinstance(d, int) else fresh.get(d) or expr.parse_dim(d) for d in inferred
        )
    before = ctx.declarations_used
    merge_declared_shape(
        ctx, IRDimWriter(), dims, ir.Shape(declared), policy=policy, anchor=anchor, hint="v"
    )
    return ctx.declarations_used - before


@pytest.mark.parametrize(
    ("declared", "inferred", "options", "used"),
    [
        ([None, "N"], ["B", "N"], {}, 0),  # nothing declared, and the same dim
        ([4, -1], [4, "N"], {}, 0),  # the same int; -1 declares nothing
        (["N"], ["N"], {"anchor": True}, 0),
        (["4"], [4], {"anchor": True}, 1),  # the text stays where the int is inferred
        (["K"], ["m"], {"minted": ["m"]}, 1),  # replaces a minted symbol downstream
        ([4], ["m"], {"minted": ["m"]}, 1),
        ([3], [4], {}, 1),  # a conflict (a diagnostic)
        (["N"], ["N+1"], {}, 1),
        ([None], ["N"], {"policy": "skip"}, 1),  # nothing written over it
        ([3], [4], {"policy": "override"}, 0),  # the inferred shape, written
        ([None, None], ["N"], {}, 1),  # rank
        ([None], None, {}, 1),  # the declared rank is all that is known
    ],
)
def test_declarations_used_counts_merges_that_change_something(
    declared, inferred, options, used
):
    assert _merge_uses(declared, inferred, **options) == used
