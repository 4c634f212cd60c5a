"""Dim names TorchScript's exporter invents on graph outputs: they declare nothing.

``torch.onnx.export(..., dynamo=False)`` names an output dim that no ``dynamic_axes``
entry names after its own shape symbol: ``{op type}{output name}_dim_{axis}`` of the first
output it meets the symbol on (``Subout0_dim_1``, ``Squeezewaveform_dim_0``; torch's
``GraphEncoder::EncodeValueInfoType``), and reuses that text wherever its symbolic shape
inference met the same symbol. These are the exporter's engine symbols, not names the
author chose, and its inference equates sizes that differ in some runs (a ``Unique``
count named as the batch). Read as the author's labels they hide what inference computes
(``seq_len-1``) behind an opaque name. :func:`clear_exporter_output_names` empties them
before inference, which then writes its own dims there (a fresh symbol where it computes
none), as onnxruntime's symbolic shape inference does.

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


def _is_exporter_name(text: str, output_names: frozenset[str], op_types: frozenset[str]) -> bool:
    """``{op type}{output name}_dim_{axis}`` for an op type of the graph and an output name."""
    suffix = _AXIS_SUFFIX.search(text)
    if suffix is None:
        return False
    stem = text[: suffix.start()]
    return any(
        stem.startswith(op_type) and stem[len(op_type) :] in output_names for op_type in op_types
    )


def clear_exporter_output_names(model: ir.Model) -> int:
    """Empties the exporter-invented dim names of the main graph's outputs.

    Returns:
        How many output shapes changed.
    """
    graph = model.graph
    output_names = frozenset(value.name for value in graph.outputs if value.name)
    op_types: frozenset[str] | None = None
    changed = 0
    for value in graph.outputs:
        shape = value.shape
        if shape is None:
            continue
        texts = [d.value for d in shape.dims if isinstance(d, ir.SymbolicDim) and d.value]
        if not any(_AXIS_SUFFIX.search(text) for text in texts):
            continue  # the common case: no text ends as the exporter's names do
        if op_types is None:
            op_types = frozenset(node.op_type for node in graph if node.domain in ("", "ai.onnx"))
        invented = [
            isinstance(d, ir.SymbolicDim)
            and bool(d.value)
            and _is_exporter_name(d.value, output_names, op_types)
            for d in shape.dims
        ]
        if any(invented):
            dims = [None if gone else d for d, gone in zip(shape.dims, invented)]
            logger.debug("output %s: exporter dim names %s cleared", value.name, shape)
            value.shape = ir.Shape(dims)
            changed += 1
    return changed
