"""Replaces per-dim scalar shape arithmetic gathered by a ``Concat`` with one vector chain.

Exports compute a size per dim: ``(H + 2) // 2 + 1`` and ``(W + 2) // 2 + 1``, each as
``Shape → Squeeze → Add → Div → Add → Reshape``, then ``Concat`` them (``Resize`` sizes,
conv output sizes, paddings). When consecutive ``Concat`` inputs (its *lanes*) apply the
same op sequence, each with a scalar constant, to consecutive dims of one tensor, the
group is ``Shape(x, start, end)`` followed by the same ops with vector constants; a lane
that is a bare dim joins with the neutral constant of each op (``+ 0``, ``- 0``,
``* 1``, ``/ 1``).

Proof relied on: the element-wise ops on int64 compute each element of the vector as the
scalar op computed it (broadcasting a ``[1]`` or scalar constant changes no element), and
``d + 0 == d - 0 == d * 1 == d / 1 == d`` exactly for integers; the dims are read from the
tensor the lanes read, by position (``Shape``'s bounds against its proven rank).
"""

from __future__ import annotations

__all__ = ["VectorizeShapeLanesPass"]

import dataclasses
import logging
from collections import Counter

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import ShapeFacts, constant_tensor, shape_slice, take_over

logger = logging.getLogger(__name__)

_ARITH = frozenset({"Add", "Sub", "Mul", "Div"})
_NEUTRAL = {"Add": 0, "Sub": 0, "Mul": 1, "Div": 1}
#: Ops with a neutral constant on the given side (``0 - d`` and ``1 / d`` are not ``d``).
_NEUTRAL_SIDE = {
    ("Add", True),
    ("Add", False),
    ("Mul", True),
    ("Mul", False),
    ("Sub", False),
    ("Div", False),
}
_MAX_OPS = 8


@dataclasses.dataclass
class _Lane:
    x: ir.Value
    axis: int
    ops: list  # [(op_type, constant, constant_is_left)], applied from the dim outwards
    nodes: list


@dataclasses.dataclass
class VectorizeShapeLanesPass(ir.passes.InPlacePass):
    """Replaces a ``Concat`` of per-dim scalar chains by ``Shape(x, a, b)`` and one vector chain when that removes nodes.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"vectorize_lanes": n}`` (groups replaced).
        declined: Why groups were kept, counted by reason.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        if model.opset_imports.get("", 0) < 15:  # Shape(start, end)
            return ir.passes.PassResult(model, modified=False)
        graph = model.graph
        for node in list(graph):
            if node.op_type != "Concat" or node.domain != "" or node.graph is None:
                continue
            out = node.outputs[0]
            shape = self.facts.shape(out)
            if self.facts.dtype(out) != ir.DataType.INT64 or shape is None or len(shape) != 1:
                continue
            self._concat(graph, node)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    # --------------------------------------------------------------------------------
    def _concat(self, graph: ir.Graph, node: ir.Node) -> None:
        lanes = [self._lanes(v) for v in node.inputs]
        for k, v in enumerate(node.inputs):
            # Proven ints are ProvenValues' to publish (and MaterializeReshapeTarget's).
            elements = self.facts.elements(v) if lanes[k] else None
            if elements is None or any(isinstance(e, int) for e in elements):
                lanes[k] = None
        i = 0
        new_inputs: list = []
        changed = False
        while i < len(lanes):
            j = i + 1
            while j < len(lanes) and self._continues(lanes[i:j], lanes[j]):
                j += 1
            group = [lane for entry in lanes[i:j] if entry for lane in entry]
            value = self._vectorize(graph, node, group) if j - i >= 2 else None
            if value is None:
                new_inputs.extend(node.inputs[i:j])
            else:
                new_inputs.append(value)
                changed = True
            i = j
        if not changed:
            return
        concat = ir.node("Concat", new_inputs, attributes={"axis": 0})
        graph.insert_before(node, concat)
        old = node.outputs[0]
        new = concat.outputs[0]
        new.dtype, new.shape = old.dtype, old.shape
        take_over(old, new, "lanes")

    def _continues(self, previous: list, entry) -> bool:
        """True when ``entry``'s lanes extend the group of ``previous`` entries."""
        if not entry or not previous[0]:
            return False
        last = previous[-1][-1]
        first = entry[0]
        if first.x is not last.x or first.axis != last.axis + 1:
            return False
        signature = _signature([lane for e in previous for lane in e] + list(entry))
        if signature is None:
            self.declined["the lanes apply different ops"] += 1
        return signature is not None

    def _vectorize(self, graph, node, group: list[_Lane]) -> ir.Value | None:
        signature = _signature(group)
        if signature is None:
            self.declined["the lanes apply different ops"] += 1
            return None
        removed = _removable(group, node)
        added = 1 + len(signature)
        if removed <= added:
            self.declined["removes no more nodes than it adds"] += 1
            return None
        x, start = group[0].x, group[0].axis
        end = start + len(group)
        shape_node = ir.node("Shape", [x], attributes={"start": start, "end": end})
        new_nodes = [shape_node]
        value = shape_node.outputs[0]
        for position, (op_type, left) in enumerate(signature):
            constants = [
                lane.ops[position][1] if lane.ops else _NEUTRAL[op_type] for lane in group
            ]
            const = ir.node(
                "Constant", [], attributes={"value": ir.tensor(np.array(constants, np.int64))}
            )
            inputs = [const.outputs[0], value] if left else [value, const.outputs[0]]
            op = ir.node(op_type, inputs)
            new_nodes += [const, op]
            value = op.outputs[0]
        for n in new_nodes:
            for o in n.outputs:
                o.dtype = ir.DataType.INT64
                o.shape = ir.Shape([len(group)])
        graph.insert_before(node, new_nodes)
        self.fired["vectorize_lanes"] += 1
        return value

    # --------------------------------------------------------------------------------
    def _lanes(self, value: ir.Value | None) -> list[_Lane] | None:
        """The lanes of one ``Concat`` input: a run of dims, or one dim through scalar ops."""
        facts = self.facts
        if value is None or facts.dtype(value) != ir.DataType.INT64:
            return None
        producer = value.producer()
        run = self._shape_bounds(producer)
        if run is not None:
            x, start, end = run
            return [_Lane(x, a, [], [producer]) for a in range(start, end)]
        if facts.shape(value) != (1,):
            return None
        ops: list = []
        nodes: list = []
        current = value
        for _ in range(_MAX_OPS + 3):
            p = current.producer()
            if p is None or p.domain != "" or facts.shape(current) not in ((), (1,)):
                return None
            nodes.append(p)
            if p.op_type in ("Reshape", "Unsqueeze", "Squeeze") and p.inputs[0] is not None:
                current = p.inputs[0]
                continue
            if p.op_type in _ARITH and len(p.inputs) == 2:
                a, b = p.inputs
                ca, cb = _scalar(a), _scalar(b)
                if (ca is None) == (cb is None):
                    return None
                left = ca is not None
                constant = ca if left else cb
                if p.op_type == "Div" and constant == 0:
                    return None
                ops.append((p.op_type, constant, left))
                current = b if left else a
                continue
            if p.op_type == "Gather" and len(p.inputs) == 2:
                bounds = self._shape_bounds(p.inputs[0].producer() if p.inputs[0] else None)
                index = _scalar(p.inputs[1])
                if bounds is None or index is None:
                    return None
                x, start, end = bounds
                k = index + (end - start) if index < 0 else index
                if not 0 <= k < end - start:
                    return None
                nodes.append(p.inputs[0].producer())
                return [_Lane(x, start + k, ops[::-1], nodes)]
            run = self._shape_bounds(p)
            if run is not None and run[2] - run[1] == 1:
                return [_Lane(run[0], run[1], ops[::-1], nodes)]
            return None
        return None

    def _shape_bounds(self, node: ir.Node | None) -> tuple | None:
        return shape_slice(node, self.facts)


def _scalar(value: ir.Value | None) -> int | None:
    """The int of a one-element int64 constant, or ``None``."""
    tensor = constant_tensor(value) if value is not None else None
    if tensor is None or tensor.dtype != ir.DataType.INT64 or tensor.size != 1:
        return None
    return int(tensor.numpy().reshape(()))


def _signature(lanes: list[_Lane]) -> tuple | None:
    """The shared ``(op_type, constant_is_left)`` sequence of the lanes, or ``None``.

    Bare-dim lanes join only when every op has a neutral constant on its side.
    """
    signature = None
    for lane in lanes:
        if lane.ops:
            s = tuple((op, left) for op, _, left in lane.ops)
            if signature is not None and s != signature:
                return None
            signature = s
    if signature is None:
        return ()
    if any(not lane.ops for lane in lanes) and not all(s in _NEUTRAL_SIDE for s in signature):
        return None
    return signature


def _removable(group: list[_Lane], concat: ir.Node) -> int:
    """Non-``Constant`` nodes of the lanes that die once the ``Concat`` stops reading them."""
    nodes = {n for lane in group for n in lane.nodes}
    changed = True
    while changed:
        changed = False
        for n in list(nodes):
            for out in n.outputs:
                if out.is_graph_output() or any(
                    user not in nodes and user is not concat for user, _ in out.uses()
                ):
                    nodes.discard(n)
                    changed = True
                    break
    return sum(1 for n in nodes if n.op_type != "Constant")
