"""A ``Loop`` that may run no iteration: its scan outputs' dims, checked in onnxruntime.

The ONNX spec leaves a scan output's dims past the first undefined when no iteration runs
(onnx/onnxruntime#1233). onnxruntime builds that empty output from the body output's
*static* type: an int dim stays, any other dim is 0, and without a known rank the result
is ``[0]``. So the annotations a tool writes into the body change onnxruntime's result
(``[0]`` before, ``[0, 3]`` once the body output reads ``float[3]``). The engine follows
the spec's natural reading, the stack of zero values of the body output's shape, and
writes the body output's shape, so that onnxruntime gives on the model written exactly
the dims written where it has a static int, and the engine writes any other dim
``d*r + e*(1-r)`` with ``r = min(1, count)`` and ``e`` fresh: ``d`` when an iteration
runs, the runtime's choice when none does (onnxruntime's load-time inference may know an
int the engine cannot predict: it types a body with the carried inputs' initial shapes).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnx_symdims import expr, infer_symbolic_shapes
from onnx_symdims.passes import SymbolicShapeInferencePass


def _loop_model(per_iteration_input: list | None) -> ir.Model:
    """``ys`` stacks ``Relu(x)`` once per element of ``t``; the body declares no shapes."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["co"]),
            helper.make_node("Identity", ["a"], ["ao"]),
            helper.make_node("Relu", ["a"], ["so"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("co", TensorProto.BOOL, []),
            helper.make_tensor_value_info("ao", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("so", TensorProto.FLOAT, None),
        ],
    )
    zero = helper.make_tensor("zero_value", TensorProto.INT64, [], [0])
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["t"], ["ms"]),
            helper.make_node("Constant", [], ["zero"], value=zero),
            helper.make_node("Gather", ["ms", "zero"], ["m"]),
            helper.make_node("Loop", ["m", "", "x"], ["y", "ys"], body=body),
        ],
        "g",
        [
            helper.make_tensor_value_info("t", TensorProto.FLOAT, ["M"]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, per_iteration_input),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("ys", TensorProto.FLOAT, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ir.serde.deserialize_model(model)


def _shapes(model: ir.Model, sizes: dict[str, int]) -> tuple[int, ...]:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(ir.to_proto(model).SerializeToString(), options)
    n = sizes.get("N", 3)
    feeds = {"t": np.zeros(sizes["M"], np.float32), "x": np.ones(n, np.float32)}
    return session.run(["ys"], feeds)[0].shape


def _bind(shape: ir.Shape, sizes: dict[str, int]) -> tuple[int | None, ...]:
    """The dims under ``sizes``; ``None`` for one that is the runtime's choice there."""
    dims: list[int | None] = []
    for d in shape.dims:
        if isinstance(d, int):
            dims.append(d)
            continue
        bound = expr.substitute(expr.parse_dim(d.value), sizes)
        dims.append(bound if isinstance(bound, int) else None)
    return tuple(dims)


@pytest.mark.parametrize(
    ("declared", "no_iteration"),
    [([3], (0, 3)), (["N"], (0, None))],
    ids=["int_dim_stays", "symbolic_dim_is_the_runtimes_choice_without_iterations"],
)
def test_zero_iterations_give_the_dims_written_on_the_model_written(declared, no_iteration):
    original = _loop_model(declared)
    before_zero = _shapes(original, {"M": 0, "N": 3})
    model = _loop_model(declared)
    infer_symbolic_shapes(model)
    ys = model.graph.outputs[1]
    # onnxruntime on the original knows no static shape of the body output: [0].
    assert before_zero == (0,)
    assert _bind(ys.shape, {"M": 0, "N": 3}) == no_iteration
    for sizes in ({"M": 0, "N": 3}, {"M": 1, "N": 3}, {"M": 2, "N": 0}, {"M": 0, "N": 1}):
        if declared == [3] and sizes["N"] != 3:
            continue  # x is float[3]
        actual = _shapes(model, sizes)
        written = _bind(ys.shape, sizes)
        assert len(actual) == len(written), sizes
        for a, w in zip(actual, written):
            assert w is None or a == w, (sizes, actual, written)
        if sizes["M"]:
            assert None not in written, sizes  # an iteration ran: every dim is known


def test_a_carried_size_that_grows_is_the_runtimes_choice_without_iterations():
    """onnxruntime infers a body once, with the carried inputs' initial shapes: a carried
    ``[2]`` that grows, passed through as a scan output, is ``[0, 2]`` without iterations
    (rewrite fuzz ``--ranges`` seed 902105, where ``0`` was written)."""
    model = ir.from_onnx_text("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[M] t, float[2] x) => (float[?] y, float[?, ?] ys) {
  ms = Shape(t)
  zero = Constant<value = int64 {0}>()
  m = Gather(ms, zero)
  y, ys = Loop<body = body (int64 i, bool c, float[2] a) => (bool co, float[?] ao, float[?] so) {
     co = Identity(c)
     so = Identity(a)
     z = Constant<value = int64[1] {0}>()
     one = Constant<value = int64[1] {1}>()
     head = Slice(a, z, one)
     ao = Concat<axis = 0>(a, head)
  }>(m, , x)
}""")
    context = SymbolicShapeInferencePass()(model).context
    count, grown = (expr.parse_dim(d.value) for d in model.graph.outputs[1].shape.dims)
    assert count == expr.sym("M")
    at_zero = expr.substitute(grown, {"M": 0})
    assert isinstance(at_zero, expr.DimExpr) and at_zero.is_symbol
    assert context.is_generated(at_zero.name)  # not 0: onnxruntime gives 2
    assert _shapes(model, {"M": 0, "N": 2}) == (0, 2)
