"""Op hooks: one module per op family, registered with :func:`register`.

Every public module of this package (no leading underscore) is a family and is
imported on the first registry lookup, so adding a family needs no edit here. A hook::

    import onnx_ir as ir

    from onnx_symdims.ops import register
    from onnx_symdims.shapes import NodeContext

    @register("", "Relu")
    def infer_relu(ctx: NodeContext, node: ir.Node) -> None:
        ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))

See :class:`onnx_symdims.shapes.NodeContext` for what a hook can read and write, and
:class:`OnnxFallback` for what happens to ops without a hook.

This is the ops layer's one seam: the passes take :func:`lookup`, :data:`Hook`,
:func:`normalize_domain`, :func:`registry_version`, :func:`infer_function_call` and :class:`OnnxFallback` from here, never from ``_registry`` or
``_fallback``.
"""

from __future__ import annotations

__all__ = [
    "Hook",
    "OnnxFallback",
    "infer_function_call",
    "lookup",
    "normalize_domain",
    "register",
    "registered_ops",
    "registry_version",
]

from typing import TYPE_CHECKING

from onnx_symdims.ops._fallback import OnnxFallback
from onnx_symdims.ops._registry import (
    Hook,
    lookup,
    normalize_domain,
    register,
    registered_ops,
    registry_version,
)

if TYPE_CHECKING:
    import onnx_ir as ir

    from onnx_symdims.shapes import NodeContext


def infer_function_call(ctx: NodeContext, node: ir.Node, function: ir.Function) -> None:
    """Infers a call of a model-local function by inferring its body in the caller's context.

    See :func:`onnx_symdims.ops.functions.infer_function_call`.
    """
    from onnx_symdims.ops import functions

    functions.infer_function_call(ctx, node, function)
