"""Replaces slices that partition one axis of a tensor by one ``Split``.

``x[..., :32]`` and ``x[..., 32:]`` (rotary embeddings' ``rotate_half``) are two ``Slice``
nodes; when the slices of ``x`` along one axis cover it exactly, without overlap, they are
one ``Split(x, sizes)``. This generalizes onnxscript's ``SlicesSplit`` (two halves of the
last axis, written with explicit sizes so an odd axis splits where the slices do) and runs
in linear time, where that rule's two-node pattern is matched in time quadratic in the
graph.

Proof relied on: the proven starts, ends and axes of the slices, every step proven 1, and
the proven int size of the axis (:class:`~onnx_symdims.rewrite.ShapeFacts`), from which the
clamped interval of each slice follows as ONNX defines it.
"""

from __future__ import annotations

__all__ = ["SlicesToSplitPass"]

import dataclasses
import logging
from collections import Counter, defaultdict

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import ShapeFacts, set_type

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SlicesToSplitPass(ir.passes.InPlacePass):
    """Replaces the slices of a value that partition one of its axes by one ``Split``.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"slices_to_split": n}`` (slices replaced).
        declined: Why groups of slices were not merged.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        opset = model.opset_imports.get("", 0)
        groups: dict[tuple[ir.Value, int], list[tuple[int, int, ir.Node]]] = defaultdict(list)
        spoiled: set[tuple[ir.Value, int]] = set()
        for node in graph:
            if node.op_type != "Slice" or node.domain != "" or not node.inputs:
                continue
            found = self._interval(node)
            if found is None:
                continue
            axis, start, end = found
            key = (node.inputs[0], axis)
            if node.outputs[0].is_graph_output():
                spoiled.add(key)
            groups[key].append((start, end, node))
        order: dict[ir.Node, int] | None = None
        for key, slices in groups.items():
            if len(slices) < 2:
                continue
            if key in spoiled:
                self.declined["a slice is a graph output"] += 1
                continue
            if order is None:
                order = {node: i for i, node in enumerate(graph)}
            self._merge(graph, opset, key, slices, order)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _interval(self, node: ir.Node) -> tuple[int, int, int] | None:
        """``(axis, start, end)`` of a one-axis, step-1 slice, clamped to the axis size."""
        facts = self.facts
        inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
        x, starts_v, ends_v, axes_v, steps_v = inputs[:5]
        if starts_v is None or ends_v is None:
            return None
        starts, ends = facts.int_elements(starts_v), facts.int_elements(ends_v)
        if starts is None or ends is None or len(starts) != 1 or len(ends) != 1:
            return None
        axes = (0,) if axes_v is None else facts.int_elements(axes_v)
        steps = (1,) if steps_v is None else facts.int_elements(steps_v)
        if axes is None or steps is None or len(axes) != 1 or tuple(steps) != (1,):
            return None
        shape = facts.shape(x)
        if shape is None:
            return None
        axis = axes[0] + len(shape) if axes[0] < 0 else axes[0]
        if not 0 <= axis < len(shape) or not isinstance(shape[axis], int):
            return None
        size = shape[axis]
        start, end = starts[0], ends[0]
        start = min(max(start + size if start < 0 else start, 0), size)
        end = min(max(end + size if end < 0 else end, 0), size)
        return axis, start, max(start, end)

    def _merge(self, graph: ir.Graph, opset: int, key, slices, order) -> None:
        x, axis = key
        size = self.facts.shape(x)[axis]  # type: ignore[index]
        slices = sorted(slices, key=lambda s: (s[0], s[1]))
        position = 0
        for start, end, _ in slices:
            if start != position or end <= start:
                self.declined["the slices do not partition the axis"] += 1
                return
            position = end
        if position != size:
            self.declined["the slices do not partition the axis"] += 1
            return
        sizes = [end - start for start, end, _ in slices]
        first = min((s[2] for s in slices), key=order.__getitem__)
        # The slices' input now: ``x`` is replaced when it was itself a slice merged
        # before (``rotate_half(x[..., :4])`` beside ``x[..., 4:]``); splitting ``x``
        # would keep its old Slice alive (found by hand on a GPT-NeoX export).
        x = slices[0][2].inputs[0]
        if opset >= 13:
            const = ir.node(
                "Constant", [], attributes={"value": ir.tensor(np.array(sizes, np.int64))}
            )
            split = ir.node(
                "Split",
                [x, const.outputs[0]],
                attributes={"axis": axis},
                num_outputs=len(sizes),
            )
            graph.insert_before(first, [const, split])
        else:
            split = ir.node(
                "Split",
                [x],
                attributes={"axis": axis, "split": sizes},
                num_outputs=len(sizes),
            )
            graph.insert_before(first, split)
        for out, (_, _, node) in zip(split.outputs, slices):
            old = node.outputs[0]
            set_type(out, old.dtype, old.shape)
            out.name = old.name
            old.name = None
            old.replace_all_uses_with(out)
        self.fired["slices_to_split"] += len(slices)
