"""Elementwise ops: unary math/activations, broadcasting binary and variadic ops.

Output shapes follow numpy broadcasting (:meth:`NodeContext.broadcast_shapes`): two
different symbolic dims give a ``broadcast(a, b)`` term, never a guess. Integer
"values as shape" are propagated through the arithmetic, comparison, logical, ``Max``,
``Min``, ``Where``, ``Clip`` and ``Neg``/``Abs``/``Relu``/``Sign`` ops, so shape
computations exported from PyTorch (``Shape -> Gather -> Add -> Concat -> Reshape``)
stay symbolic.
"""

from __future__ import annotations

__all__: list[str] = []

import functools
import logging
from collections.abc import Callable, Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import is_static, same_dim
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    INTEGER_DTYPES,
    MAX_VALUE_ELEMENTS,
    NodeContext,
    broadcast_elements,
    element_compare,
    element_div,
    element_mod,
    element_pow,
    is_fully_unknown,
    unknown_element,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim

# ----------------------------------------------------------------------------------------
# Unary: output = input shape and type
# ----------------------------------------------------------------------------------------
UNARY_OPS = (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Ceil", "Celu",
    "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu",
    "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Swish",
    "Tan", "Tanh", "ThresholdedRelu",
)  # fmt: skip
BOOL_UNARY_OPS = ("IsInf", "IsNaN")
CONTRIB_UNARY_OPS = ("Gelu", "QuickGelu", "FastGelu", "BiasGelu", "BiasAdd")


def _value_neg(ctx: NodeContext, a: Dim) -> Dim:
    return expr.neg(a)


def _value_abs(ctx: NodeContext, a: Dim) -> Dim:
    if isinstance(a, int):
        return abs(a)
    if a.is_unknown:
        return unknown_element()
    if ctx.scope.prove_nonneg(a):
        return a
    if ctx.scope.prove_nonneg(expr.neg(a)):
        return expr.neg(a)
    # |x| == max(x, -x) for every integer (Abs(Sub(a, b)) of two dims).
    return expr.dmax(a, expr.neg(a), scope=ctx.scope)


def _value_relu(ctx: NodeContext, a: Dim) -> Dim:
    if isinstance(a, int):
        return max(a, 0)
    if a.is_unknown:
        return unknown_element()
    return expr.dmax(a, 0, scope=ctx.scope)


def _value_sign(ctx: NodeContext, a: Dim) -> Dim:
    if isinstance(a, int):
        return (a > 0) - (a < 0)
    if a.is_unknown:
        return unknown_element()
    # For an integer, sign(x) == min(max(x, -1), 1); the scope folds what it proves
    # (a dim's sign is min(1, d), a dim >= 1 has sign 1).
    return expr.dmin(expr.dmax(a, -1, scope=ctx.scope), 1, scope=ctx.scope)


def _value_not(ctx: NodeContext, a: Dim) -> Dim:
    if isinstance(a, int):
        return int(not a)
    if a.is_unknown:
        return unknown_element()
    return expr.sub(1, a)  # boolean elements are 0/1


_UNARY_VALUE_FNS: dict[str, Callable[[NodeContext, Dim], Dim]] = {
    "Neg": _value_neg,
    "Abs": _value_abs,
    "Relu": _value_relu,
    "Sign": _value_sign,
    "Not": _value_not,
}


@register("", UNARY_OPS)
def infer_unary(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape and element type as input 0."""
    value = ctx.require_input(0)
    facts = ctx.ctx
    ctx.set_output(0, facts.shape_of(value), facts.dtype_of(value))
    # node._op_type: the slot behind node.op_type (see passes/_inference.py).
    value_fn = _UNARY_VALUE_FNS.get(node._op_type)
    if value_fn is not None:
        elements = facts.value_of(value)
        if elements is not None:
            computed = [value_fn(ctx, e) for e in elements]
            ctx.set_output_value(0, None if is_fully_unknown(computed) else computed)


@register("", BOOL_UNARY_OPS)
def infer_bool_unary(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as input 0, boolean elements."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), ir.DataType.BOOL)


@register("com.microsoft", CONTRIB_UNARY_OPS)
def infer_contrib_elementwise(ctx: NodeContext, node: ir.Node) -> None:
    """Contrib activations with optional bias/skip inputs broadcast against input 0."""
    ctx.require_input(0)
    shapes = [ctx.input_shape(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
    ctx.set_output(0, ctx.broadcast_shapes(*shapes), ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Broadcasting ops
# ----------------------------------------------------------------------------------------
ElementFn = Callable[..., Dim]


def _propagate_values(
    ctx: NodeContext, fn: ElementFn, inputs: Sequence[int], out_shape: tuple[Dim, ...] | None
) -> None:
    """Computes output 0's elements when every input has a static shape."""
    if not is_static(out_shape):
        return
    operands = []
    any_known = False
    for i in inputs:
        shape = ctx.input_shape(i)
        if not is_static(shape):
            return
        elements = ctx.input_value(i)
        any_known = any_known or elements is not None
        operands.append((shape, elements))
    if not any_known:
        return
    _set_broadcast_value(ctx, fn, operands, out_shape)


def _set_broadcast_value(
    ctx: NodeContext,
    fn: ElementFn,
    operands: Sequence[tuple[tuple[Dim, ...], Sequence[Dim] | None]],
    out_shape: tuple[Dim, ...],
) -> None:
    """Sets output 0's elements to ``fn`` of the operands' (static shapes, one known)."""
    if not out_shape and not any(shape for shape, _ in operands):
        # Scalars only (shape arithmetic: sizes added, divided, compared one at a time):
        # what broadcast_elements gives for them, without its general machinery.
        args = []
        for _, elements in operands:
            if elements is None:
                args.append(unknown_element())
            elif len(elements) != 1:
                return
            else:
                args.append(elements[0])
        element = fn(*args)
        if not (isinstance(element, expr.DimExpr) and element.is_unknown):
            ctx.set_output_value(0, (element,))
        return
    result = broadcast_elements(fn, operands)
    if result is not None and result[0] == out_shape:
        ctx.set_output_value(0, result[1])


def _binary_value_fn(scope: expr.Scope, op: str, fmod: bool) -> ElementFn | None:
    """The element function of a binary op, or ``None`` when values are not tracked."""
    if op == "Add":
        return expr.add
    if op == "Sub":
        return expr.sub
    if op == "Mul":
        return expr.mul
    if op == "Div":
        return functools.partial(_element_div, scope)
    if op == "Mod":
        return functools.partial(element_mod, scope, fmod=fmod)
    if op == "Pow":
        return element_pow
    if op in ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"):
        return functools.partial(element_compare, scope, op)
    if op == "And":
        return _and
    if op == "Or":
        return _or
    return None


def _element_div(scope: expr.Scope, a: Dim, b: Dim) -> Dim:
    """Integer ``Div``, which truncates toward zero (C++ ``/`` in onnxruntime).

    Truncation is odd, ``trunc(a / -c) == -trunc(a / c)``, so a negative constant divisor
    is the negation of the division by ``-c`` (``Div(Sub(a, b), -2)`` of two dims).
    """
    if isinstance(b, int) and b < 0 and not isinstance(a, int) and b != _INT64_MIN:
        q = element_div(scope, a, -b)
        return q if isinstance(q, expr.DimExpr) and q.is_unknown else expr.neg(q)
    return element_div(scope, a, b)


_INT64_MIN = -(2**63)


def _and(a: Dim, b: Dim) -> Dim:
    if a == 0 or b == 0:
        return 0
    if _either_unknown(a, b):
        return unknown_element()
    return expr.dmin(a, b)  # boolean elements are 0/1


def _or(a: Dim, b: Dim) -> Dim:
    if (isinstance(a, int) and a != 0) or (isinstance(b, int) and b != 0):
        return 1
    if _either_unknown(a, b):
        return unknown_element()
    return expr.dmax(a, b)  # boolean elements are 0/1


def _either_unknown(a: Dim, b: Dim) -> bool:
    return any(isinstance(d, expr.DimExpr) and d.is_unknown for d in (a, b))


ARITHMETIC_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "BitwiseAnd",
                  "BitwiseOr", "BitwiseXor")  # fmt: skip
COMPARISON_OPS = ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual")
LOGICAL_OPS = ("And", "Or", "Xor")
_BOOL_RESULT_OPS = frozenset(COMPARISON_OPS + LOGICAL_OPS)
_LEGACY_BROADCAST_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Greater", "Less",
                         "And", "Or", "Xor")  # fmt: skip


@register("", ARITHMETIC_OPS + COMPARISON_OPS + LOGICAL_OPS, since=7)
def infer_binary(ctx: NodeContext, node: ir.Node) -> None:
    """Numpy broadcasting of inputs 0 and 1; boolean output for comparisons/logic."""
    # The slots behind node.inputs and node.op_type (see passes/_inference.py): every
    # elementwise node reads them, and a property read is a Python call.
    inputs = node._inputs
    try:
        a, b = inputs  # two inputs (every valid node): one unpacking, no len() call
    except ValueError:
        a, b = ctx.require_two_inputs()
    if a is None or b is None:
        ctx.require_two_inputs()  # fails the node
    facts = ctx.ctx
    a_shape = facts.shape_of(a)
    b_shape = facts.shape_of(b)
    # Equal shapes (a float tensor and its residual, or two scalars) broadcast to
    # themselves: broadcast_shapes' first check, without its call.
    if a_shape is not None and (a_shape is b_shape or a_shape == b_shape):
        out_shape = a_shape
    elif a_shape is None or b_shape is None:
        out_shape = None  # broadcast_shapes' answer for an unknown rank
    elif len(b_shape) < len(a_shape) and a_shape[len(a_shape) - len(b_shape) :] == b_shape:
        # A bias or a scalar (b is a's tail, or empty): broadcast_shapes keeps a as it is.
        out_shape = a_shape
    elif len(a_shape) < len(b_shape) and b_shape[len(b_shape) - len(a_shape) :] == a_shape:
        out_shape = b_shape
    else:
        out_shape = ctx.broadcast_shapes(a_shape, b_shape)
    op = node._op_type
    if op in _BOOL_RESULT_OPS:
        dtype: ir.DataType | None = ir.DataType.BOOL
    else:
        dtype = facts.dtype_of(a)
    ctx.set_output(0, out_shape, dtype)
    # Mod reads (and so checks) its attribute whether or not values are computed.
    fmod = bool(ctx.attr_int("fmod", 0)) if op == "Mod" else False
    # Values need a static output shape: a symbolic one (the usual float tensor) skips
    # building the element function. (is_static(out_shape), inline: every node.)
    if out_shape is None:
        return
    for d in out_shape:
        if d.__class__ is not int and not isinstance(d, int):
            return
    if op in ("Div", "Mod") and dtype in INTEGER_DTYPES:
        _note_divisors(ctx, out_shape)
    fn = _PLAIN_VALUE_FNS.get(op) or _binary_value_fn(ctx.scope, op, fmod)
    if fn is not None:
        _propagate_binary(ctx, fn, a, b, a_shape, b_shape, out_shape)  # type: ignore[arg-type]


#: The element functions that need no scope (built once, not per node).
_PLAIN_VALUE_FNS: dict[str, ElementFn] = {
    "Add": expr.add,
    "Sub": expr.sub,
    "Mul": expr.mul,
    "Pow": element_pow,
}


def _propagate_binary(
    ctx: NodeContext,
    fn: ElementFn,
    a: ir.Value,
    b: ir.Value,
    a_shape: tuple[Dim, ...] | None,
    b_shape: tuple[Dim, ...] | None,
    out_shape: tuple[Dim, ...],
) -> None:
    """:func:`_propagate_values` of inputs ``a`` and ``b`` (shapes already read).

    The same reads in the same order, and the same elements: scalars and vectors whose
    elements are all known (shape arithmetic) are computed here without building the
    operands of :func:`broadcast_elements`, whose vector path gives the same elements.
    """
    if not is_static(a_shape):
        return
    facts = ctx.ctx
    a_elements = facts.value_of(a)
    if not is_static(b_shape):
        return
    b_elements = facts.value_of(b)
    if a_elements is None and b_elements is None:
        return
    if (
        a_elements is None
        or b_elements is None
        or len(a_shape) > 1  # type: ignore[arg-type]
        or len(b_shape) > 1  # type: ignore[arg-type]
    ):
        operands = ((a_shape, a_elements), (b_shape, b_elements))
        _set_broadcast_value(ctx, fn, operands, out_shape)  # type: ignore[arg-type]
        return
    if not out_shape and not a_shape and not b_shape:
        # Scalars (sizes added, divided, compared one at a time).
        if len(a_elements) != 1 or len(b_elements) != 1:
            return
        element = fn(a_elements[0], b_elements[0])
        if not (isinstance(element, expr.DimExpr) and element.is_unknown):
            ctx.set_output_value(0, (element,))
        return
    # Vectors and scalars, all elements known: broadcast_elements' vector path.
    a_size = a_shape[0] if a_shape else 1  # type: ignore[index]
    b_size = b_shape[0] if b_shape else 1  # type: ignore[index]
    if len(a_elements) != a_size or len(b_elements) != b_size:
        return
    if a_size == b_size or b_size == 1:
        n = a_size
    elif a_size == 1:
        n = b_size
    else:
        return  # does not broadcast
    if n > MAX_VALUE_ELEMENTS:
        return
    if a_size == b_size:
        flat = tuple(map(fn, a_elements, b_elements))
    elif b_size == 1:
        e = b_elements[0]
        flat = tuple([fn(x, e) for x in a_elements])
    else:
        e = a_elements[0]
        flat = tuple([fn(e, y) for y in b_elements])
    if (n,) != out_shape or is_fully_unknown(flat):
        return
    ctx.set_output_value(0, flat)


def _note_divisors(ctx: NodeContext, out_shape: tuple[Dim, ...]) -> None:
    """An integer division that ran divided by nonzero values: a fact from here on.

    Every element of the divisor meets a dividend when the output is not empty
    (broadcasting repeats, never drops, elements), so each known element is nonzero in
    every run that gets past this node. ``Div(Mul(b, s), b)`` is then ``s``.
    """
    if 0 in out_shape:
        return
    divisor = ctx.input_value(1)
    if divisor is None:
        return
    for e in divisor:
        if isinstance(e, expr.DimExpr) and not e.is_unknown:
            ctx.ctx.note_nonzero(e)


@register("", _LEGACY_BROADCAST_OPS)
def infer_legacy_binary(ctx: NodeContext, node: ir.Node) -> None:
    """Opsets before 7: input 1 is broadcast *to* input 0, the output has input 0's shape."""
    ctx.require_input(0)
    ctx.require_input(1)
    if node.op_type in ("Equal", "Greater", "Less", "And", "Or", "Xor"):
        dtype: ir.DataType | None = ir.DataType.BOOL
    else:
        dtype = ctx.input_dtype(0)
    if ctx.has_attr("broadcast") and ctx.attr_int("broadcast", 0):
        ctx.set_output(0, ctx.input_shape(0), dtype)
    else:
        ctx.set_output(0, ctx.broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1)), dtype)


@register("", "PRelu")
def infer_prelu(ctx: NodeContext, node: ir.Node) -> None:
    """X's shape broadcast with the slope's (from opset 7).

    The spec broadcasts the slope *to* X (the output has X's shape); onnxruntime and the
    reference evaluator broadcast both ways (``x[1, 2]``, slope ``[2, 1]``: ``[2, 2]``).
    The broadcast is X's shape wherever the spec's holds. Before opset 7 a slope
    ``[C]`` meant the channels, not the last axis: X's shape.
    """
    ctx.require_input(0)
    ctx.require_input(1)
    x = ctx.input_shape(0)
    if ctx.opset >= 7:
        x = ctx.broadcast_shapes(x, ctx.input_shape(1))
    ctx.set_output(0, x, ctx.input_dtype(0))


# Variadic ops (since 8 they broadcast; before, all inputs had one shape, which
# broadcasting reproduces).
@register("", ("Max", "Min", "Sum", "Mean"))
def infer_variadic(ctx: NodeContext, node: ir.Node) -> None:
    """Numpy broadcasting of all inputs."""
    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if not present:
        ctx.fail("needs at least one input")
    shapes = [ctx.input_shape(i) for i in present]
    out_shape = ctx.broadcast_shapes(*shapes)
    ctx.set_output(0, out_shape, ctx.input_dtype(present[0]))
    scope = ctx.scope
    fn: ElementFn | None
    op = node._op_type  # the slot behind node.op_type (see passes/_inference.py)
    if op == "Max":
        fn = functools.partial(expr.dmax, scope=scope)
    elif op == "Min":
        fn = functools.partial(expr.dmin, scope=scope)
    elif op == "Sum":
        fn = _sum
    else:
        fn = None  # Mean of integers: not tracked
    if fn is None:
        return
    if len(present) == 2 and is_static(out_shape):
        # Two inputs (a size clamped by max or min): the binary ops' path, the same reads.
        inputs = node._inputs
        _propagate_binary(
            ctx, fn, inputs[present[0]], inputs[present[1]], shapes[0], shapes[1], out_shape
        )  # type: ignore[arg-type]
        return
    _propagate_values(ctx, fn, present, out_shape)


def _sum(*args: Dim) -> Dim:
    return functools.reduce(expr.add, args)


def _where(cond: Dim, x: Dim, y: Dim) -> Dim:
    if isinstance(cond, int):
        return x if cond else y
    if same_dim(x, y):
        return x
    if _either_unknown(cond, x) or _either_unknown(cond, y):
        return unknown_element()
    return expr.add(expr.mul(cond, x), expr.mul(expr.sub(1, cond), y))  # cond is 0/1


@register("", "Where", since=9)
def infer_where(ctx: NodeContext, node: ir.Node) -> None:
    """Numpy broadcasting of condition, X and Y; X's element type."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    if len(inputs) < 3 or inputs[0] is None or inputs[1] is None or inputs[2] is None:
        for i in range(3):
            ctx.require_input(i)  # one of them fails the node
    out_shape = ctx.broadcast_shapes(
        ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    )
    ctx.set_output(0, out_shape, ctx.input_dtype(1) or ctx.input_dtype(2))
    if is_static(out_shape):  # _propagate_values' first test: a mask's shape is symbolic
        _propagate_values(ctx, _where, (0, 1, 2), out_shape)


@register("", "Clip")
def infer_clip(ctx: NodeContext, node: ir.Node) -> None:
    """Shape and type of input 0; integer values are clamped by known min/max inputs."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))
    elements = ctx.input_value(0)
    if elements is None or ctx.opset < 11:
        return
    bounds = []
    for i in (1, 2):
        if not ctx.has_input(i):
            bounds.append(None)
            continue
        bound = ctx.input_value(i)
        if bound is None or len(bound) != 1:
            return
        bounds.append(bound[0])
    low, high = bounds
    scope = ctx.scope
    clipped = []
    for e in elements:
        if low is not None:
            e = expr.dmax(e, low, scope=scope)
        if high is not None:
            e = expr.dmin(e, high, scope=scope)
        clipped.append(e)
    ctx.set_output_value(0, clipped)


@register("", "Dropout")
def infer_dropout(ctx: NodeContext, node: ir.Node) -> None:
    """Output and optional mask have input 0's shape (mask is bool since opset 10)."""
    ctx.require_input(0)
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, shape, dtype)
    ctx.set_output_value(0, ctx.input_value(0))
    if ctx.num_outputs > 1:
        ctx.set_output(1, shape, ir.DataType.BOOL if ctx.opset >= 10 else dtype)
