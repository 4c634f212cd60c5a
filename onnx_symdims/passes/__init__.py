"""onnx-ir passes of onnx-symdims."""

from __future__ import annotations

__all__ = [
    "AnchorConstraintPropagationPass",
    "AnchorPropagationResult",
    "POLICIES",
    "Policy",
    "SymbolicShapeInferencePass",
    "SymbolicShapeInferenceResult",
]

from onnx_symdims.passes._anchors import (
    AnchorConstraintPropagationPass,
    AnchorPropagationResult,
)
from onnx_symdims.passes._inference import (
    POLICIES,
    Policy,
    SymbolicShapeInferencePass,
    SymbolicShapeInferenceResult,
)
