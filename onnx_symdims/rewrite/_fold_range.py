"""Folds a float ``Range`` of constants as ONNX defines it: by accumulating ``delta``.

ONNX defines ``Range`` by a function body that adds ``delta`` to the previous element
(``prev = prev + delta``, rounded to the element type at each step), and onnxruntime's
kernel does exactly that. The folder's reference evaluator computes ``numpy.arange``,
which for floats gives ``start + i*delta`` with other last bits (279 of 300 random float
ranges differ from onnxruntime somewhere), so a float ``Range`` is among the nodes the
exact-floats policy keeps (:func:`~onnx_symdims.rewrite._folding.should_fold`): the
``affine_grid`` of ``torch.nn.functional`` leaves two of them, and the float math after
them, computing the same grid on every run.

Proof relied on: each element is one IEEE addition of two values of the element type,
rounded to that type, in the order the spec gives; no other rounding, no fused
multiply-add, no reordering, so every conforming runtime and this fold compute the same
bits. The count ``ceil((limit - start) / delta)`` is taken as onnxruntime's kernel does
(in ``double``), as ONNX's shape inference does (in the element type) and in between; the
node is folded only where they agree (``Range(-3.3, 7.1, 0.13)`` is 81 elements in
onnxruntime and 80 by ONNX's inference, which then refuses the model at load).

Folded: a ``Range`` of the default domain whose three inputs are constant scalars
(initializers that are not graph inputs, folded values) of type ``float`` or ``double``,
finite, ``delta != 0``, with at most :data:`MAX_ELEMENTS` elements, its output not a graph
output. Integer ranges are exact in the reference evaluator and left to the folder.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 8, opset_import: ["" : 17]>
    ...     g (float[N, 5] x) => (float[N, 5] y)
    ...     <float s = {-1.0}, float l = {1.0}, float d = {0.4}>
    ...     {
    ...         r = Range(s, l, d)
    ...         y = Add(x, r)
    ...     }
    ... ''')
    >>> fold_float_ranges(model)
    1
    >>> [n.op_type for n in model.graph]
    ['Add']
    >>> model.graph.node(0).inputs[1].const_value.numpy().tolist()[2]  # (-1 + 0.4) + 0.4
    -0.20000001788139343
"""

from __future__ import annotations

__all__ = ["MAX_ELEMENTS", "fold_float_ranges"]

import logging
import math

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._fold_split import replace_by_initializers

logger = logging.getLogger(__name__)

#: Longest range folded (a constant of this many elements replaces three scalars).
MAX_ELEMENTS = 1 << 16

_FLOAT_TYPES = {ir.DataType.FLOAT: np.float32, ir.DataType.DOUBLE: np.float64}


def fold_float_ranges(model: ir.Model) -> int:
    """Replaces each foldable float ``Range`` of the main graph; returns how many."""
    graph = model.graph
    folded = 0
    for node in list(graph):
        if node.op_type != "Range" or node.domain not in ("", "ai.onnx"):
            continue
        values = _range_values(node)
        if values is None:
            continue
        output = node.outputs[0]
        dtype = output.dtype if output.dtype is not None else node.inputs[0].dtype
        replace_by_initializers(graph, node, [values], dtype)
        folded += 1
    if folded:
        logger.debug("folded %d float Range(s) of constants", folded)
    return folded


def _range_values(node: ir.Node) -> np.ndarray | None:
    """The elements of ``node`` as ONNX defines them, or ``None`` when it is not folded."""
    if len(node.inputs) != 3 or len(node.outputs) != 1 or node.outputs[0].is_graph_output():
        return None
    scalars = []
    for value in node.inputs:
        tensor = value.const_value if value is not None else None
        if tensor is None or value.is_graph_input() or tensor.size != 1:
            return None
        scalars.append(tensor)
    kinds = {t.dtype for t in scalars}
    if len(kinds) != 1 or (kind := kinds.pop()) not in _FLOAT_TYPES:
        return None
    np_type = _FLOAT_TYPES[kind]
    start, limit, delta = (np_type(t.numpy().reshape(())) for t in scalars)
    if not all(math.isfinite(v) for v in (start, limit, delta)) or delta == 0:
        return None
    with np.errstate(all="ignore"):
        difference = np_type(limit - start)
        quotients = (
            (float(limit) - float(start)) / float(delta),  # onnxruntime's kernel: double
            float(difference) / float(delta),
            float(np_type(difference / delta)),  # ONNX's inference: the element type
        )
    if not all(math.isfinite(q) for q in quotients):
        return None
    counts = {math.ceil(q) for q in quotients}
    if len(counts) != 1:
        return None  # the count depends on the precision it is taken in
    count = max(counts.pop(), 0)
    if count > MAX_ELEMENTS:
        return None
    values = np.empty(count, dtype=np_type)
    current = start
    with np.errstate(all="ignore"):
        for i in range(count):
            values[i] = current
            current = np_type(current + delta)
    return values
