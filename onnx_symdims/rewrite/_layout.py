"""Collapses chains of reshape-like ops (Reshape, Squeeze, Unsqueeze, Flatten).

Each of these ops keeps the row-major order of the elements, so a chain of them is one
reshape of the chain's first input ``r``. For the last value ``y`` of a chain:

* when ``y``'s shape is proven equal to ``r``'s, ``y`` is ``r`` (``Unsqueeze(Squeeze(x))``
  pairs that cancel, ``Reshape(Reshape(x, a), shape(x))``);
* otherwise, when a constant target exists (:func:`constant_reshape_target`), the chain
  becomes one ``Reshape(r, target)`` (``Reshape∘Reshape``).

Proof relied on: the proven shapes of ``r`` and ``y``
(:class:`~onnx_symdims.rewrite.ShapeFacts`) and the order-keeping semantics of the ops.
"""

from __future__ import annotations

__all__ = ["CollapseReshapeChainsPass", "FlattenConcatsPass"]

import dataclasses
import logging
from collections import Counter

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import ShapeFacts
from onnx_symdims.rewrite._rules import constant_reshape_target

logger = logging.getLogger(__name__)

_RESHAPE_LIKE = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_MAX_CHAIN = 16


def _is_reshape_like(node: ir.Node | None) -> bool:
    # allowzero only changes how a Reshape target reads; the op still keeps the order.
    return node is not None and node.domain == "" and node.op_type in _RESHAPE_LIKE


@dataclasses.dataclass
class CollapseReshapeChainsPass(ir.passes.InPlacePass):
    """Replaces a chain of reshape-like ops by its input or by one constant ``Reshape``.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: How often each rewrite fired (``"chain_to_input"``, ``"chain_to_reshape"``).
        declined: Why chains were not collapsed, counted by reason.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        outputs = frozenset(graph.outputs)
        for node in list(graph):
            if node.graph is None or not _is_reshape_like(node):
                continue
            y = node.outputs[0]
            if y in outputs:
                continue
            root, length = node.inputs[0], 1
            while length < _MAX_CHAIN and _is_reshape_like(root.producer() if root else None):
                root = root.producer().inputs[0]  # type: ignore[union-attr]
                length += 1
            if root is None or length < 2:
                continue
            self._collapse(graph, node, root, y)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _collapse(self, graph: ir.Graph, node: ir.Node, root: ir.Value, y: ir.Value) -> None:
        facts = self.facts
        source, result = facts.shape(root), facts.shape(y)
        if source is None or result is None or facts.dtype(root) != facts.dtype(y):
            self.declined["rank or dtype of the chain's ends not proven"] += 1
            return
        if facts.same_shape(source, result):
            y.replace_all_uses_with(root)
            self.fired["chain_to_input"] += 1
            return
        target, reason = constant_reshape_target(facts, source, result)
        if target is None:
            self.declined[reason] += 1
            return
        const = ir.node(
            "Constant", [], attributes={"value": ir.tensor(np.array(target, np.int64))}
        )
        reshape = ir.node("Reshape", [root, const.outputs[0]])
        graph.insert_before(node, [const, reshape])
        new = reshape.outputs[0]
        new.name = f"{y.name}_collapsed" if y.name else None
        new.dtype = facts.dtype(y)
        new.shape = y.shape
        y.replace_all_uses_with(new)
        self.fired["chain_to_reshape"] += 1


@dataclasses.dataclass
class FlattenConcatsPass(ir.passes.InPlacePass):
    """Replaces ``Concat(a, Concat(b, c), d)`` by ``Concat(a, b, c, d)`` on one axis.

    Concatenation along one axis is associative. The inner ``Concat`` must have no
    other use (else nothing is saved) and the same axis once negative axes are read
    against the proven rank.

    Attributes:
        fired: ``{"flatten_concat": n}``.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        graph = model.graph
        for node in list(graph):
            if node.graph is None or node.op_type != "Concat" or node.domain != "":
                continue
            axis = self._axis(node)
            if axis is None:
                continue
            flat: list[ir.Value | None] = []
            merged = []
            for value in node.inputs:
                inner = value.producer() if value is not None else None
                if (
                    inner is not None
                    and inner.op_type == "Concat"
                    and inner.domain == ""
                    and inner.graph is graph
                    and len(value.uses()) == 1
                    and not value.is_graph_output()
                    and self._axis(inner) == axis
                ):
                    flat.extend(inner.inputs)
                    merged.append(inner)
                else:
                    flat.append(value)
            if not merged:
                continue
            concat = ir.node("Concat", flat, attributes={"axis": axis})
            graph.insert_before(node, concat)
            out = node.outputs[0]
            concat.outputs[0].dtype = out.dtype
            concat.outputs[0].shape = out.shape
            if out.is_graph_output():
                graph.remove(concat, safe=True)
                continue
            out.replace_all_uses_with(concat.outputs[0])
            concat.outputs[0].name = out.name
            out.name = None
            self.fired["flatten_concat"] += len(merged)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _axis(self, node: ir.Node) -> int | None:
        attr = node.attributes.get("axis")
        if attr is None:
            return None
        axis = attr.as_int()
        if axis >= 0:
            return axis
        shape = self.facts.shape(node.outputs[0])
        return None if shape is None else axis + len(shape)
