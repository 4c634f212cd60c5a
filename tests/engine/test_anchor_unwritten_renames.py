"""The anchor pass skips reading the model when no rename key can be on any dim.

With a context the inference made for this model (``fresh_context``), a minted symbol
names no declared dim; when no ``IRDimWriter`` ever wrote it either, a rename of an
expression holding it changes nothing, and the model's dims are not read.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims.passes import (
    AnchorConstraintPropagationPass,
    SymbolicShapeInferencePass,
    _anchors,
)
from onnx_symdims.shapes import IRDimWriter, _convert

# The Loop's scan output count, probed with a minted empty-trip symbol (Loop_empty_d1),
# is equated to the declared N: the rename's key holds Loop_empty_d1, which the widened
# body inference never writes on a value.
LOOP = """
<ir_version: 8, opset_import: ["" : 18]>
g (float[N,C] X) => (int64 loop_count, float[N,?] loop_acc, float[?,N] loop_scan) {
   ax1 = Constant <value: tensor = int64[1] {1}> ()
   c = Shape <start: int = 1, end: int = 2> (X)
   trip = Squeeze (c)
   true_c = Constant <value: tensor = bool {1}> ()
   cnt0 = Constant <value: tensor = int64 {0}> ()
   s0 = Constant <value: tensor = int64[1] {0}> ()
   e1 = Constant <value: tensor = int64[1] {1}> ()
   acc0 = Slice (X, s0, e1, ax1)
   loop_count, loop_acc, loop_scan = Loop (trip, true_c, cnt0, acc0)
     <body: graph = loop_body (int64 i, bool cond_in, int64 cnt_in, float[N,?] acc_in)
       => (bool cond_out, int64 cnt_out, float[N,?] acc_out, float[N] scan_el) {
      cond_out = Identity (cond_in)
      one = Constant <value: tensor = int64 {1}> ()
      cnt_out = Add (cnt_in, one)
      col = Gather <axis: int = 1> (X, i)
      one_ax = Constant <value: tensor = int64[1] {1}> ()
      colu = Unsqueeze (col, one_ax)
      acc_out = Concat <axis: int = 1> (acc_in, colu)
      scan_el = ReduceSum <keepdims: int = 0> (acc_out, one_ax)
   }>
}
"""

# z's count is minted (NonZero_z_nnz) and written on z; y declares it K: renamed.
ANCHORED = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N] x) => (int64[1, K] y) {
    z = NonZero (x)
    y = Identity (z)
}
"""


@pytest.fixture(autouse=True)
def nothing_written_yet(monkeypatch):
    """A process in which no writer printed a dim yet: the record is process-wide, and a
    test run before these (another Loop model on the same worker) may have written
    ``Loop_empty_d1``. The writers' shared caches go too: a cached dim is not noted again.
    """
    monkeypatch.setattr(_convert, "_WRITTEN_SYMBOLS", set())
    monkeypatch.setattr(_convert, "_ALL_WRITTEN", False)
    monkeypatch.setattr(_convert, "_IR_DIMS", {})
    monkeypatch.setattr(_convert, "_IR_SHAPES", {})


@pytest.fixture
def rewrites(monkeypatch):
    """The models the anchor pass reads and rewrites (``_rewrite_model`` calls)."""
    seen: list[ir.Model] = []
    original = _anchors._rewrite_model

    def counting(snapshot, rewriter, ctx):
        seen.append(snapshot.model)
        return original(snapshot, rewriter, ctx)

    monkeypatch.setattr(_anchors, "_rewrite_model", counting)
    return seen


def _dims(model: ir.Model) -> list[list[str]]:
    values = [*model.graph.inputs, *model.graph.outputs]
    values += [
        v for node in ir.traversal.RecursiveGraphIterator(model.graph) for v in node.outputs
    ]
    return [[str(d) for d in v.shape] if v.shape is not None else [] for v in values]


def _run(text: str, fresh: bool):
    model = ir.from_onnx_text(text)
    inferred = SymbolicShapeInferencePass().call_without_gc(model)
    result = AnchorConstraintPropagationPass(
        inferred.context, snapshot=inferred.snapshot, fresh_context=fresh
    ).call_without_gc(model)
    return model, result


def test_an_unwritten_minted_key_skips_the_model_with_the_same_result(rewrites):
    full_model, full = _run(LOOP, fresh=False)
    assert rewrites == [full_model]  # without the flag the model is read
    assert "Loop_empty_d1" in next(iter(full.renames))
    assert IRDimWriter.never_wrote("Loop_empty_d1")
    rewrites.clear()
    model, result = _run(LOOP, fresh=True)
    assert rewrites == []  # the skip fired
    assert (result.modified, result.renames, result.implied_equalities) == (
        full.modified,
        full.renames,
        full.implied_equalities,
    )
    assert [(d.severity, d.message) for d in result.diagnostics] == [
        (d.severity, d.message) for d in full.diagnostics
    ]
    assert not result.modified
    assert _dims(model) == _dims(full_model)
    # The context's tables are still rewritten (rewrite_context defaults to True).
    assert result.context.constraints_size() == full.context.constraints_size()


def test_a_written_minted_key_is_still_renamed(rewrites):
    model, result = _run(ANCHORED, fresh=True)
    assert not IRDimWriter.never_wrote("NonZero_z_nnz")
    assert rewrites == [model]  # the skip declined
    assert result.modified and result.renames == {"NonZero_z_nnz": "K"}
    assert [str(d) for d in model.graph.node(0).outputs[0].shape] == ["1", "K"]


def test_the_one_call_api_skips_and_still_renames(rewrites):
    model = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(LOOP))
    assert rewrites == []
    unrenamed = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(LOOP), anchors=False)
    assert _dims(model) == _dims(unrenamed)
    renamed = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(ANCHORED))
    assert rewrites == [renamed]
    assert [str(d) for d in renamed.graph.node(0).outputs[0].shape] == ["1", "K"]


def test_a_callers_context_is_not_taken_as_fresh(rewrites):
    context = onnx_symdims.ShapesContext()
    model = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(LOOP), context=context)
    assert rewrites == [model]  # its minted names may be another model's declared ones
