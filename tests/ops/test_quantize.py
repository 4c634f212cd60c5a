"""QuantizeLinear / DequantizeLinear hooks: x's shape and the spec's output type, per opset."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import ops
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
