"""The per-call shortcuts of the inference pass do what the long way does."""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims import passes
from onnx_symdims.passes._inference import InferenceEngine
from onnx_symdims.passes._model_dims import ModelSnapshot, in_topological_order
from onnx_symdims.shapes import ShapesContext

_SPLIT = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N, 6] x) => (float[N, 3] a, b, c) {
    a, t = Split<axis = 1, num_outputs = 2>(x)
    b = Relu(t)
    c = Neg(b)
}
"""

_OLD_IR = """
<ir_version: 3, opset_import: ["" : 8]>
g (float[2, 3] x, float[2, 3] w) => (y) {
    y = Add(x, w)
}
"""


def _shapes(model: ir.Model) -> dict[str, object]:
    return {
        v.name: (None if v.shape is None else list(v.shape.dims))
        for node in model.graph
        for v in node.outputs
    }


def test_snapshot_of_a_multi_output_node_lists_each_output_once_in_order():
    model = ir.from_onnx_text(_SPLIT)
    snapshot = ModelSnapshot.of(model)
    split = next(iter(model.graph))
    a, t = split.outputs
    # main_values: inputs, outputs, then node outputs in node order (duplicates kept)
    names = [v.name for v in snapshot.main_values]
    assert names == ["x", "a", "b", "c", "a", "t", "b", "c"]
    assert [v.name for v in snapshot.values] == ["x", "a", "b", "c", "t"]
    assert snapshot.main_sorted is in_topological_order(list(model.graph)) is True
    assert {a, t} <= set(snapshot.values)


def test_snapshot_sees_an_out_of_order_multi_output_producer():
    model = ir.from_onnx_text(_SPLIT)
    nodes = list(model.graph)
    model.graph.remove(nodes[0])
    model.graph.append(nodes[0])  # Split last: Relu reads t before it is produced
    snapshot = ModelSnapshot.of(model)
    assert snapshot.main_sorted is in_topological_order(list(model.graph)) is False


def test_input_names_and_anonymous_dims_are_seeded_as_before():
    model = ir.from_onnx_text(
        """
        <ir_version: 10, opset_import: ["" : 21]>
        g (float[batch, ?, M] x) => (y) { y = Relu(x) }
        """
    )
    model.graph.inputs[0].shape = ir.Shape(["batch", None, "2*batch"])
    ctx = ShapesContext()
    engine = InferenceEngine(model, ctx)
    engine.prepare()
    engine._seed_inputs(model.graph, None, None)
    x = model.graph.inputs[0]
    shape = ctx.peek_shape(x)
    assert str(shape[0]) == "batch"
    assert str(shape[1]) == "x_d1"  # named after the input (the slot read for .name)
    assert str(shape[2]) == "2*batch"
    assert ctx.value_of(x) is None


def test_subgraph_inputs_take_the_given_shapes_as_tuples():
    model = ir.from_onnx_text(_SPLIT)
    ctx = ShapesContext()
    engine = InferenceEngine(model, ctx)
    engine.prepare()
    engine._seed_inputs(model.graph, [[2, 6]], None)
    assert ctx.peek_shape(model.graph.inputs[0]) == (2, 6)


def test_old_ir_inputs_backed_by_initializers_are_still_constants():
    model = ir.from_onnx_text(_OLD_IR)
    w = model.graph.inputs[1]
    w.const_value = ir.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    model.graph.register_initializer(w)
    result = passes.SymbolicShapeInferencePass()(model)
    assert _shapes(result.model)["y"] == [2, 3]
    # the marks are removed after the run
    assert not w.meta.get("onnx_symdims.constant_input")


def test_a_shallow_model_runs_in_the_calling_thread(monkeypatch):
    import threading

    from onnx_symdims.passes import _inference

    def refuse(run, bound):  # the deep path is not taken for a shallow model
        raise AssertionError("run_deep called")

    monkeypatch.setattr(_inference, "run_deep", refuse)
    seen = []
    model = ir.from_onnx_text(_SPLIT)
    passes.SymbolicShapeInferencePass(
        progress=lambda done, total: seen.append(
            threading.current_thread() is threading.main_thread()
        )
    )(model)
    assert seen and all(seen)
    assert _shapes(model)["c"] == [ir.SymbolicDim("N"), 3]


def test_value_info_anchors_still_reach_node_outputs_of_the_main_graph():
    # A node output's _graph slot is empty: its owner is its producer's graph.
    text = """
    <ir_version: 10, opset_import: ["" : 21]>
    g (float[N, 4] x) => (y) <float[M, 4] t> {
        t = Relu(x)
        y = Neg(t)
    }
    """
    model = ir.from_onnx_text(text)
    t = next(iter(model.graph)).outputs[0]
    assert t._graph is None and t.graph is model.graph
    result = passes.SymbolicShapeInferencePass(value_info_anchors=True)(model)
    # An anchor keeps its declared text, and the merge records N == M.
    assert [str(d) for d in t.shape.dims] == ["M", "4"]
    assert result.context.constraints_size()


def test_a_declared_output_type_is_read_as_the_property_reads_it():
    text = """
    <ir_version: 10, opset_import: ["" : 21]>
    g (float[N] x) => (int64[N] y, float[N] z) { y = Relu(x)  z = Neg(x) }
    """
    model = ir.from_onnx_text(text)
    result = passes.SymbolicShapeInferencePass()(model)
    y, z = model.graph.outputs
    assert y.type._dtype is y.type.dtype is ir.DataType.INT64
    messages = [d.message for d in result.diagnostics]
    assert any("declared type INT64 but inferred FLOAT" in m for m in messages)
    assert z.dtype is ir.DataType.FLOAT
