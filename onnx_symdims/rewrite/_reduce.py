"""Folds a reshape that drops a reduction's kept axes into the reduction.

``ReduceMean(x, axes, keepdims=1)`` keeps each reduced axis as a 1; a ``Reshape`` (or
``Squeeze``, ``Flatten``) right after it that only drops those 1s (``mean(...).view(N, C)``
after a global pool) is ``ReduceMean(x, axes, keepdims=0)``: removing size-1 axes keeps
the row-major order of the elements, and ``keepdims`` changes only the output shape, not
a single reduced value.

Proof relied on: the reduced axes (read from the attribute or a proven constant input,
against ``x``'s proven rank) and the reshape's output shape proven equal to the reduce
output's dims without them (:class:`~onnx_symdims.rewrite.ShapeFacts`).
"""

from __future__ import annotations

__all__ = ["ReduceDropsKeptAxesPass"]

import logging

import onnx_ir as ir

from onnx_symdims.rewrite._facts import (
    FactsPass,
    int_attribute,
    ints_attribute,
    set_type,
    take_over,
)

logger = logging.getLogger(__name__)

_REDUCE = frozenset(
    {
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    }
)
_RESHAPE_LIKE = frozenset({"Reshape", "Squeeze", "Flatten"})


class ReduceDropsKeptAxesPass(FactsPass):
    """Replaces ``Reshape(Reduce(x, keepdims=1))`` by ``Reduce(x, keepdims=0)`` when the reshape only drops the reduced axes.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"reduce_drops_kept_axes": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    op_types = _RESHAPE_LIKE

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        r = node.inputs[0] if node.inputs else None
        reduce = r.producer() if r is not None else None
        if reduce is None or reduce.domain != "" or reduce.op_type not in _REDUCE:
            return
        if reduce.graph is not graph or len(r.uses()) != 1 or r.is_graph_output():
            self.declined["the reduction has other uses or is a graph output"] += 1
            return
        if int_attribute(reduce, "keepdims", 1) != 1:
            return
        if self._drops_only_reduced_axes(reduce, node.outputs[0]):
            self._replace(graph, node, reduce)

    def _drops_only_reduced_axes(self, reduce: ir.Node, y: ir.Value) -> bool:
        facts = self.facts
        x, r = reduce.inputs[0], reduce.outputs[0]
        sx, sr, sy = facts.shape(x), facts.shape(r), facts.shape(y)
        if sx is None or sr is None or sy is None or len(sx) != len(sr):
            self.declined["a rank is not proven"] += 1
            return False
        if facts.dtype(r) is None or facts.dtype(r) != facts.dtype(y):
            self.declined["dtypes are not proven equal"] += 1
            return False
        axes = self._axes(reduce, len(sx))
        if axes is None:
            return False
        kept = [d for i, d in enumerate(sr) if i not in axes]
        if not facts.same_shape(kept, sy):
            self.declined["the reshape does not only drop the reduced axes"] += 1
            return False
        return True

    def _axes(self, reduce: ir.Node, rank: int) -> set[int] | None:
        """The reduced axes (normalized), or ``None`` (reason recorded)."""
        given = reduce.inputs[1] if len(reduce.inputs) > 1 else None
        if given is not None:
            axes = self.facts.int_elements(given)
            if axes is None:
                self.declined["the axes are not proven constant"] += 1
                return None
        else:
            axes = ints_attribute(reduce, "axes", ())
            if axes is None:
                self.declined["a malformed axes attribute"] += 1
                return None
        if not axes:
            if int_attribute(reduce, "noop_with_empty_axes", 0) != 0:
                self.declined["empty axes with noop_with_empty_axes"] += 1
                return None
            return set(range(rank))
        normalized = {a + rank if a < 0 else a for a in axes}
        if not all(0 <= a < rank for a in normalized):
            self.declined["an axis is out of range"] += 1
            return None
        return normalized

    def _replace(self, graph: ir.Graph, node: ir.Node, reduce: ir.Node) -> None:
        attributes = dict(reduce.attributes)
        attributes["keepdims"] = ir.AttrInt64("keepdims", 0)
        new = ir.Node(
            "",
            reduce.op_type,
            list(reduce.inputs),
            attributes=list(attributes.values()),
            version=reduce.version,
        )
        graph.insert_before(node, new)
        y, out = node.outputs[0], new.outputs[0]
        set_type(out, self.facts.dtype(y), y.shape)
        take_over(y, out, "reduced")
        self.fired["reduce_drops_kept_axes"] += 1
