"""QuantizeLinear / DequantizeLinear hooks: x's shape and the spec's output type, per opset."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import ops
from onnx_symdims.passes import SymbolicShapeInferencePass
from tests.ops._ort_oracle import check_against_ort, model_text

SIZES = [{"N": 0}, {"N": 1}, {"N": 3}]

CASES = {
    "opset 13, uint8 zero point": (
        13,
        "float[N, 4] x",
        """
        s = Constant<value = float {0.5}>()
        z = Constant<value = uint8 {3}>()
        q = QuantizeLinear(x, s, z)
        y = DequantizeLinear(q, s, z)
        """,
        "float[?, ?] y, uint8[?, ?] q",
        {"q": ir.DataType.UINT8, "y": ir.DataType.FLOAT},
    ),
    "opset 13, no zero point": (
        13,
        "float[N, 4] x",
        """
        s = Constant<value = float {0.5}>()
        q = QuantizeLinear(x, s)
        y = DequantizeLinear(q, s)
        """,
        "float[?, ?] y, uint8[?, ?] q",
        {"q": ir.DataType.UINT8, "y": ir.DataType.FLOAT},
    ),
    "opset 19, float16 scale, int8 per axis": (
        19,
        "float16[N, 4] x",
        """
        s32 = Constant<value = float[4] {0.5, 0.25, 1.0, 2.0}>()
        s = Cast<to = 10>(s32)
        z = Constant<value = int8[4] {0, 1, -1, 2}>()
        q = QuantizeLinear<axis = 1>(x, s, z)
        y = DequantizeLinear<axis = 1>(q, s, z)
        """,
        "float16[?, ?] y, int8[?, ?] q",
        {"q": ir.DataType.INT8, "y": ir.DataType.FLOAT16},
    ),
    "opset 21, output_dtype without zero point": (
        21,
        "float[N, 4] x",
        """
        s = Constant<value = float {0.5}>()
        q = QuantizeLinear<output_dtype = 3>(x, s)
        y = DequantizeLinear(q, s)
        """,
        "float[?, ?] y, int8[?, ?] q",
        {"q": ir.DataType.INT8, "y": ir.DataType.FLOAT},
    ),
    "opset 23, dequantize to output_dtype": (
        23,
        "float[N, 4] x",
        """
        s = Constant<value = float {0.5}>()
        z = Constant<value = int8 {1}>()
        q = QuantizeLinear(x, s, z)
        y = DequantizeLinear<output_dtype = 10>(q, s, z)
        """,
        "float16[?, ?] y, int8[?, ?] q",
        {"q": ir.DataType.INT8, "y": ir.DataType.FLOAT16},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_shape_and_type_agree_with_onnxruntime(case):
    opset, inputs, body, outputs, dtypes = case
    inferred = check_against_ort(model_text(opset, inputs, body, outputs), SIZES)
    for name, dtype in dtypes.items():
        assert inferred.shape(name) == ["N", 4]
        assert inferred.dtype(name) == dtype


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_every_opset_from_10_has_a_hook(op):
    # Not the ONNX fallback: QDQ models hold dozens of these.
    for opset in range(10, 26):
        assert ops.lookup("", op, opset).__module__ == "onnx_symdims.ops.quantize"


DYNAMIC_QUANTIZE = """
<ir_version: 10, opset_import: ["" : {opset}]>
g ({dtype}[N, 4] x) => (uint8[?, ?] y, float s, uint8 z) {{
  y, s, z = DynamicQuantizeLinear(x)
}}
"""


def _written(model: ir.Model) -> dict[str, tuple]:
    return {
        value.name: (
            None if value.shape is None else tuple(str(d) for d in value.shape),
            value.dtype,
        )
        for node in model.graph
        for value in node.outputs
    }


def _with_fallback(model: ir.Model) -> dict[str, tuple]:
    """What ONNX's own inference (the fallback) writes for the model."""
    from onnx_symdims.ops import _registry

    registry = _registry.registry
    key = ("", "DynamicQuantizeLinear")
    registry.registered_ops()  # every family loaded: the hook is in the tables
    saved = (list(registry._since[key]), list(registry._hooks[key]))
    registry._since[key].clear()
    registry._hooks[key].clear()
    registry.invalidate()
    try:
        SymbolicShapeInferencePass()(model)
    finally:
        registry._since[key][:], registry._hooks[key][:] = saved
        registry.invalidate()
    return _written(model)


@pytest.mark.parametrize("opset", [11, 17, 21])
def test_dynamic_quantize_linear_writes_what_the_fallback_writes(opset):
    text = DYNAMIC_QUANTIZE.format(opset=opset, dtype="float")
    hooked = ir.from_onnx_text(text)
    SymbolicShapeInferencePass()(hooked)
    assert _written(hooked) == _with_fallback(ir.from_onnx_text(text))
    assert _written(hooked)["y"] == (("N", "4"), ir.DataType.UINT8)
    assert _written(hooked)["s"] == ((), ir.DataType.FLOAT)
    assert _written(hooked)["z"] == ((), ir.DataType.UINT8)


def test_dynamic_quantize_linear_leaves_a_wrong_input_type_to_onnx():
    # ONNX rejects a non-float input; the hook hands such a node to the fallback.
    m = ir.from_onnx_text(DYNAMIC_QUANTIZE.format(opset=17, dtype="int64"))
    result = SymbolicShapeInferencePass()(m)
    assert any("ONNX inference failed" in d.message for d in result.diagnostics)
