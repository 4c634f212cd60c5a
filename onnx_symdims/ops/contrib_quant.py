"""onnxruntime's quantized contrib ops (``com.microsoft``): what its quantizers emit.

``quantize_static`` (QOperator), ``quantize_dynamic``, the QDQ-to-QLinear fusions of its
graph optimizer and ``MatMulNBitsQuantizer`` produce these ops. Each has the shape of the
float op it replaces; the scales and zero points never change a shape. Checked against
onnxruntime runs (CPU kernels):

* ``QLinearConv``: the ``Conv`` shape of ``x`` (input 0) and ``w`` (input 3);
  ``channels_last=1`` (onnxruntime's NHWC pass) takes ``x (N, d..., C)``, keeps ``w`` as
  ``(M, C/group, k...)`` and gives ``(N, out..., M)``.
* ``QLinearAdd``/``QLinearMul``: broadcast of inputs 0 and 3. ``QLinearWhere``: broadcast
  of inputs 0, 1 and 4. ``QLinearConcat``: ``Concat`` of inputs 2, 5, 8, ...
* ``QLinearSoftmax``/``QLinearSigmoid``/``QLinearLeakyRelu``: X's shape.
* ``QLinearAveragePool``/``QLinearGlobalAveragePool``: the ``ai.onnx`` pools, or their
  channels-last forms with ``channels_last=1``. ``QLinearReduceMean``: ``ReduceMean``.
* ``QGemm``: the ``Gemm`` shape of inputs 0 and 3 (bias at 6); FLOAT without
  ``y_zero_point``.
* ``DynamicQuantizeMatMul``/``MatMulIntegerToFloat``: ``numpy.matmul`` of inputs 0 and 1.
* ``MatMulNBits`` (in :mod:`onnx_symdims.ops.contrib`), ``MatMulBnb4``, ``MatMulNBitsMlp``,
  ``MatMulNBitsQLoRA``: ``A (..., K)`` to ``(..., N)`` for every ``bits``/``block_size``/
  ``accuracy_level``; ``MatMulNBitsQkv``: ``(..., Nq)``, ``(..., Nkv)`` twice.
* ``GatherBlockQuantized``: ``Gather`` along ``gather_axis``; ``uint8`` data with
  ``bits < 8`` packs ``8 / bits`` values per byte along the last axis. ``GatherPacked``
  (CUDA) and ``MatMulPacked`` (CUDA): ``indices.shape + (K,)`` and ``(..., N)``.
* ``QuantizeLinear``/``DequantizeLinear`` (int8/16/4 and their unsigned forms): x's shape.
* ``QEmbedLayerNormalization``: ``EmbedLayerNormalization``. ``DynamicQuantizeLSTM``: the
  ``LSTM`` outputs (W is ``(num_directions, input_size, 4 * hidden)``).
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import merge_dims
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.contrib_fused import nhwc_conv, nhwc_pool
from onnx_symdims.ops.conv_pool import infer_conv_output, infer_global_pool, infer_pool
from onnx_symdims.ops.linalg import check_inner, gemm_matrix, matmul_shape
from onnx_symdims.ops.reduce_norm import reduced_shape, unique_axes
from onnx_symdims.ops.shape_ops import least_fresh
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None


# ----------------------------------------------------------------------------------------
# Convolution and pooling
# ----------------------------------------------------------------------------------------
@register(MS, "QLinearConv", since=1)
def infer_qlinear_conv_ms(ctx: NodeContext, node: ir.Node) -> None:
    """``Conv`` of ``x`` (0) by ``w`` (3), NCHW or channels last; ``y_zero_point`` type."""
    dtype = ctx.input_dtype(7)
    if ctx.attr_int("channels_last", 0):
        nhwc_conv(ctx, 0, 3, dtype, weight_is_oihw=True)
    else:
        infer_conv_output(ctx, 0, 3, dtype)


@register(MS, "QLinearAveragePool", since=1)
def infer_qlinear_average_pool(ctx: NodeContext, node: ir.Node) -> None:
    """``AveragePool`` (no dilations), NCHW or channels last."""
    if ctx.attr_int("channels_last", 0):
        nhwc_pool(ctx, dilations=False, dtype=ctx.input_dtype(0))
    else:
        infer_pool(ctx, node)


@register(MS, "QLinearGlobalAveragePool", since=1)
def infer_qlinear_global_average_pool(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, C, 1, ..., 1)``, or ``(N, 1, ..., 1, C)`` channels last."""
    if not ctx.attr_int("channels_last", 0):
        infer_global_pool(ctx, node)
        return
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None and len(x) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(x)}")
    out = None if x is None else (x[0], *([1] * (len(x) - 2)), x[-1])
    ctx.set_output(0, out, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------------------
def _broadcast(ctx: NodeContext, inputs: tuple[int, ...], dtype_from: int) -> None:
    for i in inputs:
        ctx.require_input(i)
    shape = ctx.broadcast_shapes(*(ctx.input_shape(i) for i in inputs))
    ctx.set_output(0, shape, ctx.input_dtype(dtype_from))


@register(MS, ("QLinearAdd", "QLinearMul"), since=1)
def infer_qlinear_binary(ctx: NodeContext, node: ir.Node) -> None:
    """Broadcast of A (0) and B (3)."""
    _broadcast(ctx, (0, 3), 0)


@register(MS, "QLinearWhere", since=1)
def infer_qlinear_where(ctx: NodeContext, node: ir.Node) -> None:
    """Broadcast of condition (0), X (1) and Y (4); X's type."""
    _broadcast(ctx, (0, 1, 4), 1)


@register(MS, ("QLinearSoftmax", "QLinearSigmoid", "QLinearLeakyRelu"), since=1)
def infer_qlinear_unary(ctx: NodeContext, node: ir.Node) -> None:
    """X's shape and type."""
    ctx.require_input(0)
    shape = ctx.input_shape(0)
    if node.op_type == "QLinearSoftmax" and shape is not None:
        ctx.normalize_axis(ctx.attr_int("axis", -1), max(len(shape), 1))
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register(MS, "QLinearConcat", since=1)
def infer_qlinear_concat(ctx: NodeContext, node: ir.Node) -> None:
    """``Concat`` along ``axis`` of the tensors at inputs 2, 5, 8, ... (with scale, zp)."""
    ctx.require_input(0)
    ctx.require_input(1)
    if (ctx.num_inputs - 2) % 3 or ctx.num_inputs < 5:
        ctx.fail(f"expects Y_scale, Y_zero_point and (X, scale, zero_point) triples, "
                 f"got {ctx.num_inputs} inputs")  # fmt: skip
    axis = ctx.attr_int("axis")
    if axis is None:
        ctx.fail("missing attribute 'axis'")
    dtype = ctx.input_dtype(1)
    shapes = [ctx.input_shape(i) for i in range(2, ctx.num_inputs, 3)]
    known = [s for s in shapes if s is not None]
    if not known:
        ctx.set_output(0, None, dtype)
        return
    rank = len(known[0])
    if any(len(s) != rank for s in known):
        ctx.fail(f"inputs have different ranks {[len(s) for s in known]}")
    if rank == 0:
        ctx.fail("cannot concatenate scalars")
    axis = ctx.normalize_axis(axis, rank)
    out: list[MaybeDim] = []
    for k in range(rank):
        candidates = [s[k] for s in known]
        if k == axis:
            total: MaybeDim = None
            if len(known) == len(shapes):
                total = candidates[0]
                for d in candidates[1:]:
                    total = expr.add(total, d)
            out.append(total)
            continue
        ints = {d for d in candidates if isinstance(d, int)}
        if len(ints) > 1:
            ctx.fail(f"inputs disagree on axis {k}: {sorted(ints)}")
        chosen = ints.pop() if ints else least_fresh(ctx, candidates)
        for d in candidates:
            if d is not chosen and not isinstance(d, int):
                ctx.ctx.add_constraint(d, chosen)  # a valid run has them equal
        out.append(chosen)
    ctx.set_output(0, out, dtype)


@register(MS, "QLinearReduceMean", since=1)
def infer_qlinear_reduce_mean(ctx: NodeContext, node: ir.Node) -> None:
    """``ReduceMean`` over the required ``axes`` with the required ``keepdims``."""
    ctx.require_input(0)
    axes = ctx.attr_ints("axes")
    keepdims = ctx.attr_int("keepdims")
    if axes is None or keepdims is None:
        ctx.fail("attributes 'axes' and 'keepdims' are required")
    shape = ctx.input_shape(0)
    if shape is not None:
        axes = list(range(len(shape))) if not axes else unique_axes(ctx, axes, len(shape))
        shape = reduced_shape(shape, axes, bool(keepdims))
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register(MS, "QuantizeLinear", since=1)
def infer_quantize_linear_ms(ctx: NodeContext, node: ir.Node) -> None:
    """X's shape; the zero point's type (UINT8 without one)."""
    ctx.require_input(0)
    dtype = ctx.input_dtype(2) if ctx.has_input(2) else ir.DataType.UINT8
    ctx.set_output(0, ctx.input_shape(0), dtype)


@register(MS, "DequantizeLinear", since=1)
def infer_dequantize_linear_ms(ctx: NodeContext, node: ir.Node) -> None:
    """X's shape; the scale's type."""
    ctx.require_input(0)
    ctx.require_input(1)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(1))


# ----------------------------------------------------------------------------------------
# Matrix products
# ----------------------------------------------------------------------------------------
@register(MS, "QGemm", since=1)
def infer_qgemm(ctx: NodeContext, node: ir.Node) -> None:
    """``(M, N)`` of A (0) and B (3) after transA/transB; typed like ``y_zero_point``."""
    ctx.require_input(0)
    ctx.require_input(3)
    m, k_a = gemm_matrix(ctx, 0, bool(ctx.attr_int("transA", 0)))
    k_b, n = gemm_matrix(ctx, 3, bool(ctx.attr_int("transB", 0)))
    if k_a is not None and k_b is not None:
        check_inner(ctx, k_a, k_b)
    bias = ctx.input_shape(6) if ctx.has_input(6) else None
    if bias is not None and bias and isinstance(bias[-1], int) and bias[-1] != 1:
        n = merge_dims(ctx, "bias columns", n, bias[-1])
    # onnxruntime types Y like y_zero_point, and FLOAT without one (even with y_scale).
    dtype = ctx.input_dtype(8) if ctx.has_input(8) else ir.DataType.FLOAT
    ctx.set_output(0, (m, n), dtype)


@register(MS, ("DynamicQuantizeMatMul", "MatMulIntegerToFloat"), since=1)
def infer_integer_matmul_to_float(ctx: NodeContext, node: ir.Node) -> None:
    """``numpy.matmul`` of A (0) and B (1); float like A (or like a_scale)."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    a = inputs[0] if inputs else None
    b = inputs[1] if len(inputs) > 1 else None
    if a is None or b is None:
        ctx.require_input(0)
        ctx.require_input(1)  # one of them fails the node
    facts = ctx.ctx
    shape = matmul_shape(ctx, facts.shape_of(a), facts.shape_of(b))
    source = 0 if node._op_type == "DynamicQuantizeMatMul" else 2
    ctx.set_output(0, shape, ctx.input_dtype(source))


def _n_columns(ctx: NodeContext, name: str = "N") -> tuple[int, int]:
    """The required ``K`` and ``N``-like attribute (output columns), non-negative."""
    k = ctx.attr_int("K")
    n = ctx.attr_int(name)
    if n is None or k is None or n < 0 or k < 0:
        ctx.fail(f"attributes K and {name} are required and non-negative")
    return k, n


def _rows_times(ctx: NodeContext, k: int, n: int) -> Shape | None:
    """``A (..., K)`` to ``(..., n)``; fails when A's last dim is an int other than K."""
    shape = ctx.input_shape(0)
    if shape is None:
        return None
    if not shape:
        ctx.fail("A must have rank >= 1")
    if isinstance(shape[-1], int) and shape[-1] != k:
        ctx.fail(f"A's last dim {shape[-1]} differs from K={k}")
    ctx.ctx.add_constraint(shape[-1], k)  # the kernels check it: every run has it
    return (*shape[:-1], n)


@register(MS, ("MatMulBnb4", "MatMulNBitsQLoRA", "MatMulPacked"), since=1)
def infer_matmul_blockwise(ctx: NodeContext, node: ir.Node) -> None:
    """``A (..., K) @ dequantized B (K, N)`` (``B^T`` for MatMulPacked): ``(..., N)``."""
    ctx.require_input(0)
    k, n = _n_columns(ctx)
    ctx.set_output(0, _rows_times(ctx, k, n), ctx.input_dtype(0))


@register(MS, "MatMulNBitsMlp", since=1)
def infer_matmul_nbits_mlp(ctx: NodeContext, node: ir.Node) -> None:
    """``act(A @ gate) * (A @ up)``: ``(..., N)``; the skip sum keeps A's shape."""
    ctx.require_input(0)
    k, n = _n_columns(ctx)
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, _rows_times(ctx, k, n), dtype)
    ctx.set_output(1, ctx.input_shape(0), dtype)


@register(MS, "MatMulNBitsQkv", since=1)
def infer_matmul_nbits_qkv(ctx: NodeContext, node: ir.Node) -> None:
    """Normed A times three weights: Q ``(..., Nq)``, K and V ``(..., Nkv)``; A's sum."""
    ctx.require_input(0)
    k, nq = _n_columns(ctx, "Nq")
    _, nkv = _n_columns(ctx, "Nkv")
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, _rows_times(ctx, k, nq), dtype)
    ctx.set_output(1, _rows_times(ctx, k, nkv), dtype)
    ctx.set_output(2, _rows_times(ctx, k, nkv), dtype)
    ctx.set_output(3, ctx.input_shape(0), dtype)


# ----------------------------------------------------------------------------------------
# Gathers and embeddings
# ----------------------------------------------------------------------------------------
@register(MS, "GatherBlockQuantized", since=1)
def infer_gather_block_quantized(ctx: NodeContext, node: ir.Node) -> None:
    """``data[:g] + indices + data[g+1:]`` (unpacked); the scales' type."""
    ctx.require_input(0)
    ctx.require_input(1)
    ctx.require_input(2)
    data = ctx.input_shape(0)
    indices = ctx.input_shape(1)
    dtype = ctx.input_dtype(2)
    if data is None or indices is None:
        ctx.set_output(0, None, dtype)
        return
    if not data:
        ctx.fail("data must have rank >= 1")
    rank = len(data)
    gather_axis = ctx.normalize_axis(ctx.attr_int("gather_axis", 0), rank)
    ctx.normalize_axis(ctx.attr_int("quantize_axis", 1), rank)
    bits = ctx.attr_int("bits", 4)
    unpacked = list(data)
    if ctx.input_dtype(0) == ir.DataType.UINT8:
        if bits not in (2, 4, 8):
            ctx.fail(f"bits must be 2, 4 or 8 for uint8 data, got {bits}")
        if bits < 8:
            if gather_axis == rank - 1:
                ctx.fail("packed uint8 data cannot be gathered along its last axis")
            unpacked[-1] = expr.mul(unpacked[-1], 8 // bits)
    elif ctx.input_dtype(0) is None:
        # Packed or not depends on the data type; the packed axis stays unknown.
        unpacked[-1] = None  # type: ignore[call-overload]
    out = [*unpacked[:gather_axis], *indices, *unpacked[gather_axis + 1 :]]
    ctx.set_output(0, out, dtype)


@register(MS, "GatherPacked", since=1)
def infer_gather_packed(ctx: NodeContext, node: ir.Node) -> None:
    """Rows of a packed ``(vocab, row_bytes)`` table: ``indices.shape + (K,)``."""
    ctx.require_input(0)
    ctx.require_input(1)
    k = ctx.attr_int("K")
    if k is None or k <= 0:
        ctx.fail("attribute K is required and positive")
    data = ctx.input_shape(0)
    if data is not None and len(data) != 2:
        ctx.fail(f"data must be a 2-D packed table, got rank {len(data)}")
    dtype = ctx.attr_int("output_dtype", int(ir.DataType.BFLOAT16))
    try:
        out_dtype = ir.DataType(dtype)
    except ValueError:
        ctx.fail(f"output_dtype {dtype} is not an ONNX element type")
    indices = ctx.input_shape(1)
    ctx.set_output(0, None if indices is None else (*indices, k), out_dtype)


@register(MS, "QEmbedLayerNormalization", since=1)
def infer_qembed_layer_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """``(B, S, hidden)`` from input_ids (0) and word_embedding_quant (2); mask ``(B,)``."""
    ctx.require_input(0)
    ctx.require_input(2)
    ids = ctx.input_shape(0)
    if ids is not None and len(ids) != 2:
        ctx.fail(f"input_ids must be 2-D, got rank {len(ids)}")
    words = ctx.input_shape(2)
    if words is not None and len(words) != 2:
        ctx.fail(f"word_embedding must be 2-D, got rank {len(words)}")
    batch, seq = ids if ids is not None else (None, None)
    hidden = None if words is None else words[1]
    dtype = ctx.input_dtype(8) if ctx.has_input(8) else ir.DataType.FLOAT
    ctx.set_output(0, (batch, seq, hidden), dtype)
    ctx.set_output(1, (batch,), ir.DataType.INT32)


# ----------------------------------------------------------------------------------------
# Recurrent
# ----------------------------------------------------------------------------------------
@register(MS, "DynamicQuantizeLSTM", since=1)
def infer_dynamic_quantize_lstm(ctx: NodeContext, node: ir.Node) -> None:
    """Y ``(seq, dirs, batch, hidden)``; Y_h, Y_c ``(dirs, batch, hidden)``."""
    for i in (0, 1, 2):
        ctx.require_input(i)
    x = ctx.input_shape(0)
    if x is not None and len(x) != 3:
        ctx.fail(f"X must be 3-D (seq, batch, input), got rank {len(x)}")
    direction = ctx.attr_str("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        ctx.fail(f"unknown direction {direction!r}")
    dirs: MaybeDim = 2 if direction == "bidirectional" else 1
    w = ctx.input_shape(1)
    r = ctx.input_shape(2)
    if (w is not None and len(w) != 3) or (r is not None and len(r) != 3):
        ctx.fail("W and R must be 3-D")
    dirs = merge_dims(ctx, "num_directions", dirs, w[0] if w else None, r[0] if r else None)
    hidden = ctx.attr_int("hidden_size")
    if hidden is not None and hidden <= 0:
        ctx.fail(f"hidden_size must be > 0, got {hidden}")
    hidden = merge_dims(ctx, "hidden_size", hidden, r[1] if r else None)
    seq, batch = (x[0], x[1]) if x is not None else (None, None)
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, (seq, dirs, batch, hidden), dtype)
    ctx.set_output(1, (dirs, batch, hidden), dtype)
    ctx.set_output(2, (dirs, batch, hidden), dtype)
