"""Ops that build a tensor from attributes or a size.

``OneHot``, ``EyeLike``, ``Multinomial``, ``RandomNormal(Like)``,
``RandomUniform(Like)``, ``Bernoulli``.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    dtype_attr,
    scalar_input,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    NodeContext,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64


# ----------------------------------------------------------------------------------------
# OneHot
# ----------------------------------------------------------------------------------------
@register("", "OneHot", since=9)
def infer_one_hot(ctx: NodeContext, node: ir.Node) -> None:
    """``indices`` shape with ``depth`` inserted at ``axis``; element type of ``values``."""
    for i in range(3):
        ctx.require_input(i)
    indices = ctx.input_shape(0)
    dtype = ctx.input_dtype(2)
    depth = scalar_input(ctx, 1, "depth")
    if isinstance(depth, int) and depth < 0:
        ctx.fail(f"depth must be >= 0, got {depth}")
    if indices is None:
        ctx.set_output(0, None, dtype)
        return
    rank = len(indices) + 1
    axis = ctx.normalize_axis(ctx.attr_int("axis", -1), rank)
    ctx.set_output(0, (*indices[:axis], depth, *indices[axis:]), dtype)


# ----------------------------------------------------------------------------------------
# Generators
# ----------------------------------------------------------------------------------------
@register("", "EyeLike", since=9)
def infer_eye_like(ctx: NodeContext, node: ir.Node) -> None:
    """Same 2-D shape as the input; element type from ``dtype`` or the input."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None and len(x) != 2:
        ctx.fail(f"EyeLike needs a 2-D input, got rank {len(x)}")
    ctx.set_output(
        0, x if x is not None else (None, None), dtype_attr(ctx, "dtype", ctx.input_dtype(0))
    )


@register("", ["RandomNormalLike", "RandomUniformLike", "Bernoulli"], since=1)
def infer_random_like(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as the input; element type from ``dtype`` or the input."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), dtype_attr(ctx, "dtype", ctx.input_dtype(0)))


@register("", ["RandomNormal", "RandomUniform"], since=1)
def infer_random(ctx: NodeContext, node: ir.Node) -> None:
    """Shape from the ``shape`` attribute; element type ``dtype`` (default FLOAT)."""
    shape = ctx.attr_ints("shape")
    if shape is None:
        ctx.fail("attribute 'shape' is required")
    if any(d < 0 for d in shape):
        ctx.fail(f"attribute 'shape' has a negative dim: {list(shape)}")
    ctx.set_output(0, tuple(shape), dtype_attr(ctx, "dtype", ir.DataType.FLOAT))


@register("", "Multinomial", since=7)
def infer_multinomial(ctx: NodeContext, node: ir.Node) -> None:
    """``[batch, classes] -> [batch, sample_size]``; element type ``dtype`` (INT32)."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None and len(x) != 2:
        ctx.fail(f"Multinomial needs a 2-D input, got rank {len(x)}")
    sample_size = ctx.attr_int("sample_size", 1)
    if sample_size < 0:
        ctx.fail(f"sample_size must be >= 0, got {sample_size}")
    batch = None if x is None else x[0]
    ctx.set_output(0, (batch, sample_size), dtype_attr(ctx, "dtype", ir.DataType.INT32))
