"""Matrix products: ``MatMul``, ``Gemm`` and the quantized ``MatMulInteger``/``QLinearMatMul``.

``MatMul`` follows ``numpy.matmul``: a 1-D operand is promoted to a matrix and the
added axis is removed again, batch dims broadcast (two different symbolic batch dims
give ``broadcast(a, b)``). Inner dims that are two different integers fail the node;
two different symbolic inner dims are accepted and recorded as an equality (every
successful run has them equal).
"""

from __future__ import annotations

__all__ = ["check_inner", "gemm_matrix"]

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import same_dim
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]


def check_inner(ctx: NodeContext, a: Dim, b: Dim) -> None:
    """Fails on two different integer contraction dims; records ``a == b`` otherwise."""
    if same_dim(a, b):
        return
    if isinstance(a, int) and isinstance(b, int):
        ctx.fail(f"inner dimensions differ: {a} and {b}")
    ctx.ctx.add_symbolic_constraint_with_leaf_derivation(a, b)


def matmul_shape(ctx: NodeContext, a: Shape | None, b: Shape | None) -> Shape | None:
    """The ``numpy.matmul`` result shape of operands ``a`` and ``b`` (``None``: unknown rank).

    Args:
        ctx: The node context (failures and constraints are reported through it).
        a: The left operand's shape.
        b: The right operand's shape.

    Returns:
        The output shape, or ``None`` when an operand's rank is unknown.
    """
    if a is None or b is None:
        return None
    if len(b) == 2 and len(a) >= 2 and a[-1] == b[0]:  # ints by value, dims by identity
        # Activations times a weight matrix sharing the inner dim (every layer's
        # projection): what the general path below gives, (*a[:-2], a[-2], b[-1]).
        return (*a[:-1], b[1])
    if not a or not b:
        ctx.fail("MatMul operands must have rank >= 1")
    a_is_vector = len(a) == 1
    b_is_vector = len(b) == 1
    left = (1, *a) if a_is_vector else a
    right = (*b, 1) if b_is_vector else b
    inner = left[-1]
    if inner is not right[-2]:  # the same dim (the usual case) needs no check
        check_inner(ctx, inner, right[-2])
    left_batch = left[:-2]
    right_batch = right[:-2]
    # Broadcasting against no batch dims (a weight matrix, the usual case) changes nothing.
    if not right_batch:
        batch = left_batch
    elif not left_batch:
        batch = right_batch
    else:
        batch = ctx.broadcast_shapes(left_batch, right_batch)
        assert batch is not None  # both batch shapes are known
    rows = () if a_is_vector else (left[-2],)
    columns = () if b_is_vector else (right[-1],)
    return (*batch, *rows, *columns)


@register("", "MatMul")
def infer_matmul(ctx: NodeContext, node: ir.Node) -> None:
    """``numpy.matmul`` of inputs 0 and 1; element type of input 0."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    try:
        a, b = inputs  # two inputs (every valid node): one unpacking, no len() call
    except ValueError:
        a, b = ctx.require_two_inputs()
    if a is None or b is None:
        ctx.require_two_inputs()  # fails the node
    facts = ctx.ctx
    out = matmul_shape(ctx, facts.shape_of(a), facts.shape_of(b))
    ctx.set_output(0, out, facts.dtype_of(a))


@register("", "MatMulInteger", since=10)
def infer_matmul_integer(ctx: NodeContext, node: ir.Node) -> None:
    """``numpy.matmul`` of inputs 0 and 1 with int32 elements."""
    ctx.require_input(0)
    ctx.require_input(1)
    ctx.set_output(
        0, matmul_shape(ctx, ctx.input_shape(0), ctx.input_shape(1)), ir.DataType.INT32
    )


@register("", "QLinearMatMul", since=10)
def infer_qlinear_matmul(ctx: NodeContext, node: ir.Node) -> None:
    """``numpy.matmul`` of inputs 0 and 3; element type of ``y_zero_point`` (input 7)."""
    ctx.require_input(0)
    ctx.require_input(3)
    shape = matmul_shape(ctx, ctx.input_shape(0), ctx.input_shape(3))
    ctx.set_output(0, shape, ctx.input_dtype(7))


def gemm_matrix(ctx: NodeContext, i: int, transposed: bool) -> tuple[Dim | None, Dim | None]:
    """``(rows, cols)`` of 2-D input ``i`` after the optional transpose (``None``: unknown)."""
    shape = ctx.input_shape(i)
    if shape is None:
        return None, None
    if len(shape) != 2:
        ctx.fail(f"Gemm input {i} must be 2-D, got rank {len(shape)}")
    return (shape[1], shape[0]) if transposed else (shape[0], shape[1])


def _refine_by_bias(ctx: NodeContext, out: list[Dim | None]) -> None:
    """Checks that ``C`` broadcasts to ``out`` and takes its non-1 integer dims.

    ``C`` is unidirectionally broadcast to ``(M, N)``: each of its dims is 1 or equal
    to the output dim, so an integer dim other than 1 *is* the output dim.
    """
    c = ctx.input_shape(2)
    if c is None:
        return
    if len(c) > 2:
        ctx.fail(f"Gemm input C must have rank <= 2, got {len(c)}")
    for k, c_dim in enumerate(c, start=2 - len(c)):
        o_dim = out[k]
        if not isinstance(c_dim, int) or c_dim == 1:
            continue
        if isinstance(o_dim, int) and o_dim != c_dim:
            ctx.fail(f"Gemm input C dim {c_dim} does not broadcast to output dim {o_dim}")
        out[k] = c_dim


@register("", "Gemm")
def infer_gemm(ctx: NodeContext, node: ir.Node) -> None:
    """``(M, N)`` from ``A`` (M x K) and ``B`` (K x N) after ``transA``/``transB``."""
    ctx.require_input(0)
    ctx.require_input(1)
    m, k_a = gemm_matrix(ctx, 0, bool(ctx.attr_int("transA", 0)))
    k_b, n = gemm_matrix(ctx, 1, bool(ctx.attr_int("transB", 0)))
    if k_a is not None and k_b is not None:
        check_inner(ctx, k_a, k_b)
    out: list[Dim | None] = [m, n]
    if ctx.has_input(2):
        _refine_by_bias(ctx, out)
    ctx.set_output(0, out, ctx.input_dtype(0))
