"""Shape computations and the ops that carry "values as shape".

``Shape``, ``Size``, ``Concat``, ``Gather``, ``Unsqueeze``, ``Squeeze``,
``Cast``, ``CastLike``, ``Identity``, ``Constant``, ``ConstantOfShape``, ``Range`` and
``Expand``. Each sets its output shape and, when the output is a small integer tensor,
its symbolic elements, so ``Shape -> Gather -> Concat -> Reshape`` chains resolve to
expressions in the model's own dim names. ``Reshape`` is in :mod:`onnx_symdims.ops.reshape`.
"""

from __future__ import annotations

__all__ = ["least_fresh"]

import logging
import math
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    constant_array,
    data_type,
    default_domain_producer,
    is_static,
    object_array,
    product,
    same_dim,
    static_length,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    INTEGER_DTYPES,
    MAX_VALUE_ELEMENTS,
    NodeContext,
    boolean_of,
    broadcast_elements,
    int_elements,
    is_fully_unknown,
    read_int64_proto,
    tensor_dims,
    unknown_element,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
INT64 = ir.DataType.INT64
_INT_ATTRIBUTE = ir.AttributeType.INT


def _axes_input_or_attr(
    ctx: NodeContext, since_input: int
) -> tuple[bool, Sequence[int] | None]:
    """``(given, axes)`` from input 1 (opset >= ``since_input``) or the ``axes`` attribute.

    ``given`` is False when no axes are specified at all; ``axes`` is ``None`` when they
    are given at runtime and unknown here.
    """
    if ctx.opset >= since_input:
        inputs = ctx.node._inputs  # ctx.input(1), inline
        value = inputs[1] if len(inputs) > 1 else None
        if value is None:
            return False, None
        axes = ctx.ctx.value_of(value)
        # Like ctx.input_ints(1): known only when every element is an int (is_static,
        # inline: every Unsqueeze and Squeeze).
        if axes is None:
            return True, None
        for a in axes:
            if a.__class__ is not int and not isinstance(a, int):
                return True, None
        return True, axes  # type: ignore[return-value]
    axes_attr = ctx.attr_ints("axes")
    return axes_attr is not None, None if axes_attr is None else list(axes_attr)


# ----------------------------------------------------------------------------------------
# Shape, Size
# ----------------------------------------------------------------------------------------
@register("", "Shape")
def infer_shape(ctx: NodeContext, node: ir.Node) -> None:
    """1-D int64 output holding the input's dims ``[start:end]`` (opset 15 slicing)."""
    dims = ctx.ctx.shape_of(ctx.require_input(0))
    if dims is None:
        ctx.set_output(0, [None], INT64)
        return
    # Without attributes (the common case) start=0 and end=rank keep every dim. (The
    # dict in onnx-ir's slot: the Attributes mapping's truth is a Python __len__ call.)
    if ctx.opset >= 15 and node._attributes.data:
        rank = len(dims)
        start = ctx.attr_int("start", 0)
        end = ctx.attr_int("end", rank)
        # min(max(v, 0), rank) as comparisons (the builtins parse their arguments):
        # dynamo writes start=0 on every Shape.
        start = start + rank if start < 0 else start
        start = 0 if start < 0 else (rank if start > rank else start)
        end = end + rank if end < 0 else end
        end = 0 if end < 0 else (rank if end > rank else end)
        dims = dims[start:end] if end > start else ()
    ctx.set_output(0, (len(dims),), INT64)
    ctx.set_output_value(0, dims)


@register("", "Size")
def infer_size(ctx: NodeContext, node: ir.Node) -> None:
    """Scalar int64 holding the number of elements."""
    ctx.require_input(0)
    ctx.set_output(0, [], INT64)
    dims = ctx.input_shape(0)
    if dims is not None:
        ctx.set_output_value(0, [product(dims)])


# ----------------------------------------------------------------------------------------
# Concat, Gather
# ----------------------------------------------------------------------------------------
def least_fresh(ctx: NodeContext, candidates: Sequence[Dim]) -> Dim:
    """The first dim built only from model names, else the first one (all are equal)."""
    generated = ctx.ctx.is_generated
    for d in candidates:
        if not any(generated(s) for s in d.symbols()):  # type: ignore[union-attr]
            return d
    return candidates[0]


@register("", "Concat")
def infer_concat(ctx: NodeContext, node: ir.Node) -> None:
    """Dims along ``axis`` add up; the other dims are equal (an int is preferred)."""
    # node._inputs: the slot behind node.inputs (see passes/_inference.py). Every input
    # present is the usual case: the sequence as it is, no list built.
    present = node._inputs
    if None in present:
        present = [value for value in present if value is not None]
    if not present:
        ctx.fail("needs at least one input")
    # ctx.attr_int("axis"), inline for its usual outcome (a plain INT attribute).
    attr = node._attributes.data.get("axis")
    if attr is not None and attr._ref_attr_name is None and attr._type is _INT_ATTRIBUTE:
        axis = attr._value
    else:
        axis = ctx.attr_int("axis")
    if axis is None:
        if ctx.opset >= 4:
            ctx.fail("missing attribute 'axis'")
        axis = 1
    facts = ctx.ctx
    shape_of = facts.shape_of
    shapes = list(map(shape_of, present))  # (a comprehension is a call of its own)
    dtype = None
    for value in present:
        dtype = facts.dtype_of(value)
        if dtype is not None:
            break
    known = [s for s in shapes if s is not None] if None in shapes else shapes
    if not known:
        ctx.set_output(0, None, dtype)
        return
    first = known[0]
    rank = len(first)
    if rank == 1:
        # Vectors (shape computations): the ranks checked and the lengths summed in one
        # pass (the sum _concatenated_dim gives), then the elements.
        total = first[0]
        for s in known[1:]:  # (by position: two inputs may share one shape tuple)
            if len(s) != 1:
                ctx.fail(f"inputs have different ranks {[len(s) for s in known]}")
            d = s[0]
            if total.__class__ is int and d.__class__ is int:
                r = total + d  # expr.add of two ints, without its call
                total = r if _INT64_MIN <= r <= _INT64_MAX else expr.add(total, d)
            else:
                total = expr.add(total, d)
        if not -1 <= axis < 1:
            ctx.normalize_axis(axis, 1)  # fails the node
        ctx.set_output(0, (total if len(known) == len(shapes) else None,), dtype)
        pieces: list[Dim] = []
        value_of = facts.value_of
        for value, shape in zip(present, shapes):
            elements = value_of(value)
            if elements is None:
                if (
                    shape is None
                    or not isinstance(shape[0], int)
                    or shape[0] > MAX_VALUE_ELEMENTS
                ):
                    return
                elements = [unknown_element() for _ in range(shape[0])]
            pieces += elements
        # An int first element (the usual shape vector) is known: no call to find one.
        if (pieces and pieces[0].__class__ is int) or not is_fully_unknown(pieces):
            ctx.set_output_value(0, pieces)
        return
    for s in known:
        if len(s) != rank:
            ctx.fail(f"inputs have different ranks {[len(s) for s in known]}")
    if rank == 0:
        ctx.fail("cannot concatenate scalars")
    if not -rank <= axis < rank:
        ctx.normalize_axis(axis, rank)  # fails the node
    axis = axis + rank if axis < 0 else axis  # normalize_axis, inline
    out: list[Dim | None] = []
    for k in range(rank):
        if k == axis:
            out.append(_concatenated_dim(known, len(shapes), k))
            continue
        chosen = first[k]
        for s in known:
            if s[k] is not chosen:
                break
        else:
            # The same dim in every input (the usual case): nothing to choose or record.
            out.append(chosen)
            continue
        candidates = [s[k] for s in known]
        ints = {d for d in candidates if isinstance(d, int)}
        if len(ints) > 1:
            ctx.fail(f"inputs disagree on axis {k}: {sorted(ints)}")
        chosen = ints.pop() if ints else least_fresh(ctx, candidates)
        for d in candidates:
            if d is not chosen and not isinstance(d, int):
                facts.add_constraint(d, chosen)  # a valid run has them equal
        out.append(chosen)
    ctx.set_output(0, out, dtype)


def _concatenated_dim(known: Sequence[Sequence[Dim]], inputs: int, axis: int) -> Dim | None:
    """The sum of the inputs' dims on ``axis``; ``None`` when an input's rank is unknown."""
    if len(known) < inputs:
        return None
    total = known[0][axis]
    for shape in known[1:]:
        d = shape[axis]
        if total.__class__ is int and d.__class__ is int:
            # expr.add of two ints (the lengths of shape vectors), without its call:
            # their sum unless it leaves int64 (then what expr.add says of it).
            r = total + d
            total = r if _INT64_MIN <= r <= _INT64_MAX else expr.add(total, d)
        else:
            total = expr.add(total, d)
    return total


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


@register("", "Gather")
def infer_gather(ctx: NodeContext, node: ir.Node) -> None:
    """``data.shape[:axis] + indices.shape + data.shape[axis+1:]``; values via ``take``."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    try:
        data_value, indices_value = inputs  # two inputs (every valid node): no len()
    except ValueError:
        data_value, indices_value = ctx.require_two_inputs()
    if data_value is None or indices_value is None:
        ctx.require_two_inputs()  # fails the node
    facts = ctx.ctx
    data = facts.shape_of(data_value)
    indices = facts.shape_of(indices_value)
    dtype = facts.dtype_of(data_value)
    if data is None or indices is None:
        ctx.set_output(0, None, dtype)
        return
    if not data:
        ctx.fail("cannot gather from a scalar")
    # ctx.attr_int("axis", 0), inline for its usual outcomes (none, a plain INT).
    attr = node._attributes.data.get("axis")
    if attr is None:
        axis = 0
    elif attr._ref_attr_name is None and attr._type is _INT_ATTRIBUTE:
        axis = attr._value
    else:
        axis = ctx.attr_int("axis")  # type: ignore[assignment]
    rank = len(data)
    if not -rank <= axis < rank:
        ctx.normalize_axis(axis, rank)  # fails the node
    axis = axis + rank if axis < 0 else axis  # normalize_axis, inline
    out = (*data[:axis], *indices, *data[axis + 1 :])
    ctx.set_output(0, out, dtype)
    elements = facts.value_of(data_value)
    if elements is None:
        return
    bound = data[0]
    if not indices and len(data) == 1 and bound.__class__ is int:
        # One element of a static vector (Shape -> Gather of a scalar index, the usual
        # case): what the general path below gives, without its checks' calls.
        index_values = facts.value_of(indices_value)
        if index_values is None:
            return
        if len(index_values) == 1:
            j = index_values[0]
            if j.__class__ is int:
                if not -bound <= j < bound:
                    ctx.fail(f"index {j} is out of range for axis {axis} of size {bound}")
                if len(elements) == bound:
                    ctx.set_output_value(0, (elements[j],))
                    return
    if not is_static(data) or not is_static(indices):
        return
    index_values = facts.value_of(indices_value)
    if index_values is None:
        return
    bound = data[axis]
    if not is_static(index_values):
        # Symbolic indices: the result has the right shape but unknown elements.
        return
    for j in index_values:
        if not -bound <= j < bound:  # type: ignore[operator]
            ctx.fail(f"index {j} is out of range for axis {axis} of size {bound}")
    if len(data) == 1 and len(elements) == bound and len(index_values) == math.prod(indices):
        # 1-D data (Shape -> Gather): plain indexing picks what ``np.take`` would.
        ctx.set_output_value(0, [elements[j] for j in index_values])  # type: ignore[index]
        return
    array = object_array(elements, data)  # type: ignore[arg-type]
    index_array = np.array(index_values, dtype=np.int64).reshape(tuple(indices))  # type: ignore[arg-type]
    taken = np.take(array, index_array, axis=axis)
    ctx.set_output_value(0, list(np.asarray(taken, dtype=object).reshape(-1)))


# ----------------------------------------------------------------------------------------
# Unsqueeze, Squeeze
# ----------------------------------------------------------------------------------------
@register("", "Unsqueeze")
def infer_unsqueeze(ctx: NodeContext, node: ir.Node) -> None:
    """Inserts 1s at ``axes`` (attribute before opset 13, input since)."""
    inputs = node._inputs  # ctx.require_input(0), inline: its check, then the input
    data_value = inputs[0] if inputs else None
    if data_value is None:
        ctx.require_input(0)  # fails the node
    facts = ctx.ctx
    data = facts.shape_of(data_value)
    dtype = facts.dtype_of(data_value)
    if data is not None and len(inputs) == 2 and ctx.opset >= 13:
        # The usual form: one constant axis in input 1. What _axes_input_or_attr and
        # the one-axis case below give, without the call and the tuple it returns.
        axes_value = inputs[1]
        axes = None if axes_value is None else facts.value_of(axes_value)
        if axes is not None and len(axes) == 1:
            k = axes[0]
            if k.__class__ is int:
                rank = len(data) + 1
                if not -rank <= k < rank:
                    ctx.normalize_axis(k, rank)  # fails the node
                k = k + rank if k < 0 else k
                ctx.set_output(0, (*data[:k], 1, *data[k:]), dtype)
                ctx.set_output_value(0, facts.value_of(data_value))
                return
    given, axes = _axes_input_or_attr(ctx, 13)
    if not given:
        ctx.fail("missing axes")
    if data is None:
        ctx.set_output(0, None, dtype)
        return
    if axes is None:
        count = static_length(ctx, 1)
        # Where the 1s go is unknown: every dim is fresh, only the rank is known.
        ctx.set_output(0, None if count is None else [None] * (len(data) + count), dtype)
        return
    rank = len(data) + len(axes)
    if len(axes) == 1:  # the usual case: one 1 inserted at one place
        k = axes[0]
        if not -rank <= k < rank:
            ctx.normalize_axis(k, rank)  # fails the node
        k = k + rank if k < 0 else k  # normalize_axis, inline
        ctx.set_output(0, (*data[:k], 1, *data[k:]), dtype)
    else:
        positions = set(ctx.normalize_axes(axes, rank))
        source = iter(data)
        ctx.set_output(0, [1 if k in positions else next(source) for k in range(rank)], dtype)
    ctx.set_output_value(0, facts.value_of(data_value))


def _squeezed_by_runtime_axes(
    ctx: NodeContext, data: Sequence[Dim], count: int | None
) -> list[Dim | None] | None:
    """The output of ``Squeeze`` by ``count`` axes whose values are unknown.

    Every squeezed dim is 1, so the axes point at dims that can be 1. onnxruntime (and
    onnx) accept a repeated axis and squeeze it once, so ``count >= 2`` axes give a
    known rank only when a single dim can be 1: then that dim goes. One axis removes
    one of the dims that can be 1; each output dim is then one of at most two input
    dims (exact when they are the same, else a fresh symbol bounded by both).
    """
    if count is None:
        return None
    if count == 0:
        return _squeezed_by_no_axis(ctx, data)
    candidates = [
        k
        for k, d in enumerate(data)
        if d == 1 or not (isinstance(d, int) or ctx.scope.prove_gt(d, 1))
    ]
    if len(candidates) == 1:
        (gone,) = candidates
        return [d for k, d in enumerate(data) if k != gone]
    if count != 1:
        return None
    out: list[Dim | None] = []
    for k in range(len(data) - 1):
        # The removed axis j is after k (dim k stays in place) or at/before k (k + 1).
        choices = []
        if any(j > k for j in candidates):
            choices.append(data[k])
        if any(j <= k for j in candidates):
            choices.append(data[k + 1])
        if len(choices) == 1 or (len(choices) == 2 and same_dim(*choices)):
            out.append(choices[0])
            continue
        if not choices:
            out.append(None)  # no dim can be 1: the node always fails
            continue
        a, b = choices
        fresh = ctx.new_symbol(f"o0_d{k}")
        ctx.ctx.add_less_equal_constraint(fresh, expr.dmax(a, b, scope=ctx.scope))
        low = expr.dmin(a, b, scope=ctx.scope)
        if low != 0:
            ctx.ctx.add_less_equal_constraint(low, fresh)
        out.append(fresh)
    return out


def _squeezed_by_no_axis(ctx: NodeContext, data: Sequence[Dim]) -> list[Dim] | None:
    """The output of ``Squeeze`` by an empty axes tensor: ``data`` unless a dim can be 1.

    The spec (the reference evaluator, onnx's inference) squeezes no dim; onnxruntime
    squeezes every dim of size 1, as without axes. Both agree when no dim can be 1;
    otherwise the rank is left unknown.
    """
    if all((isinstance(d, int) and d != 1) or ctx.scope.prove_gt(d, 1) for d in data):
        return list(data)
    return None


@register("", "Squeeze")
def infer_squeeze(ctx: NodeContext, node: ir.Node) -> None:
    """Removes ``axes`` (which must be 1); without axes, every dim known to be 1."""
    ctx.require_input(0)
    data = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    given, axes = _axes_input_or_attr(ctx, 13)
    if data is None:
        ctx.set_output(0, None, dtype)
        return
    if given and axes == [] and ctx.opset < 13:
        # An empty axes attribute is no axes: onnxruntime and the reference squeeze every 1
        given = False
    if not given:
        if not all(isinstance(d, int) or ctx.scope.prove_gt(d, 1) for d in data):
            # A symbolic dim might be 1 at runtime: which dims go is unknown.
            ctx.set_output(0, None, dtype)
            return
        out = [d for d in data if d != 1]
    elif axes is None:
        out = _squeezed_by_runtime_axes(ctx, data, static_length(ctx, 1))
    elif not axes:
        out = _squeezed_by_no_axis(ctx, data)
    else:
        # a repeated axis is squeezed once (onnxruntime; onnx's inference accepts it)
        drop = {ctx.normalize_axis(a, len(data)) for a in axes}
        for k in drop:
            if isinstance(data[k], int) and data[k] != 1:
                ctx.fail(f"cannot squeeze axis {k} of size {data[k]}")
        out = [d for k, d in enumerate(data) if k not in drop]
    ctx.set_output(0, out, dtype)
    ctx.set_output_value(0, ctx.input_value(0))


# ----------------------------------------------------------------------------------------
# Cast, CastLike, Identity
# ----------------------------------------------------------------------------------------
_INT_RANGES = {
    ir.DataType.INT8: (-(2**7), 2**7 - 1),
    ir.DataType.INT16: (-(2**15), 2**15 - 1),
    ir.DataType.INT32: (-(2**31), 2**31 - 1),
    ir.DataType.INT64: (-(2**63), 2**63 - 1),
    ir.DataType.UINT8: (0, 2**8 - 1),
    ir.DataType.UINT16: (0, 2**16 - 1),
    ir.DataType.UINT32: (0, 2**32 - 1),
    ir.DataType.UINT64: (0, 2**64 - 1),
}
# Symbolic elements are dim-sized; these types hold any realistic dim.
_WIDE_INTS = frozenset({ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT64})


_BOOL = ir.DataType.BOOL


def _cast_element(scope: expr.Scope, e: Dim, to: ir.DataType) -> Dim:
    if to == _BOOL:
        return boolean_of(scope, e)
    if isinstance(e, int):
        low, high = _INT_RANGES[to]
        return e if low <= e <= high else unknown_element()
    return e if to in _WIDE_INTS else unknown_element()


def _set_cast(ctx: NodeContext, to: ir.DataType) -> None:
    ctx.set_output(0, ctx.input_shape(0), to)
    elements = ctx.input_value(0)
    if elements is None and to in INTEGER_DTYPES:
        folded = _float_scalar_to_int(ctx, ctx.input(0), to)
        if folded is not None:
            ctx.set_output_value(0, [folded])
        return
    if (
        elements is None
        or to not in INTEGER_DTYPES
        or ctx.input_dtype(0) not in INTEGER_DTYPES
    ):
        return
    cast = [_cast_element(ctx.scope, e, to) for e in elements]
    if not is_fully_unknown(cast):
        ctx.set_output_value(0, cast)


# ----------------------------------------------------------------------------------------
# Float constant scalars cast to an integer (``Cast<to=INT64>(Pow(16.0, 0.5))``)
# ----------------------------------------------------------------------------------------
#: Float types folded, with their numpy type. Half types are not: runtimes compute them
#: through float32 with their own roundings.
_FOLDED_FLOATS = {ir.DataType.FLOAT: np.float32, ir.DataType.DOUBLE: np.float64}
#: Nodes visited at most per folded Cast (a DAG: each visited once).
_MAX_FOLD_NODES = 32
_NOT_FOLDED = object()


def _float_scalar_to_int(
    ctx: NodeContext, value: ir.Value | None, to: ir.DataType
) -> int | None:
    """``Cast<to>`` of a one-element float value computed from constants only, or ``None``.

    Sound only where the float value is exactly the one onnxruntime computes:
    :func:`_fold_float` evaluates in the value's own IEEE type, and only ops whose result
    is defined bit for bit (correctly rounded or exact). The cast truncates toward zero
    (``static_cast``), as onnxruntime's ``Cast`` does (to bool: ``x != 0``); a value
    outside ``to``'s range (undefined behaviour in C++) is not folded.
    """
    if value is None or ctx.input_dtype(0) not in _FOLDED_FLOATS:
        return None
    shape = ctx.input_shape(0)
    if not is_static(shape) or math.prod(shape) != 1:  # type: ignore[arg-type]
        return None  # checked first: reading producers turns the node's memo off
    seen: dict[ir.Value, object] = {}
    folded = _fold_float(ctx, value, seen)
    if not isinstance(folded, np.ndarray) or folded.size != 1:
        return None
    x = float(folded.reshape(-1)[0])
    if not math.isfinite(x):
        return None
    if to == ir.DataType.BOOL:
        return int(x != 0)
    n = math.trunc(x)
    low, high = _INT_RANGES[to]
    return n if low <= n <= high else None


def _fold_float(ctx: NodeContext, value: ir.Value, seen: dict[ir.Value, object]) -> object:
    """The one-element float array ``value`` holds in every run, or ``_NOT_FOLDED``.

    Constants (initializers, ``Constant``) of type float or double, and these ops on
    them, each evaluated in the value's numpy type exactly as IEEE 754 defines it:

    * ``Add``, ``Sub``, ``Mul``, ``Div``, ``Sqrt``: correctly rounded (onnxruntime's
      kernels on one element are the scalar IEEE operations);
    * ``Neg``, ``Abs``, ``Floor``, ``Ceil``, ``Identity``: exact;
    * ``Cast`` between float and double (exact, or one round-to-nearest), and from a
      known integer the float type holds exactly;
    * ``Pow`` only where its result does not depend on the C library: exponent 2 or 3
      (onnxruntime multiplies, ``x*x`` and ``x*x*x``), and exponent 0.5 of the square
      of an integer ``n`` (result ``n`` exactly; see :func:`_exact_square_root`).

    Subnormal, infinite and NaN intermediates are not folded (a runtime may flush
    subnormals). Symbolic values (``Cast(dim, float)``) are never folded.
    """
    known = seen.get(value)
    if known is not None:
        return known
    if len(seen) >= _MAX_FOLD_NODES:
        return _NOT_FOLDED
    seen[value] = _NOT_FOLDED  # also stops a cycle
    result = _fold_float_node(ctx, value, seen)
    if result is not _NOT_FOLDED:
        result = _checked(np.asarray(result))  # numpy ops on 0-d arrays give scalars
    seen[value] = result
    return result


def _checked(array: np.ndarray) -> object:
    """``array`` unless it is too large or holds a non-finite or subnormal number."""
    if array.size != 1:
        return _NOT_FOLDED
    x = array.reshape(-1)[0]
    if not np.isfinite(x) or (x != 0 and abs(x) < np.finfo(array.dtype).tiny):
        return _NOT_FOLDED
    return array


def _fold_float_node(
    ctx: NodeContext, value: ir.Value, seen: dict[ir.Value, object]
) -> object:
    dtype = ctx.ctx.dtype_of(value)
    np_type = _FOLDED_FLOATS.get(dtype)  # type: ignore[arg-type]
    if np_type is None:
        return _NOT_FOLDED
    array = constant_array(value)
    if array is not None:
        if array.dtype.kind != "f" or array.size != 1:
            return _NOT_FOLDED
        # value_float attributes read back as Python floats: float32 values, exactly.
        return np.asarray(array, dtype=np_type)
    producer = default_domain_producer(value)
    if producer is None or producer.op_type == "Constant":
        return _NOT_FOLDED
    op = producer.op_type
    inputs = producer.inputs
    if op == "Cast":
        return _fold_cast_to_float(ctx, producer, np_type, seen)
    if not inputs or any(i is None for i in inputs):
        return _NOT_FOLDED
    if op == "Pow" and len(inputs) == 2:
        base = _fold_float(ctx, inputs[0], seen)  # type: ignore[arg-type]
        exponent = _pow_exponent(ctx, inputs[1], seen)  # type: ignore[arg-type]
        if not isinstance(base, np.ndarray) or base.dtype != np_type or exponent is None:
            return _NOT_FOLDED
        return _fold_pow(base, exponent)
    operands = []
    for i in inputs:
        folded = _fold_float(ctx, i, seen)  # type: ignore[arg-type]
        if not isinstance(folded, np.ndarray) or folded.dtype != np_type:
            return _NOT_FOLDED
        operands.append(folded)
    with np.errstate(all="ignore"):
        if op in _FLOAT_UNARY and len(operands) == 1:
            return _FLOAT_UNARY[op](operands[0]).astype(np_type)
        if op in _FLOAT_BINARY and len(operands) == 2:
            a, b = operands
            return _FLOAT_BINARY[op](a, b).astype(np_type)
    return _NOT_FOLDED


def _pow_exponent(
    ctx: NodeContext, value: ir.Value, seen: dict[ir.Value, object]
) -> float | None:
    """The one-element exponent of ``Pow`` (any float or integer type), or ``None``."""
    elements = ctx.ctx.value_of(value)
    if elements is not None:
        if len(elements) == 1 and isinstance(elements[0], int):
            return float(elements[0])
        return None
    folded = _fold_float(ctx, value, seen)
    if isinstance(folded, np.ndarray):
        return float(folded.reshape(-1)[0])
    return None


_FLOAT_UNARY = {
    "Identity": lambda a: a,
    "Neg": np.negative,
    "Abs": np.abs,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Sqrt": np.sqrt,
}
_FLOAT_BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
}


def _fold_cast_to_float(
    ctx: NodeContext, producer: ir.Node, np_type: type, seen: dict[ir.Value, object]
) -> object:
    source = producer.inputs[0] if producer.inputs else None
    if source is None:
        return _NOT_FOLDED
    source_type = ctx.ctx.dtype_of(source)
    if source_type in _FOLDED_FLOATS:
        folded = _fold_float(ctx, source, seen)
        if not isinstance(folded, np.ndarray):
            return _NOT_FOLDED
        return folded.astype(np_type)  # exact, or one round-to-nearest (static_cast)
    exact = _cast_integer(ctx, producer.outputs[0])
    if exact is None:
        return _NOT_FOLDED
    return np.asarray([exact], dtype=np_type)


def _fold_pow(base: np.ndarray, y: float) -> object:
    """``Pow`` where onnxruntime's result is known bit for bit, else ``_NOT_FOLDED``.

    onnxruntime multiplies for a scalar exponent 2 or 3 (``x*x``, ``x*x*x``: correctly
    rounded products, reproduced here in the same order) and calls ``std::pow``
    otherwise, whose accuracy the C++ standard leaves open: there only an exponent of
    exactly 0.5 is folded, and only when the result is exact (:func:`_exact_square_root`).
    """
    with np.errstate(all="ignore"):
        if y == 2:
            return (base * base).astype(base.dtype)
        if y == 3:
            return (base * base * base).astype(base.dtype)
    if y == 0.5:
        root = _exact_square_root(float(base.reshape(-1)[0]), base.dtype)
        if root is not None:
            return np.full(base.shape, root, base.dtype)
    return _NOT_FOLDED


def _exact_square_root(x: float, dtype: np.dtype) -> int | None:
    """``n`` when ``x == n*n`` for an integer ``1 <= n`` the float type holds exactly.

    ``pow(n*n, 0.5)`` is then the representable number ``n``, and onnxruntime's
    ``std::pow`` returns it exactly; this is the one assumption the fold makes about the
    C library (the C++ standard does not bound ``pow``'s error). glibc and musl (the Arm
    optimized routines): ``powf`` evaluates in double precision with a relative error
    of at most ``1.27 * 2**-26`` and rounds once, ``pow`` is within ``0.52`` ulp, and
    both errors are below half the distance from a float to either neighbour (also
    below a power of two, where the lower neighbour is half an ulp away), so a
    representable result comes out unchanged. Other C libraries are assumed faithfully
    rounded (one of the two floats around the exact result), which also keeps it.
    """
    if not x.is_integer() or x < 1:
        return None
    n = math.isqrt(int(x))
    if n * n != int(x):
        return None
    bits = 24 if dtype == np.float32 else 53
    return n if n * n <= 2**bits else None


@register("", "Cast")
def infer_cast(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape, element type ``to`` (an int, or a type name before opset 6)."""
    ctx.require_input(0)
    attr = node._attributes.data.get("to")  # the slots (see passes/_inference.py)
    if attr is None:
        ctx.fail("missing attribute 'to'")
    try:
        if attr._type == ir.AttributeType.STRING:
            to = ir.DataType[attr._value.upper()]
        else:
            to = data_type(ctx.attr_int("to"))  # type: ignore[arg-type]
    except (KeyError, ValueError):
        ctx.fail(f"invalid target type {attr.value!r}")
    _set_cast(ctx, to)


@register("", "CastLike", since=15)
def infer_cast_like(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as input 0, element type of input 1."""
    ctx.require_input(0)
    ctx.require_input(1)
    to = ctx.input_dtype(1)
    if to is None:
        ctx.set_output(0, ctx.input_shape(0))
        return
    _set_cast(ctx, to)


@register("", "Identity")
def infer_identity(ctx: NodeContext, node: ir.Node) -> None:
    """Output = input: shape, type and value (sequences/optionals keep their type)."""
    value = ctx.require_input(0)
    if value.type is not None and not isinstance(value.type, ir.TensorType):
        ctx.set_output_type(0, value.type)
        ctx.set_output(0, None)
        return
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))
    ctx.set_output_value(0, ctx.input_value(0))


# ----------------------------------------------------------------------------------------
# Constant, ConstantOfShape, Range, Expand
# ----------------------------------------------------------------------------------------
_INT64_CODE = int(INT64)
_TENSOR_ATTRIBUTE = ir.AttributeType.TENSOR


@register("", "Constant")
def infer_constant(ctx: NodeContext, node: ir.Node) -> None:
    """Shape, type and (small integer) value from whichever ``value*`` attribute is set."""
    attributes = node._attributes.data  # onnx-ir's slots (see passes/_inference.py)
    if len(attributes) != 1:
        ctx.fail(f"expects exactly one attribute, got {sorted(attributes)}")
    ((name, attr),) = attributes.items()
    if name == "value":
        # The usual tensor attribute is read directly (attr_tensor re-finds and re-checks it).
        if attr._type is _TENSOR_ATTRIBUTE and attr._ref_attr_name is None:
            tensor = attr._value
        else:
            tensor = ctx.attr_tensor("value")
        read = read_int64_proto(tensor)
        if read is not None:
            dims, elements = read
            ctx.set_output(0, dims, INT64)
            ctx.set_output_value(0, elements)
            return
        dims = tensor_dims(tensor)
        dtype = tensor.dtype
        ctx.set_output(0, dims, dtype)
        # int_elements has no elements for another type (a float constant): not read.
        ctx.set_output_value(0, int_elements(tensor) if dtype in INTEGER_DTYPES else None)
    elif name == "value_int":
        ctx.set_output(0, [], INT64)
        ctx.set_output_value(0, [ctx.attr_int(name)])
    elif name == "value_ints":
        ints = ctx.attr_ints(name)
        ctx.set_output(0, [len(ints)], INT64)
        ctx.set_output_value(0, ints)
    elif name == "value_float":
        ctx.attr_float(name)
        ctx.set_output(0, [], ir.DataType.FLOAT)
    elif name == "value_floats":
        ctx.set_output(0, [len(ctx.attr_floats(name))], ir.DataType.FLOAT)
    elif name == "value_string":
        ctx.set_output(0, [], ir.DataType.STRING)
    elif name == "value_strings":
        ctx.set_output(0, [len(attr.value)], ir.DataType.STRING)
    else:  # sparse_value and anything newer: ONNX knows best
        ctx.fallback()


@register("", "ConstantOfShape", since=9)
def infer_constant_of_shape(ctx: NodeContext, node: ir.Node) -> None:
    """Output shape = input 0's elements; type and fill value from ``value``."""
    ctx.require_input(0)
    tensor = ctx.attr_tensor("value")
    dtype = tensor.dtype if tensor is not None else ir.DataType.FLOAT
    target = ctx.input_value(0)
    if target is None:
        length = static_length(ctx, 0)
        ctx.set_output(0, None if length is None else [None] * length, dtype)
        return
    dims: list[Dim | None] = []
    for k, t in enumerate(target):
        if isinstance(t, int):
            if t < 0:
                ctx.fail(f"negative dim {t} at axis {k}")
            dims.append(t)
        else:
            # A negative element fails the node (the spec and onnxruntime agree), so in
            # every run that gets past it the element is the dim: no proof of t >= 0 needed.
            dims.append(None if t.is_unknown else t)
    ctx.set_output(0, dims, dtype)
    if tensor is None:
        fill: tuple[int, ...] | None = (0,)
    else:  # (int_elements has nothing for another type: a float fill is not read)
        fill = int_elements(tensor) if dtype in INTEGER_DTYPES else None
    if fill is not None and len(fill) == 1 and is_static(dims):
        count = math.prod(dims)  # type: ignore[arg-type]
        if count <= MAX_VALUE_ELEMENTS and dtype in INTEGER_DTYPES:
            ctx.set_output_value(0, fill * count)


def _scalar(ctx: NodeContext, i: int) -> Dim | float | None:
    """Input ``i`` as one integer element or, for a float constant, one float."""
    elements = ctx.input_value(i)
    if elements is not None:
        return elements[0] if len(elements) == 1 else None
    value = ctx.input(i)
    array = constant_array(value)  # an initializer or a Constant node
    if array is not None and array.size == 1 and array.dtype.kind == "f":
        return float(array.reshape(-1)[0])
    return _cast_integer(ctx, value)


#: The integers each float type holds exactly: ``|n| <= 2**bits``.
_EXACT_INTEGER_BITS = {
    ir.DataType.FLOAT: 24,
    ir.DataType.DOUBLE: 53,
    ir.DataType.FLOAT16: 11,
    ir.DataType.BFLOAT16: 8,
}


def _cast_integer(ctx: NodeContext, value: ir.Value | None) -> float | None:
    """A float scalar cast from a known integer it holds exactly (``Cast(size)``)."""
    producer = default_domain_producer(value, "Cast")
    if producer is None or not producer.inputs or producer.inputs[0] is None:
        return None
    attr = producer.attributes.get("to")
    if attr is None or attr.type != ir.AttributeType.INT:
        return None
    bits = _EXACT_INTEGER_BITS.get(data_type(attr.value))
    elements = ctx.ctx.value_of(producer.inputs[0])
    if bits is None or elements is None or len(elements) != 1:
        return None
    n = elements[0]
    if not isinstance(n, int) or abs(n) > 2**bits:
        return None
    return float(n)


@register("", "Range", since=11)
def infer_range(ctx: NodeContext, node: ir.Node) -> None:
    """1-D output of ``max(ceil((limit - start) / delta), 0)`` elements."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    if len(inputs) < 3 or inputs[0] is None or inputs[1] is None or inputs[2] is None:
        for i in range(3):
            ctx.require_input(i)  # one of them fails the node
    dtype = ctx.input_dtype(0)
    # One at a time, in input order (no generator to resume for each).
    start = _scalar(ctx, 0)
    limit = _scalar(ctx, 1)
    delta = _scalar(ctx, 2)
    length: Dim | None = None
    if isinstance(delta, (int, float)) and delta == 0:
        ctx.fail("delta is zero")
    if (
        isinstance(start, (int, float))
        and isinstance(limit, (int, float))
        and isinstance(delta, (int, float))
    ):
        if isinstance(start, int) and isinstance(limit, int) and isinstance(delta, int):
            # exact, as onnxruntime counts: (limit - start) / delta as a float rounds
            # beyond 2**53 (Range(10, -2**63 + 1, -2**62) has 3 elements, not 2)
            length = max(-((start - limit) // delta), 0)
        else:
            length = max(math.ceil((limit - start) / delta), 0)  # type: ignore[operator]
    elif isinstance(delta, int) and _is_dim(start) and _is_dim(limit):
        span = expr.sub(limit, start) if delta > 0 else expr.sub(start, limit)  # type: ignore[arg-type]
        # ceildiv(span, 1) is span (floordiv(add(span, 0), 1)) unless span is unknown:
        # the usual step of 1 (arange(seq)) skips the two calls.
        if delta == 1 and (span.__class__ is int or not span.is_unknown):  # type: ignore[union-attr]
            count = span
        else:
            count = expr.ceildiv(span, abs(delta))
        length = expr.dmax(count, 0, scope=ctx.ctx.scope)
    ctx.set_output(0, [length], dtype)
    if (
        isinstance(length, int)
        and length <= MAX_VALUE_ELEMENTS
        and isinstance(delta, int)
        and _is_dim(start)
        and dtype in INTEGER_DTYPES
    ):
        ctx.set_output_value(0, [expr.add(start, k * delta) for k in range(length)])  # type: ignore[arg-type]


def _is_dim(x: object) -> bool:
    return isinstance(x, int) or (isinstance(x, expr.DimExpr) and not x.is_unknown)


@register("", "Expand", since=8)
def infer_expand(ctx: NodeContext, node: ir.Node) -> None:
    """Numpy broadcasting of the input shape with the target shape (input 1)."""
    ctx.require_input(0)
    ctx.require_input(1)
    data = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    target = ctx.input_value(1)
    if target is None:
        length = static_length(ctx, 1)
        target = None if length is None else [unknown_element()] * length
    if data is None or target is None:
        ctx.set_output(0, None, dtype)
        return
    dims: list[Dim] = []
    for k, t in enumerate(target):
        if isinstance(t, int):
            if t < 0:
                ctx.fail(f"negative target dim {t} at axis {k}")
            dims.append(t)
        elif t.is_unknown or not ctx.scope.prove_nonneg(t):
            dims.append(ctx.new_symbol(f"shape{k}"))  # some dim >= 0
        else:
            dims.append(t)
    out = ctx.broadcast_shapes(data, tuple(dims))
    ctx.set_output(0, out, dtype)
    elements = ctx.input_value(0)
    if elements is not None and is_static(data) and is_static(out):
        result = broadcast_elements(lambda e, _: e, [(data, elements), (out, None)])
        if result is not None:
            ctx.set_output_value(0, result[1])
