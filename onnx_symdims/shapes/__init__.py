"""Shape facts for one model: the context, the per-node view for op hooks, diagnostics.

This is the shapes layer's one seam: ``ops`` and ``passes`` import from here, never from
its ``_private`` modules. What each needs:

* op hooks (``ops``): :class:`NodeContext` (their whole view of a node), the tensor readers
  (:func:`constant_tensor`, :func:`int_elements`, :func:`read_int64_proto`,
  :func:`tensor_dims`, :data:`INTEGER_DTYPES`, :func:`note_untracked_read`) and the
  element arithmetic of values tracked as shapes (:func:`unknown_element`,
  :func:`broadcast_elements`, :func:`element_div`, ...);
* the passes (``passes``): :class:`ShapesContext`, :class:`FactScope`, the declared-shape
  merges (:func:`declared_dims`, :func:`merge_with_anchor`, :func:`merge_declared_shape`),
  :class:`IRDimWriter` / :func:`same_ir_dims` / :func:`new_tensor_type` and the read counters
  (:func:`untracked_reads`).
"""

from __future__ import annotations

__all__ = [
    "CONSTANT_INPUT_KEY",
    "Diagnostic",
    "FactScope",
    "INTEGER_DTYPES",
    "IRDimWriter",
    "MAX_VALUE_ELEMENTS",
    "MISSING",
    "NodeContext",
    "NodeInferenceFailure",
    "Severity",
    "ShapeInferenceError",
    "ShapesContext",
    "boolean_of",
    "broadcast_elements",
    "constant_tensor",
    "declared_dims",
    "element_compare",
    "element_div",
    "element_mod",
    "element_pow",
    "direct_subgraphs",
    "graph_nodes",
    "graph_values",
    "initializer_values",
    "int_elements",
    "is_anonymous_dim_text",
    "is_tool_minted_dim_text",
    "is_fully_unknown",
    "merge_declared_shape",
    "merge_with_anchor",
    "new_ir_shape",
    "new_tensor_type",
    "nested_nodes",
    "node_subgraphs",
    "note_untracked_read",
    "read_int64_proto",
    "refine_dim",
    "same_ir_dims",
    "sanitize_symbol_name",
    "tensor_dims",
    "unknown_element",
    "untracked_reads",
]

from onnx_symdims.shapes._anchors import declared_dims, merge_with_anchor
from onnx_symdims.shapes._context import (
    MISSING,
    ShapesContext,
    is_anonymous_dim_text,
    is_tool_minted_dim_text,
    sanitize_symbol_name,
)
from onnx_symdims.shapes._convert import (
    IRDimWriter,
    new_ir_shape,
    new_tensor_type,
    same_ir_dims,
)
from onnx_symdims.shapes._diagnostics import (
    Diagnostic,
    NodeInferenceFailure,
    Severity,
    ShapeInferenceError,
)
from onnx_symdims.shapes._facts import FactScope, refine_dim
from onnx_symdims.shapes._graphs import (
    direct_subgraphs,
    graph_nodes,
    graph_values,
    initializer_values,
    nested_nodes,
    node_subgraphs,
)
from onnx_symdims.shapes._merge import merge_declared_shape
from onnx_symdims.shapes._node_context import NodeContext
from onnx_symdims.shapes._tensors import (
    CONSTANT_INPUT_KEY,
    INTEGER_DTYPES,
    MAX_VALUE_ELEMENTS,
    constant_tensor,
    int_elements,
    note_untracked_read,
    read_int64_proto,
    tensor_dims,
    untracked_reads,
)
from onnx_symdims.shapes._values import (
    boolean_of,
    broadcast_elements,
    element_compare,
    element_div,
    element_mod,
    element_pow,
    is_fully_unknown,
    unknown_element,
)
