"""Moves an elementwise op from under two equal Transposes to before them, where they cancel.

ConvNeXt keeps its residual stream channels-first and each block's output channels-last,
so its export adds two ``Transpose(perm=[0, 3, 1, 2])`` outputs and transposes the sum
back with ``perm=[0, 2, 3, 1]``: ``T'(Add(T(a), T(b)))``. That is ``Add(a, b)``.

Proof relied on: a ``Transpose`` only relabels axes. With ``a`` and ``b`` of the same
proven rank, broadcasting pairs the same elements on permuted axes as on the original
ones, so ``Op(T_p(a), T_p(b)) = T_p(Op(a, b))`` element for element (the same scalar
op on the same pairs, bit for bit), and ``T_q(T_p(z)) = z`` when ``q`` undoes ``p``;
likewise ``T_q(Op(x, T_p(b))) = Op(T_q(x), T_q(T_p(b))) = Op(T_q(x), b)``.
"""

from __future__ import annotations

__all__ = ["TransposeThroughBinaryPass"]

import logging

import onnx_ir as ir

from onnx_symdims.rewrite._facts import FactsPass, ints_attribute, set_type, take_over

logger = logging.getLogger(__name__)

#: Elementwise ops with numpy-style broadcasting whose result element depends on the
#: pair of input elements only.
_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div"})


class TransposeThroughBinaryPass(FactsPass):
    """Replaces ``T_q(Op(T_p(a), T_p(b)))`` by ``Op(a, b)`` when ``q`` undoes ``p``.

    Also ``T_q(Op(x, T_p(b)))`` by ``Op(T_q(x), b)`` (either operand order) when nothing
    else uses ``T_p(b)``. ``Op`` is ``Add``, ``Sub``, ``Mul`` or ``Div``; the operands have
    the proven rank of ``p``; every use of ``Op``'s result is such a ``T_q``. Each rewrite
    removes at least one node: the ``T_q`` go, and a ``T_p`` stays only when something
    else uses it (both transposed) or the rewrite is declined (one transposed).

    Attributes:
        fired: ``{"transpose_through_binary": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    op_types = _ELEMENTWISE

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        if len(node.inputs) != 2 or len(node.outputs) != 1:
            return
        transposed = [_transpose_of(value, node) for value in node.inputs]
        perms = {ints_attribute(t, "perm") for t in transposed if t is not None}
        if not perms:
            return
        if len(perms) > 1:
            self.declined["the two Transposes permute differently"] += 1
            return
        (perm,) = perms
        if perm is None or sorted(perm) != list(range(len(perm))):
            self.declined["a Transpose without an explicit, valid perm"] += 1
            return
        if None in transposed and any(_kept(t) for t in transposed if t is not None):
            # One operand to transpose instead: only a gain when the other's dies.
            self.declined["one operand transposed, by a Transpose with other uses"] += 1
            return
        y = node.outputs[0]
        inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))
        undoing = []
        for use in y.uses():
            user = use.node
            if (
                user.op_type != "Transpose"
                or user.domain != ""
                or user.graph is not node.graph  # a subgraph's output must stay its own
                or ints_attribute(user, "perm") != inverse
            ):
                self.declined["a use of the result is not the inverse Transpose"] += 1
                return
            undoing.append(user)
        if not undoing or y.is_graph_output():
            self.declined["the result is a graph output or unused"] += 1
            return
        if sum(user.outputs[0].is_graph_output() for user in undoing) > 1:
            # one value cannot keep two graph outputs' names
            self.declined["two inverse Transposes are graph outputs"] += 1
            return
        operands = [
            t.inputs[0] if t is not None else value
            for t, value in zip(transposed, node.inputs)
        ]
        for operand in operands:
            shape = self.facts.shape(operand)
            if shape is None or len(shape) != len(perm):
                self.declined["an operand's rank is not proven equal to the perm's"] += 1
                return
        new_nodes = []
        for i, t in enumerate(transposed):
            if t is None:  # T_q(Op(x, T_p(b))) = Op(T_q(x), b)
                moved_x = ir.node(
                    "Transpose", [operands[i]], attributes={"perm": list(inverse)}
                )
                set_type(moved_x.outputs[0], self.facts.dtype(operands[i]))
                new_nodes.append(moved_x)
                operands[i] = moved_x.outputs[0]
        moved = ir.node(node.op_type, operands)
        new_nodes.append(moved)
        graph.insert_before(node, new_nodes)
        z = moved.outputs[0]
        set_type(z, self.facts.dtype(y), undoing[0].outputs[0].shape)
        for user in undoing:  # each dies once its output has no use left
            take_over(user.outputs[0], z, "moved")
        self.fired["transpose_through_binary"] += 1


def _transpose_of(value: ir.Value | None, node: ir.Node) -> ir.Node | None:
    """The ``Transpose`` in ``node``'s graph that produces ``value``, if any."""
    producer = value.producer() if value is not None else None
    if producer is None or producer.op_type != "Transpose" or producer.domain != "":
        return None
    return producer if producer.graph is node.graph else None


def _kept(transpose: ir.Node) -> bool:
    """Whether ``transpose`` outlives the rewrite: another use, or a graph output."""
    out = transpose.outputs[0]
    return len(out.uses()) != 1 or out.is_graph_output()
