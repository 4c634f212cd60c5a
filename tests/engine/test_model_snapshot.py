"""``ModelSnapshot``: the one walk the passes share, and what the first call imports."""

from __future__ import annotations

import copy
import dataclasses
import pathlib
import subprocess
import sys
import textwrap

import onnx
import onnx_ir as ir
import pytest

from onnx_symdims.passes._model_dims import ModelSnapshot

DATA = pathlib.Path(__file__).parent.parent / "data"

NESTED = """
<ir_version: 10, opset_import: ["" : 21, "local" : 1]>
g (bool c, float[N] x) => (float[M] y, float[N] z) {
  y = If(c) <
    then_branch = t () => (float[K] ty) { ty = Relu(x) },
    else_branch = e () => (float[L] ey) { ey = Neg(x) }
  >
  z = local.F(x)
}
<domain: "local", opset_import: ["" : 21]>
F (a) => (b) { b = Abs(a) }
"""

UNSORTED = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N] x) => (float[N] z) {
  y = Relu(x)
  z = Neg(y)
}
"""


def _reference(model: ir.Model) -> dict:
    """The snapshot's fields, computed the slow, obvious way."""
    graphs: list = [model.graph, *model.functions.values()]
    values: dict = {}
    i = 0
    while i < len(graphs):
        graph = graphs[i]
        i += 1
        values.update(dict.fromkeys(graph.inputs))
        values.update(dict.fromkeys(graph.outputs))
        if isinstance(graph, ir.Graph):
            values.update(dict.fromkeys(graph.initializers.values()))
        for node in graph:
            values.update(dict.fromkeys(node.outputs))
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    graphs.append(attr.value)
                elif attr.type == ir.AttributeType.GRAPHS:
                    graphs.extend(attr.value)
    main = model.graph
    nodes = list(main)
    position = {node: k for k, node in enumerate(nodes)}
    defined = {*main.inputs, *main.initializers.values()}
    sorted_ = all(
        v is None
        or (v.producer() is None and v in defined)
        or position.get(v.producer(), len(nodes)) < position[node]
        for node in nodes
        for v in node.inputs
    )
    main_values = [*main.inputs, *main.outputs]
    for node in nodes:
        main_values.extend(node.outputs)
    return {
        "model": model,
        "main_nodes": nodes,
        "values": list(values),
        "anchors": frozenset((*main.inputs, *main.outputs)),
        "main_values": main_values,
        "main_sorted": sorted_,
        "nested": len(graphs) > 1,
    }


def _models() -> list[tuple[str, ir.Model]]:
    found = [(path.name, ir.load(path)) for path in sorted(DATA.glob("*.onnx"))]
    found.append(("nested", ir.from_onnx_text(NESTED)))
    return found


@pytest.mark.parametrize(
    ("name", "model"), _models(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_snapshot_holds_every_value_once_in_walk_order(name, model):
    snapshot = ModelSnapshot.of(model)
    reference = _reference(model)
    for field, expected in reference.items():
        got = getattr(snapshot, field)
        if field == "model":
            assert got is expected
        elif field == "values":  # each once; the main graph's first, in graph order
            assert len(got) == len(set(got)) and set(got) == set(expected), name
            main = len(
                dict.fromkeys([*model.graph.initializers.values(), *reference["main_values"]])
            )
            assert got[:main] == expected[:main], name
        else:
            assert got == expected, (name, field)


def test_nested_model_values_include_branches_and_functions():
    model = ir.from_onnx_text(NESTED)
    names = {v.name for v in ModelSnapshot.of(model).values}
    assert {"ty", "ey", "b", "a", "y", "z"} <= names
    assert ModelSnapshot.of(model).nested


def test_order_check_sees_a_node_before_its_producer_and_an_undefined_input():
    model = ir.from_onnx_text(UNSORTED)
    assert ModelSnapshot.of(model).main_sorted
    relu, neg = list(model.graph)
    model.graph.remove(neg)
    model.graph.insert_before(relu, neg)  # z = Neg(y) now comes before y = Relu(x)
    assert not ModelSnapshot.of(model).main_sorted
    dangling = ir.from_onnx_text(UNSORTED)
    relu, neg = list(dangling.graph)
    neg.replace_input_with(0, ir.Value(name="nowhere"))  # defined by nothing
    assert not ModelSnapshot.of(dangling).main_sorted


def test_snapshot_is_immutable_and_copies():
    model = ir.from_onnx_text(NESTED)
    snapshot = ModelSnapshot.of(model)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.main_sorted = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del snapshot.values
    twin = copy.copy(snapshot)
    assert twin.values == snapshot.values and twin.model is model
    assert "2 main nodes" in repr(snapshot)


def test_first_call_on_an_ir_model_loads_no_io_rederive_or_planner_module():
    # The cold start: a first call on an in-memory model must not import what only
    # paths / protos (model I/O), context-less anchoring or recorded equalities need
    # (bert_ortfused records none: not even the anchor pass is imported).
    script = textwrap.dedent(
        f"""
        import sys
        import onnx_ir as ir
        model = ir.load({str(DATA / "bert_ortfused.onnx")!r})
        import onnx_symdims
        onnx_symdims.infer_symbolic_shapes(model)
        assert model.graph.outputs[0].shape is not None
        print(" ".join(sorted(sys.modules)))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    for module in (
        "onnx_symdims._modelio",
        "onnx_symdims.passes._anchor_rederive",
        "onnx_symdims.passes._anchor_renames",
        "onnx_symdims.passes._anchors",  # no equality recorded: the anchor pass is not run
    ):
        assert module not in out
    # ... while a ModelProto or a path still works (they load model I/O on use)
    proto = onnx.load(DATA / "bert_ortfused.onnx")
    import onnx_symdims

    assert isinstance(onnx_symdims.infer_symbolic_shapes(proto), onnx.ModelProto)
    assert isinstance(
        onnx_symdims.infer_symbolic_shapes(DATA / "bert_ortfused.onnx"), ir.Model
    )


def _reordered(text: str, order: list[int]) -> ir.Model:
    proto = ir.serde.serialize_model(ir.from_onnx_text(text))
    nodes = list(proto.graph.node)
    del proto.graph.node[:]
    proto.graph.node.extend(nodes[i] for i in order)
    return ir.from_proto(proto)


CHAIN = """
<ir_version: 10, opset_import: ["" : 21]>
g (float[N] x) => (float[N] w) {
  y = Relu(x)
  z = Neg(y)
  u = Abs(x)
  w = Add(z, u)
}
"""


@pytest.mark.parametrize(
    "order", [[0, 1, 2, 3], [2, 0, 1, 3], [1, 0, 2, 3], [0, 1, 3, 2], [3, 2, 1, 0]]
)
def test_main_sorted_is_the_topological_check(order):
    from onnx_symdims.passes._model_dims import in_topological_order

    m = _reordered(CHAIN, order)
    assert ModelSnapshot.of(m).main_sorted == in_topological_order(list(m.graph))
