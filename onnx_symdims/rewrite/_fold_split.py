"""Folds a ``Split`` of a constant, which onnxscript's folder skips (it has several outputs).

Exports split packed weights with it: WavLM's and wav2vec2-style attention split one
``in_proj_bias`` into the query, key and value biases, a ``Split`` of an initializer
left in every layer. The chunks are copies of the constant's elements (no arithmetic: any
element type folds bit for bit), so each output becomes an initializer of its own.

Proof relied on: the chunk sizes follow from the node alone, as ONNX defines them: the
``split`` sizes (an input from opset 13, an attribute before), which must be
non-negative and sum to the axis; else ``num_outputs`` (opset 18) chunks of
``ceil(d / n)`` with a smaller last one; else equal chunks, which need ``d`` divisible by
the number of outputs. A node that breaks any of these is left for onnxruntime to refuse.

Like onnxscript's folder, a constant larger than :data:`INPUT_SIZE_LIMIT` elements folds
only when this ``Split`` is its sole consumer (the chunks replace it, nothing is copied
twice); graph inputs (initializers a caller may override) and outputs are left.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 8, opset_import: ["" : 18]>
    ...     g (float[N, 2] x) => (float[N, 2] y)
    ...     <float[4] b = {1., 2., 3., 4.}>
    ...     {
    ...         q, k = Split<axis = 0, num_outputs = 2>(b)
    ...         s = Add(x, q)
    ...         y = Mul(s, k)
    ...     }
    ... ''')
    >>> fold_constant_splits(model)
    1
    >>> [n.op_type for n in model.graph]
    ['Add', 'Mul']
    >>> model.graph.node(0).inputs[1].const_value.numpy().tolist()
    [1.0, 2.0]
"""

from __future__ import annotations

__all__ = ["INPUT_SIZE_LIMIT", "fold_constant_splits"]

import logging

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import int_attribute, ints_attribute

logger = logging.getLogger(__name__)

#: Elements of a constant that may be split when other nodes read it too (onnxscript's
#: folder's ``input_size_limit``).
INPUT_SIZE_LIMIT = 8192


def fold_constant_splits(model: ir.Model) -> int:
    """Replaces each foldable ``Split`` of a constant in the main graph; returns how many."""
    graph = model.graph
    imports = model.opset_imports
    opset = imports.get("", imports.get("ai.onnx", 0))
    folded = 0
    for node in list(graph):
        if node.op_type != "Split" or node.domain != "" or not node.inputs:
            continue
        chunks = _chunks(node, opset)
        if chunks is None:
            continue
        replace_by_initializers(graph, node, chunks, node.inputs[0].const_value.dtype)
        folded += 1
    if folded:
        logger.debug("folded %d Split(s) of constants", folded)
    return folded


def replace_by_initializers(
    graph: ir.Graph, node: ir.Node, arrays: list[np.ndarray], dtype: ir.DataType
) -> None:
    """Replaces each output of ``node`` by an initializer holding its array; removes it."""
    values = []
    for output, array in zip(node.outputs, arrays):
        value = ir.Value(
            name=_fresh_name(graph, output.name or node.op_type),
            shape=ir.Shape(array.shape),
            type=ir.TensorType(dtype),
            const_value=ir.tensor(array, dtype=dtype),
        )
        output.replace_all_uses_with(value)
        values.append(value)
    graph.remove(node, safe=True)  # first: its outputs' names go with it
    for value in values:
        value.const_value.name = value.name
        graph.register_initializer(value)


def _chunks(node: ir.Node, opset: int) -> list[np.ndarray] | None:
    """The outputs of ``node`` computed from its constant input, or ``None``."""
    data = node.inputs[0]
    tensor = data.const_value if data is not None else None
    if tensor is None or data.is_graph_input() or data.is_graph_output():
        return None
    if tensor.dtype == ir.DataType.STRING or tensor.dtype.itemsize < 1:  # packed 4-bit
        return None
    if any(o.is_graph_output() for o in node.outputs):
        return None
    if tensor.size > INPUT_SIZE_LIMIT and len(data.uses()) != 1:
        return None
    sizes = _split_sizes(node, opset)
    if sizes is False:
        return None
    array = tensor.numpy()
    axis = int_attribute(node, "axis", 0)
    if axis is None or not -array.ndim <= axis < array.ndim:
        return None
    length = array.shape[axis]
    n = len(node.outputs)
    if sizes is None:
        num_outputs = int_attribute(node, "num_outputs") if opset >= 18 else None
        if num_outputs is not None:
            if num_outputs != n or n < 1:
                return None
            chunk = -(-length // n)
            sizes = [chunk] * (n - 1) + [length - chunk * (n - 1)]
        elif n >= 1 and length % n == 0:
            sizes = [length // n] * n
        else:
            return None
    if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != length:
        return None
    offsets = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(c) for c in np.split(array, offsets, axis=axis)]


def _split_sizes(node: ir.Node, opset: int) -> list[int] | bool | None:
    """The ``split`` sizes (``None``: not given), or ``False`` when they are not constant."""
    if opset >= 13:
        if len(node.inputs) < 2 or node.inputs[1] is None:
            return None
        sizes = node.inputs[1].const_value
        if sizes is None or node.inputs[1].is_graph_input():
            return False
        return [int(s) for s in sizes.numpy().reshape(-1)]
    sizes = ints_attribute(node, "split")
    if "split" in node.attributes and sizes is None:  # malformed
        return False
    return None if sizes is None else list(sizes)


def _fresh_name(graph: ir.Graph, base: str) -> str:
    """``base`` itself when no initializer is called so, else ``base_folded_k``."""
    name, k = base, 0
    while name in graph.initializers:
        k += 1
        name = f"{base}_folded_{k}"
    return name
