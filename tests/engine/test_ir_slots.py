"""The onnx-ir slots the engine's hot paths read instead of the properties.

``passes/_inference.py``, ``passes/_model_dims.py``, ``passes/_anchors.py``
and ``ops/control_flow.py`` read ``node._inputs`` for
``node.inputs`` and so on (a property read is a Python call per access, on every node),
and write ``value._shape`` / ``value._type`` where the setters would only store an
``ir.Shape`` or a type. An onnx-ir release that changes one of them
fails here, not in a wrong shape.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

_MODEL = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N, 4] x) => (y) {
    s = Constant<value = int64[2] {4, -1}>()
    y = Reshape(x, s)
}
"""


def _model() -> ir.Model:
    return ir.from_onnx_text(_MODEL)


def test_node_properties_return_their_slots():
    reshape = next(node for node in _model().graph if node.op_type == "Reshape")
    assert reshape._inputs is reshape.inputs
    assert reshape._outputs is reshape.outputs
    assert reshape._attributes is reshape.attributes
    assert reshape._op_type is reshape.op_type
    assert reshape._domain is reshape.domain


def test_attribute_properties_return_their_slots():
    constant = next(node for node in _model().graph if node.op_type == "Constant")
    attr = constant.attributes.data["value"]
    assert attr._type is attr.type
    assert attr._value is attr.value
    assert attr._ref_attr_name is attr.ref_attr_name is None


def test_value_properties_return_their_slots_and_setters_only_store():
    value = _model().graph.inputs[0]
    assert value._shape is value.shape
    assert value._type is value.type
    assert value._const_value is value.const_value
    shape = ir.Shape([2, 3])
    type_ = ir.TensorType(ir.DataType.INT64)
    value.shape = shape
    value.type = type_
    assert value._shape is shape
    assert value._type is type_
    # and the other way: what the engine writes to the slots is what is read
    value._shape = None
    value._type = None
    assert value.shape is None
    assert value.type is None


def test_shape_and_symbolic_dim_properties_return_their_slots():
    # passes/_anchors.py and the anchor merges read shape._dims, shape._frozen, dim._value
    shape = _model().graph.inputs[0].shape
    assert list(shape._dims) == list(shape.dims) == [ir.SymbolicDim("N"), 4]
    assert shape._frozen is shape.frozen
    frozen = ir.Shape(["N"], frozen=True)
    assert frozen._frozen is frozen.frozen is True
    dim = shape.dims[0]
    assert dim._value is dim.value == "N"


def test_a_missing_slot_fails_the_import_check_with_its_name(monkeypatch):
    from onnx_symdims.passes import _inference

    _inference._require_ir_slots()  # onnx-ir as installed: nothing raised

    class RenamedValue:  # a release that renamed Value._shape
        __slots__ = ("_const_value", "_shape_renamed", "_type")

    monkeypatch.setattr(ir, "Value", RenamedValue)
    with pytest.raises(ImportError, match="_shape"):
        _inference._require_ir_slots()


def test_value_producer_slot_is_the_producer():
    reshape = next(node for node in _model().graph if node.op_type == "Reshape")
    assert reshape.outputs[0]._producer is reshape.outputs[0].producer() is reshape
    assert reshape.inputs[0]._producer is None


def test_graph_nodes_reads_the_linked_list_as_iteration_does():
    from onnx_symdims.shapes import graph_nodes

    model = ir.from_onnx_text(
        """
        <ir_version: 10, opset_import: ["" : 21, "local" : 1]>
        g (float[N, 4] x) => (y) {
            a = Relu(x)
            b = Neg(a)
            c = Abs(b)
            y = local.F(c)
        }
        <domain: "local", opset_import: ["" : 21]>
        F (t) => (u) { v = Relu(t)  u = Neg(v) }
        """
    )
    graph = model.graph
    assert graph._nodes._root.next.value is graph[0]  # the layout graph_nodes reads
    assert graph_nodes(graph) == list(graph)
    graph.remove(graph[1], safe=False)  # an erased box is skipped
    assert graph_nodes(graph) == list(graph) and len(list(graph)) == 3
    function = next(iter(model.functions.values()))
    assert graph_nodes(function) == list(function) and len(list(function)) == 2


def test_graph_output_flag_slot_is_is_graph_output():
    graph = _model().graph
    assert graph.outputs[0]._is_graph_output is graph.outputs[0].is_graph_output() is True
    assert graph.inputs[0]._is_graph_output is graph.inputs[0].is_graph_output() is False
