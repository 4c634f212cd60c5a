"""Reuses an integer tensor computed earlier for a later one proven to hold the same elements.

Exporters recompute the same size in different ways: Swin's window padding computes
``(h//2)%2`` once as ``Mod(h//2, 2)`` and again as ``Mod(2 + -1*Mod(h//2, 2), 2)``;
TorchScript decoders take ``Shape(x)`` of every layer's activations, whose dims are all
``[batch, seq, hidden]``. onnxscript's common-subexpression pass merges only nodes that
are the same op over the same inputs; this pass merges by *value*: a later integer
tensor whose dtype, shape and every element are proven equal to those of an earlier one
is replaced by it, and the nodes that computed only the later one are removed.

Proof relied on: :class:`~onnx_symdims.rewrite.ShapeFacts` shapes and elements hold in
every successful run, and equal canonical expressions are equal integers, so both
tensors are the same tensor in every run where the original succeeds. The earlier one is
computed before the later one's node (the graph is in topological order), so it is
available to every use of the later one, subgraphs included.

Example::

    >>> import onnx_ir as ir
    >>> from onnx_symdims.rewrite import ReuseEqualValuesPass, analyze
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (float[N, 4] x) => (float[?, ?] y) {
    ...         s = Shape(x)
    ...         r = Reshape(x, s)
    ...         a = Relu(r)
    ...         t = Shape(a)
    ...         y = Reshape(a, t)
    ...     }
    ... ''')
    >>> reuse = ReuseEqualValuesPass(analyze(model))
    >>> _ = reuse(model)
    >>> [n.op_type for n in model.graph], dict(reuse.fired)
    (['Shape', 'Reshape', 'Relu', 'Reshape'], {'reuse_equal_value': 1})
"""

from __future__ import annotations

__all__ = ["ReuseEqualValuesPass"]

import logging
from collections import Counter

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import FactsPass
from onnx_symdims.rewrite._values import INTEGER_DTYPES, dead_cone

logger = logging.getLogger(__name__)


class ReuseEqualValuesPass(FactsPass):
    """Replaces an integer tensor by an earlier one proven to hold the same elements.

    Values whose elements are all integers are left to
    :class:`~onnx_symdims.rewrite.ProvenValuesPass` (they become constants).

    Args:
        facts: The proven facts of the model (see :func:`~onnx_symdims.rewrite.analyze`).

    Attributes:
        fired: ``{"reuse_equal_value": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:  # every node, not some op types
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        if not _in_topological_order(graph):
            # "Earlier" must mean "computed before": otherwise the earlier value may
            # depend on the later one, and reusing it would make a cycle.
            self.declined["the graph is not in topological order"] += 1
            return ir.passes.PassResult(model, modified=False)
        first: dict[tuple, ir.Value] = {}
        for node in list(graph):
            if node.graph is None:  # removed with a value reused before it
                continue
            for value in node.outputs:
                key = self._key(value)
                if key is None:
                    continue
                earlier = first.get(key)
                if earlier is None or _removed(earlier):
                    first[key] = value
                    continue
                if value.is_graph_output():
                    self.declined["the later value is a graph output (it keeps its name)"] += 1
                    continue
                if any(
                    o is not value and (o.uses() or o.is_graph_output()) for o in node.outputs
                ):
                    self.declined["its node computes other values still used"] += 1
                    continue
                value.replace_all_uses_with(earlier)
                graph.remove(dead_cone(node, value), safe=True)
                self.fired["reuse_equal_value"] += 1
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _key(self, value: ir.Value) -> tuple | None:
        """``(dtype, shape, elements)`` of a used integer tensor with symbolic elements."""
        if not value.uses() and not value.is_graph_output():
            return None
        facts = self.facts
        dtype = facts.dtype(value)
        if dtype not in INTEGER_DTYPES:
            return None
        shape = facts.shape(value)
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        elements = facts.elements(value)
        if elements is None or all(isinstance(e, int) for e in elements):
            return None
        # An unknown stands for a value nothing proves equal to any other.
        if any(isinstance(e, expr.DimExpr) and e.is_unknown for e in elements):
            return None
        return (dtype, shape, tuple(elements))


def _in_topological_order(graph: ir.Graph) -> bool:
    """True when every node's inputs are computed by nodes before it."""
    seen: set[ir.Node] = set()
    for node in graph:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and producer.graph is graph and producer not in seen:
                return False
        seen.add(node)
    return True


def _removed(value: ir.Value) -> bool:
    producer = value.producer()
    return producer is not None and producer.graph is None
