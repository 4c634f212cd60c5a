"""Upper bounds from every producer: recorded, true at runtime, and renamed by the pass.

The hooks producing bounds are written elsewhere; a case runs once its op has a hook.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from onnx_symdims import expr
from onnx_symdims.ops import _registry
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.passes._anchors import AnchorConstraintPropagationPass
from tests.constraints._util import (
    all_values,
    build,
    check_against_runtime,
    make_feeds,
    runtime_shapes,
)

d = expr.parse_dim


@dataclasses.dataclass
class BoundCase:
    id: str
    op: str
    text: str  # the data-dependent output dim is declared "?"
    output: str
    axis: int
    allowed: tuple[str, ...] | None  # acceptable bounds (None: any bound that holds)
    draw: Callable[[np.random.Generator], dict[str, int]]
    data: Callable | None = None


def _ranges(**ranges):
    return lambda rng: {k: int(rng.integers(lo, hi + 1)) for k, (lo, hi) in ranges.items()}


def _compress_data(rng, b):
    return {"cond": rng.random(b["C"]) < 0.5}


def _topk_data(rng, b):
    return {"k": np.array([rng.integers(0, b["B"] + 1)], dtype=np.int64)}


def _nms_data(rng, b):
    boxes = rng.random((b["nb"], b["nbox"], 4)).astype(np.float32)
    scores = rng.random((b["nb"], b["nc"], b["nbox"])).astype(np.float32)
    return {"boxes": boxes, "scores": scores, "mo": np.array([2], dtype=np.int64)}


def _cond_data(value):
    return lambda rng, b: {"cond": np.array(value)}


BOUND_CASES = [
    BoundCase(
        "NonZero", "NonZero",
        "g (float[A, B] X) => (int64[2, ?] Y) { Y = NonZero(X) }",
        "Y", 1, ("A*B",), _ranges(A=(0, 3), B=(1, 3)),
    ),
    BoundCase(
        "NonZero-static", "NonZero",
        "g (float[3, 4] X) => (int64[2, ?] Y) { Y = NonZero(X) }",
        "Y", 1, ("12",), _ranges(),
    ),
    BoundCase(
        "Compress-axis", "Compress",
        "g (float[A, B] X, bool[C] cond) => (float[A, ?] Y) { Y = Compress <axis = 1> (X, cond) }",
        "Y", 1, ("B", "min(B,C)"), _ranges(A=(1, 3), B=(2, 4), C=(0, 2)), _compress_data,
    ),
    BoundCase(
        "Compress-flat", "Compress",
        "g (float[A, B] X, bool[C] cond) => (float[?] Y) { Y = Compress (X, cond) }",
        "Y", 0, ("A*B", "min(A*B,C)"), _ranges(A=(1, 3), B=(1, 3), C=(0, 1)), _compress_data,
    ),
    BoundCase(
        "TopK-runtime-k", "TopK",
        "g (float[A, B] X, int64[1] k) => (float[A, ?] V, int64[A, ?] I) { V, I = TopK(X, k) }",
        "V", 1, ("B",), _ranges(A=(1, 3), B=(1, 4)), _topk_data,
    ),
    BoundCase(
        "Unique", "Unique",
        "g (float[A, B] X) => (float[?] Y) { Y = Unique(X) }",
        "Y", 0, ("A*B",), _ranges(A=(0, 3), B=(1, 3)),
    ),
    BoundCase(
        "NonMaxSuppression", "NonMaxSuppression",
        "g (float[nb, nbox, 4] boxes, float[nb, nc, nbox] scores, int64[1] mo)"
        " => (int64[?, 3] sel) { sel = NonMaxSuppression(boxes, scores, mo) }",
        "sel", 0, None, _ranges(nb=(1, 2), nbox=(1, 4), nc=(1, 2)), _nms_data,
    ),
    BoundCase(
        "If-differing-dims", "If",
        """g (bool cond, float[A] X, float[B] Y) => (float[?] Z) {
  Z = If(cond) <
    then_branch = t () => (float[A] t_out) { t_out = Identity(X) },
    else_branch = e () => (float[B] e_out) { e_out = Identity(Y) }
  >
}""",
        "Z", 0, ("max(A,B)",), _ranges(A=(0, 3), B=(0, 3)), _cond_data(False),
    ),
    BoundCase(
        "Loop-scan-trip-count", "Loop",
        """g (float[A] X, bool cond) => (float[A] fin, float[?, A] scan) {
  trip = Constant <value = int64 {5}> ()
  fin, scan = Loop(trip, cond, X) <
    body = b (int64 i, bool c_in, float[A] acc) => (bool c_out, float[A] acc_out, float[A] sc) {
      c_out = Identity(c_in)
      acc_out = Identity(acc)
      sc = Identity(acc)
    }
  >
}""",
        "scan", 0, ("5",), _ranges(A=(0, 3)), _cond_data(True),
    ),
]  # fmt: skip


def _skip_without_hook(case: BoundCase) -> None:
    if _registry.lookup("", case.op, 21) is None:
        pytest.skip(f"no shape hook for {case.op} yet")


def _bound_of(ctx, dim):
    return [rhs for lhs, rhs in ctx.less_equal_constraint_dims() if lhs is dim]


@pytest.mark.parametrize("case", BOUND_CASES, ids=lambda c: c.id)
def test_bound_recorded_and_true_at_runtime(case: BoundCase):
    _skip_without_hook(case)
    model = build(case.text)
    ctx = SymbolicShapeInferencePass()(model).context
    dim = ctx.shape_of(all_values(model)[case.output])[case.axis]
    assert isinstance(dim, expr.DimExpr) and ctx.is_generated(dim.name)
    bounds = _bound_of(ctx, dim)
    assert bounds, ctx.less_equal_constraints()
    if case.allowed is not None:
        assert any(expr.to_onnx(b) in case.allowed or b in case.allowed for b in bounds), (
            bounds
        )
    rng = np.random.default_rng(0)
    for _ in range(5):
        bindings = case.draw(rng)
        data = case.data(rng, bindings) if case.data else None
        actual = runtime_shapes(model, make_feeds(model, bindings, rng, data))
        known = check_against_runtime(model, actual)
        size = actual[case.output][case.axis]
        for bound in bounds:
            assert size <= expr.evaluate(bound, known), (expr.to_onnx(bound), size, known)


@pytest.mark.parametrize("case", BOUND_CASES, ids=lambda c: c.id)
def test_bound_renamed_with_its_symbol(case: BoundCase):
    _skip_without_hook(case)
    model = build(case.text)
    output = all_values(model)[case.output]
    dims = [x if isinstance(x, int) else x.value for x in output.shape.dims]
    dims[case.axis] = "K"
    output.shape = type(output.shape)(dims)
    ctx = SymbolicShapeInferencePass()(model).context
    minted = [
        lhs for lhs, _ in ctx.less_equal_constraint_dims() if isinstance(lhs, expr.DimExpr)
    ]
    before = {expr.to_onnx(lhs) for lhs in minted}
    result = AnchorConstraintPropagationPass(ctx)(model)
    renamed = {key for key in result.renames if key in before}
    assert renamed, (result.renames, ctx.less_equal_constraints())
    lhs_after = {lhs for lhs, _ in ctx.less_equal_constraints()}
    assert "K" in lhs_after
    assert not renamed & lhs_after
