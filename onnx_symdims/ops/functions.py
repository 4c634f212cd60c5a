"""Calls of model-local functions: a copy of the body inferred in the caller's context.

Dispatched by the engine before any hook (the function defines the op, whatever its name);
a recursive call is refused with a diagnostic naming the chain.
"""

from __future__ import annotations

__all__ = ["infer_function_call"]

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops.control_flow import body_values, copy_type
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]


def infer_function_call(ctx: NodeContext, node: ir.Node, function: ir.Function) -> None:
    """Infers a call of a model-local function by inferring a copy of its body.

    The body is cloned with the call's attributes substituted (defaults of the function
    otherwise) and omitted optional inputs removed, then inferred with the body reading
    the call's inputs themselves (their shapes, and their values as shape: a constant
    passed in reaches a ``Range`` or ``Reshape`` in the body), so symbolic arithmetic
    and values as shape flow through the call. Symbols the body mints are fresh for
    each call.

    Args:
        ctx: The context of the calling node (reset to ``node``).
        node: The call.
        function: The function ``node`` calls (``model.functions[node.op_identifier()]``).
    """
    from onnx_ir import _cloner  # the public clone() cannot substitute attributes

    calls = ctx.ctx.active_functions
    identifier = node.op_identifier()
    if identifier in calls:
        chain = " -> ".join(_function_label(f) for f in (*calls, identifier))
        ctx.fail(f"recursive call of function {_function_label(identifier)} ({chain})")
    if len(node.inputs) > len(function.inputs):
        ctx.fail(
            f"call has {len(node.inputs)} inputs, the function at most {len(function.inputs)}"
        )
    if len(node.outputs) > len(function.outputs):
        ctx.fail(f"call has {len(node.outputs)} outputs, the function {len(function.outputs)}")
    attributes: dict[str, ir.Attr] = {
        name: attr for name, attr in function.attributes.items() if attr.value is not None
    }
    attributes.update(node.attributes)
    cloner = _cloner.Cloner(
        attr_map=attributes, value_map={}, metadata_props={}, resolve_ref_attrs=True
    )
    body = cloner.clone_graph(function.graph)
    present = [ctx.has_input(i) for i in range(len(body.inputs))]
    for value, given in zip(body.inputs, present):
        if not given:
            for consumer, index in list(value.uses()):
                consumer.replace_input_with(index, None)
    shapes = [ctx.input_shape(i) for i in range(len(body.inputs))]
    dtypes = [ctx.input_dtype(i) for i in range(len(body.inputs))]
    # The body reads the call's inputs themselves (outer values are visible), so their
    # values as shape (constants, Shape outputs) flow into it; undone afterwards, so
    # that the caller's values never keep the clone's nodes as uses.
    rewired = _read_call_inputs(body, node)
    calls.append(identifier)
    try:
        outputs = ctx.infer_subgraph(body, shapes, dtypes)
        for i, value in enumerate(body.outputs[: ctx.num_outputs]):
            ctx.set_output(i, outputs[i], ctx.ctx.dtype_of(value))
            source = _call_input(body, node, value)
            ctx.set_output_value(i, ctx.ctx.value_of(source))
            copy_type(ctx, i, value)
    finally:
        calls.pop()
        for consumer, index, value in rewired:
            consumer.replace_input_with(index, value)
        for value in body_values(body):
            ctx.ctx.forget(value)


def _read_call_inputs(body: ir.Graph, node: ir.Node) -> list[tuple[ir.Node, int, ir.Value]]:
    """Points every use of a body input at the call's input; returns what to undo."""
    rewired = []
    for value, given in zip(body.inputs, node.inputs):
        if given is None:
            continue
        for consumer, index in list(value.uses()):
            consumer.replace_input_with(index, given)
            rewired.append((consumer, index, value))
    return rewired


def _call_input(body: ir.Graph, node: ir.Node, value: ir.Value) -> ir.Value:
    """The call's input for a body output that is a body input, else ``value``."""
    for i, body_input in enumerate(body.inputs):
        if body_input is value and i < len(node.inputs) and node.inputs[i] is not None:
            return node.inputs[i]
    return value


def _function_label(identifier: tuple[str, str, str]) -> str:
    domain, name, overload = identifier
    return f"{domain}::{name}" + (f":{overload}" if overload else "")
