"""Invalid graph structure is an error naming the node; deep valid models just work.

Cycles, self-loops and node inputs that nothing defines are ``error`` diagnostics (so
strict mode raises); unreadable external data is a warning; hundreds of nested Ifs or
function calls infer like any model; a recursive function is refused by name.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto
from onnx import helper as h

import onnx_symdims
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapeInferenceError

X = h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])
Z = h.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 4])

# The ONNX text syntax refuses these graphs, so they are built node by node.
INVALID = {
    "cycle": (
        [
            h.make_node("Add", ["X", "B"], ["A"], name="add"),
            h.make_node("Relu", ["A"], ["B"], name="relu"),
            h.make_node("Identity", ["A"], ["Z"], name="id"),
        ],
        {
            "add": "the node is on a cycle: input 'B' is computed from its output",
            "relu": "the node is on a cycle: input 'A'",
            "id": "the node depends on a cycle",
        },
    ),
    "self_loop": (
        [h.make_node("Add", ["X", "Z"], ["Z"], name="add")],
        {"add": "input 'Z' is the node's own output (a self-loop)"},
    ),
    "undefined_input": (
        [h.make_node("Add", ["X", "nope"], ["Z"], name="add")],
        {"add": "input 'nope' is defined by no node, initializer or input"},
    ),
}


def _load(proto: onnx.ModelProto) -> ir.Model:
    return ir.serde.deserialize_model(proto)


def _model(nodes, functions=(), opsets=(("", 18),)) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", [X], [Z])
    return h.make_model(
        graph,
        opset_imports=[h.make_opsetid(d, v) for d, v in opsets],
        functions=list(functions),
    )


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_structure_is_an_error_naming_the_node(case):
    nodes, expected = INVALID[case]
    result = SymbolicShapeInferencePass()(_load(_model(nodes)))
    errors = {d.node_name: d.message for d in result.diagnostics if d.severity == "error"}
    for node, message in expected.items():
        assert node in errors and message in errors[node], errors
    with pytest.raises(ShapeInferenceError, match="invalid graph"):
        SymbolicShapeInferencePass(strict=True)(_load(_model(nodes)))


def test_valid_unsorted_graph_is_sorted_without_a_diagnostic():
    nodes = [
        h.make_node("Neg", ["A"], ["Z"], name="second"),
        h.make_node("Relu", ["X"], ["A"], name="first"),
    ]
    model = _load(_model(nodes))
    result = SymbolicShapeInferencePass(strict=True)(model)
    assert not result.diagnostics
    assert [d if isinstance(d, int) else d.value for d in model.graph.outputs[0].shape] == [
        "N",
        4,
    ]


def _external_model(folder, location: str, offset: int = 0) -> str:
    """A Reshape whose int64 target ``[2, -1]`` is external data at ``location``."""
    np.array([2, -1], np.int64).tofile(folder / "target.bin")
    target = onnx.TensorProto(name="shp", data_type=TensorProto.INT64, dims=[2])
    target.data_location = TensorProto.EXTERNAL
    for key, text in (("location", location), ("offset", str(offset)), ("length", "16")):
        entry = target.external_data.add()
        entry.key, entry.value = key, text
    graph = h.make_graph(
        [h.make_node("Reshape", ["X", "shp"], ["Y"], name="reshape")],
        "g",
        [X],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [target],
    )
    path = folder / "model" / "m.onnx"
    path.parent.mkdir(exist_ok=True)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), str(path))
    return str(path)


@pytest.mark.parametrize(
    ("location", "offset", "cause"),
    [
        ("missing.bin", 0, "FileNotFoundError"),
        ("../target.bin", 0, "outside the base directory"),  # never followed
        ("ABSOLUTE", 0, "outside the base directory"),
        ("../model/../../target.bin", 0, "outside the base directory"),
    ],
)
def test_unreadable_external_data_is_skipped_with_a_diagnostic(
    tmp_path, location, offset, cause
):
    if location == "ABSOLUTE":
        location = str(tmp_path / "target.bin")
    model = ir.load(_external_model(tmp_path, location, offset))
    result = SymbolicShapeInferencePass()(model)
    warnings = [d.message for d in result.diagnostics if d.severity == "warning"]
    assert any("constant 'shp'" in w and cause in w for w in warnings), warnings
    shape = model.graph.outputs[0].shape
    assert len(shape) == 2 and all(not isinstance(d, int) for d in shape)  # fresh, sound


def test_readable_external_data_is_read(tmp_path):
    (tmp_path / "model").mkdir()
    path = _external_model(tmp_path, "target.bin")
    (tmp_path / "target.bin").rename(tmp_path / "model" / "target.bin")
    model = ir.load(path)
    result = SymbolicShapeInferencePass()(model)
    assert not result.diagnostics
    assert [d if isinstance(d, int) else d.value for d in model.graph.outputs[0].shape] == [
        2,
        "2*N",
    ]


def _function(name: str, nodes) -> onnx.FunctionProto:
    opsets = [h.make_opsetid("", 18), h.make_opsetid("local", 1)]
    return h.make_function("local", name, ["a"], ["b"], nodes, opsets)


def _call(callee: str, name: str) -> onnx.NodeProto:
    return h.make_node(callee, ["a"], ["b"], domain="local", name=name)


@pytest.mark.parametrize("depth", [30, 250])
def test_deeply_nested_function_calls_infer(depth):
    functions = [_function("F0", [h.make_node("Relu", ["a"], ["b"], name="r")])]
    functions += [_function(f"F{i}", [_call(f"F{i - 1}", f"c{i}")]) for i in range(1, depth)]
    top = h.make_node(f"F{depth - 1}", ["X"], ["Z"], domain="local", name="top")
    model = _load(_model([top], functions, (("", 18), ("local", 1))))
    result = SymbolicShapeInferencePass(strict=True)(model)
    assert not result.diagnostics
    assert [d if isinstance(d, int) else d.value for d in model.graph.outputs[0].shape] == [
        "N",
        4,
    ]


def _nested_ifs(depth: int) -> ir.Model:
    """``depth`` Ifs, each then-branch holding the next (built in memory: protobuf
    refuses messages nested this deep)."""
    x = ir.Value(name="X", shape=ir.Shape(["N", 4]), type=ir.TensorType(ir.DataType.FLOAT))
    c = ir.Value(name="C", shape=ir.Shape([]), type=ir.TensorType(ir.DataType.BOOL))
    node = ir.Node("", "Relu", [x], name="leaf", num_outputs=1)
    node.outputs[0].name = "leaf"
    for k in range(1, depth + 1):
        then_branch = ir.Graph([], [node.outputs[0]], nodes=[node], name=f"then{k}")
        neg = ir.Node("", "Neg", [x], name=f"neg{k}", num_outputs=1)
        neg.outputs[0].name = f"o{k}"
        else_branch = ir.Graph([], [neg.outputs[0]], nodes=[neg], name=f"else{k}")
        node = ir.Node(
            "",
            "If",
            [c],
            attributes=[
                ir.AttrGraph("then_branch", then_branch),
                ir.AttrGraph("else_branch", else_branch),
            ],
            name=f"if{k}",
            num_outputs=1,
        )
        node.outputs[0].name = f"r{k}"
    graph = ir.Graph([x, c], [node.outputs[0]], nodes=[node], opset_imports={"": 18})
    return ir.Model(graph, ir_version=9)


@pytest.mark.parametrize("depth", [10, 300])
def test_deeply_nested_ifs_infer(depth):
    model = _nested_ifs(depth)
    result = SymbolicShapeInferencePass(strict=True)(model)
    assert not result.diagnostics
    assert [d if isinstance(d, int) else d.value for d in model.graph.outputs[0].shape] == [
        "N",
        4,
    ]


@pytest.mark.parametrize(
    ("functions", "message"),
    [
        ([("F", "F")], "recursive call of function local::F (local::F -> local::F)"),
        (
            [("F", "G"), ("G", "F")],
            "recursive call of function local::F (local::F -> local::G -> local::F)",
        ),
    ],
)
def test_recursive_function_is_a_clear_error(functions, message):
    protos = [_function(name, [_call(callee, f"call_{callee}")]) for name, callee in functions]
    top = h.make_node("F", ["X"], ["Z"], domain="local", name="top")
    model = _load(_model([top], protos, (("", 18), ("local", 1))))
    result = SymbolicShapeInferencePass()(model)
    errors = [str(d) for d in result.diagnostics if d.severity == "error"]
    assert any(message in e and "call_F" in e for e in errors), errors
    assert not any("internal error" in e for e in errors), errors


def test_a_function_forwarding_a_graph_attribute_is_inferred():
    """A model-local function whose ``If`` takes its branches from the call (graph-attribute
    references, which hold no graph in the body) crashed the walk over subgraphs."""
    ifnode = h.make_node("If", ["c"], ["y"])
    ifnode.attribute.extend(
        h.make_attribute_ref(name, onnx.AttributeProto.GRAPH)
        for name in ("then_branch", "else_branch")
    )
    function = h.make_function(
        "local",
        "F",
        ["c"],
        ["y"],
        [ifnode],
        [h.make_opsetid("", 17)],
        attributes=["then_branch", "else_branch"],
    )

    def branch(name: str, values: list[float]) -> onnx.GraphProto:
        tensor = h.make_tensor("v", onnx.TensorProto.FLOAT, [len(values)], values)
        return h.make_graph(
            [h.make_node("Constant", [], [name], value=tensor)],
            name,
            [],
            [h.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [len(values)])],
        )

    call = h.make_node(
        "F",
        ["c"],
        ["y"],
        domain="local",
        then_branch=branch("t", [1.0]),
        else_branch=branch("e", [2.0, 3.0]),
    )
    graph = h.make_graph(
        [call],
        "g",
        [h.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = h.make_model(
        graph,
        functions=[function],
        opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)],
    )
    inferred = onnx_symdims.infer_symbolic_shapes(model)
    (dim,) = inferred.graph.output[0].type.tensor_type.shape.dim
    assert dim.dim_param  # 1 or 2 elements by the condition: a fresh symbol, not a guess
