"""Computes scalar shape arithmetic on one-element vectors when its results are unsqueezed.

Exports compute sizes on scalars and turn each into a one-element vector for a ``Concat``:
Swin's window padding is ``Squeeze(Shape(x, 1, 2))``, then ``Mod``, ``Add`` and ``Div``
on scalars, then ``Reshape(_, [-1])`` of every result that a ``Pad`` or ``Reshape`` target
reads. The same arithmetic on ``[1]`` tensors computes the same numbers, already as the
vectors the ``Concat`` wants: the ``Squeeze`` at the start and every ``Reshape`` /
``Unsqueeze`` at the end go.

A scalar value is *lifted* (computed as ``[1]``) when every use of it is a lifted node or
a node that turns it into ``[1]`` (``Unsqueeze(v, [0])``, ``Reshape(v, [1])`` or
``[-1]``); its node is then a ``Squeeze`` of a ``[1]`` tensor (replaced by that tensor), a
``Gather`` of a scalar constant index from a vector (the index becomes ``[i]``), or an
element-wise op of the integer arithmetic below with at least one lifted input. A value
used by anything else (a ``Range`` bound, a graph output, a subgraph) stays a scalar, and
so does every value computing it. Each lifted node is replaced one for one by a new node
(a rewrite never changes a value it leaves in the model), so the nodes removed are the
``Squeeze`` and ``Unsqueeze``/``Reshape`` nodes.

Proof relied on: on integers and booleans these ops compute each output element from the
operand elements alone, and with multidirectional broadcasting a ``[1]`` operand next to
scalars gives ``[1]`` with the element the scalars gave (the scalar operands are
broadcast, not changed). The proven shapes (:class:`~onnx_symdims.rewrite.ShapeFacts`)
show that each lifted value is a scalar and each ``Squeeze`` input has one element.

Example::

    >>> import onnx_ir as ir
    >>> from onnx_symdims.rewrite import LiftScalarArithmeticPass, analyze
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (float[N, H] x) => (float[N, ?] y) {
    ...         h = Shape<start = 1, end = 2>(x)
    ...         s = Squeeze(h)
    ...         two = Constant<value = int64 {2}>()
    ...         m = Mod(s, two)
    ...         zero = Constant<value = int64[1] {0}>()
    ...         m_v = Unsqueeze(m, zero)
    ...         pads = Concat<axis = 0>(zero, zero, zero, m_v)
    ...         y = Pad(x, pads)
    ...     }
    ... ''')
    >>> lift = LiftScalarArithmeticPass(analyze(model))
    >>> lift(model).modified
    True
    >>> [n.op_type for n in model.graph if n.op_type != "Constant"]
    ['Shape', 'Mod', 'Concat', 'Pad']
"""

from __future__ import annotations

__all__ = ["LiftScalarArithmeticPass"]

import logging
from collections import Counter

import onnx_ir as ir

from onnx_symdims.rewrite._facts import (
    INTEGER_AND_BOOL_TYPES,
    FactsPass,
    constant_tensor,
    ints_attribute,
    set_type,
)

logger = logging.getLogger(__name__)

#: Element-wise integer ops whose output element depends on the operand elements alone,
#: broadcasting multidirectionally (or one operand: nothing to broadcast).
_ELEMENTWISE = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "Min",
        "Max",
        "Neg",
        "Abs",
        "Sign",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "Not",
        "Where",
        "Cast",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
        "BitShift",
    }
)


class LiftScalarArithmeticPass(FactsPass):
    """Replaces scalar integer arithmetic whose results are only unsqueezed by the same on ``[1]`` tensors.

    Args:
        facts: The proven facts of the model (see :func:`~onnx_symdims.rewrite.analyze`).

    Attributes:
        fired: ``{"lift_scalar_arithmetic": n}`` (``Unsqueeze``/``Reshape`` and
            ``Squeeze`` nodes made unnecessary).
        declined: Why scalars that are unsqueezed were kept, counted by reason.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        if model.opset_imports.get("", 0) < 7:  # broadcasting became multidirectional in 7
            return ir.passes.PassResult(model, modified=False)
        sinks = [node for node in graph if self._sink_input(node) is not None]
        if not sinks:
            return ir.passes.PassResult(model, modified=False)
        # Values hash by identity: the sets below are walked in graph order, so that the
        # new nodes (and the names they get) do not depend on where objects live in memory.
        position = {node: i for i, node in enumerate(graph)}
        candidates = self._candidates(graph, sinks)
        lifted = self._prune(candidates, set(sinks), position)
        if not lifted:
            return ir.passes.PassResult(model, modified=False)
        replacement = self._rewrite(graph, lifted)
        for sink in sinks:
            value = sink.inputs[0]
            if value in replacement:
                new = replacement[value]
                old = sink.outputs[0]
                if new.name is None and old.name:
                    new.name = f"{old.name}_lifted"
                old.replace_all_uses_with(new)
                self.fired["lift_scalar_arithmetic"] += 1
        # The Squeeze nodes whose [1] input replaced their output are gone too.
        self.fired["lift_scalar_arithmetic"] += sum(
            1 for v in lifted if (p := v.producer()) is not None and p.op_type == "Squeeze"
        )
        graph.remove(
            [v.producer() for v in lifted] + [s for s in sinks if s.inputs[0] in replacement],
            safe=True,
        )
        return ir.passes.PassResult(model, modified=True)

    # --------------------------------------------------------------------------------
    def _sink_input(self, node: ir.Node) -> ir.Value | None:
        """The scalar ``node`` turns into ``[1]`` (``Unsqueeze(v, [0])``, ``Reshape(v, [±1])``)."""
        if node.domain != "" or node.op_type not in ("Unsqueeze", "Reshape"):
            return None
        if not node.inputs or node.inputs[0] is None or node.outputs[0].is_graph_output():
            return None
        value = node.inputs[0]
        if (
            self.facts.shape(value) != ()
            or self.facts.dtype(value) not in INTEGER_AND_BOOL_TYPES
        ):
            return None
        if node.op_type == "Unsqueeze":
            if len(node.inputs) > 1:
                axes = self.facts.int_elements(node.inputs[1])
            else:
                axes = ints_attribute(node, "axes")
            return value if axes in ((0,), (-1,)) else None
        target = self.facts.int_elements(node.inputs[1]) if len(node.inputs) > 1 else None
        return value if target in ((1,), (-1,)) else None

    def _candidates(self, graph: ir.Graph, sinks: list[ir.Node]) -> set[ir.Value]:
        """Scalars computed by liftable nodes, walking back from the sinks' inputs."""
        candidates: set[ir.Value] = set()
        stack = [s.inputs[0] for s in sinks]
        while stack:
            value = stack.pop()
            if value in candidates:
                continue
            node = value.producer()
            if node is None or node.graph is not graph or node.domain != "":
                continue
            if value.is_graph_output():
                self.declined["a value is a graph output (it keeps its shape)"] += 1
                continue
            if len(node.outputs) != 1:
                continue
            if (
                self.facts.shape(value) != ()
                or self.facts.dtype(value) not in INTEGER_AND_BOOL_TYPES
            ):
                continue
            if self._leaf(node) is not None:
                candidates.add(value)
            elif node.op_type in _ELEMENTWISE:
                candidates.add(value)
                stack.extend(v for v in node.inputs if v is not None)
        return candidates

    def _leaf(self, node: ir.Node) -> str | None:
        """``"squeeze"`` or ``"gather"`` for a node whose scalar is a ``[1]`` tensor's element."""
        facts = self.facts
        if node.op_type == "Squeeze" and node.inputs[0] is not None:
            return "squeeze" if facts.shape(node.inputs[0]) == (1,) else None
        if node.op_type == "Gather" and len(node.inputs) == 2 and None not in node.inputs:
            shape = facts.shape(node.inputs[0])
            index = constant_tensor(node.inputs[1])
            if (
                shape is not None
                and len(shape) == 1
                and index is not None
                and index.shape.dims == ()
            ):
                return "gather"
        return None

    def _prune(
        self, candidates: set[ir.Value], sinks: set[ir.Node], position: dict[ir.Node, int]
    ) -> list[ir.Value]:
        """The candidates every use of which is lifted too, each with a lifted operand."""
        lifted = set(candidates)
        changed = True
        while changed:
            changed = False
            for value in list(lifted):
                for user, index in value.uses():
                    if user in sinks and index == 0:  # not an Unsqueeze's axes
                        continue
                    if len(user.outputs) == 1 and user.outputs[0] in lifted:
                        continue
                    lifted.discard(value)
                    self.declined["a value is also used as a scalar"] += 1
                    changed = True
                    break
        # An op gives [1] only with a [1] operand: a node of scalars alone stays.
        ordered: list[ir.Value] = []
        for value in _topological(lifted, position):
            node = value.producer()
            if self._leaf(node) is not None or any(v in lifted for v in node.inputs):
                ordered.append(value)
            else:
                lifted.discard(value)
        # Dropping a scalar-only node leaves the lifted users it fed with a scalar operand,
        # which broadcasting handles; its own users stay valid.
        return [v for v in ordered if v in lifted]

    def _rewrite(self, graph: ir.Graph, lifted: list[ir.Value]) -> dict[ir.Value, ir.Value]:
        """New ``[1]`` nodes for the lifted values (in order); old value -> new value."""
        replacement: dict[ir.Value, ir.Value] = {}
        for value in lifted:
            node = value.producer()
            kind = self._leaf(node)
            if kind == "squeeze":
                replacement[value] = node.inputs[0]
                continue
            if kind == "gather":
                index = constant_tensor(node.inputs[1]).numpy().reshape(1)
                const = ir.node("Constant", [], attributes={"value": ir.tensor(index)})
                inputs = [node.inputs[0], const.outputs[0]]
                new_nodes = [const]
            else:
                inputs = [
                    replacement.get(v, v) if v is not None else None for v in node.inputs
                ]
                new_nodes = []
            new = ir.Node(
                node.domain,
                node.op_type,
                inputs,
                attributes=list(node.attributes.values()),
                version=node.version,
            )
            new_nodes.append(new)
            out = new.outputs[0]
            set_type(out, self.facts.dtype(value), ir.Shape([1]))
            out.name = f"{value.name}_lifted" if value.name else None
            graph.insert_before(node, new_nodes)
            replacement[value] = out
        return replacement


def _topological(values: set[ir.Value], position: dict[ir.Node, int]) -> list[ir.Value]:
    """``values`` with each after the ones among them its node reads.

    Deterministic: the walks start in the graph order of the values' nodes (``position``).
    """
    ordered: list[ir.Value] = []
    seen: set[ir.Value] = set()
    for start in sorted(values, key=lambda v: position[v.producer()]):
        stack = [(start, False)]
        while stack:
            value, expanded = stack.pop()
            if expanded:
                ordered.append(value)
                continue
            if value in seen:
                continue
            seen.add(value)
            stack.append((value, True))
            stack.extend(
                (v, False) for v in value.producer().inputs if v in values and v not in seen
            )
    return ordered
