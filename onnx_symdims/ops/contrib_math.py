"""onnxruntime contrib math ops (``com.microsoft``): products, integer math, FFTs, gates.

``CDist``, ``ComplexMul``/``ComplexMulConj``, ``MulInteger``, ``ReduceSumInteger``, the
matmul variants (``MatMulInteger16``, ``QOrderedMatMul``, ``MatMulFpQ4``, ``GemmFloat8``,
the block-quantized fp8/fp4 weights), ``Rfft``/``Irfft``, ``SwiGLU`` and ``IsAllFinite``;
the other utilities are in :mod:`onnx_symdims.ops.contrib_misc`. Shapes follow
onnxruntime's contrib schemas and CPU kernels (checked against onnxruntime runs where a CPU
kernel exists).
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import divide, merge_dims
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.attention import require_rank
from onnx_symdims.ops.linalg import matmul_shape
from onnx_symdims.ops.reduce_norm import infer_reduce_axes_attribute
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None

INT32 = ir.DataType.INT32


# ----------------------------------------------------------------------------------------
# Math
# ----------------------------------------------------------------------------------------
@register(MS, "CDist", since=1)
def infer_cdist(ctx: NodeContext, node: ir.Node) -> None:
    """Pairwise distances of ``A (M, K)`` and ``B (N, K)``: ``(M, N)``."""
    ctx.require_input(1)
    a = require_rank(ctx, 0, (2,), "A") or (None, None)
    b = require_rank(ctx, 1, (2,), "B") or (None, None)
    merge_dims(ctx, "feature dims", a[1], b[1])
    ctx.set_output(0, (a[0], b[0]), ctx.input_dtype(0))


@register(MS, ("ComplexMul", "ComplexMulConj"), since=1)
def infer_complex_mul(ctx: NodeContext, node: ir.Node) -> None:
    """Broadcast of A and B (``(..., 2)`` complex pairs)."""
    ctx.require_input(1)
    shape = ctx.broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1))
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register(MS, "MulInteger", since=1)
def infer_mul_integer(ctx: NodeContext, node: ir.Node) -> None:
    """Broadcast of A and B, INT32."""
    ctx.require_input(2)
    shape = ctx.broadcast_shapes(ctx.input_shape(0), ctx.input_shape(2))
    ctx.set_output(0, shape, INT32)


@register(MS, "ReduceSumInteger", since=1)
def infer_reduce_sum_integer(ctx: NodeContext, node: ir.Node) -> None:
    """ReduceSum over the ``axes`` attribute; INT32."""
    infer_reduce_axes_attribute(ctx, node)
    ctx.set_output(0, ctx.ctx.shape_of(node.outputs[0]), INT32)
    ctx.set_output_value(0, None)  # summed int8 values are no shape quantities


@register(MS, ("MatMulInteger16", "QOrderedMatMul"), since=1)
def infer_matmul_like(ctx: NodeContext, node: ir.Node) -> None:
    """``numpy.matmul`` shape; MatMulInteger16 gives INT32, QOrderedMatMul INT8."""
    b_index = 2 if node.op_type == "QOrderedMatMul" else 1
    ctx.require_input(b_index)
    shape = matmul_shape(ctx, ctx.input_shape(0), ctx.input_shape(b_index))
    dtype = INT32 if node.op_type == "MatMulInteger16" else ir.DataType.INT8
    ctx.set_output(0, shape, dtype)


@register(MS, "MatMulFpQ4", since=1)
def infer_matmul_fp_q4(ctx: NodeContext, node: ir.Node) -> None:
    """``A (..., K) @ B`` with ``B_shape = [K, N]`` a constant: ``(..., N)``."""
    ctx.require_input(2)
    a = ctx.input_shape(0)
    b_shape = ctx.input_value(2)
    if b_shape is not None and len(b_shape) != 2:
        ctx.fail(f"B_shape must have 2 elements, got {len(b_shape)}")
    n = b_shape[1] if b_shape is not None else None
    if isinstance(n, expr.DimExpr) and n.is_unknown:
        n = None
    if a is not None and not a:
        ctx.fail("A must have rank >= 1")
    if a is not None and b_shape is not None:
        merge_dims(
            ctx, "K", a[-1], None if isinstance(b_shape[0], expr.DimExpr) else b_shape[0]
        )
    ctx.set_output(0, None if a is None else (*a[:-1], n), ctx.input_dtype(0))


def _matrix(shape: Shape | None, trans: bool) -> tuple[MaybeDim, MaybeDim]:
    if shape is None:
        return None, None
    return (shape[1], shape[0]) if trans else (shape[0], shape[1])


@register(MS, "GemmFloat8", since=1)
def infer_gemm_float8(ctx: NodeContext, node: ir.Node) -> None:
    """``op(A) (M, K) @ op(B) (K, N)``: ``(M, N)`` of the ``dtype`` attribute."""
    ctx.require_input(1)
    m, k_a = _matrix(require_rank(ctx, 0, (2,), "A"), bool(ctx.attr_int("transA", 0)))
    k_b, n = _matrix(require_rank(ctx, 1, (2,), "B"), bool(ctx.attr_int("transB", 0)))
    merge_dims(ctx, "inner dims", k_a, k_b)
    code = ctx.attr_int("dtype", 1)
    ctx.set_output(0, (m, n), ir.DataType(code) if code else None)


@register(MS, ("MatMulBlockQuantizedFp8Weight", "MatMulBlockQuantizedFp4Weight"), since=1)
def infer_matmul_block_quantized_fp(ctx: NodeContext, node: ir.Node) -> None:
    """``A (..., K) @ B^T`` with ``N = B.shape[0]``: ``(..., N)``."""
    ctx.require_input(1)
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    if a is not None and not a:
        ctx.fail("A must have rank >= 1")
    n = b[0] if b else None
    ctx.set_output(0, None if a is None else (*a[:-1], n), ctx.input_dtype(0))


@register(MS, ("Rfft", "Irfft"), since=1)
def infer_rfft(ctx: NodeContext, node: ir.Node) -> None:
    """Rfft: real ``(..., n)`` to ``(..., n/2 + 1, 2)``; Irfft: ``(..., m, 2)`` to ``(..., 2(m-1))``.

    Only one-dimensional, onesided transforms have a known length; others are fresh.
    """
    ctx.require_input(0)
    x = ctx.input_shape(0)
    onesided = ctx.attr_int("onesided", 1)
    ndim = ctx.attr_int("signal_ndim")
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    if node.op_type == "Rfft":
        if not x:
            ctx.fail("X must have rank >= 1")
        last = expr.add(expr.floordiv(x[-1], 2), 1) if onesided and ndim == 1 else None
        out: tuple[MaybeDim, ...] = (*x[:-1], last, 2)
    else:
        if len(x) < 2:
            ctx.fail("X must have rank >= 2 (..., m, 2)")
        last = None
        if onesided and ndim == 1:
            last = expr.mul(2, expr.sub(x[-2], 1))
            if isinstance(last, int) and last < 0:
                ctx.fail("the onesided length must be >= 1")
        out = (*x[:-2], last)
    ctx.set_output(0, out, ctx.input_dtype(0))


@register(MS, "SwiGLU", since=1)
def infer_swiglu(ctx: NodeContext, node: ir.Node) -> None:
    """``gate * up``; without ``up`` the gate's last dim holds both halves: ``D / 2``."""
    ctx.require_input(0)
    gate = ctx.input_shape(0)
    if ctx.has_input(1):
        shape = ctx.broadcast_shapes(gate, ctx.input_shape(1))
    elif gate is not None:
        if not gate:
            ctx.fail("gate must have rank >= 1")
        shape = (*gate[:-1], divide(ctx, gate[-1], 2, "packed gate/up"))
    else:
        shape = None
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register(MS, "IsAllFinite", since=1)
def infer_is_all_finite(ctx: NodeContext, node: ir.Node) -> None:
    """A BOOL scalar."""
    ctx.set_output(0, (), ir.DataType.BOOL)
