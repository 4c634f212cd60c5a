"""Rewrites next to values whose element type inference does not know.

Inference leaves a value untyped where it fails: a ``Conv`` whose window is larger than
its input (found on GLPN and Moonshine of the attack2 corpus optimized with
``--symbol-range height=1:1``: the patch embedding leaves a 1-row map under a 4-row
kernel), or an op it does not know. A rewrite that copied that unknown type onto the value
it made wrote a ``TensorType(None)``, which onnx_ir cannot serialize: ``optimize -o``
failed with "cannot serialize the model". The value a rewrite makes now stays untyped
instead (``set_type``), as the value it replaces was.

No size runs these models in onnxruntime (the ``Conv`` refuses every input), so there is
no output to compare: the tests check that the optimized model serializes, passes the
onnx checker and is refused by onnxruntime for the same reason as the original.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

import onnx_symdims
from onnx_symdims.rewrite._facts import set_type

# c is untyped (the Conv's window of 3 is larger than its input of 2); q has a proven
# shape [2, 3, 1, 4] and no type.
PREFIX = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[1, 1, 2] x, float[1, 1, 3] w) => ({outputs}) {{
    c = Conv(x, w)
    t = Constant<value = int64[4] {{2, 3, 1, 4}}>()
    r = Reshape(c, t)
    q = Relu(r)
{body}
}}
"""

CASES = {
    # CollapseReshapeChainsPass: Unsqueeze then Reshape become one Reshape of q
    "reshape_chain": (
        "float[4, 6] z",
        """
    a = Constant<value = int64[1] {0}>()
    u = Unsqueeze(q, a)
    t2 = Constant<value = int64[2] {4, 6}>()
    v = Reshape(u, t2)
    z = Relu(v)
""",
    ),
    # the transposes around an Add cancel: a new Add of q
    "transpose_through_binary": (
        "float[2, 3, 4, 1] z",
        """
    p = Transpose<perm = [0, 1, 3, 2]>(q)
    e = Add(p, p)
    z = Transpose<perm = [0, 1, 3, 2]>(e)
""",
    ),
    # two slices covering the axis: a Split
    "slices_to_split_concat": (
        "float[2, 3, 1, 4] z",
        """
    s0 = Constant<value = int64[1] {0}>()
    s1 = Constant<value = int64[1] {1}>()
    s3 = Constant<value = int64[1] {3}>()
    ax = Constant<value = int64[1] {1}>()
    y1 = Slice(q, s0, s1, ax)
    y2 = Slice(q, s1, s3, ax)
    z = Concat<axis = 1>(y1, y2)
""",
    ),
    "slices_to_split": (
        "float[2, 1, 1, 4] z1, float[2, 2, 1, 4] z2",
        """
    s0 = Constant<value = int64[1] {0}>()
    s1 = Constant<value = int64[1] {1}>()
    s3 = Constant<value = int64[1] {3}>()
    ax = Constant<value = int64[1] {1}>()
    y1 = Slice(q, s0, s1, ax)
    y2 = Slice(q, s1, s3, ax)
    z1 = Relu(y1)
    z2 = Relu(y2)
""",
    ),
    "reduce_keepdims_then_squeeze": (
        "float[2, 3, 4] z",
        """
    a = Constant<value = int64[1] {2}>()
    s = ReduceSum<keepdims = 1>(q, a)
    z = Squeeze(s, a)
""",
    ),
    # the Expand is a graph output: q takes its place and keeps its declared type
    "expand_output_to_own_shape": (
        "float[2, 3, 1, 4] z",
        """
    sh = Constant<value = int64[4] {2, 3, 1, 4}>()
    z = Expand(q, sh)
""",
    ),
    "expand_to_own_shape": (
        "float[2, 3, 1, 4] z",
        """
    sh = Constant<value = int64[4] {2, 3, 1, 4}>()
    ex = Expand(q, sh)
    z = Add(ex, q)
""",
    ),
}


def _refusal(model: onnx.ModelProto) -> str:
    """onnxruntime's error for the one input size the model declares."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    feeds = {
        "x": np.ones((1, 1, 2), np.float32),
        "w": np.ones((1, 1, 3), np.float32),
    }
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        session.run(None, feeds)
    except Exception as e:  # onnxruntime's InvalidArgument (node names differ)
        message = str(e)
        return (
            "conv" if "Conv node" in message and "Invalid input shape" in message else message
        )
    return "ran"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rewrite_next_to_an_untyped_value_keeps_the_model_serializable(case):
    outputs, body = CASES[case]
    text = PREFIX.format(outputs=outputs, body=body)
    original = ir.serde.serialize_model(ir.from_onnx_text(text))
    optimized = onnx_symdims.optimize(ir.from_onnx_text(text))
    result = ir.serde.serialize_model(optimized)  # raised SerdeError before
    onnx.checker.check_model(result)  # the graph outputs keep their declared types
    assert [o.type.tensor_type.elem_type for o in result.graph.output] == [
        o.type.tensor_type.elem_type for o in original.graph.output
    ]
    assert _refusal(original) == _refusal(result) == "conv"


def test_set_type_leaves_a_value_of_unknown_dtype_untyped():
    value = ir.Value(name="v")
    set_type(value, None, ir.Shape([2, 3]))
    assert value.type is None
    assert value.shape is None
    set_type(value, ir.DataType.FLOAT, ir.Shape([2, 3]))
    assert value.dtype == ir.DataType.FLOAT
    assert list(value.shape) == [2, 3]
