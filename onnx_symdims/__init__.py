"""onnx-symdims: sound symbolic shape inference for ONNX models.

Example::

    import onnx_symdims

    model = onnx_symdims.infer_symbolic_shapes("model.onnx")  # an ir.Model
"""

from __future__ import annotations

__all__ = [
    "Diagnostic",
    "ShapeInferenceError",
    "ShapesContext",
    "SymbolicShapeInferencePass",
    "__version__",
    "infer_symbolic_shapes",
]

import logging
import os
from typing import TYPE_CHECKING, Any, overload

import onnx_ir as ir

from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import Diagnostic, ShapeInferenceError, ShapesContext

if TYPE_CHECKING:
    import onnx

__version__ = "0.1.0"

logger = logging.getLogger(__name__)


@overload
def infer_symbolic_shapes(model: ir.Model, **options: Any) -> ir.Model: ...
@overload
def infer_symbolic_shapes(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto: ...
@overload
def infer_symbolic_shapes(model: str | os.PathLike, **options: Any) -> ir.Model: ...


def infer_symbolic_shapes(model, **options):
    """Infers symbolic shapes for every value of ``model``.

    Args:
        model: An ``ir.Model`` (updated in place and returned), an ``onnx.ModelProto``
            (a new, inferred ``ModelProto`` is returned; the argument is not changed) or a
            path (loaded without reading external weights; the ``ir.Model`` is returned).
        **options: Keyword options of :class:`SymbolicShapeInferencePass`: ``policy``,
            ``strict``, ``context``, ``progress``.

    Returns:
        The inferred model, of the kind described above.

    Raises:
        ShapeInferenceError: in strict mode, on the first error diagnostic.
    """
    if isinstance(model, ir.Model):
        SymbolicShapeInferencePass(**options)(model)
        return model
    if isinstance(model, (str, os.PathLike)):
        loaded = ir.load(model)
        SymbolicShapeInferencePass(**options)(loaded)
        return loaded
    import onnx

    if isinstance(model, onnx.ModelProto):
        ir_model = ir.serde.deserialize_model(model)
        SymbolicShapeInferencePass(**options)(ir_model)
        return ir.serde.serialize_model(ir_model)
    raise TypeError(
        f"expected an ir.Model, onnx.ModelProto or path, got {type(model).__name__}"
    )
