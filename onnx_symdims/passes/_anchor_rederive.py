"""Re-deriving anchor equalities from a model that carries shapes but no context.

Used by :class:`~onnx_symdims.passes._anchors.AnchorConstraintPropagationPass` when it
is given no :class:`ShapesContext` (e.g. after another engine): the producer of each
graph output is inferred again from the shapes already on the model and merged with the
output's declared shape. Nothing is written to the model.
"""

from __future__ import annotations

__all__ = ["rederive", "rederived_renamable"]

import logging
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr, ops
from onnx_symdims.passes._model_dims import dim_symbols, dim_texts, model_values
from onnx_symdims.shapes import (
    INTEGER_DTYPES,
    NodeContext,
    ShapeInferenceError,
    ShapesContext,
    declared_dims,
    merge_with_anchor,
)

logger = logging.getLogger(__name__)

Shape = tuple[expr.Dim, ...]

#: At most this many integer-producing nodes are re-inferred per anchor.
_SHAPE_COMPUTATION_BUDGET = 64


class _ModelShapesEngine:
    """Infers single nodes from the shapes already on the model, writing nothing.

    Subgraphs are not walked: their outputs' shapes are read as declared on the model.
    """

    def __init__(self, model: ir.Model, ctx: ShapesContext) -> None:
        self._model = model
        self._ctx = ctx
        self._onnx = ops.OnnxFallback(model)
        self._opsets = {
            ops.normalize_domain(domain): version
            for domain, version in model.opset_imports.items()
        }

    def fallback(self, node_ctx: NodeContext) -> None:
        self._onnx.infer(node_ctx)

    def infer_subgraph(
        self,
        graph: ir.Graph,
        input_shapes: Sequence[Shape | None] | None,
        input_dtypes: Sequence[ir.DataType | None] | None,
    ) -> list[Shape | None]:
        return [self._ctx.shape_of(value) for value in graph.outputs]

    def infer(self, node_ctx: NodeContext, node: ir.Node) -> bool:
        """Infers ``node`` into the context; False when it could not be inferred."""
        opset = self._opsets.get(ops.normalize_domain(node.domain))
        node_ctx.reset(node, opset if opset is not None else 0)
        if node.op_identifier() in self._model.functions:
            hook = None
        else:
            hook = ops.lookup(node.domain, node.op_type, opset)
        try:
            if hook is None:
                self.fallback(node_ctx)
            else:
                hook(node_ctx, node)
        except ShapeInferenceError:
            raise
        except Exception as e:  # NodeInferenceFailure or a hook bug: the anchor is optional
            logger.debug("cannot re-infer %s: %s", node.op_type, e)
            return False
        return True


def _infer_with_shape_inputs(
    engine: _ModelShapesEngine,
    node_ctx: NodeContext,
    node: ir.Node,
    inferred: dict[ir.Node, bool],
    budget: int = _SHAPE_COMPUTATION_BUDGET,
) -> None:
    """Infers ``node`` after the producers of its integer inputs, transitively.

    The model carries shapes but not values: a ``Reshape`` target or a ``Concat`` of
    ``Shape`` outputs is only known by inferring the integer subgraph that computes it
    (at most ``budget`` nodes). Float inputs are read as they are on the model.
    """
    order: list[ir.Node] = []
    stack = [node]
    seen = {node}
    while stack and len(order) < budget:
        current = stack.pop()
        order.append(current)
        for value in current.inputs:
            if value is None or value.dtype not in INTEGER_DTYPES:
                continue
            producer = value.producer()
            if producer is not None and producer.graph is node.graph and producer not in seen:
                seen.add(producer)
                stack.append(producer)
    ranked = {n: i for i, n in enumerate(node.graph)}
    for current in sorted(order, key=lambda n: ranked.get(n, -1)):
        if current not in inferred:
            inferred[current] = engine.infer(node_ctx, current)
            if current is not node:
                _prefer_model_shapes(node_ctx.ctx, current)


def _prefer_model_shapes(ctx: ShapesContext, node: ir.Node) -> None:
    """Keeps the model's dims on an intermediate (only its value was wanted).

    Re-inferring e.g. a ``NonZero`` would mint a new symbol where the model already
    names the dim; the anchor must relate to the name the model carries.
    """
    for value in node.outputs:
        declared = declared_dims(value.shape, ctx)
        if declared is None:
            continue
        inferred = ctx.peek_shape(value) if ctx.has_shape(value) else None
        if inferred is not None and len(inferred) == len(declared):
            dims = tuple(d if d is not None else i for d, i in zip(declared, inferred))
        else:
            dims = ctx.dims_from_ir(value.shape, value.name or node.op_type)
        ctx.set_shape(value, dims)


def rederive(model: ir.Model, *, strict: bool) -> ShapesContext:
    """A context holding the equalities between each graph output and its producer."""
    ctx = ShapesContext()
    names: set[str] = set()
    for value, _ in model_values(model):
        names |= dim_texts(value.shape) | dim_symbols(value.shape)
    ctx.reserve_names(names)
    engine = _ModelShapesEngine(model, ctx)
    node_ctx = NodeContext(ctx, engine)
    inferred_nodes: dict[ir.Node, bool] = {}
    for value in model.graph.outputs:
        producer = value.producer()
        if producer is None or producer.graph is not model.graph:
            continue  # a graph input or initializer passed through: nothing computed
        _infer_with_shape_inputs(engine, node_ctx, producer, inferred_nodes)
        if not inferred_nodes[producer] or not ctx.has_shape(value):
            continue
        merge_with_anchor(
            ctx,
            ctx.peek_shape(value),
            declared_dims(value.shape, ctx),
            strict=strict,
            where=f"graph output {value.name!r}",
            node=producer,
        )
    return ctx


def rederived_renamable(model: ir.Model, ctx: ShapesContext) -> frozenset[str]:
    """Symbols carried only by intermediate values, plus those minted while re-deriving."""
    on_model: set[str] = set()
    on_anchors: set[str] = set()
    for value, is_anchor in model_values(model):
        symbols = dim_symbols(value.shape)
        on_model |= symbols
        if is_anchor:
            on_anchors |= symbols
    return frozenset((on_model - on_anchors) | ctx.generated_symbols)
