"""Shape facts for one model: the context, the per-node view for op hooks, diagnostics."""

from __future__ import annotations

__all__ = [
    "Diagnostic",
    "IRDimWriter",
    "MAX_VALUE_ELEMENTS",
    "NodeContext",
    "NodeInferenceFailure",
    "Severity",
    "ShapeInferenceError",
    "ShapesContext",
    "sanitize_symbol_name",
]

from onnx_symdims.shapes._context import (
    MAX_VALUE_ELEMENTS,
    ShapesContext,
    sanitize_symbol_name,
)
from onnx_symdims.shapes._convert import IRDimWriter
from onnx_symdims.shapes._diagnostics import (
    Diagnostic,
    NodeInferenceFailure,
    Severity,
    ShapeInferenceError,
)
from onnx_symdims.shapes._node_context import NodeContext
