"""onnx-ir passes of onnx-symdims.

This is the passes layer's one seam: the layers above (``rewrite``, the package's API and
CLI) import from here, never from its ``_private`` modules.
"""

from __future__ import annotations

__all__ = [
    "AnchorConstraintPropagationPass",
    "AnchorPropagationResult",
    "POLICIES",
    "Policy",
    "SymbolicShapeInferencePass",
    "SymbolicShapeInferenceResult",
    "without_gc",
]

from onnx_symdims.passes._anchors import (
    AnchorConstraintPropagationPass,
    AnchorPropagationResult,
)
from onnx_symdims.passes._gc import without_gc
from onnx_symdims.passes._inference import (
    POLICIES,
    Policy,
    SymbolicShapeInferencePass,
    SymbolicShapeInferenceResult,
)
