"""Small helpers shared by several op families (private: not a family, never registered).

Only logic that is really the same in every caller lives here: dim arithmetic over
shapes, reading constants and attributes, and minting bounded fresh symbols. Anything
with op-specific semantics stays in its family module.
"""

from __future__ import annotations

__all__ = [
    "constant_array",
    "count_symbol",
    "data_type",
    "default_domain_producer",
    "divide",
    "dtype_attr",
    "element_array",
    "fresh_at_most",
    "is_static",
    "merge_dims",
    "non_tensor_type",
    "object_array",
    "output_name",
    "output_symbol",
    "product",
    "replace_axis",
    "same_dim",
    "set_value_array",
    "scalar_input",
    "single_element",
    "static_length",
    "string_elements",
]

import functools
import logging
import math
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes import (
    MAX_VALUE_ELEMENTS,
    NodeContext,
    ShapesContext,
    constant_tensor,
    note_untracked_read,
    tensor_dims,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None

#: The attributes a ``Constant`` node may hold its value in, read by :func:`constant_array`.
_CONSTANT_LIST_ATTRS = ("value_float", "value_floats", "value_int", "value_ints")


# ----------------------------------------------------------------------------------------
# Dims and shapes
# ----------------------------------------------------------------------------------------
def object_array(elements: Sequence[Dim], shape: Sequence[int]) -> np.ndarray:
    """``elements`` (row-major) as an object array of ``shape``, one element per cell.

    Filled element by element: numpy must not look inside a ``DimExpr``.
    """
    array = np.empty(len(elements), dtype=object)
    for k, e in enumerate(elements):
        array[k] = e
    return array.reshape(tuple(shape))


def same_dim(a: Dim, b: Dim) -> bool:
    """Canonical equality (ints by value, hash-consed ``DimExpr`` by identity)."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def is_static(dims: Sequence[Dim] | None) -> bool:
    """True when ``dims`` are known and all integers."""
    if dims is None:
        return False
    # A loop rather than all(<generator>): several times faster, and hooks ask this of
    # most shapes they see.
    for d in dims:  # noqa: SIM110
        if d.__class__ is not int and not isinstance(d, int):
            return False
    return True


def product(dims: Sequence[Dim]) -> Dim:
    """The product of ``dims`` (1 for none): the element count of a shape."""
    return functools.reduce(expr.mul, dims, 1)


def replace_axis(shape: Shape, axis: int, dim: Dim) -> Shape:
    """``shape`` with the dim at ``axis`` replaced by ``dim``."""
    return (*shape[:axis], dim, *shape[axis + 1 :])


def merge_dims(ctx: NodeContext, what: str, *dims: MaybeDim) -> MaybeDim:
    """One dim that several inputs must agree on (``None`` entries are unknown).

    A known int wins over a symbol (they must be equal at run time); two different ints
    fail the node.
    """
    known = [d for d in dims if d is not None]
    ints = {d for d in known if isinstance(d, int)}
    if len(ints) > 1:
        ctx.fail(f"inconsistent {what}: {sorted(ints)}")
    if ints:
        return ints.pop()
    return known[0] if known else None


def divide(ctx: NodeContext, total: MaybeDim, parts: MaybeDim, what: str) -> MaybeDim:
    """``total / parts`` for a split that must be exact (e.g. hidden size into heads).

    Records that ``parts`` divides ``total`` (a fact of every run that gets past the
    node, see :meth:`ShapesContext.note_divides`).
    """
    if total is None or parts is None:
        return None
    if isinstance(parts, int) and parts <= 0:
        ctx.fail(f"{what}: cannot split {total} into {parts} parts")
    try:
        quotient = expr.exact_div(total, parts)
    except expr.InexactDivisionError:
        ctx.fail(f"{what}: {total} is not divisible by {parts}")
    # The split executed: from here on ``parts`` divides ``total`` (``total // parts``
    # computed on shape values later is this same quotient).
    ctx.ctx.note_divides(parts, total)
    return quotient


def fresh_at_most(ctx: NodeContext, hint: str, bound: MaybeDim) -> expr.DimExpr:
    """A fresh symbol (see :meth:`NodeContext.new_symbol`) recorded as ``<= bound``.

    ``bound=None`` records nothing: the symbol is just fresh.
    """
    symbol = ctx.new_symbol(hint)
    if bound is not None:
        ctx.ctx.add_less_equal_constraint(symbol, bound)
    return symbol


# ----------------------------------------------------------------------------------------
# Inputs, outputs and attributes
# ----------------------------------------------------------------------------------------
def single_element(elements: Sequence[Dim] | None) -> Dim | None:
    """The one known element of a one-element value, else ``None``."""
    if elements is None or len(elements) != 1:
        return None
    element = elements[0]
    if isinstance(element, expr.DimExpr) and element.is_unknown:
        return None
    return element


def static_length(ctx: NodeContext, i: int) -> int | None:
    """The length of 1-D input ``i`` from its known elements or its static shape."""
    value = ctx.input_value(i)
    if value is not None:
        return len(value)
    shape = ctx.input_shape(i)
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def output_name(ctx: NodeContext, i: int, default: str) -> str:
    """The name of output ``i``, or ``default`` when it is absent or unnamed."""
    value = ctx.output(i)
    return value.name if value is not None and value.name else default


#: Every ONNX element type by its code: ``ir.DataType(code)`` is an enum call, about ten
#: times a dict lookup, and Cast and the typed attributes ask it of every node.
_DATA_TYPES: dict[int, ir.DataType] = {int(t): t for t in ir.DataType}


def data_type(code: int) -> ir.DataType:
    """``ir.DataType(code)``: raises ``ValueError`` for a code that is no element type."""
    found = _DATA_TYPES.get(code)
    return found if found is not None else ir.DataType(code)


def dtype_attr(ctx: NodeContext, name: str, default: ir.DataType | None) -> ir.DataType | None:
    """An element-type attribute (``dtype``, ``stash_type``, ...), or ``default`` when absent.

    A code that is no ONNX element type, or ``UNDEFINED``, fails the node.
    """
    code = ctx.attr_int(name)
    if code is None:
        return default
    dtype = _DATA_TYPES.get(code)  # data_type's hit, inline (every Cast)
    if dtype is None:
        try:
            dtype = data_type(code)
        except ValueError:
            ctx.fail(f"attribute {name!r} = {code} is not an ONNX element type")
    if dtype == ir.DataType.UNDEFINED:
        ctx.fail(f"attribute {name!r} is UNDEFINED")
    return dtype


def non_tensor_type(shapes: ShapesContext, value: ir.Value) -> ir.TypeProtocol | None:
    """The sequence/optional/map type inferred or declared for ``value``, if any."""
    note_untracked_read()
    inferred = shapes.non_tensor_type_of(value)
    if inferred is not None:
        return inferred
    declared = value.type
    if declared is not None and not isinstance(declared, ir.TensorType):
        return declared
    return None


# ----------------------------------------------------------------------------------------
# Producers and constants
# ----------------------------------------------------------------------------------------
def default_domain_producer(
    value: ir.Value | None, op_type: str | None = None
) -> ir.Node | None:
    """The node computing ``value`` when it is an ``ai.onnx`` op (of type ``op_type``)."""
    note_untracked_read()
    producer = value.producer() if value is not None else None
    if (
        producer is None
        or producer.domain not in ("", "ai.onnx")
        or (op_type is not None and producer.op_type != op_type)
    ):
        return None
    return producer


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The contents of a small constant (initializer or ``Constant`` node), any dtype.

    A graph input backed by an initializer is no constant: a run may feed another value.

    Args:
        value: The value to read (``None``: absent input).

    Returns:
        The array (at most ``MAX_VALUE_ELEMENTS`` elements), or ``None`` when ``value``
        is no readable constant.
    """
    if value is None:
        return None
    tensor = constant_tensor(value)
    if tensor is None:
        producer = default_domain_producer(value, "Constant")
        if producer is None:
            return None
        for name, attr in producer.attributes.items():
            if name in _CONSTANT_LIST_ATTRS:
                return np.array(attr.value)
            if name == "value" and attr.type == ir.AttributeType.TENSOR:
                tensor = attr.value
        if tensor is None:
            return None
    fast = _raw_float32_array(tensor)
    if fast is not None:
        return fast
    try:
        # The product of the dims, not tensor.size (which builds an array first).
        if math.prod(tensor_dims(tensor)) > MAX_VALUE_ELEMENTS:
            return None
        return tensor.numpy()
    except Exception as e:  # external data missing, string tensors, ...: unknown
        logger.debug("cannot read constant %r: %s", value.name, e)
        return None


_PROTO_TENSOR = ir.serde.TensorProtoTensor
_FLOAT_CODE = int(ir.DataType.FLOAT)
_FLOAT32_LE = np.dtype(np.float32).newbyteorder("<")  # as numpy() reads raw data


def _raw_float32_array(tensor: ir.TensorProtocol) -> np.ndarray | None:
    """What ``numpy()`` gives for a small float32 ``TensorProto`` (raw or ``float_data``).

    Resize scales are such constants: ``numpy()`` first looks up the dtype and its bit
    width several times; this is only the ``np.frombuffer``/``np.array`` and ``reshape``
    it ends in. ``None`` for any other tensor (read it the generic way).
    """
    if type(tensor) is not _PROTO_TENSOR:
        return None
    proto = tensor.raw
    if proto.data_type != _FLOAT_CODE or proto.data_location == 1:  # 1: EXTERNAL
        return None
    dims = tuple(proto.dims)
    count = math.prod(dims)
    if count > MAX_VALUE_ELEMENTS:
        return None
    if proto.HasField("raw_data"):
        raw = proto.raw_data
        if len(raw) != 4 * count:
            return None
        return np.frombuffer(raw, dtype=_FLOAT32_LE).reshape(dims)
    # float_data (onnx.helper.make_tensor's default): numpy() reads it after finding
    # the integer fields empty.
    if proto.int32_data or proto.int64_data or proto.uint64_data:
        return None
    data = proto.float_data
    if not count or len(data) != count:
        return None
    return np.array(data, dtype=_FLOAT32_LE).reshape(dims)


def string_elements(value: ir.Value | None) -> list[bytes] | None:
    """The elements of a small constant string tensor, as the bytes they hold."""
    if value is None:
        return None
    tensor = constant_tensor(value)
    if tensor is None:
        producer = default_domain_producer(value, "Constant")
        attr = None if producer is None else producer.attributes.get("value")
        if attr is not None and attr.type == ir.AttributeType.TENSOR:
            tensor = attr.value
        elif producer is not None and "value_strings" in producer.attributes:
            strings = producer.attributes["value_strings"].value
            return [w.encode() if isinstance(w, str) else w for w in strings]
    if tensor is None or tensor.dtype != ir.DataType.STRING:
        return None
    if math.prod(tensor_dims(tensor)) > MAX_VALUE_ELEMENTS:
        return None
    read = getattr(tensor, "string_data", None)
    try:
        return None if read is None else list(read())
    except Exception as e:  # unreadable (external data...): unknown
        logger.debug("cannot read string constant %r: %s", value.name, e)
        return None


# ----------------------------------------------------------------------------------------
# Data-dependent sizes
# ----------------------------------------------------------------------------------------
def output_symbol(ctx: NodeContext, hint: str, output: int = 0) -> expr.DimExpr:
    """A fresh symbol named ``{op_type}_{output name}_{hint}`` (e.g. ``NonZero_y_nnz``)."""
    name = output_name(ctx, output, str(output))
    return ctx.ctx.new_symbol(f"{ctx.node.op_type}_{name}_{hint}")


def count_symbol(ctx: NodeContext, hint: str, bound: Dim | None, output: int = 0) -> Dim:
    """A data-dependent size ``0 <= s <= bound``.

    ``0`` when the bound is ``0``; otherwise a fresh symbol whose upper bound (when
    known) is recorded in the context.
    """
    if bound is not None and isinstance(bound, expr.DimExpr) and bound.is_unknown:
        bound = None
    if bound == 0:
        return 0
    symbol = output_symbol(ctx, hint, output)
    if bound is not None:
        ctx.ctx.add_less_equal_constraint(symbol, bound)
    return symbol


def scalar_input(ctx: NodeContext, i: int, what: str) -> Dim | None:
    """The one element of input ``i`` (scalar or 1-element tensor), ``None`` if unknown.

    Integer values come from value propagation (elements may be symbolic); float
    constants are truncated to integers as onnxruntime casts them.
    """
    shape = ctx.input_shape(i)
    if shape is not None and len(shape) > 1:
        ctx.fail(f"{what} must be a scalar or a 1-D tensor, got rank {len(shape)}")
    if shape and isinstance(shape[0], int) and shape[0] != 1:
        ctx.fail(f"{what} must have exactly one element, got {shape[0]}")
    elements = ctx.input_value(i)
    if elements is None:
        array = constant_array(ctx.input(i))
        if array is None or array.dtype.kind not in "fiub":
            return None
        flat = array.reshape(-1)
        if flat.size != 1:
            ctx.fail(f"{what} must have exactly one element, got {flat.size}")
        if not np.isfinite(flat[0]) or abs(flat[0]) >= 2**63:
            return None  # the int64 cast is undefined there
        return int(np.trunc(flat[0]))
    if len(elements) != 1:
        ctx.fail(f"{what} must have exactly one element, got {len(elements)}")
    return single_element(elements)


def element_array(ctx: NodeContext, i: int) -> np.ndarray | None:
    """Input ``i``'s known elements as an object array of its (all-int) shape."""
    shape = ctx.input_shape(i)
    elements = ctx.input_value(i)
    if elements is None or not is_static(shape) or math.prod(shape) != len(elements):
        return None
    return object_array(elements, shape)


def set_value_array(ctx: NodeContext, i: int, array: np.ndarray | None) -> None:
    """Stores ``array`` (row-major) as output ``i``'s value; nothing for ``None``."""
    if array is not None:
        ctx.set_output_value(i, tuple(array.reshape(-1).tolist()))
