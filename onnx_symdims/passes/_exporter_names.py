"""Dim names TorchScript's exporter invents on graph outputs: they declare nothing.

``torch.onnx.export(..., dynamo=False)`` names an output dim that no ``dynamic_axes``
entry names after its own shape symbol: ``{op type}{output name}_dim_{axis}`` of the first
output it meets the symbol on (``Subout0_dim_1``, ``Squeezewaveform_dim_0``; torch's
``GraphEncoder::EncodeValueInfoType``), and reuses that text wherever its symbolic shape
inference met the same symbol. These are the exporter's engine symbols, not names the
author chose, and its inference equates sizes that differ in some runs (a ``Unique``
count named as the batch). Read as the author's labels they hide what inference computes
(``seq_len-1``) behind an opaque name. :func:`clear_exporter_output_names` empties them,
on the main graph's outputs and on subgraph outputs where the exporter reused them, before
inference, which then writes its own dims there (a fresh symbol where it computes
none), as onnxruntime's symbolic shape inference does. The same texts on intermediate
values (``value_info``, in the main graph and its subgraphs) are emptied too: there the
exporter wrote them on values of sizes that differ (a ``Unique`` count and a ``NonZero``
count both ``Uniquey_dim_0``), and read as a declared name they would bring the cleared
name back on the outputs computed from them.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 8, opset_import: ["" : 18]>
    ...     g (float[N] x) => (float[Reluy_dim_0] y) { y = Relu(x) }
    ... ''')
    >>> clear_exporter_output_names(model)
    1
    >>> print(model.graph.outputs[0].shape)
    [None]
"""

from __future__ import annotations

__all__ = ["clear_exporter_output_names"]

import logging
import re

import onnx_ir as ir

logger = logging.getLogger(__name__)

_AXIS_SUFFIX = re.compile(r"_dim_\d+\Z")


def _is_exporter_name(
    text: str, output_names: frozenset[str], op_types: frozenset[str]
) -> bool:
    """``{op type}{output name}_dim_{axis}`` for an op type of the graph and an output name."""
    suffix = _AXIS_SUFFIX.search(text)
    if suffix is None:
        return False
    stem = text[: suffix.start()]
    return any(
        stem.startswith(op_type) and stem[len(op_type) :] in output_names
        for op_type in op_types
    )


def clear_exporter_output_names(model: ir.Model) -> int:
    """Empties the exporter-invented dim names of the graphs' outputs.

    The main graph's, and those of the subgraphs (``If`` branches, ``Loop`` bodies), where
    the exporter reuses its names (a branch output of ``[Ifout0_dim_1, 8]``): a subgraph's
    declared output text is otherwise kept as the author's.

    Then the texts cleared there, wherever the graphs' intermediate values (node outputs,
    ``value_info``) carry them.

    Returns:
        How many shapes changed.
    """
    graph = model.graph
    output_names = frozenset(value.name for value in graph.outputs if value.name)
    op_types: list[frozenset[str]] = []
    cleared: set[str] = set()
    changed = _clear(graph.outputs, graph, output_names, op_types, cleared)
    if op_types:  # a main output had such a name: the exporter may have reused it below
        nodes = list(ir.traversal.RecursiveGraphIterator(graph))
        for node in nodes:
            for attr in node.attributes.values():
                if attr.type is ir.AttributeType.GRAPH:
                    changed += _clear(
                        attr.value.outputs, graph, output_names, op_types, cleared
                    )
                elif attr.type is ir.AttributeType.GRAPHS:
                    for subgraph in attr.value:
                        changed += _clear(
                            subgraph.outputs, graph, output_names, op_types, cleared
                        )
        if cleared:
            changed += _clear_texts(nodes, cleared)
    return changed


def _clear_texts(nodes: list[ir.Node], texts: set[str]) -> int:
    """Empties the dims spelled as one of ``texts`` on the nodes' outputs.

    Not on a graph's outputs: those are cleared by name (:func:`_clear`) or are the
    author's.
    """
    changed = 0
    for node in nodes:
        for value in node.outputs:
            shape = value.shape
            if shape is None or value.is_graph_output():
                continue
            gone = [isinstance(d, ir.SymbolicDim) and d.value in texts for d in shape.dims]
            if any(gone):
                dims = [None if g else d for d, g in zip(shape.dims, gone)]
                logger.debug("value %s: exporter dim names %s cleared", value.name, shape)
                value.shape = ir.Shape(dims)
                changed += 1
    return changed


def _clear(
    values,
    graph: ir.Graph,
    output_names: frozenset[str],
    op_types: list[frozenset[str]],
    cleared: set[str],
) -> int:
    """Empties the invented names on ``values``, adding them to ``cleared``.

    ``op_types`` caches the graph's op types.
    """
    changed = 0
    for value in values:
        shape = value.shape
        if shape is None:
            continue
        texts = [d.value for d in shape.dims if isinstance(d, ir.SymbolicDim) and d.value]
        if not any(_AXIS_SUFFIX.search(text) for text in texts):
            continue  # the common case: no text ends as the exporter's names do
        if not op_types:
            op_types.append(
                frozenset(node.op_type for node in graph if node.domain in ("", "ai.onnx"))
            )
        invented = [
            isinstance(d, ir.SymbolicDim)
            and bool(d.value)
            and _is_exporter_name(d.value, output_names, op_types[0])
            for d in shape.dims
        ]
        if any(invented):
            cleared.update(d.value for d, gone in zip(shape.dims, invented) if gone)
            dims = [None if gone else d for d, gone in zip(shape.dims, invented)]
            logger.debug("output %s: exporter dim names %s cleared", value.name, shape)
            value.shape = ir.Shape(dims)
            changed += 1
    return changed
