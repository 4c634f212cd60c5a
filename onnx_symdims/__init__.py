"""onnx-symdims: sound symbolic shape inference for ONNX models.

Example::

    import onnx_symdims

    model = onnx_symdims.infer_symbolic_shapes("model.onnx")  # an ir.Model
    model = onnx_symdims.optimize("model.onnx")               # smaller, same outputs

The names below are imported on first use, so ``import onnx_symdims`` (and the
``onnx-symdims --help`` / ``simplify`` commands) stay fast: onnx-ir and onnx take over a
second to import.
"""

from __future__ import annotations

__all__ = [
    "AnchorConstraintPropagationPass",
    "Diagnostic",
    "InputShapeError",
    "ModelLoadError",
    "ModelSaveError",
    "OptimizePass",
    "ShapeInferenceError",
    "ShapesContext",
    "SymbolicShapeInferencePass",
    "__version__",
    "data_path",
    "infer_symbolic_shapes",
    "optimize",
]

import importlib
import logging
from typing import TYPE_CHECKING, Any

#: The package version; pyproject.toml reads it from here (the one place it is set).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from onnx_symdims._api import infer_symbolic_shapes, optimize
    from onnx_symdims._modelio import ModelLoadError, ModelSaveError
    from onnx_symdims.passes import (
        AnchorConstraintPropagationPass,
        SymbolicShapeInferencePass,
    )
    from onnx_symdims.rewrite import InputShapeError, OptimizePass
    from onnx_symdims.shapes import Diagnostic, ShapeInferenceError, ShapesContext

logger = logging.getLogger(__name__)

_LAZY = {
    "AnchorConstraintPropagationPass": "onnx_symdims.passes",
    "SymbolicShapeInferencePass": "onnx_symdims.passes",
    "Diagnostic": "onnx_symdims.shapes",
    "ShapeInferenceError": "onnx_symdims.shapes",
    "ShapesContext": "onnx_symdims.shapes",
    "ModelLoadError": "onnx_symdims._modelio",
    "ModelSaveError": "onnx_symdims._modelio",
    "infer_symbolic_shapes": "onnx_symdims._api",
    "optimize": "onnx_symdims._api",
    "OptimizePass": "onnx_symdims.rewrite",
    "InputShapeError": "onnx_symdims.rewrite",
}


def data_path(name: str) -> str:
    """The path of a model bundled with the package, e.g. ``data_path("tiny_decoder.onnx")``."""
    import os

    path = os.path.join(os.path.dirname(__file__), "data", name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no bundled model {name!r} in {os.path.dirname(path)}")
    return path


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'onnx_symdims' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
