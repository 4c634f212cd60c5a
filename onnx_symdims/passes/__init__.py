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
    "checked_symbol_ranges",
    "without_gc",
]

from typing import TYPE_CHECKING, Any

from onnx_symdims.passes._gc import without_gc
from onnx_symdims.passes._inference import (
    POLICIES,
    Policy,
    SymbolicShapeInferencePass,
    SymbolicShapeInferenceResult,
    checked_symbol_ranges,
)

if TYPE_CHECKING:
    from onnx_symdims.passes._anchors import (
        AnchorConstraintPropagationPass,
        AnchorPropagationResult,
    )


def __getattr__(name: str) -> Any:
    # The anchor pass is imported on first use: inference runs it only after recording
    # an equality, which most models do not, and its import is part of every process's
    # first call (the cold start).
    if name in ("AnchorConstraintPropagationPass", "AnchorPropagationResult"):
        from onnx_symdims.passes import _anchors

        value = getattr(_anchors, name)
        globals()[name] = value  # later lookups (the API's, every call) skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
