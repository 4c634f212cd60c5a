"""Sequence ops (``Sequence*``, ``SplitToSequence``, ``ConcatFromSequence``) and optionals.

The shape stored for a sequence is the shape shared by *all* its elements (the onnx-ir
convention for ``value.shape`` of a sequence); it is only set when that is proven,
otherwise left unknown. When a sequence is built by visible sequence ops, its elements
are listed (following the chain back at most :data:`MAX_SEQUENCE_CHAIN` nodes), so
``SequenceAt``, ``SequenceLength`` and ``ConcatFromSequence`` can be exact.

An optional's shape is that of its element (the onnx-ir convention again: a graph input
``optional(float[4])`` has ``value.shape == [4]``), so ``OptionalGetElement`` returns it.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    default_domain_producer,
    dtype_attr,
    non_tensor_type,
    replace_axis,
    same_dim,
    single_element,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext, ShapesContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64

#: How far back a chain of sequence ops is followed to list a sequence's elements.
MAX_SEQUENCE_CHAIN = 64


# ----------------------------------------------------------------------------------------
# Element shapes and types
# ----------------------------------------------------------------------------------------
def _common_shape(shapes: Sequence[Shape | None]) -> Shape | None:
    """The shape shared by every element, or ``None`` (no element, or they differ)."""
    if not shapes or any(s is None for s in shapes):
        return None
    first = shapes[0]
    for other in shapes[1:]:
        if len(other) != len(first) or not all(map(same_dim, first, other)):  # type: ignore[arg-type]
            return None
    return first


def _sequence_type(dtype: ir.DataType | None) -> ir.SequenceType:
    return ir.SequenceType(ir.TensorType(dtype or ir.DataType.UNDEFINED))


def _element_dtype(shapes: ShapesContext, value: ir.Value) -> ir.DataType | None:
    other = non_tensor_type(shapes, value)
    if isinstance(other, ir.SequenceType) and isinstance(other.elem_type, ir.TensorType):
        return other.elem_type.dtype
    return shapes.dtype_of(value)


def _set_sequence(
    ctx: NodeContext, i: int, shape: Shape | None, dtype: ir.DataType | None
) -> None:
    ctx.set_output(i, shape, dtype)
    ctx.set_output_type(i, _sequence_type(dtype))


def _is_generated_symbol(ctx: NodeContext, d: Dim) -> bool:
    return isinstance(d, expr.DimExpr) and d.is_symbol and ctx.ctx.is_generated(d.name)  # type: ignore[arg-type]


def _remint_generated(ctx: NodeContext, shape: Shape | None) -> Shape | None:
    """Replaces bare engine-minted symbols by fresh ones.

    A declared sequence element shape with an empty dim got one symbol, which need not
    hold for every element.
    """
    if shape is None:
        return None
    return tuple(
        ctx.new_symbol(f"elem_d{k}") if _is_generated_symbol(ctx, d) else d
        for k, d in enumerate(shape)
    )


# ----------------------------------------------------------------------------------------
# Listing the elements of a sequence built by visible sequence ops
# ----------------------------------------------------------------------------------------
def _position(
    shapes: ShapesContext,
    node: ir.Node,
    index: int,
    length: int,
    default: int,
    *,
    insert: bool,
) -> int | None:
    """A known position input of ``SequenceInsert``/``SequenceErase``/``SequenceAt``."""
    if index < len(node.inputs) and node.inputs[index] is not None:
        element = single_element(shapes.value_of(node.inputs[index]))
        if not isinstance(element, int):
            return None
        position = element
    else:
        position = default
    upper = length if insert else length - 1
    if not -length <= position <= upper:
        return None
    return position + length if position < 0 else position


def _split_axis(shapes: ShapesContext, node: ir.Node) -> tuple[Shape, int] | None:
    shape = shapes.shape_of(node.inputs[0]) if node.inputs and node.inputs[0] else None
    attr = node.attributes.get("axis")
    axis = attr.value if attr is not None and attr.type == ir.AttributeType.INT else 0
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    return shape, axis + len(shape) if axis < 0 else axis


def _split_sizes(shapes: ShapesContext, node: ir.Node) -> list[Dim] | None:
    """The sizes along the axis of each ``SplitToSequence`` chunk, when known."""
    located = _split_axis(shapes, node)
    if located is None:
        return None
    shape, axis = located
    total = shape[axis]
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is None:
        return [1] * total if isinstance(total, int) and total <= MAX_SEQUENCE_CHAIN else None
    elements = shapes.value_of(split)
    split_shape = shapes.shape_of(split)
    if elements is None or split_shape is None:
        return None
    if len(split_shape) == 0:
        size = elements[0]
        if not (isinstance(size, int) and isinstance(total, int)) or size <= 0:
            return None
        sizes = [size] * (total // size) + ([total % size] if total % size else [])
        return sizes if len(sizes) <= MAX_SEQUENCE_CHAIN else None
    if any(isinstance(e, expr.DimExpr) and e.is_unknown for e in elements):
        return None
    return list(elements)


def _split_element(node: ir.Node, shape: Shape, axis: int, size: Dim) -> Shape:
    attr = node.attributes.get("keepdims")
    keepdims = attr.value if attr is not None and attr.type == ir.AttributeType.INT else 1
    has_split = len(node.inputs) > 1 and node.inputs[1] is not None
    if not has_split and not keepdims:
        return shape[:axis] + shape[axis + 1 :]
    return replace_axis(shape, axis, size)


def _sequence_elements(
    shapes: ShapesContext, value: ir.Value | None, depth: int = 0
) -> list[Shape | None] | None:
    """Per-element shapes of a sequence built by visible sequence ops, else ``None``."""
    producer = default_domain_producer(value)
    if producer is None or depth > MAX_SEQUENCE_CHAIN:
        return None
    op, inputs = producer.op_type, producer.inputs
    if op == "SequenceEmpty":
        return []
    if op == "SequenceConstruct":
        return [None if v is None else shapes.shape_of(v) for v in inputs]
    if op == "Identity":
        return _sequence_elements(shapes, inputs[0] if inputs else None, depth + 1)
    if op == "SplitToSequence":
        located = _split_axis(shapes, producer)
        sizes = _split_sizes(shapes, producer)
        if located is None or sizes is None:
            return None
        return [_split_element(producer, located[0], located[1], s) for s in sizes]
    if op not in ("SequenceInsert", "SequenceErase") or not inputs:
        return None
    inner = _sequence_elements(shapes, inputs[0], depth + 1)
    if inner is None:
        return None
    n = len(inner)
    if op == "SequenceInsert":
        position = _position(shapes, producer, 2, n, n, insert=True)
        if position is None or len(inputs) < 2 or inputs[1] is None:
            return None
        return [*inner[:position], shapes.shape_of(inputs[1]), *inner[position:]]
    position = _position(shapes, producer, 1, n, -1, insert=False)
    return None if position is None else inner[:position] + inner[position + 1 :]


def is_empty_sequence(shapes: ShapesContext, value: ir.Value | None) -> bool:
    """Whether ``value`` is a sequence built with no element (``SequenceEmpty``, ...)."""
    return _sequence_elements(shapes, value) == []


def _sequence_length(
    shapes: ShapesContext, value: ir.Value | None, depth: int = 0
) -> Dim | None:
    """The number of elements of a sequence built by visible sequence ops, else ``None``."""
    elements = _sequence_elements(shapes, value, depth)
    if elements is not None:
        return len(elements)
    producer = default_domain_producer(value)
    if producer is None or depth > MAX_SEQUENCE_CHAIN:
        return None
    op, inputs = producer.op_type, producer.inputs
    if op == "Identity" and inputs:
        return _sequence_length(shapes, inputs[0], depth + 1)
    if op in ("SequenceInsert", "SequenceErase") and inputs:
        inner = _sequence_length(shapes, inputs[0], depth + 1)
        if inner is None:
            return None
        return expr.add(inner, 1) if op == "SequenceInsert" else expr.sub(inner, 1)
    if op == "SplitToSequence":
        return _split_count(shapes, producer)
    return None


def _split_count(shapes: ShapesContext, node: ir.Node) -> Dim | None:
    located = _split_axis(shapes, node)
    if located is None:
        return None
    total = located[0][located[1]]
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is None:
        return total
    split_shape = shapes.shape_of(split)
    if split_shape is None:
        return None
    if len(split_shape) == 1:
        return split_shape[0]
    size = single_element(shapes.value_of(split))
    if size is None or (isinstance(size, int) and size <= 0):
        return None
    try:
        return expr.ceildiv(total, size)
    except ZeroDivisionError:
        return None


# ----------------------------------------------------------------------------------------
# Sequence ops
# ----------------------------------------------------------------------------------------
@register("", "SequenceEmpty", since=11)
def infer_sequence_empty(ctx: NodeContext, node: ir.Node) -> None:
    """An empty sequence of ``dtype`` (float by default); no element shape."""
    _set_sequence(ctx, 0, None, dtype_attr(ctx, "dtype", ir.DataType.FLOAT))


@register("", "SequenceConstruct", since=11)
def infer_sequence_construct(ctx: NodeContext, node: ir.Node) -> None:
    """A sequence of the inputs; the element shape when all inputs share it."""
    if ctx.num_inputs == 0:
        ctx.fail("SequenceConstruct needs at least one input")
    shapes = [ctx.input_shape(i) for i in range(ctx.num_inputs)]
    _set_sequence(ctx, 0, _common_shape(shapes), ctx.input_dtype(0))


@register("", "SequenceInsert", since=11)
def infer_sequence_insert(ctx: NodeContext, node: ir.Node) -> None:
    """The element shape stays only when the inserted tensor has it too."""
    sequence = ctx.require_input(0)
    ctx.require_input(1)
    elements = _sequence_elements(ctx.ctx, node.outputs[0]) if node.outputs else None
    if elements is not None:
        shape = _common_shape(elements)
    else:
        shape = _common_shape([ctx.ctx.shape_of(sequence), ctx.input_shape(1)])
    _set_sequence(ctx, 0, shape, _element_dtype(ctx.ctx, sequence) or ctx.input_dtype(1))


@register("", "SequenceErase", since=11)
def infer_sequence_erase(ctx: NodeContext, node: ir.Node) -> None:
    """Erasing keeps the element shape (exact when the elements are listed)."""
    sequence = ctx.require_input(0)
    elements = _sequence_elements(ctx.ctx, node.outputs[0]) if node.outputs else None
    shape = _common_shape(elements) if elements is not None else ctx.ctx.shape_of(sequence)
    _set_sequence(ctx, 0, shape, _element_dtype(ctx.ctx, sequence))


@register("", "SequenceAt", since=11)
def infer_sequence_at(ctx: NodeContext, node: ir.Node) -> None:
    """The element's shape: exact for a known position in a listed sequence."""
    sequence = ctx.require_input(0)
    ctx.require_input(1)
    dtype = _element_dtype(ctx.ctx, sequence)
    elements = _sequence_elements(ctx.ctx, sequence)
    if elements is not None:
        position = _position(ctx.ctx, node, 1, len(elements), 0, insert=False)
        shape = elements[position] if position is not None else _common_shape(elements)
    else:
        shape = _remint_generated(ctx, ctx.ctx.shape_of(sequence))
        if shape is None:
            shape = _split_chunk(ctx, sequence)
    ctx.set_output(0, shape, dtype)


def _split_chunk(ctx: NodeContext, sequence: ir.Value) -> Shape | None:
    """A chunk of a ``SplitToSequence`` by unknown sizes: a fresh size on the split axis.

    TorchScript's ``tensor_split`` computes the sizes at run time. Only with a ``split`` input: every chunk then keeps the axis (``keepdims`` applies
    without one), and the other dims are the input's.
    """
    producer = default_domain_producer(sequence, "SplitToSequence")
    if producer is None or len(producer.inputs) < 2 or producer.inputs[1] is None:
        return None
    located = _split_axis(ctx.ctx, producer)
    if located is None:
        return None
    shape, axis = located
    return replace_axis(shape, axis, ctx.new_symbol("chunk"))


@register("", "SequenceLength", since=11)
def infer_sequence_length(ctx: NodeContext, node: ir.Node) -> None:
    """A scalar int64, with its value when the sequence's length is known."""
    sequence = ctx.require_input(0)
    ctx.set_output(0, (), INT64)
    length = _sequence_length(ctx.ctx, sequence)
    if length is not None:
        ctx.set_output_value(0, (length,))


@register("", "SplitToSequence", since=11)
def infer_split_to_sequence(ctx: NodeContext, node: ir.Node) -> None:
    """Chunks along ``axis``; an element shape only when every chunk has the same one."""
    ctx.require_input(0)
    dtype = ctx.input_dtype(0)
    located = _split_axis(ctx.ctx, node)
    if located is None:
        if ctx.input_shape(0) is not None:
            ctx.fail(f"axis {ctx.attr_int('axis', 0)} is out of range")
        _set_sequence(ctx, 0, None, dtype)
        return
    shape, axis = located
    sizes = _split_sizes(ctx.ctx, node)
    if sizes is not None:
        elements: list[Shape | None] = [_split_element(node, shape, axis, s) for s in sizes]
        _set_sequence(ctx, 0, _common_shape(elements), dtype)
        return
    uniform: Shape | None = None
    if not ctx.has_input(1):
        uniform = _split_element(node, shape, axis, 1)
    elif ctx.input_rank(1) == 0:
        size = single_element(ctx.input_value(1))
        total = shape[axis]
        positive = size is not None and not (isinstance(size, int) and size <= 0)
        if positive and ctx.scope.prove_gt(size, 0) and expr.mod(total, size) == 0:
            uniform = _split_element(node, shape, axis, size)
    _set_sequence(ctx, 0, uniform, dtype)


# ----------------------------------------------------------------------------------------
# ConcatFromSequence
# ----------------------------------------------------------------------------------------
def _rejoined_split(ctx: NodeContext, sequence: ir.Value, axis: int) -> Shape | None:
    """The input shape, when ``sequence`` is a ``SplitToSequence`` rejoined on its axis."""
    producer = default_domain_producer(sequence, "SplitToSequence")
    if producer is None:
        return None
    located = _split_axis(ctx.ctx, producer)
    if located is None:
        return None
    shape, split_axis = located
    squeezed = _split_element(producer, shape, split_axis, 1) != replace_axis(
        shape, split_axis, 1
    )
    if squeezed or not -len(shape) <= axis < len(shape):
        return None
    return shape if axis % len(shape) == split_axis else None


@register("", "ConcatFromSequence", since=11)
def infer_concat_from_sequence(ctx: NodeContext, node: ir.Node) -> None:
    """Concatenation (or stacking with ``new_axis=1``) of the elements along ``axis``."""
    sequence = ctx.require_input(0)
    axis = ctx.attr_int("axis")
    if axis is None:
        ctx.fail("missing attribute 'axis'")
    new_axis = ctx.attr_int("new_axis", 0)
    dtype = _element_dtype(ctx.ctx, sequence)
    if not new_axis and (rejoined := _rejoined_split(ctx, sequence, axis)) is not None:
        ctx.set_output(0, rejoined, dtype)
        return
    elements = _sequence_elements(ctx.ctx, sequence)
    if elements:
        if any(s is None or len(s) != len(elements[0]) for s in elements):  # type: ignore[arg-type]
            ctx.set_output(0, None, dtype)
            return
        stored: Shape = elements[0]  # type: ignore[assignment]
        length: Dim | None = len(elements)
    else:
        stored = ctx.ctx.shape_of(sequence)  # type: ignore[assignment]
        length = _sequence_length(ctx.ctx, sequence)
        if stored is None:
            ctx.set_output(0, None, dtype)
            return
    first = stored if elements else _remint_generated(ctx, stored)
    if new_axis:
        k = ctx.normalize_axis(axis, len(first) + 1)
        count = length if length is not None else ctx.new_symbol("count")
        ctx.set_output(0, (*first[:k], count, *first[k:]), dtype)
        return
    k = ctx.normalize_axis(axis, len(first))
    if elements:
        total: Dim = 0
        for shape in elements:
            total = expr.add(total, shape[k])  # type: ignore[index]
    elif length is not None and not _is_generated_symbol(ctx, stored[k]):
        # Every element has the stored dim (a minted symbol may stand for differing ones).
        total = expr.mul(length, stored[k])
    else:
        total = ctx.new_symbol(f"concat_d{k}")
    ctx.set_output(0, (*first[:k], total, *first[k + 1 :]), dtype)


# ----------------------------------------------------------------------------------------
# Optionals
# ----------------------------------------------------------------------------------------
def _element_type(ctx: NodeContext, value: ir.Value) -> ir.TypeProtocol:
    """The type of ``value`` as an optional's element: its sequence type or tensor type."""
    other = non_tensor_type(ctx.ctx, value)
    if other is not None:
        return other
    return ir.TensorType(ctx.ctx.dtype_of(value) or ir.DataType.UNDEFINED)


@register("", "Optional", since=15)
def infer_optional(ctx: NodeContext, node: ir.Node) -> None:
    """An optional holding input 0 (its shape), or an empty one of attribute ``type``."""
    value = ctx.input(0)
    if value is None:
        attr = node.attributes.get("type")
        if attr is None or attr.type != ir.AttributeType.TYPE_PROTO:
            ctx.fail("an Optional without input needs the 'type' attribute")
        ctx.set_output(0, None, attr.value.dtype)
        ctx.set_output_type(0, ir.OptionalType(attr.value))
        return
    element = _element_type(ctx, value)
    ctx.set_output(0, ctx.ctx.shape_of(value), element.dtype)
    ctx.set_output_type(0, ir.OptionalType(element))
    if isinstance(element, ir.TensorType):  # its contents, for OptionalGetElement
        ctx.set_output_value(0, ctx.ctx.value_of(value))


@register("", "OptionalGetElement", since=15)
def infer_optional_get_element(ctx: NodeContext, node: ir.Node) -> None:
    """The optional's element: its shape and type (a tensor or sequence passes through)."""
    value = ctx.require_input(0)
    facts = ctx.ctx
    other = non_tensor_type(facts, value)
    shape = facts.shape_of(value)
    if other is None:  # a tensor (accepted from opset 18): itself
        ctx.set_output(0, shape, facts.dtype_of(value))
        ctx.set_output_value(0, facts.value_of(value))
        return
    element = other.elem_type if isinstance(other, ir.OptionalType) else other
    if isinstance(element, ir.TensorType):
        ctx.set_output(0, shape, element.dtype)
        ctx.set_output_value(0, facts.value_of(value))
    elif isinstance(element, ir.SequenceType):
        _set_sequence(ctx, 0, shape, element.dtype)
    else:
        ctx.fallback()  # a map or a nested optional: ONNX's inference


@register("", "OptionalHasElement", since=15)
def infer_optional_has_element(ctx: NodeContext, node: ir.Node) -> None:
    """A BOOL scalar (also without input, from opset 18: then false)."""
    ctx.set_output(0, (), ir.DataType.BOOL)
