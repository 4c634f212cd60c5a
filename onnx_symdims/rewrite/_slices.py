"""Merges a ``Slice`` of a ``Slice`` on other axes into one ``Slice``.

Swin's patch merging takes ``x[:, 0::2, 0::2]``, ``x[:, 1::2, 0::2]``, …: PyTorch
exports each as a ``Slice`` on axis 1 followed by a ``Slice`` on axis 2. A slice only
re-indexes its own axes, clamping its bounds against their dims; on disjoint axes the
second slice reads dims the first left unchanged, so the pair is one ``Slice`` of the
first input with both sets of ``starts``/``ends``/``axes``/``steps`` (the spec slices each
listed axis independently). Every element of the result, and its shape, is the same
for every input, empty axes included.

Proof relied on: every ``starts``/``ends``/``axes``/``steps`` element proven an int
(:class:`~onnx_symdims.rewrite.ShapeFacts`), the first input's proven rank (to read
negative axes), and the two axis sets disjoint.
"""

from __future__ import annotations

__all__ = ["MergeDisjointSlicesPass"]

import dataclasses
import logging
from collections import Counter

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import ShapeFacts, set_type, take_over

logger = logging.getLogger(__name__)


def _is_slice(node: ir.Node | None) -> bool:
    # Opset >= 10: starts, ends (and axes, steps) are inputs, not attributes.
    return (
        node is not None
        and node.domain == ""
        and node.op_type == "Slice"
        and 3 <= len(node.inputs) <= 5
        and node.inputs[0] is not None
    )


@dataclasses.dataclass
class MergeDisjointSlicesPass(ir.passes.InPlacePass):
    """Replaces ``Slice(Slice(x, s1, e1, a1, p1), s2, e2, a2, p2)`` by ``Slice(x, s1+s2, e1+e2, a1+a2, p1+p2)`` when the axes are disjoint.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"merge_disjoint_slices": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        for node in list(graph):
            if node.graph is None or not _is_slice(node):
                continue
            inner = node.inputs[0].producer()
            if not _is_slice(inner) or inner.graph is not graph:
                continue
            x = inner.inputs[0]
            shape = self.facts.shape(x)
            if shape is None:
                self.declined["the input rank is not proven"] += 1
                continue
            first = self._params(inner, len(shape))
            second = self._params(node, len(shape))
            if first is None or second is None:
                continue
            if set(first[2]) & set(second[2]):
                self.declined["the two slices share an axis"] += 1
                continue
            self._replace(graph, node, x, [a + b for a, b in zip(first, second)])
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _params(self, node: ir.Node, rank: int) -> list[list[int]] | None:
        """``[starts, ends, axes, steps]`` of a ``Slice`` (axes normalized), or ``None``."""
        facts = self.facts
        starts = facts.int_elements(node.inputs[1])
        ends = facts.int_elements(node.inputs[2])
        if starts is None or ends is None or len(starts) != len(ends):
            self.declined["starts or ends are not proven ints"] += 1
            return None
        n = len(starts)
        given = node.inputs[3] if len(node.inputs) > 3 else None
        axes = facts.int_elements(given) if given is not None else tuple(range(n))
        given = node.inputs[4] if len(node.inputs) > 4 else None
        steps = facts.int_elements(given) if given is not None else (1,) * n
        if axes is None or steps is None:
            self.declined["axes or steps are not proven ints"] += 1
            return None
        if len(axes) != n or len(steps) != n or 0 in steps:
            self.declined["malformed slice parameters"] += 1
            return None
        normalized = [a + rank if a < 0 else a for a in axes]
        if not all(0 <= a < rank for a in normalized) or len(set(normalized)) != n:
            self.declined["an axis is out of range or repeated"] += 1
            return None
        return [list(starts), list(ends), normalized, list(steps)]

    def _replace(self, graph: ir.Graph, node: ir.Node, x: ir.Value, params) -> None:
        consts = [
            ir.node("Constant", [], attributes={"value": ir.tensor(np.array(p, np.int64))})
            for p in params
        ]
        merged = ir.node("Slice", [x, *(c.outputs[0] for c in consts)])
        graph.insert_before(node, [*consts, merged])
        y, out = node.outputs[0], merged.outputs[0]
        set_type(out, self.facts.dtype(y), y.shape)
        take_over(y, out, "merged")
        self.fired["merge_disjoint_slices"] += 1
