"""Tests of the control-flow and function-call hooks (onnxruntime as oracle)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.ops import functions
from onnx_symdims.passes import _inference
from tests.ops._no_iteration import runtime_choice_without_iterations
from tests.ops._ort_oracle import check_against_ort, check_runs, infer, infer_graph


# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------
def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def i64(v: int) -> np.ndarray:
    return np.array(v, np.int64)


# ----------------------------------------------------------------------------------------
# If
# ----------------------------------------------------------------------------------------
IF_DIFFERENT = """
g (bool c, float[N, 4] x) => (y) {
  y = If(c) <then_branch = t () => (float[N, 4] a) { a = Identity(x) },
             else_branch = e () => (b) { b = Concat<axis=0>(x, x) }>
}
"""

IF_EQUAL = """
g (bool c, float[N, 4] x) => (y) {
  y = If(c) <then_branch = t () => (a) { a = Relu(x) },
             else_branch = e () => (b) { b = Neg(x) }>
}
"""

IF_INTS = """
g (bool c) => (y) {
  y = If(c) <then_branch = t () => (a) { a = Constant<value = float[3] {1, 2, 3}>() },
             else_branch = e () => (b) { b = Constant<value = float[5] {1, 2, 3, 4, 5}>() }>
}
"""

IF_RANKS = """
g (bool c, float[N, 4] x) => (y) {
  y = If(c) <then_branch = t () => (a) { a = Identity(x) },
             else_branch = e () => (b) {
                 m = Constant<value = int64[1] {-1}>()
                 b = Reshape(x, m)
             }>
}
"""


@pytest.mark.parametrize(
    ("text", "expected", "bound"),
    [
        (IF_DIFFERENT, ["If_y_d0", 4], ("If_y_d0", "2*N")),
        (IF_EQUAL, ["N", 4], None),
        (IF_INTS, ["If_y_d0"], ("If_y_d0", "5")),
        (IF_RANKS, None, None),
    ],
    ids=["different", "equal", "ints", "ranks"],
)
def test_if_merges_branches(text, expected, bound):
    result = infer_graph(text)
    assert result.shape("y") == expected
    if bound is not None:
        assert result.bounds() == {bound[0]: bound[1]}
    else:
        assert result.bounds() == {}
    inputs = {v.name for v in result.model.graph.inputs}
    feeds = [
        {k: v for k, v in {"c": np.array(c), "x": f32(n, 4)}.items() if k in inputs}
        for c in (True, False)
        for n in (0, 3)
    ]
    check_runs(result, feeds)


@pytest.mark.parametrize(("flag", "expected"), [("1", ["N", 4]), ("0", ["2*N", 4])])
def test_if_constant_condition_takes_branch(flag, expected):
    text = IF_DIFFERENT.replace("(bool c, ", "(").replace(
        "y = If(c)", f"c = Constant<value = bool {{{flag}}}>()\n  y = If(c)"
    )
    result = infer_graph(text)
    assert result.shape("y") == expected
    assert result.bounds() == {}
    check_runs(result, [{"x": f32(n, 4)} for n in (0, 2)])


def test_if_value_as_shape_when_branches_agree():
    result = infer_graph("""
g (bool c, float[N, 4] x) => (y, z) {
  s = Shape(x)
  y = If(c) <then_branch = t () => (a) { a = Identity(s) },
             else_branch = e () => (b) { b = Shape(x) }>
  z = Reshape(x, y)
}
""")
    value = result.context.value_of(result.value("y"))
    assert [expr.to_onnx(e) if not isinstance(e, int) else e for e in value] == ["N", 4]
    assert result.shape("z") == ["N", 4]
    check_runs(result, [{"c": np.array(c), "x": f32(3, 4)} for c in (True, False)])


def test_if_value_as_shape_partial_when_branches_differ():
    result = infer_graph("""
g (bool c, float[N, 4] x) => (y) {
  s = Shape(x)
  k = Constant<value = int64[2] {7, 4}>()
  y = If(c) <then_branch = t () => (a) { a = Identity(s) },
             else_branch = e () => (b) { b = Identity(k) }>
}
""")
    value = result.context.value_of(result.value("y"))
    assert value is not None and value[1] == 4
    assert isinstance(value[0], expr.DimExpr) and value[0].is_unknown


def test_if_branch_sees_outer_scope_and_mints_bounded_symbol():
    result = infer_graph("""
g (bool c, float[N] x) => (y) {
  y = If(c) <then_branch = t () => (a) { a = NonZero(x) },
             else_branch = e () => (b) { b = Constant<value = int64[1, 2] {0, 0}>() }>
}
""")
    shape = result.dims("y")
    assert shape is not None and shape[0] == 1
    assert isinstance(shape[1], expr.DimExpr) and shape[1].is_symbol
    feeds = [
        {"c": np.array(c), "x": np.array(v, np.float32)}
        for c in (True, False)
        for v in ([0, 1, 2], [], [3, 0])
    ]
    check_runs(result, feeds)


# ----------------------------------------------------------------------------------------
# Loop
# ----------------------------------------------------------------------------------------
LOOP_EARLY_EXIT = """
g (int64 M, float[N] x) => (ys, xf) {
  xf, ys = Loop(M, , x) <body = body(int64 i, bool c, float[N] xin) => (bool co, float[N] xo, yo) {
     two = Constant<value = int64 {2}>()
     co = Less(i, two)
     xo = Identity(xin)
     yo = Identity(xin)
  }>
}
"""


def test_loop_early_exit_count_is_never_the_trip_count():
    result = infer_graph(LOOP_EARLY_EXIT)
    count, per_iteration = result.dims("ys")
    assert isinstance(count, expr.DimExpr) and count.is_symbol
    assert result.context.is_generated(count.name)
    assert result.shape("xf") == ["N"]
    # The loop may run zero times (M <= 0), when the dim is the runtime's choice.
    assert runtime_choice_without_iterations(result, per_iteration, expr.sym("N"), count)
    feeds = [{"M": i64(m), "x": f32(n)} for m in (10, 2, 0, -1) for n in (0, 3)]
    check_runs(result, feeds)


def test_loop_stopped_by_its_index_with_constant_trip_count_is_exact():
    text = LOOP_EARLY_EXIT.replace("(int64 M, ", "(").replace(
        "xf, ys = Loop", "M = Constant<value = int64 {10}>()\n  xf, ys = Loop"
    )
    result = infer_graph(text)
    count, per_iteration = result.dims("ys")
    # i < 2 is false first at i = 2: iterations 0, 1 and 2 run (of at most 10).
    assert count == 3
    assert per_iteration == expr.sym("N")
    check_runs(result, [{"x": f32(n)} for n in (0, 3)])


@pytest.mark.parametrize(
    ("condition", "runs"),
    [
        ("co = Less(i, c)", "min(C+1,M)"),
        (
            "one = Constant<value = int64 {1}>()\n     n = Add(i, one)\n     co = Less(n, c)",
            "min(max(C-1,0)+1,M)",
        ),
        (
            "one = Constant<value = int64 {1}>()\n     n = Add(one, i)\n     co = Greater(c, n)",
            "min(max(C-1,0)+1,M)",
        ),
    ],
    ids=["less", "index_plus_one", "greater"],
)
def test_loop_stopped_by_its_index_against_an_outer_size_is_exact(condition, runs):
    """``for i in range(M): ...; if i + 1 >= c: break`` with ``c`` a size: ``min(M, c)``."""
    result = infer_graph(f"""
g (float[N] x, float[M] w, float[C] v) => (ys) {{
  sw = Shape(w)
  sv = Shape(v)
  zero = Constant<value = int64 {{0}}>()
  M = Gather<axis=0>(sw, zero)
  c = Gather<axis=0>(sv, zero)
  ys = Loop(M, , ) <body = body(int64 i, bool cin) => (bool co, yo) {{
     {condition}
     yo = Identity(x)
  }}>
}}
""")
    count, _ = result.dims("ys")
    assert expr.to_onnx(count) == runs
    sizes = [(n, m, k) for n in (0, 3) for m in (0, 1, 4) for k in (0, 1, 2, 6)]
    check_runs(result, [{"x": f32(n), "w": f32(m), "v": f32(k)} for n, m, k in sizes])


def test_loop_stopped_by_a_value_the_body_changes_is_not_counted():
    # The bound is a carried value: it may change between iterations, the count is fresh.
    result = infer_graph("""
g (float[N] x, int64 b) => (bf, ys) {
  t = Constant<value = bool {1}>()
  bf, ys = Loop(, t, b) <body = body(int64 i, bool cin, int64 bin) => (bool co, int64 bo, yo) {
     one = Constant<value = int64 {1}>()
     bo = Sub(bin, one)
     co = Less(i, bin)
     yo = Identity(x)
  }>
}
""")
    count, _ = result.dims("ys")
    assert isinstance(count, expr.DimExpr) and result.context.is_generated(count.name)
    check_runs(result, [{"x": f32(n), "b": i64(k)} for n in (0, 3) for k in (0, 1, 4)])


LOOP_FOR = """
g (float[N] x) => (ys, xf) {
  M = Constant<value = int64 {TRIP}>()
  t = Constant<value = bool {1}>()
  xf, ys = Loop(M, t, x) <body = body(int64 i, bool c, float[N] xin) => (bool co, float[N] xo, yo) {
     co = Identity(c)
     xo = Relu(xin)
     yo = Unsqueeze(xin, zero)
     zero = Constant<value = int64[1] {0}>()
  }>
}
"""


@pytest.mark.parametrize(
    ("trip", "expected"), [(3, [3, 1, "N"]), (0, [0, 1, None]), (-2, [0, 1, None])]
)
def test_loop_without_exit_runs_exactly_the_trip_count(trip, expected):
    text = LOOP_FOR.replace("TRIP", str(trip)).replace(
        "yo = Unsqueeze(xin, zero)\n     zero = Constant<value = int64[1] {0}>()",
        "zero = Constant<value = int64[1] {0}>()\n     yo = Unsqueeze(xin, zero)",
    )
    result = infer_graph(text)
    if expected[2] is None:  # no iteration: the runtime's choice, a fresh symbol
        assert result.shape("ys")[:2] == expected[:2]
        assert result.context.is_generated(result.shape("ys")[2])
    else:
        assert result.shape("ys") == expected
    assert result.shape("xf") == ["N"]
    check_runs(result, [{"x": f32(n)} for n in (0, 4)])


def test_loop_trip_count_from_shape_value_is_exact():
    result = infer_graph("""
g (float[N] x, float[K] w) => (ys) {
  s = Shape(w)
  zero = Constant<value = int64 {0}>()
  M = Gather<axis=0>(s, zero)
  ys = Loop(M, , ) <body = body(int64 i, bool c) => (bool co, yo) {
     co = Constant<value = bool {1}>()
     yo = Identity(x)
  }>
}
""")
    count, per_iteration = result.dims("ys")
    assert count == expr.sym("K")
    assert runtime_choice_without_iterations(result, per_iteration, expr.sym("N"), count)
    check_runs(result, [{"x": f32(n), "w": f32(k)} for n in (0, 3) for k in (0, 1, 4)])


LOOP_GROWING = """
g (int64 M, float[N] x) => (xf, ys) {
  t = Constant<value = bool {1}>()
  xf, ys = Loop(M, t, x) <body = body(int64 i, bool c, float[N] xin) => (bool co, xo, yo) {
     co = Identity(c)
     one = Constant<value = float[1] {1}>()
     xo = Concat<axis=0>(xin, one)
     yo = Shape(xin)
  }>
}
"""


def test_loop_growing_carried_value_is_not_its_first_iteration_shape():
    result = infer_graph(LOOP_GROWING)
    (final,) = result.dims("xf")
    count, _ = result.dims("ys")
    # One element per iteration, and the same count symbol as the scan output's.
    assert isinstance(count, expr.DimExpr) and count.is_symbol
    assert final == expr.sym("N") + count
    # The body itself is annotated with the generalised size, not N then N+1.
    body = result.value("xf").producer().attributes["body"].value
    (grown,) = body.outputs[1].shape.dims
    assert grown.value != "N+1" and grown.value.endswith("+1")
    check_runs(result, [{"M": i64(m), "x": f32(n)} for m in (0, 1, 3) for n in (0, 2)])


def test_loop_carried_dim_that_changes_only_after_widening():
    # a looks invariant on the first probe (3 == 3) but becomes b's size afterwards.
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
    (a_final,) = result.dims("af")
    (b_final,) = result.dims("bf")
    assert isinstance(a_final, expr.DimExpr) and isinstance(b_final, expr.DimExpr)
    check_runs(result, [{"M": i64(m), "a": f32(3), "b": f32(3)} for m in (0, 1, 2, 4)])


def test_loop_invariant_dims_are_kept_and_probes_leave_no_trace():
    result = infer_graph("""
g (int64 M, float[B, N] x) => (xf) {
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Constant<value = bool {1}>()
     s = Shape(xin)
     xo = Reshape(xin, s)
  }>
}
""")
    assert result.shape("xf") == ["B", "N"]
    assert result.context.constraints() == []
    assert result.messages("error") == []
    check_runs(result, [{"M": i64(2), "x": f32(2, 3)}])


def test_loop_partially_growing_keeps_the_invariant_axis():
    result = infer_graph("""
g (int64 M, float[B, N] x) => (xf) {
  t = Constant<value = bool {1}>()
  xf = Loop(M, t, x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Identity(c)
     xo = Concat<axis=1>(xin, xin)
  }>
}
""")
    b, grown = result.dims("xf")
    assert b == expr.sym("B")
    assert isinstance(grown, expr.DimExpr) and grown not in (expr.sym("N"), 2 * expr.sym("N"))
    check_runs(result, [{"M": i64(m), "x": f32(2, 3)} for m in (0, 1, 3)])


def test_loop_rank_change_gives_unknown_rank():
    result = infer_graph("""
g (int64 M, float[N] x) => (xf) {
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Constant<value = bool {1}>()
     z = Constant<value = int64[1] {0}>()
     xo = Unsqueeze(xin, z)
  }>
}
""")
    assert result.dims("xf") is None


def test_nested_loop_in_loop():
    result = infer_graph("""
g (int64 M, float[N] x) => (xf, ys) {
  t = Constant<value = bool {1}>()
  xf, ys = Loop(M, t, x) <body = outer(int64 i, bool c, float[N] xin) => (bool co, xo, yo) {
     co = Identity(c)
     two = Constant<value = int64 {2}>()
     xo, yo = Loop(two, , xin) <body = inner(int64 j, bool d, zin) => (bool do, zo, wo) {
        do = Constant<value = bool {1}>()
        one = Constant<value = float[1] {1}>()
        zo = Concat<axis=0>(zin, one)
        wo = Shape(zin)
     }>
  }>
}
""")
    (final,) = result.dims("xf")
    # The inner scan output is [2, 1]; the outer count is bounded by nothing (M unknown).
    count, two, one = result.dims("ys")
    assert isinstance(count, expr.DimExpr) and (two, one) == (2, 1)
    # Each outer iteration runs the inner loop twice, adding one element each time.
    assert final == expr.sym("N") + 2 * count
    check_runs(result, [{"M": i64(m), "x": f32(n)} for m in (0, 1, 2) for n in (0, 2)])


# ----------------------------------------------------------------------------------------
# Scan
# ----------------------------------------------------------------------------------------
SCAN = """
g (float[N] s0, float[{xs}] xs) => (sf, ys) {{
  sf, ys = Scan<num_scan_inputs=1{attrs}, body = body(float[N] s, float[N] x) => (float[N] so, y) {{
     so = Add(s, x)
     z = Constant<value = int64[1] {{0}}>()
     y = Unsqueeze(so, z)
  }}>(s0, xs)
}}
"""


@pytest.mark.parametrize(
    ("xs", "attrs", "xs_shape", "expected"),
    [
        ("T, N", "", lambda t, n: (t, n), ["T", 1, "N"]),
        ("N, T", ", scan_input_axes=[1]", lambda t, n: (n, t), ["T", 1, "N"]),
        (
            "N, T",
            ", scan_input_axes=[-1], scan_output_axes=[1]",
            lambda t, n: (n, t),
            [1, "T", "N"],
        ),
        ("T, N", ", scan_output_axes=[-1]", lambda t, n: (t, n), [1, "N", "T"]),
        (
            "T, N",
            ", scan_input_directions=[1], scan_output_axes=[2]",
            lambda t, n: (t, n),
            [1, "N", "T"],
        ),
    ],
    ids=["default", "input_axis", "negative_axes", "negative_output_axis", "reverse"],
)
def test_scan_axes(xs, attrs, xs_shape, expected):
    result = infer_graph(SCAN.format(xs=xs, attrs=attrs))
    assert result.shape("sf") == ["N"]
    assert result.shape("ys") == expected
    check_runs(
        result, [{"s0": f32(n), "xs": f32(*xs_shape(t, n))} for t in (1, 3) for n in (0, 2)]
    )


def test_scan_growing_state():
    result = infer_graph("""
g (float[K] s0, float[T, 2] xs) => (sf, ys) {
  sf, ys = Scan<num_scan_inputs=1, body = body(s, x) => (so, y) {
     so = Concat<axis=0>(s, x)
     y = Identity(x)
  }>(s0, xs)
}
""")
    (final,) = result.dims("sf")
    assert final == expr.sym("K") + 2 * expr.sym("T")
    assert result.shape("ys") == ["T", 2]
    # No onnxruntime run: it preallocates Scan states and rejects a state that changes shape.


def test_scan_opset8_batch_axis():
    result = infer_graph(
        """
g (float[B, N] s0, float[B, T, N] xs) => (sf, ys) {
  sf, ys = Scan<num_scan_inputs=1, body = body(float[N] s, float[N] x) => (float[N] so, y) {
     so = Add(s, x)
     y = Identity(so)
  }>(, s0, xs)
}
""",
        opset=8,
    )
    assert result.shape("sf") == ["B", "N"]
    assert result.shape("ys") == ["B", "T", "N"]
    check_runs(
        result,
        [
            {"s0": f32(b, n), "xs": f32(b, t, n)}
            for b in (1, 2)
            for t in (1, 3)
            for n in (0, 2)
        ],
    )


# ----------------------------------------------------------------------------------------
# Model-local functions (helper for the pass; integrated here by patching the fallback)
# ----------------------------------------------------------------------------------------
FUNCTION_MODEL = """
<ir_version: 10, opset_import: ["" : 21, "local" : 1]>
g (float[B, N] x) => (y, s) {
  y = local.Twice<axis = 1>(x)
  s = local.ShapeOf(y)
}
<domain: "local", opset_import: ["" : 21]>
Twice <axis>(a) => (b) {
  b = Concat<axis: int = @axis>(a, a)
}
<domain: "local", opset_import: ["" : 21]>
ShapeOf (a) => (b) {
  b = Shape(a)
}
"""


def test_function_call_helper(monkeypatch):
    original = _inference.InferenceEngine.fallback

    def fallback(self, node_ctx):
        function = self.model.functions.get(node_ctx.node.op_identifier())
        if function is None:
            original(self, node_ctx)
        else:
            functions.infer_function_call(node_ctx, node_ctx.node, function)

    monkeypatch.setattr(_inference.InferenceEngine, "fallback", fallback)
    result = infer(FUNCTION_MODEL)
    assert result.shape("y") == ["B", "2*N"]
    elements = result.context.value_of(result.value("s"))
    assert [expr.to_onnx(e) for e in elements] == ["B", "2*N"]
    check_runs(result, [{"x": f32(b, n)} for b in (1, 2) for n in (0, 3)])


# ----------------------------------------------------------------------------------------
# Diagnostics
# ----------------------------------------------------------------------------------------
MALFORMED = {
    "if_missing_branch": """
g (bool c) => (y) {
  y = If(c) <then_branch = t () => (a) { a = Constant<value = float {1}>() }>
}
""",
    "loop_body_arity": """
g (int64 M, float[N] x) => (y) {
  y = Loop(M, , x) <body = b(int64 i, bool c) => (bool co) { co = Identity(c) }>
}
""",
    "scan_no_num_scan_inputs": """
g (float[N] s, float[T, N] x) => (y, z) {
  y, z = Scan<body = b(s1, x1) => (a, b) { a = Identity(s1) b = Identity(x1) }>(s, x)
}
""",
    "scan_bad_axis": """
g (float[N] s, float[T, N] x) => (y, z) {
  y, z = Scan<num_scan_inputs=1, scan_input_axes=[2],
              body = b(s1, x1) => (a, b) { a = Identity(s1) b = Identity(x1) }>(s, x)
}
""",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_nodes_give_diagnostics(name):
    result = infer_graph(MALFORMED[name])
    assert result.messages("error"), result.context.diagnostics
    assert all(result.dims(v.name) is None for v in result.model.graph.outputs)


def test_loop_stopped_by_its_index_with_symbolic_trip_count_is_exact():
    result = infer_graph("""
g (float[N] x, float[K] w) => (ys) {
  s = Shape(w)
  zero = Constant<value = int64 {0}>()
  M = Gather<axis=0>(s, zero)
  ys = Loop(M, , ) <body = body(int64 i, bool c) => (bool co, yo) {
     two = Constant<value = int64 {2}>()
     co = Less(i, two)
     yo = Identity(x)
  }>
}
""")
    count, _ = result.dims("ys")
    assert expr.to_onnx(count) == "min(3,K)"  # i < 2 stops it after iteration 2
    check_runs(result, [{"x": f32(n), "w": f32(k)} for n in (0, 3) for k in (0, 1, 5)])


def test_loop_accumulating_a_sequence():
    result = infer_graph("""
g (int64 M, float[N, 2] x) => (acc, stacked, joined, n) {
  s0 = SequenceConstruct(x)
  acc = Loop(M, , s0) <body = body(int64 i, bool c, sin) => (bool co, sout) {
     co = Constant<value = bool {1}>()
     sout = SequenceInsert(sin, x)
  }>
  stacked = ConcatFromSequence<axis=0, new_axis=1>(acc)
  joined = ConcatFromSequence<axis=1>(acc)
  n = SequenceLength(acc)
}
""")
    assert result.shape("acc") == ["N", 2]
    stacked = result.dims("stacked")
    assert stacked[1:] == (expr.sym("N"), 2) and stacked[0] != 1
    assert result.dims("joined")[0] == expr.sym("N")
    assert result.context.value_of(result.value("n")) is None
    check_runs(result, [{"M": i64(m), "x": f32(n, 2)} for m in (0, 2) for n in (0, 3)])


def test_loop_appending_to_an_empty_sequence():
    """A scripted ``for i in range(n): out.append(...)``: the sequence starts empty, each
    iteration inserts one tensor; dims from outside the body hold for every element, the
    length of ``x[:, i:i+1]`` (read per iteration) is left to each element."""
    result = infer_graph("""
g (int64 M, float[B, L, 8] x) => (pieces, rows, joined, means, stacked) {
  e0 = SequenceEmpty<dtype=1>()
  e1 = SequenceEmpty<dtype=1>()
  pieces, rows = Loop(M, , e0, e1) <body = body(int64 i, bool c, p_in, r_in) => (bool co, p_out, r_out) {
     co = Identity(c)
     one = Constant<value = int64[1] {1}>()
     axis = Constant<value = int64[1] {1}>()
     axes = Constant<value = int64[1] {1}>()
     first = Constant<value = int64[1] {0}>()
     start = Unsqueeze(i, first)
     end = Add(start, one)
     piece = Slice(x, start, end, axis)
     p_out = SequenceInsert(p_in, piece)
     mean = ReduceMean<keepdims=0>(x, axes)
     r_out = SequenceInsert(r_in, mean)
  }>
  joined = ConcatFromSequence<axis=1>(pieces)
  means = ConcatFromSequence<axis=0>(rows)
  stacked = ConcatFromSequence<axis=0, new_axis=1>(rows)
}
""")
    pieces = result.dims("pieces")
    assert pieces[0] == expr.sym("B") and pieces[2] == 8 and pieces[1] != expr.sym("L")
    assert isinstance(result.value("pieces").type, ir.SequenceType)
    assert result.shape("rows") == ["B", 8]
    joined = result.dims("joined")
    assert joined[0] == expr.sym("B") and joined[2] == 8
    assert result.dims("means")[1] == 8
    assert result.dims("stacked")[1:] == (expr.sym("B"), 8)
    # ConcatFromSequence of an empty sequence fails: the runs have 1 and 3 iterations.
    check_runs(result, [{"M": i64(m), "x": f32(b, 4, 8)} for m in (1, 3) for b in (1, 2)])


def test_loop_appending_to_an_empty_sequence_with_an_erase_gets_no_element_shape():
    result = infer_graph("""
g (int64 M, float[B, 8] x) => (s) {
  e0 = SequenceEmpty<dtype=1>()
  s = Loop(M, , e0) <body = body(int64 i, bool c, s_in) => (bool co, s_out) {
     co = Identity(c)
     grown = SequenceInsert(s_in, x)
     s_out = SequenceErase(grown)
  }>
}
""")
    assert result.shape("s") is None


LOOP_GROWTH = """
g (float[N] x, float[L] w) => (xf) {
  s = Shape(w)
  zero = Constant<value = int64 {0}>()
  M = Gather<axis=0>(s, zero)
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Constant<value = bool {1}>()
     minus1 = Constant<value = int64[1] {-1}>()
     GROWTH
  }>
}
"""


@pytest.mark.parametrize(
    ("growth", "affine"),
    [
        ("xo = Concat<axis=0>(xin, w)", True),
        ("xo = Concat<axis=0>(xin, xin)", False),
        (
            (
                "nz = NonZero(xin)\n     flat = Reshape(nz, minus1)\n"
                "     flatf = Cast<to=1>(flat)\n     xo = Concat<axis=0>(xin, flatf)"
            ),
            False,
        ),
    ],
    ids=["outer_symbol", "doubling", "data_dependent"],
)
@pytest.mark.parametrize("declared", ["", "<int64[1, K] nz>"], ids=["", "declared_in_body"])
def test_loop_final_size_of_constant_growth(growth, affine, declared):
    # A name the body declares (K) is per iteration, never a loop-invariant growth.
    text = LOOP_GROWTH.replace("GROWTH", growth).replace(
        "(bool co, xo) {", f"(bool co, xo) {declared} {{"
    )
    result = infer_graph(text)
    (final,) = result.dims("xf")
    if affine:  # L iterations (exact: nothing stops the loop), each adding L elements
        assert final == expr.sym("N") + expr.sym("L") * expr.sym("L")
    else:  # growth that depends on the iteration: no closed form
        assert isinstance(final, expr.DimExpr) and final.is_symbol
    feeds = [
        {"x": np.arange(n, dtype=np.float32), "w": f32(k)} for n in (0, 3) for k in (0, 2, 3)
    ]
    check_runs(result, feeds)


def test_loop_with_conditional_growth_in_an_if():
    result = infer_graph("""
g (int64 M, float[N] x) => (xf, ys) {
  xf, ys = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo, yo) {
     co = Constant<value = bool {1}>()
     two = Constant<value = int64 {2}>()
     early = Less(i, two)
     xo = If(early) <then_branch = t () => (a) {
                        one = Constant<value = float[1] {1}>()
                        a = Concat<axis=0>(xin, one)
                     },
                     else_branch = e () => (b) { b = Identity(xin) }>
     yo = Shape(xin)
  }>
}
""")
    (final,) = result.dims("xf")
    assert isinstance(final, expr.DimExpr) and final.is_symbol
    assert result.shape("ys")[1] == 1
    assert result.messages("error") == []
    check_runs(result, [{"M": i64(m), "x": f32(n)} for m in (0, 1, 2, 5) for n in (0, 3)])


def test_scan_inside_loop_body():
    result = infer_graph("""
g (int64 M, float[T, D] xs, float[D] s0) => (sf, ys) {
  sf, ys = Loop(M, , s0) <body = body(int64 i, bool c, sin) => (bool co, sout, yo) {
     co = Constant<value = bool {1}>()
     sout, yo = Scan<num_scan_inputs=1, body = inner(s, x) => (so, y) {
        so = Add(s, x)
        y = Identity(so)
     }>(sin, xs)
  }>
}
""")
    assert result.shape("sf") == ["D"]
    count, t, d = result.dims("ys")
    # M is unknown, so the loop may run zero times (the dims are then the runtime's choice).
    assert runtime_choice_without_iterations(result, t, expr.sym("T"), count)
    assert runtime_choice_without_iterations(result, d, expr.sym("D"), count)
    check_runs(
        result, [{"M": i64(m), "xs": f32(t, 3), "s0": f32(3)} for m in (0, 2) for t in (1, 4)]
    )


RANGE_FUNCTION_MODEL = """
<ir_version: 9, opset_import: ["" : 18, "local" : 1]>
g (float[N, 3] x) => (int64[] y, int64[] z, int64[] w, float[] v) {
  five = Constant<value = int64 {5}>()
  y = local.Upto(five)
  shape = Shape(x)
  zero = Constant<value = int64 {0}>()
  n = Gather<axis = 0>(shape, zero)
  z = local.Upto(n)
  w = local.Same(shape)
  v = Reshape(x, w)
}
<domain: "local", opset_import: ["" : 18]>
Upto (limit) => (r) {
  start = Constant<value = int64 {0}>()
  step = Constant<value = int64 {1}>()
  r = Range(start, limit, step)
}
<domain: "local", opset_import: ["" : 18]>
Same (a) => (b) {
  b = Identity(a)
}
"""


def test_function_body_reads_the_call_inputs_values():
    # A constant (and a shape quantity) passed into a function reaches the Range in
    # its body, as onnx's inference does; a body output that is its input keeps it.
    result = check_against_ort(RANGE_FUNCTION_MODEL, [{"N": 2}, {"N": 0}, {"N": 7}])
    assert result.shape("y") == [5]
    assert result.elements("y") == [0, 1, 2, 3, 4]
    assert result.shape("z") == ["N"]
    assert result.elements("w") == ["N", 3]
    assert result.shape("v") == ["N", 3]


def test_function_call_leaves_no_use_of_the_callers_values():
    result = infer(RANGE_FUNCTION_MODEL)
    five = result.value("five")
    assert [user.op_type for user, _ in five.uses()] == ["Upto"]
    assert {user.op_type for user, _ in result.value("shape").uses()} == {"Gather", "Same"}


def test_function_output_that_is_its_input_keeps_the_value():
    # onnxruntime refuses a function without nodes; onnx's IR allows it.
    text = RANGE_FUNCTION_MODEL.replace("b = Identity(a)", "").replace(
        "(a) => (b)", "(a) => (a)"
    )
    result = infer(text)
    assert result.elements("w") == ["N", 3]
    assert result.shape("v") == ["N", 3]
