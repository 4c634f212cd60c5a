"""Op hooks: one module per op family, registered with :func:`_registry.register`.

Every public module of this package (no leading underscore) is a family and is
imported on the first registry lookup, so adding a family needs no edit here. A hook::

    import onnx_ir as ir

    from onnx_symdims.ops._registry import register
    from onnx_symdims.shapes import NodeContext

    @register("", "Relu")
    def infer_relu(ctx: NodeContext, node: ir.Node) -> None:
        ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))

See :class:`onnx_symdims.shapes.NodeContext` for what a hook can read and write, and
:mod:`onnx_symdims.ops._fallback` for what happens to ops without a hook.
"""

from __future__ import annotations

__all__ = ["lookup", "register", "registered_ops"]

from onnx_symdims.ops._registry import lookup, register, registered_ops
