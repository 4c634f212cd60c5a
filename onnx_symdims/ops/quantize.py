"""``QuantizeLinear`` and ``DequantizeLinear`` of the ONNX domain: x's shape, the spec's type.

Hooks instead of the ONNX fallback because QDQ models hold dozens of them (one per tensor
a quantized op reads), and the fallback builds and checks a node proto for each. The
contrib (``com.microsoft``) forms are in :mod:`onnx_symdims.ops.contrib_quant`.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims.ops._common import data_type
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)


def _output_dtype_attr(ctx: NodeContext) -> ir.DataType | None:
    """The ``output_dtype`` attribute (opset 21 / 23 on), ``None`` when unset or 0."""
    code = ctx.attr_int("output_dtype", 0)
    if not code:
        return None
    try:
        return data_type(code)
    except ValueError:
        ctx.fail(f"invalid output_dtype {code}")


@register("", "QuantizeLinear", since=10)
def infer_quantize_linear(ctx: NodeContext, node: ir.Node) -> None:
    """X's shape; typed ``output_dtype`` (opset 21 on), else like the zero point, else UINT8."""
    ctx.require_input(0)
    ctx.require_input(1)
    dtype = _output_dtype_attr(ctx) if ctx.opset >= 21 else None
    if dtype is None:
        dtype = ctx.input_dtype(2) if ctx.has_input(2) else ir.DataType.UINT8
    ctx.set_output(0, ctx.input_shape(0), dtype)


@register("", "DequantizeLinear", since=10)
def infer_dequantize_linear(ctx: NodeContext, node: ir.Node) -> None:
    """X's shape; FLOAT before opset 19, then the scale's type (or ``output_dtype``, 23 on)."""
    ctx.require_input(0)
    ctx.require_input(1)
    if ctx.opset < 19:
        dtype: ir.DataType | None = ir.DataType.FLOAT
    else:
        dtype = _output_dtype_attr(ctx) if ctx.opset >= 23 else None
        if dtype is None:
            dtype = ctx.input_dtype(1)
    ctx.set_output(0, ctx.input_shape(0), dtype)


_DYNAMIC_QUANTIZE_TYPES = (ir.DataType.UINT8, ir.DataType.FLOAT, ir.DataType.UINT8)


@register("", "DynamicQuantizeLinear", since=11)
def infer_dynamic_quantize_linear(ctx: NodeContext, node: ir.Node) -> None:
    """``y`` (UINT8) has x's shape; ``y_scale`` (FLOAT) and ``y_zero_point`` (UINT8) are scalars.

    What ONNX's inference gives (dynamically quantized models hold one per quantized
    MatMul input, and the fallback costs tens of microseconds each). Anything but the
    plain form (a float ``x``, three named outputs) goes to the fallback, which checks
    it the way ONNX does.
    """
    x = node.inputs[0] if len(node.inputs) == 1 else None
    outputs = node.outputs
    if (
        x is None
        or not x.name
        or len(outputs) != 3
        or not all(value.name for value in outputs)
        or ctx.input_dtype(0) != ir.DataType.FLOAT
    ):
        ctx.fallback()
        return
    ctx.set_output(0, ctx.input_shape(0), _DYNAMIC_QUANTIZE_TYPES[0])
    ctx.set_output(1, (), _DYNAMIC_QUANTIZE_TYPES[1])
    ctx.set_output(2, (), _DYNAMIC_QUANTIZE_TYPES[2])
