"""Bodies are inferred from the snapshot's node lists, and the inline paths of a body walk
and of a memo replay write what the long ways write."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims.passes import SymbolicShapeInferencePass, _inference
from onnx_symdims.passes._model_dims import ModelSnapshot
from onnx_symdims.shapes import graph_nodes
from tests.engine._engine_testing import assert_verified, model

# A Loop whose carried tensor grows (widened, then kept), holding an If whose branches
# differ, and a Scan: every body kind, a nested one, and outputs declared with "?".
BODIES = """
g (float[N, C] x, int64[] trip) => (float[N, ?] acc, float[N, ?] pick, float[N, C] total) {
  zero = Constant <value = int64[1] {0}> ()
  one = Constant <value = int64[1] {1}> ()
  yes = Constant <value = bool {1}> ()
  acc0 = Slice (x, zero, one, one)
  acc = Loop (trip, yes, acc0) <body = body (int64 i, bool c, float[N, ?] a) => (bool co, float[N, ?] ao) {
    co = Identity (c)
    col = Slice (x, zero, one, one)
    ao = Concat <axis = 1> (a, col)
  }>
  n = Shape <start = 0, end = 1> (x)
  three = Constant <value = int64[1] {3}> ()
  big = Greater (n, three)
  flag = Squeeze (big)
  pick = If (flag) <
    then_branch = t () => (float[N, ?] ty) { ty = Concat <axis = 1> (x, x) },
    else_branch = e () => (float[N, ?] ey) { ey = Identity (x) }
  >
  xs = Unsqueeze (x, zero)
  total, out = Scan (x, xs) <num_scan_inputs = 1, body = s (float[N, C] s_in, float[N, C] x_t) => (float[N, C] s_out, float[N, C] y_t) {
    s_out = Add (s_in, x_t)
    y_t = Identity (s_out)
  }>
}
"""

UNSORTED_BRANCH = """
g (float[N, C] x, bool c) => (float[N, ?] y) {
  y = If (c) <
    then_branch = t () => (float[N, ?] ty) { ty = Concat <axis = 1> (r, x)  r = Relu (x) },
    else_branch = e () => (float[N, ?] ey) { ey = Identity (x) }
  >
}
"""


def _subgraphs(graph: ir.Graph) -> list[ir.Graph]:
    found = []
    for node in graph:
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                found.append(attr.value)
                found.extend(_subgraphs(attr.value))
    return found


def _written(m: ir.Model) -> dict[str, object]:
    texts: dict[str, object] = {}
    graphs = [m.graph, *_subgraphs(m.graph)]
    for graph in graphs:
        for value in [*graph.inputs, *(o for node in graph for o in node.outputs)]:
            shape = value.shape
            texts[value.name] = (
                None
                if shape is None
                else tuple(d if isinstance(d, int) else d.value for d in shape.dims)
            )
    return texts


def test_snapshot_lists_the_nodes_of_every_subgraph():
    m = model(BODIES)
    snapshot = ModelSnapshot.of(m)
    subgraphs = _subgraphs(m.graph)
    assert len(subgraphs) == 4  # loop body, two branches, scan body
    assert set(snapshot.subgraph_nodes) == set(subgraphs)
    for graph in subgraphs:
        assert snapshot.subgraph_nodes[graph] == list(graph)


def test_a_model_without_subgraphs_lists_none():
    m = model("g (float[N] x) => (float[N] y) { y = Relu (x) }")
    assert not ModelSnapshot.of(m).subgraph_nodes
    # A snapshot made without the field (an older caller) lists none either.
    snapshot = ModelSnapshot.of(m)
    assert not ModelSnapshot(*tuple(snapshot)[:8]).subgraph_nodes


def test_bodies_infer_the_same_from_the_listing_or_a_walk(monkeypatch):
    listed = model(BODIES)
    SymbolicShapeInferencePass()(listed)
    walked = model(BODIES)
    made = ModelSnapshot.of

    def without_lists(m: ir.Model) -> ModelSnapshot:
        return ModelSnapshot(*tuple(made(m))[:8])  # no subgraph_nodes: each body is walked

    monkeypatch.setattr(ModelSnapshot, "of", staticmethod(without_lists))
    SymbolicShapeInferencePass()(walked)
    assert _written(listed) == _written(walked)
    # One more column an iteration: not the first iteration's min(1,C).
    assert _written(listed)["acc"] == ("N", "(Loop_iterations+1)*min(1,C)")
    assert_verified(listed)


def test_an_unsorted_branch_is_sorted_from_the_listing():
    m = model(UNSORTED_BRANCH)
    branch = _subgraphs(m.graph)[0]
    assert [node.op_type for node in graph_nodes(branch)] == ["Concat", "Relu"]
    result = SymbolicShapeInferencePass()(m)
    assert not [d for d in result.diagnostics if d.severity == "error"]
    assert _written(m)["ty"] == ("N", "2*C")
    assert _written(m)["r"] == ("N", "C")


@pytest.mark.parametrize("memoize", [True, False])
def test_replays_write_what_the_hooks_write(monkeypatch, memoize):
    """Repeated layers replay memo entries (their one output committed inline)."""
    layers = "\n".join(
        f"  r{i} = Relu (h{i})\n  h{i + 1} = Reshape (r{i}, shp)" for i in range(6)
    )
    body = (
        "g (float[B, S, 8] h0) => (float[B, S, 2, 4] h6) {\n"
        "  shp = Constant <value = int64[4] {0, 0, 2, 4}> ()\n"
        + layers.replace("Reshape (r0, shp)", "Reshape (r0, shp0)")
        + "\n}"
    )
    # Every layer after the first reshapes [B, S, 2, 4] to itself; the first, [B, S, 8].
    body = body.replace(
        "  shp = Constant",
        "  shp0 = Constant <value = int64[4] {0, 0, 2, 4}> ()\n  shp = Constant",
    )
    monkeypatch.setattr(_inference.InferenceEngine, "memo_min_nodes", 0)
    monkeypatch.setattr(_inference.InferenceEngine, "memoize", memoize)
    m = model(body)
    SymbolicShapeInferencePass()(m)
    written = _written(m)
    for i in range(1, 6):
        assert written[f"r{i}"] == ("B", "S", 2, 4)
        assert m.graph.node(2 * i + 2).outputs[0].type == ir.TensorType(ir.DataType.FLOAT)
    assert_verified(m)
