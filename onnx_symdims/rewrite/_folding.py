"""Which constant nodes onnxscript's folder may evaluate: only where numpy equals onnxruntime.

onnxscript's constant folder evaluates a node with constant inputs by the ONNX reference
implementation (numpy) and writes the result as a constant. For a float ``MatMul`` numpy
sums in another order than onnxruntime's kernels (``(7x300) @ (300x5)``: 34 of 35
elements differ in the last bits), and its ``Exp`` rounds otherwise (1,640 of 4,096
values); ``Tanh``, ``Erf``, ``Log``, ``Softmax`` and reductions differ the same way. A folded model then no longer computes what the
original computed, which ``optimize`` promises it does.

:func:`should_fold` keeps the folder to nodes whose every result element is the same in
numpy and onnxruntime: every node without floats (integer arithmetic wraps alike,
comparisons and data movement are exact); with floats, data movement, comparisons and
the IEEE operations that are correctly rounded by definition (``+ - * /``, square root,
reciprocal, negation, absolute value, floor and ceiling; for ``Sqrt`` and ``Reciprocal``
also measured: 0 of 4,096 values differ), and casts whose result is defined (a float cast to
an integer only when every value is finite and in range).

Half-precision results (``float16``, ``bfloat16``, the 8-bit floats) of rounding ops
(``+ - * /``, square root, reciprocal, casts) are never folded either. The spec rounds
each such result to the half type, as numpy does; onnxruntime's CPU provider has no
half kernel for most of these ops, computes them in ``float`` and drops the
``float -> float16 -> float`` cast pairs it inserts around them, so a rounding the
spec makes does not happen there (``Mul(x, Cast<to=FLOAT16>(0.5946035))``: 59 of
192 elements differ from the spec's result). A folded constant would carry the
spec's rounding into a model whose original never made it.

Two more departures of the reference implementation from onnxruntime are never folded,
whatever the types: ``Unique(sorted=0)`` (the reference sorts; onnxruntime keeps the
order of first occurrence) and a ``Slice`` with a negative step whose ``end`` lies
outside ``[-dim, dim)`` (``INT64_MAX``: empty by the spec's clamping, which the
reference follows; onnxruntime keeps the elements). Nor is an integer ``Resize`` that
interpolates (``linear``, ``cubic``): the spec leaves the conversion of the weighted sum
unspecified, the reference rounds it and onnxruntime does not. Not folding keeps the
original's behaviour on every runtime.

Example::

    >>> import onnx_ir as ir
    >>> from onnx_symdims.rewrite._folding import should_fold
    >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    >>> x.const_value = ir.tensor([[1.0]], dtype=ir.DataType.FLOAT)
    >>> should_fold(ir.node("MatMul", [x, x])) is False
    True
    >>> should_fold(ir.node("Add", [x, x])) is None  # the folder's own rules decide
    True
"""

from __future__ import annotations

__all__ = [
    "inexact_on_floats",
    "kept_float_weight_nodes",
    "should_fold",
    "should_fold_exactly",
]

import math

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import int_attribute

_FLOATS = frozenset(
    dtype for dtype in ir.DataType if dtype.is_floating_point() or "COMPLEX" in dtype.name
)

#: Ops whose float results are the same in numpy and onnxruntime, element by element.
_EXACT_ON_FLOATS = frozenset(
    {
        # data movement and shapes
        "Identity",
        "Reshape",
        "Transpose",
        "Concat",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "Squeeze",
        "Unsqueeze",
        "Expand",
        "Tile",
        "Flatten",
        "Split",
        "Pad",
        "ConstantOfShape",
        "Shape",
        "Size",
        "Where",
        "Compress",
        "DepthToSpace",
        "SpaceToDepth",
        "ReverseSequence",
        "Trilu",
        "SplitToSequence",
        # comparisons and predicates
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "IsNaN",
        "IsInf",
        "Sign",
        "Not",
        "And",
        "Or",
        "Xor",
        # correctly rounded IEEE operations
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Sqrt",
        "Reciprocal",
        "Neg",
        "Abs",
        "Floor",
        "Ceil",
        "Cast",
        "CastLike",
    }
)


#: Float types narrower than ``float``: onnxruntime's CPU kernels compute in ``float``.
_HALF_FLOATS = frozenset(
    dtype for dtype in _FLOATS if dtype.is_floating_point() and dtype.itemsize < 4
)

#: Ops of :data:`_EXACT_ON_FLOATS` that round their result to the output type.
_ROUNDING = frozenset({"Add", "Sub", "Mul", "Div", "Sqrt", "Reciprocal", "Cast", "CastLike"})


def _dtype(value: ir.Value | None) -> ir.DataType | None:
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.dtype
    return value.dtype


def _rounds_to_half(node: ir.Node) -> bool:
    """A rounding op whose result is a half-precision float (see the module docstring)."""
    if node.op_type not in _ROUNDING:
        return False
    result = _dtype(node.outputs[0]) if node.outputs else None
    if result is None and node.op_type == "Cast":
        result = _cast_target(node)
    elif result is None:  # CastLike takes the second input's type, the others the first's
        result = _dtype(node.inputs[-1 if node.op_type == "CastLike" else 0])
    return result in _HALF_FLOATS


def _involves_floats(node: ir.Node) -> bool:
    if any(_dtype(v) in _FLOATS for v in (*node.inputs, *node.outputs)):
        return True
    value = node.attributes.get("value")  # ConstantOfShape's fill
    return (
        value is not None
        and value.type == ir.AttributeType.TENSOR
        and (value.value.dtype in _FLOATS)
    )


def _cast_target(node: ir.Node) -> ir.DataType | None:
    """A ``Cast``'s ``to`` type; ``None`` when absent or not a data type."""
    to = int_attribute(node, "to")
    try:
        return None if to is None else ir.DataType(to)
    except ValueError:
        return None


def _cast_is_defined(node: ir.Node) -> bool:
    """A float cast to an integer type is defined only for finite values in its range."""
    source = node.inputs[0] if node.inputs else None
    if source is None or source.const_value is None or _dtype(source) not in _FLOATS:
        return True
    target = _cast_or_cast_like_target(node)
    if target is None or target in _FLOATS or target == ir.DataType.BOOL:
        return target is not None
    try:
        bounds = np.iinfo(target.numpy())
    except (TypeError, ValueError):
        return False  # a type numpy has no integer limits for: leave it
    values = source.const_value.numpy().astype(np.float64)
    return bool(
        np.all(np.isfinite(values))
        and np.all(values > float(bounds.min) - 1)
        and np.all(values < float(bounds.max) + 1)
    )


def _cast_or_cast_like_target(node: ir.Node) -> ir.DataType | None:
    """The type a ``Cast`` (its ``to``) or ``CastLike`` (its second input's) converts to."""
    if node.op_type == "Cast":
        return _cast_target(node)
    return _dtype(node.inputs[1]) if len(node.inputs) > 1 else None


def _casts_strings(node: ir.Node) -> bool:
    """A cast from or to ``string``: numpy spells values otherwise than onnxruntime.

    ``Cast(bool -> string)`` is ``["1", "0"]`` in onnxruntime, ``["True", "False"]`` by
    numpy's ``astype(str)``, and the folded numpy string tensor could not even be
    serialized (``optimize`` raised ``SerdeError``; found by hand).
    """
    source = node.inputs[0] if node.inputs else None
    target = _cast_or_cast_like_target(node)
    return ir.DataType.STRING in (target, _dtype(source) if source is not None else None)


def _reads_or_writes_strings(node: ir.Node) -> bool:
    """A node with a ``string`` input or output.

    The folder's reference evaluator computes them as numpy byte strings, which it then
    cannot store: ``Concat``, ``Reshape``, ``Gather``, ``Transpose``, ``Unique`` of string
    constants made ``optimize`` raise ``SerdeError`` on a model onnxruntime runs (found
    by hand). ``Shape`` and ``Size`` of a string tensor fold (their result is int64).
    """
    if node.op_type in ("Cast", "CastLike") and _casts_strings(node):
        return True
    read = () if node.op_type in ("Shape", "Size") else node.inputs  # a shape is no string
    return any(
        v is not None and _dtype(v) == ir.DataType.STRING for v in (*read, *node.outputs)
    )


def _slice_departs(node: ir.Node) -> bool:
    """A Slice with a negative step and an ``end`` outside ``[-dim, dim)`` (or unknown)."""
    inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
    data, _, ends, axes, steps = inputs[:5]
    if steps is None or steps.const_value is None:
        return False  # steps default to 1
    step_values = steps.const_value.numpy().reshape(-1).tolist()
    if all(step > 0 for step in step_values):
        return False
    if data is None or data.const_value is None or ends is None or ends.const_value is None:
        return True
    shape = data.const_value.shape.numpy() if data.const_value.shape is not None else None
    end_values = ends.const_value.numpy().reshape(-1).tolist()
    axis_values = (
        axes.const_value.numpy().reshape(-1).tolist()
        if axes is not None and axes.const_value is not None
        else list(range(len(end_values)))
    )
    if shape is None or not len(axis_values) == len(end_values) == len(step_values):
        return True
    for axis, end, step in zip(axis_values, end_values, step_values):
        if step < 0:
            if not -len(shape) <= axis < len(shape):
                return True
            dim = shape[axis]
            if not -dim <= end < dim:
                return True
    return False


#: Integers a ``double`` holds exactly: onnxruntime's integer ``Pow`` goes through one.
_DOUBLE_EXACT = 1 << 53


#: Elements of a constant the integer checks below read at most: a larger one declines
#: (onnxscript's folder folds no larger input of these ops, its ``input_size_limit``, so
#: nothing is lost, and no weight is turned into a Python list).
_MAX_CHECKED_ELEMENTS = 8192


def _exact_limit(dtype: ir.DataType | None) -> int | None:
    """The largest magnitude an integer result of ``dtype`` may have and stay exact in onnxruntime.

    onnxruntime computes an integer ``Pow`` and the integer reductions on ``double``s
    cast back: exact up to ``2**53``, and beyond the type's range the cast saturates
    (``int32`` ``3**21`` is ``-2**31`` there) where numpy wraps. ``None``: not an integer.
    """
    if dtype is None or not dtype.is_integer():
        return None
    return min(_DOUBLE_EXACT, int(np.iinfo(dtype.numpy()).max))


def _int_pow_is_exact(node: ir.Node) -> bool:
    """Whether an integer ``Pow`` of constants gives numpy's exact powers in onnxruntime.

    onnxruntime computes an integer ``Pow`` as ``std::pow`` on ``double``s cast back:
    ``3 ** 39`` is ``4052555153018976256`` there, ``...267`` in numpy (the folder's
    reference), and an ``int32`` ``3 ** 21`` saturates to ``-2**31`` where numpy wraps.
    Exact only for results within :func:`_exact_limit`. ``True`` for any other node, and
    for inputs not constant.
    """
    limit = _exact_limit(_dtype(node.inputs[0])) if len(node.inputs) == 2 else None
    if limit is None:
        return True
    base, exponent = (v.const_value if v is not None else None for v in node.inputs)
    if base is None or exponent is None:
        return True  # nothing the folder evaluates
    if max(base.size, exponent.size) > _MAX_CHECKED_ELEMENTS:
        return False
    try:
        bases, exponents = np.broadcast_arrays(base.numpy(), exponent.numpy())
    except ValueError:
        return True  # shapes that do not broadcast: the folder declines or fails alone
    for b, e in zip(bases.reshape(-1).tolist(), exponents.reshape(-1).tolist()):
        b, e = int(b), int(e)
        if abs(b) <= 1 or e <= 0:
            continue  # 0, 1, -1 to any power; b ** 0 == 1; b ** -n fails the reference
        if e > 64 or abs(b) ** e > limit:
            return False
    return True


#: Integer reductions onnxruntime computes in ``double`` (measured: ``ReduceSum`` of
#: ``[2**53 + 1, 0]`` is ``2**53``, of ``int32`` ``[2**30, 2**30, 3]`` saturates to
#: ``2**31 - 1`` where numpy wraps), with the bound of each one's partial results by the
#: magnitudes of the elements.
def _square_sum(magnitudes: list[int]) -> int:
    return sum(v * v for v in magnitudes)


def _product(magnitudes: list[int]) -> int:
    return math.prod(max(v, 1) for v in magnitudes)


_DOUBLE_REDUCTIONS = {
    "ReduceSum": sum,
    "ReduceL1": sum,
    "ReduceMean": sum,
    "ReduceSumSquare": _square_sum,
    "ReduceL2": _square_sum,
    "ReduceProd": _product,
}


def _int_einsum_is_exact(node: ir.Node) -> bool:
    """Whether an integer ``Einsum`` of constants gives numpy's result in onnxruntime.

    onnxruntime sums a contracted or dropped index with its reductions, in ``double``
    (``Einsum("i->")`` of int64 ``[2**53 + 1, 2]`` is ``2**53 + 2`` there; of int32
    ``[2**30, 2**30, 3]`` it saturates where numpy wraps). Every partial result is at
    most the product over the inputs of each one's sum of magnitudes: exact when that
    is within :func:`_exact_limit`.
    """
    limit = _exact_limit(_dtype(node.inputs[0])) if node.inputs else None
    if limit is None:
        return True
    bound = 1
    for value in node.inputs:
        tensor = value.const_value if value is not None else None
        if tensor is None:
            return True  # nothing the folder evaluates
        if tensor.size > _MAX_CHECKED_ELEMENTS:
            return False
        bound *= sum(abs(int(v)) for v in tensor.numpy().reshape(-1).tolist())
        if bound > limit:
            return False
    return True


def _int_reduction_is_exact(node: ir.Node) -> bool:
    """Whether an integer reduction of a constant gives numpy's result in onnxruntime.

    Exact when every partial result stays within :func:`_exact_limit`: the sum (of
    squares) of the elements' magnitudes, the product of the magnitudes above 1. The
    logarithmic reductions of integers are never folded, nor an integer ``ReduceMean`` of
    an empty tensor: the spec leaves the mean of no values undefined, onnxruntime gives
    0 and the reference ``NaN`` cast to the type (``INT64_MIN``; found by hand). ``True``
    for any other node, and for inputs not constant.
    """
    if node.op_type not in _DOUBLE_REDUCTIONS and node.op_type not in (
        "ReduceLogSum",
        "ReduceLogSumExp",
    ):
        return True
    limit = _exact_limit(_dtype(node.inputs[0])) if node.inputs else None
    if limit is None:
        return True
    if node.op_type not in _DOUBLE_REDUCTIONS:
        return False
    data = node.inputs[0].const_value
    if data is None:
        return True  # nothing the folder evaluates
    if data.size > _MAX_CHECKED_ELEMENTS or (data.size == 0 and node.op_type == "ReduceMean"):
        return False
    magnitudes = [abs(int(v)) for v in data.numpy().reshape(-1).tolist()]
    if any(v > limit for v in magnitudes):
        return False
    return _DOUBLE_REDUCTIONS[node.op_type](magnitudes) <= limit


def inexact_on_floats(node: ir.Node) -> bool:
    """True when numpy may compute the node's float results otherwise than onnxruntime."""
    if not _involves_floats(node):
        return False
    return node.op_type not in _EXACT_ON_FLOATS or _rounds_to_half(node)


def should_fold_exactly(node: ir.Node) -> bool | None:
    """``False`` for a node numpy would evaluate otherwise than onnxruntime, floats aside.

    What :func:`should_fold` checks but the rounding of floats: with ``exact_floats=False``
    and no onnxruntime to fold them, float nodes may round otherwise, but integers, the
    order of ``Unique``, the elements of a ``Slice`` and of an integer ``Resize`` stay
    exact.
    """
    if node.domain not in ("", "ai.onnx"):
        return None
    if _reads_or_writes_strings(node):
        return False
    if node.op_type == "Unique":
        if int_attribute(node, "sorted", 1) != 1:
            return False
    elif (
        (node.op_type == "Slice" and _slice_departs(node))
        or (node.op_type == "Pow" and not _int_pow_is_exact(node))
        or not _int_reduction_is_exact(node)
        or (node.op_type == "Einsum" and not _int_einsum_is_exact(node))
        or _interpolates_integers(node)
    ):
        return False
    return None


def _interpolates_integers(node: ir.Node) -> bool:
    """A ``Resize`` (or ``Upsample``) of integers that interpolates (not ``nearest``).

    Its result is a weighted sum of elements converted back to the integer type, which
    the spec leaves unspecified: the reference rounds it, onnxruntime does not
    (``linear`` ``uint8`` of ``[[0, 100, 7], [255, 3, 9]]`` to ``5x4``: 127 there, 128
    by the reference; found by hand). ``nearest`` only picks elements.
    """
    if node.op_type not in ("Resize", "Upsample") or not node.inputs:
        return False
    attr = node.attributes.get("mode")
    mode = (
        attr.value if attr is not None and attr.type == ir.AttributeType.STRING else "nearest"
    )
    dtype = _dtype(node.inputs[0])
    return mode != "nearest" and (dtype is None or dtype not in _FLOATS)


def should_fold(node: ir.Node) -> bool | None:
    """``False`` for a node numpy would evaluate otherwise than onnxruntime; else ``None``.

    ``None`` leaves the decision to onnxscript's folder (its size limits and op rules).
    """
    if node.domain not in ("", "ai.onnx"):
        return None
    if should_fold_exactly(node) is False:
        return False
    if not _involves_floats(node):
        return None
    if node.op_type not in _EXACT_ON_FLOATS:
        return False
    if _rounds_to_half(node):
        return False
    if node.op_type in ("Cast", "CastLike") and not _cast_is_defined(node):
        return False
    return None


#: Ops whose result is not a function of their inputs: never "computed from weights".
_RANDOM = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Bernoulli",
        "Multinomial",
    }
)


def kept_float_weight_nodes(graph: ir.Graph) -> int:
    """How many nodes compute from weights alone and stay only because of exact floats.

    A node counts when every input is a weight (an initializer that is not a graph input,
    a ``Constant``'s output, or a value computed so) and the node, or a node it reads
    from, is one :func:`inexact_on_floats` reports: float math the folder keeps so that
    the model computes the original's bits on every CPU (``exact_floats=True``).
    ``exact_floats=False`` folds them where onnxruntime can (DeBERTa-v2's
    ``LayerNormalization`` of its relative embeddings and the ``MatMul`` projections of
    the result). Nodes in graph order; a node read before its producer never counts.

    Example::

        >>> import onnx_ir as ir
        >>> model = ir.from_onnx_text('''
        ...     <ir_version: 10, opset_import: ["" : 20]>
        ...     g (float[2, 2] x) => (float[2, 2] y) <float[2, 2] w = {1., 2., 3., 4.}> {
        ...         e = Exp(w)
        ...         t = Transpose(e)
        ...         y = MatMul(x, t)
        ...     }
        ... ''')
        >>> kept_float_weight_nodes(model.graph)  # Exp and the Transpose of its result
        2
    """
    weights: set[ir.Value] = {v for v in graph.initializers.values() if not v.is_graph_input()}
    kept: set[ir.Value] = set()  # weights computed through inexact float math
    count = 0
    for node in graph:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            weights.update(node.outputs)
            continue
        inputs = [v for v in node.inputs if v is not None]
        if not inputs or node.op_type in _RANDOM or any(v not in weights for v in inputs):
            continue
        if any(_has_graph(attr) for attr in node.attributes.values()):
            continue  # a body may read any outer value (a graph input): not weights alone
        if node.domain not in ("", "ai.onnx"):
            continue  # a runtime's own op: no folder here evaluates it
        weights.update(node.outputs)
        if any(v in kept for v in inputs) or inexact_on_floats(node):
            kept.update(node.outputs)
            count += 1
    return count


def _has_graph(attr: ir.Attr | ir.RefAttr) -> bool:
    return attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
