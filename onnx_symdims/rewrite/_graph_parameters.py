"""Model-local functions that take graph attributes (an ``If`` whose branches the call gives).

onnx-ir's inliner refuses such a function ("does not support graph attribute parameters")
and its passes that walk function bodies (unused-node removal, the recursive graph
iterator) fail on the body's reference, which holds no graph. ``optimize`` therefore
inlines them with onnx's own inliner, which substitutes the call's graphs
(:func:`inline_graph_parameter_functions`); where they must stay (``inline=False``, or
onnx's inliner fails) they are set aside while the passes run and put back after
(:func:`set_aside_graph_parameter_functions`): their calls stay as they are.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=10)
    >>> graph_parameter_functions(model)
    []
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from onnx_symdims.shapes import nested_nodes

logger = logging.getLogger(__name__)

_GRAPH_KINDS = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def graph_parameter_functions(model: ir.Model) -> list[ir.OperatorIdentifier]:
    """The model-local functions whose bodies refer to a graph attribute of the call."""
    return [
        key
        for key, function in model.functions.items()
        if any(
            attr.is_ref() and attr.type in _GRAPH_KINDS
            for node in nested_nodes(function)
            for attr in node.attributes.values()
        )
    ]


def inline_graph_parameter_functions(model: ir.Model) -> bool:
    """Inlines every model-local function with onnx's inliner when one takes a graph.

    The model is serialized, inlined and read back, and its graph, functions and opset
    imports are replaced in place (the main graph's value names stay). Returns whether
    it was done; when onnx's inliner fails, the model is left as it was.
    """
    if not graph_parameter_functions(model):
        return False
    import onnx.inliner

    try:
        inlined = ir.serde.deserialize_model(
            onnx.inliner.inline_local_functions(ir.serde.serialize_model(model))
        )
    except Exception as error:  # a malformed or recursive function: the calls stay
        logger.warning("onnx's inliner failed on functions with graph attributes: %s", error)
        return False
    model.graph = inlined.graph
    model.functions.clear()
    model.functions.update(inlined.functions)
    return True


def set_aside_graph_parameter_functions(model: ir.Model) -> dict:
    """Removes the functions that take graphs from ``model`` and returns them.

    The caller puts them back with ``model.functions.update(...)`` after the passes.
    """
    return {key: model.functions.pop(key) for key in graph_parameter_functions(model)}
