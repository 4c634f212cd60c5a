"""onnxruntime's fused contrib ops (``com.microsoft``) from its offline graph optimizations.

``SessionOptions.optimized_model_filepath`` saves the graph onnxruntime runs, with ops its
optimizer fused. Their shapes are those of the ops they replace (checked against
onnxruntime runs; the ops without a CPU kernel against the schema's inference):

* ``FusedConv`` (Conv + activation, optional ``Z`` summand): the ``Conv`` output.
* ``NhwcConv`` / ``NhwcFusedConv`` (CUDA): channels-last ``X (N, d..., C)`` and output
  ``(N, out..., M)``. The CUDA layout pass may also transpose the weight, so its spatial
  dims are only trusted through ``kernel_shape``; ``M`` is ``W[0]`` in both layouts.
* ``NhwcMaxPool`` (quantized CPU kernel): the ``MaxPool`` output, channels last.
* ``FusedGemm``: the ``Gemm`` output. ``TransposeMatMul`` and ``FusedMatMulActivation``:
  the ``FusedMatMul`` output.
* ``BiasSoftmax``, ``BiasDropout``, ``BitmaskBiasDropout`` (training/CUDA): the output has
  the data's shape; the mask is BOOL like the data, or packed bits ``ceil(numel / 32)``
  UINT32.

``Gelu``, ``FastGelu``, ``BiasGelu``, ``QuickGelu`` and ``BiasAdd`` are in
:mod:`onnx_symdims.ops.elementwise`; ``FusedMatMul``, ``GemmFastGelu``, ``BiasSplitGelu``
and the fused layer norms in :mod:`onnx_symdims.ops.contrib`.
"""

from __future__ import annotations

__all__ = ["nhwc_conv", "nhwc_pool"]

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import product
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.contrib import infer_fused_matmul
from onnx_symdims.ops.conv_pool import (
    conv_spatial_dim,
    infer_conv_output,
    pool_output_dim,
    read_window,
)
from onnx_symdims.ops.linalg import infer_gemm
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None


# ----------------------------------------------------------------------------------------
# Convolutions
# ----------------------------------------------------------------------------------------
@register(MS, "FusedConv", since=1)
def infer_fused_conv(ctx: NodeContext, node: ir.Node) -> None:
    """``Conv(X, W, B)`` then the activation (and ``+ Z``): the ``Conv`` output."""
    infer_conv_output(ctx, 0, 1, ctx.input_dtype(0))


def _channels_last_rank(ctx: NodeContext, x: Shape | None, minimum: int) -> int | None:
    """The spatial rank of channels-last ``x``, else of ``kernel_shape`` (None: unknown)."""
    if x is not None:
        if len(x) < minimum:
            ctx.fail(f"input must have rank >= {minimum} (N, spatial..., C), got {len(x)}")
        return len(x) - 2
    kernel = ctx.attr_ints("kernel_shape")
    return None if kernel is None else len(kernel)


def nhwc_conv(
    ctx: NodeContext,
    x_index: int,
    w_index: int,
    dtype: ir.DataType | None,
    *,
    weight_is_oihw: bool,
) -> None:
    """Sets output 0 of a channels-last convolution: ``(N, out..., M)``.

    Args:
        ctx: The node context.
        x_index: Input index of ``X (N, d..., C)``.
        w_index: Input index of the weight (``M`` first in every layout).
        dtype: Element type of the output.
        weight_is_oihw: True when the weight is ``(M, C/group, k...)`` for sure (the
            quantized CPU kernels); otherwise only ``kernel_shape`` gives the kernel.
    """
    ctx.require_input(x_index)
    ctx.require_input(w_index)
    x = ctx.input_shape(x_index)
    w = ctx.input_shape(w_index)
    spatial = _channels_last_rank(ctx, x, 3)
    if spatial is None and weight_is_oihw and w is not None:
        spatial = len(w) - 2
    if spatial is None:
        ctx.set_output(0, None, dtype)
        return
    if w is not None and len(w) != spatial + 2:
        ctx.fail(f"weight rank {len(w)} does not match input rank {spatial + 2}")
    kernel_attr = ctx.attr_ints("kernel_shape")
    if kernel_attr is not None:
        if len(kernel_attr) != spatial or min(kernel_attr, default=1) < 1:
            ctx.fail(f"kernel_shape {list(kernel_attr)} does not fit {spatial} spatial axes")
        kernel: list[MaybeDim] = list(kernel_attr)
    elif weight_is_oihw and w is not None:
        kernel = list(w[2:])
    else:
        kernel = [None] * spatial
    group = ctx.attr_int("group", 1)
    if group < 1:
        ctx.fail(f"group must be >= 1, got {group}")
    if weight_is_oihw and x is not None and w is not None:
        channels, per_group = x[-1], w[1]
        expected = expr.mul(per_group, group)
        if isinstance(channels, int) and isinstance(expected, int) and channels != expected:
            ctx.fail(
                f"input channels {channels} != weight channels {per_group} * group {group}"
            )
    window = read_window(ctx, spatial, pads_with_auto_pad="fail")
    out: list[MaybeDim] = [None if x is None else x[0]]
    for i in range(spatial):
        d, k = (None if x is None else x[1 + i]), kernel[i]
        if d is None or k is None:
            out.append(None)
            continue
        out.append(conv_spatial_dim(ctx, i, d, k, window))
    out.append(None if w is None else w[0])
    ctx.set_output(0, out, dtype)


@register(MS, ("NhwcConv", "NhwcFusedConv"), since=1)
def infer_nhwc_conv(ctx: NodeContext, node: ir.Node) -> None:
    """Channels-last Conv (no CPU kernel): ``(N, out..., W[0])``."""
    nhwc_conv(ctx, 0, 1, ctx.input_dtype(0), weight_is_oihw=False)


# ----------------------------------------------------------------------------------------
# Pooling
# ----------------------------------------------------------------------------------------
def nhwc_pool(ctx: NodeContext, *, dilations: bool, dtype: ir.DataType | None) -> None:
    """Sets output 0 of a channels-last pool of input 0: ``(N, out..., C)``.

    Args:
        ctx: The node context.
        dilations: Whether the op reads a ``dilations`` attribute (QLinearAveragePool
            does not).
        dtype: Element type of the output.
    """
    ctx.require_input(0)
    x = ctx.input_shape(0)
    kernel = ctx.attr_ints("kernel_shape")
    if kernel is None:
        ctx.fail("attribute 'kernel_shape' is required")
    if x is not None and len(x) != len(kernel) + 2:
        ctx.fail(f"input rank {len(x)} does not match kernel_shape {list(kernel)}")
    if min(kernel, default=1) < 1:
        ctx.fail(f"kernel_shape values must be >= 1, got {list(kernel)}")
    spatial = len(kernel)
    window = read_window(ctx, spatial, pads_with_auto_pad="ignore")
    ceil_mode = bool(ctx.attr_int("ceil_mode", 0))
    out: list[MaybeDim] = [None if x is None else x[0]]
    for i in range(spatial):
        if x is None:
            out.append(None)
            continue
        out.append(
            pool_output_dim(
                x[1 + i],
                kernel[i],
                window.strides[i],
                window.dilations[i] if dilations else 1,
                window.pads_begin[i],
                window.pads_end[i],
                window.auto_pad,
                ceil_mode,
                ctx.scope,
            )
        )
    out.append(None if x is None else x[-1])
    ctx.set_output(0, out, dtype)


@register(MS, "NhwcMaxPool", since=1)
def infer_nhwc_max_pool(ctx: NodeContext, node: ir.Node) -> None:
    """Channels-last MaxPool of 8-bit data: ``(N, out..., C)``."""
    nhwc_pool(ctx, dilations=True, dtype=ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Matrix products
# ----------------------------------------------------------------------------------------
@register(MS, "FusedGemm", since=1)
def infer_fused_gemm(ctx: NodeContext, node: ir.Node) -> None:
    """``activation(alpha * op(A) @ op(B) + beta * C)``: the ``Gemm`` output."""
    infer_gemm(ctx, node)


@register(MS, ("TransposeMatMul", "FusedMatMulActivation"), since=1)
def infer_transpose_matmul(ctx: NodeContext, node: ir.Node) -> None:
    """``FusedMatMul`` (transA/transB, and transBatch for the activation variant)."""
    infer_fused_matmul(ctx, node)


# ----------------------------------------------------------------------------------------
# Bias + softmax / dropout
# ----------------------------------------------------------------------------------------
@register(MS, "BiasSoftmax", since=1)
def infer_bias_softmax(ctx: NodeContext, node: ir.Node) -> None:
    """``Softmax(data + bias)`` with bias broadcast into data: data's shape."""
    ctx.require_input(0)
    ctx.require_input(1)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))


@register(MS, ("BiasDropout", "BitmaskBiasDropout"), since=1)
def infer_bias_dropout(ctx: NodeContext, node: ir.Node) -> None:
    """``Dropout(data + bias) + residual``: data's shape; BOOL mask or packed UINT32 bits."""
    ctx.require_input(0)
    ctx.require_input(1)
    shape = ctx.input_shape(0)
    ctx.set_output(0, shape, ctx.input_dtype(0))
    if node.op_type == "BiasDropout":
        ctx.set_output(1, shape, ir.DataType.BOOL)
    else:
        words = None if shape is None else (expr.ceildiv(product(shape), 32),)
        ctx.set_output(1, words, ir.DataType.UINT32)
