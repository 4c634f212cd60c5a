"""What a call of ``infer_symbolic_shapes`` skips when a model does not need it."""

from __future__ import annotations

import onnx_ir as ir

import onnx_symdims
from onnx_symdims import passes

# z's count is a symbol the engine mints; y declares it "K": inference records the
# equality, which the anchor pass turns into a rename of z's dim.
ANCHORED = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N] x) => (int64[1, K] y) {
    z = NonZero (x)
    y = Identity (z)
}
"""


def test_the_anchor_pass_is_still_exported_and_runs_after_an_equality():
    from onnx_symdims.passes import AnchorConstraintPropagationPass, AnchorPropagationResult

    assert AnchorConstraintPropagationPass is passes.AnchorConstraintPropagationPass
    assert AnchorPropagationResult.__name__ == "AnchorPropagationResult"
    model = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(ANCHORED))
    z = model.graph.node(0).outputs[0]
    assert [str(d) for d in z.shape] == ["1", "K"]
    unrenamed = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(ANCHORED), anchors=False)
    assert [str(d) for d in unrenamed.graph.node(0).outputs[0].shape] == ["1", "NonZero_z_nnz"]


def test_the_anchor_pass_with_a_context_without_equalities_changes_nothing():
    model = ir.from_onnx_text(ANCHORED)
    ctx = onnx_symdims.ShapesContext()
    result = passes.AnchorConstraintPropagationPass(ctx)(model)
    assert not result.modified and result.renames == {} and result.diagnostics == []
    assert result.context is ctx
