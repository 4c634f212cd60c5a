"""``AnchorConstraintPropagationPass`` on models whose shapes are set directly."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes._anchors import AnchorConstraintPropagationPass
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext
from tests.constraints._util import all_values, build, copy_model, dims_text, shapes_text

d = expr.parse_dim

NONZERO = """
g (float[A, B] X) => (int64[N, 2] Y) {
  nz = NonZero(X)
  Y = Transpose(nz)
}"""


def _context(*generated: str) -> ShapesContext:
    ctx = ShapesContext()
    for name in generated:
        assert ctx.new_symbol(name).name == name
    return ctx


def _nonzero_model(nnz: str = "g") -> ir.Model:
    return build(NONZERO, {"nz": [2, nnz]})


def test_no_equality_changes_nothing():
    model = _nonzero_model()
    before = shapes_text(model)
    result = AnchorConstraintPropagationPass(_context("g"))(model)
    assert not result.modified
    assert result.renames == {}
    assert shapes_text(model) == before


def test_rename_generated_symbol_and_modified_is_exact():
    model = _nonzero_model()
    ctx = _context("g")
    ctx.add_constraint("g", "N")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert result.modified
    assert result.renames == {"g": "N"}
    assert dims_text(all_values(model)["nz"]) == [2, "N"]
    assert dims_text(model.graph.inputs[0]) == ["A", "B"]
    # a second run has nothing left to change
    again = AnchorConstraintPropagationPass(ctx)(model)
    assert not again.modified


def test_equality_between_declared_names_is_reported_not_applied():
    model = build(NONZERO, {"nz": [2, "g"], "Y": ["N", "M"]})
    ctx = _context("g")
    ctx.add_constraint("g", "N")
    ctx.add_constraint("g", "M")
    ctx.add_constraint("A", "B")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert result.implied_equalities == ["A == B", "M == N"]
    infos = [x.message for x in result.diagnostics if x.severity == "info"]
    assert any("M == N" in m for m in infos)
    assert dims_text(model.graph.outputs[0]) == ["N", "M"]
    assert dims_text(model.graph.inputs[0]) == ["A", "B"]
    assert dims_text(all_values(model)["nz"]) == [2, "M"]  # byte order: "M" < "N"


@pytest.mark.parametrize("user_name", ["_d0", "s0", "NonZero_nz_nnz", "unk__0", "DYN0"])
def test_user_names_that_look_generated_are_never_renamed(user_name):
    # the user's name is on an intermediate value_info: only generated symbols move
    model = build(NONZERO, {"nz": [2, user_name]})
    ctx = _context()
    ctx.reserve_names([user_name])
    ctx.add_constraint(user_name, "N")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert not result.modified
    assert dims_text(all_values(model)["nz"]) == [2, user_name]


def test_dyn_names_are_filtered_not_a_veto():
    text = """
g (float[A, B] X) => (int64[DYN0, 2] Y, int64[batch, 2] Y2) {
  nz = NonZero(X)
  Y = Transpose(nz)
  Y2 = Identity(Y)
}"""
    model = build(text, {"nz": [2, "g"]})
    ctx = _context("g")
    ctx.add_constraint("g", "DYN0")
    assert not AnchorConstraintPropagationPass(ctx)(model).modified
    ctx.add_constraint("g", "batch")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert result.renames == {"g": "batch"}
    assert dims_text(all_values(model)["nz"]) == [2, "batch"]
    assert dims_text(model.graph.outputs[0]) == ["DYN0", 2]
    assert result.implied_equalities == ["DYN0 == batch"]


def test_nested_broadcast_rewritten_to_fixed_point():
    model = build(
        """
g (float[N] X) => (float[N] Y) {
  t = Identity(X)
  u = Identity(t)
  Y = Identity(u)
}""",
        {"t": ["broadcast(broadcast(g,h),N)+1"], "u": ["max(broadcast(g,N),2*h)"]},
    )
    ctx = _context("g", "h")
    ctx.add_constraint("g", "N")
    ctx.add_constraint("h", "g")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert result.modified
    values = all_values(model)
    assert dims_text(values["t"]) == ["N+1"]
    n = d("N")
    assert dims_text(values["u"]) == [expr.to_onnx(expr.dmax(n, 2 * n))]


KV_TEXT = """
g (float[batch, past_seq] past, float[batch, seq] k, float[batch, total_seq] mask)
  => (float[batch, total_seq] present, float[batch, total_seq] out, float[batch, TT] label) {
  present = Concat <axis = 1> (past, k)
  s = Identity(present)
  out = Add(s, mask)
  label = Identity(present)
}"""


def _kv(ctx_pairs):
    model = build(
        KV_TEXT,
        {"s": ["batch", "past_seq+seq"], "label": ["batch", "past_seq+seq"]},
    )
    ctx = _context()
    for a, b in ctx_pairs:
        ctx.add_constraint(a, b)
    return model, ctx


def test_compound_of_declared_names_rewritten_to_input_symbol():
    model, ctx = _kv([("past_seq+seq", "total_seq")])
    values = all_values(model)
    values["s"].shape = ir.Shape(["batch", "broadcast(seq+past_seq,total_seq)"])
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert result.modified
    assert dims_text(values["s"]) == ["batch", "total_seq"]  # broadcast collapsed
    # declared output text is the author's: kept although it equals total_seq
    assert dims_text(values["label"]) == ["batch", "past_seq+seq"]


def test_compound_of_declared_names_kept_for_output_label():
    model, ctx = _kv([("past_seq+seq", "TT")])
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert not result.modified
    assert dims_text(all_values(model)["s"]) == ["batch", "past_seq+seq"]


def test_b_plus_c_kept():
    model = build(
        """
g (float[b] X, float[c] Y) => (float[e] Z) {
  W = Concat <axis = 0> (X, Y)
  Z = Relu(W)
}""",
        {"W": ["b+c"]},
    )
    ctx = _context()
    ctx.add_constraint("b+c", "e")
    assert not AnchorConstraintPropagationPass(ctx)(model).modified
    assert dims_text(all_values(model)["W"]) == ["b+c"]


IF_LOOP = """
g (bool cond, float[A, B] X, int64 trip) => (int64[N, 2] Y, int64[N, 2] Z, int64[2, N] W) {
  nz = NonZero(X)
  Y = Transpose(nz)
  Z = If(cond) <
    then_branch = t () => (int64[N, 2] t_out) { t_out = Transpose(nz) },
    else_branch = e () => (int64[N, 2] e_out) { e_out = Identity(Y) }
  >
  W = Loop(trip, cond, nz) <
    body = b (int64 i, bool c_in, int64[2, N] acc) => (bool c_out, int64[2, N] acc_out) {
      c_out = Identity(c_in)
      acc_out = Identity(acc)
    }
  >
}"""


def test_subgraph_values_rewritten():
    model = build(
        IF_LOOP,
        {
            "nz": [2, "g"],
            "t_out": ["g", 2],
            "e_out": ["2*g//2", 2],
            "acc": [2, "g"],
            "acc_out": [2, "g"],
        },
    )
    ctx = _context("g")
    ctx.add_constraint("g", "N")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert result.modified
    values = all_values(model)
    assert dims_text(values["t_out"]) == ["N", 2]
    assert dims_text(values["e_out"]) == ["N", 2]
    assert dims_text(values["acc"]) == [2, "N"]
    assert dims_text(values["acc_out"]) == [2, "N"]


def test_function_bodies_rewritten():
    proto = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 21, "local" : 1]>
g (float[A, B] X) => (int64[N, 2] Y) {
  Y = local.F(X)
}
<domain: "local", opset_import: ["" : 21]>
F (x) => (y) {
  nz = NonZero(x)
  y = Transpose(nz)
}"""
    )
    model = ir.serde.deserialize_model(proto)
    function = next(iter(model.functions.values()))
    nz = next(iter(function)).outputs[0]
    nz.shape = ir.Shape([2, "g"])
    ctx = _context("g")
    ctx.add_constraint("g", "N")
    assert AnchorConstraintPropagationPass(ctx)(model).modified
    assert dims_text(nz) == [2, "N"]


def test_main_graph_io_rewritten_only_where_the_engine_wrote():
    model = build(NONZERO, {"Y": ["g", 2]})  # the engine filled an empty output dim
    ctx = _context("g")
    ctx.add_constraint("g", "A")
    AnchorConstraintPropagationPass(ctx)(model)
    assert dims_text(model.graph.outputs[0]) == ["A", 2]


def test_names_declared_only_in_a_subgraph_are_never_targets():
    # a loop body annotation names a per-iteration dim: it means nothing outside
    model = build(IF_LOOP, {"nz": [2, "g"], "acc_out": [2, "S"], "Y": ["g", 2]})
    ctx = _context("g")
    ctx.add_constraint("g+1", "S")
    ctx.add_constraint("g", "S")
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert not result.modified
    assert result.renames == {}


def test_context_tables_and_bounds_rewritten():
    model = _nonzero_model()
    ctx = _context("g")
    values = all_values(model)
    ctx.set_shape(values["nz"], (2, d("g")))
    ctx.set_value(values["nz"], (d("g"), -1))
    ctx.add_less_equal_constraint("g", "A*B")
    ctx.add_less_equal_constraint("k", "g+1")
    ctx.add_constraint("g", "N")
    AnchorConstraintPropagationPass(ctx)(model)
    assert ctx.shape_of(values["nz"]) == (2, d("N"))
    assert ctx.value_of(values["nz"]) == (d("N"), -1)
    assert sorted(ctx.less_equal_constraints()) == [("N", "A*B"), ("k", "N+1")]
    assert ctx.has_constraint("g", "N")  # the equalities are kept as history
    assert ctx.scope.prove_ge(d("A*B"), d("N"))


def test_contradicting_anchors():
    model = _nonzero_model()
    ctx = _context("g")
    ctx.add_constraint("g", 3)
    ctx.add_constraint("g", 4)
    result = AnchorConstraintPropagationPass(ctx)(model)
    assert not result.modified
    assert [x.severity for x in result.diagnostics] == ["info", "warning"]
    with pytest.raises(ShapeInferenceError, match="contradict"):
        AnchorConstraintPropagationPass(ctx, strict=True)(copy_model(model))


def test_rederive_after_onnx_inference():
    # ONNX's own inference names the NonZero count unk__0; re-derive relates it to N.
    model = build(NONZERO)
    proto = onnx.shape_inference.infer_shapes(ir.serde.serialize_model(model))
    model = ir.serde.deserialize_model(proto)
    nz_dims = dims_text(all_values(model)["nz"])
    assert nz_dims[0] == 2 and nz_dims[1].startswith("unk__")
    result = AnchorConstraintPropagationPass()(model)
    assert result.modified
    assert dims_text(all_values(model)["nz"]) == [2, "N"]
    assert result.renames == {nz_dims[1]: "N"}


def test_rederive_preserve_option():
    model = build(NONZERO, {"nz": [2, "_d0"]})
    result = AnchorConstraintPropagationPass(preserve=["_d0"])(model)
    assert not result.modified
    assert result.context.has_constraint("_d0", "N")
    assert AnchorConstraintPropagationPass()(model).modified
    assert dims_text(all_values(model)["nz"]) == [2, "N"]


def test_rederive_conflict_is_a_diagnostic():
    model = build(NONZERO, {"nz": [2, "g"], "Y": ["N", 3]})
    result = AnchorConstraintPropagationPass()(model)
    assert not result.modified
    assert any(x.severity == "warning" for x in result.diagnostics)
    with pytest.raises(ShapeInferenceError):
        AnchorConstraintPropagationPass(strict=True)(model)
