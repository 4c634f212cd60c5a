"""The loop-body listing of ``ops/control_flow.py``: what onnx-ir's own walks give."""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims.ops.control_flow import _Body, body_values
from onnx_symdims.shapes import graph_nodes

MODEL = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N, 4] x, int64 trip, bool cond) => (y) {
    y = Loop(trip, cond, x) <body: graph = body (int64 i, bool c, float[N, 4] s) => (bool c_out, float[N, 4] s_out) {
        c_out = Identity(c)
        a = Relu(s)
        flag = Constant <value: tensor = bool {1}> ()
        s_out = If(flag) <then_branch: graph = t () => (float[N, 4] r) { r = Neg(a) },
                          else_branch: graph = e () => (float[N, 4] q) { q = Abs(a) }>
        t = Loop(trip, c, a) <body: graph = inner (int64 j, bool d, float[N, 4] z)
                                  => (bool d_out, float[N, 4] z_out) {
            d_out = Identity(d)
            z_out = Relu(z)
        }>
    }>
}
"""


def _body() -> ir.Graph:
    model = ir.from_onnx_text(MODEL)
    return model.graph[0].attributes["body"].value


def test_graph_nodes_are_the_graph_s_iteration_erased_boxes_skipped():
    body = _body()
    assert graph_nodes(body) == list(body)
    body.remove(body[1], safe=False)
    assert graph_nodes(body) == list(body) and len(list(body)) == 4


def test_body_lists_every_nested_node_and_defined_value_once():
    body = _body()
    listing = _Body(body)
    nested = list(ir.traversal.RecursiveGraphIterator(body))
    assert len(listing.nodes) == len(nested) == 9
    assert set(listing.nodes) == set(nested)
    outputs = [v for node in nested for v in node.outputs]
    assert len(listing.outputs) == len(outputs) and set(listing.outputs) == set(outputs)
    inner = listing.nodes[[n.op_type for n in listing.nodes].index("Loop")]
    defined = [*body.inputs, *inner.attributes["body"].value.inputs, *outputs]
    assert len(listing.values) == len(defined) and set(listing.values) == set(defined)
    assert list(body_values(body)) == listing.values
