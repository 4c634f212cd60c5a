"""The anchor pass's rewrite of the model: what its shortcuts must not change.

The rewrite skips a dim text that lacks every symbol of some rename key, reads each
distinct shape once, and gives each value with a non-frozen shape its own new shape.
"""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims.passes._anchors import AnchorConstraintPropagationPass
from onnx_symdims.passes._model_dims import ModelSnapshot
from onnx_symdims.shapes import ShapesContext
from tests.constraints._util import all_values, build, dims_text

CHAIN = """
g (float[batch, past_seq] past, float[batch, seq] k, float[batch, total_seq] mask)
  => (float[batch, total_seq] out) {
  present = Concat <axis = 1> (past, k)
  a = Identity(present)
  b = Identity(present)
  c = Identity(present)
  out = Add(a, mask)
}"""


def _model(shapes: dict[str, list]) -> ir.Model:
    model = build(CHAIN, {})
    values = all_values(model)
    for name, dims in shapes.items():
        values[name].shape = ir.Shape(dims, frozen=True)
    return model


def _context() -> ShapesContext:
    ctx = ShapesContext()
    ctx.add_constraint("past_seq+seq", "total_seq")
    return ctx


def test_text_with_part_of_a_compound_key_stays_and_a_multiple_is_rewritten():
    model = _model(
        {
            "present": ["batch", "past_seq+seq"],
            "a": ["batch", "past_seq+1"],  # past_seq alone: no key occurs in it
            "b": ["batch", "2*past_seq+2*seq+1"],  # twice the key, plus one
            "c": ["seq", "past_seq+seq"],
        }
    )
    result = AnchorConstraintPropagationPass(_context())(model)
    values = all_values(model)
    assert result.modified
    assert dims_text(values["present"]) == ["batch", "total_seq"]
    assert dims_text(values["a"]) == ["batch", "past_seq+1"]
    assert dims_text(values["b"]) == ["batch", "2*total_seq+1"]
    assert dims_text(values["c"]) == ["seq", "total_seq"]


def test_text_holding_a_key_s_names_only_inside_other_names_stays():
    # "past_seq" and "seq" occur in the text, as parts of other names: parsed, kept.
    model = _model({"a": ["batch", "past_seq_len+seq_len"], "b": ["past_seq+seq", "seq2"]})
    AnchorConstraintPropagationPass(_context())(model)
    values = all_values(model)
    assert dims_text(values["a"]) == ["batch", "past_seq_len+seq_len"]
    assert dims_text(values["b"]) == ["total_seq", "seq2"]


def test_one_frozen_shape_shared_by_values_is_rewritten_once_for_all():
    shared = ir.Shape(["batch", "past_seq+seq"], frozen=True)
    model = _model({})
    values = all_values(model)
    for name in ("present", "a", "b"):
        values[name].shape = shared
    AnchorConstraintPropagationPass(_context())(model)
    new = values["present"].shape
    assert new is not shared and new.frozen
    assert values["a"].shape is new and values["b"].shape is new
    assert dims_text(values["a"]) == ["batch", "total_seq"]


def test_values_sharing_a_shape_that_is_not_frozen_get_their_own_shapes():
    shared = ir.Shape(["batch", "past_seq+seq"])
    model = _model({})
    values = all_values(model)
    for name in ("present", "a"):
        values[name].shape = shared
    AnchorConstraintPropagationPass(_context())(model)
    assert dims_text(values["present"]) == dims_text(values["a"]) == ["batch", "total_seq"]
    assert not values["present"].shape.frozen
    assert values["present"].shape is not values["a"].shape  # editable: not shared
    values["a"].shape[0] = 3
    assert dims_text(values["present"]) == ["batch", "total_seq"]


def test_a_snapshot_listing_the_anchors_elsewhere_rewrites_the_same():
    def run(reorder: bool) -> dict:
        model = _model({"present": ["batch", "past_seq+seq"], "a": ["batch", "past_seq+seq"]})
        model.graph.outputs[0].shape = ir.Shape(["batch", "past_seq+seq"])
        snapshot = ModelSnapshot.of(model)
        if reorder:  # the main graph's inputs and outputs last
            values = [v for v in snapshot.values if v not in snapshot.anchors]
            values += [v for v in snapshot.values if v in snapshot.anchors]
            snapshot = ModelSnapshot(
                model, snapshot.main_nodes, values, snapshot.anchors, snapshot.main_values
            )
        AnchorConstraintPropagationPass(_context(), snapshot=snapshot)(model)
        return {name: dims_text(v) for name, v in all_values(model).items()}

    written = run(reorder=True)
    assert written == run(reorder=False)
    assert written["out"] == ["batch", "past_seq+seq"]  # a declared output: the author's
    assert written["a"] == ["batch", "total_seq"]


def _rename_twice_written(ctx_pairs: list[tuple[str, str]]) -> dict:
    model = _model(
        {
            "present": ["batch", "past_seq+seq"],
            "a": ["batch", "past_seq+1"],
            "b": ["batch", "2*past_seq+2*seq+1"],
        }
    )
    ctx = ShapesContext()
    for a, b in ctx_pairs:
        ctx.add_constraint(a, b)
    AnchorConstraintPropagationPass(ctx)(model)
    return {name: dims_text(v) for name, v in all_values(model).items()}


def test_runs_that_reuse_a_rewriter_write_what_a_fresh_one_writes(monkeypatch):
    from onnx_symdims.passes import _anchors

    monkeypatch.setattr(_anchors, "_REWRITERS", {})
    kv = [("past_seq+seq", "total_seq")]
    other = [("past_seq+1", "total_seq")]
    fresh_kv, fresh_other = _rename_twice_written(kv), _rename_twice_written(other)
    assert fresh_kv["b"] == ["batch", "2*total_seq+1"]
    assert fresh_other["a"] == ["batch", "total_seq"]
    assert fresh_kv != fresh_other
    # Interleaved runs (each mapping's rewriter reused), and with a rewriter that must
    # start over on every new shape.
    for _ in range(2):
        assert _rename_twice_written(kv) == fresh_kv
        assert _rename_twice_written(other) == fresh_other
    monkeypatch.setattr(_anchors, "_MAX_FROZEN", 1)
    assert _rename_twice_written(kv) == fresh_kv
    assert len(_anchors._REWRITERS) == 2
