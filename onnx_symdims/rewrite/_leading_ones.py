"""Drops a reshape that only prepends size-1 axes before ops that broadcast anyway.

T5's position bias is ``bias.unsqueeze(0)`` added to the scores, attention masks are
viewed ``[1, 1, q, k]`` before ``Where``/``Add`` with the scores:
``Add(scores, Unsqueeze(b, [0]))``.
Numpy-style broadcasting aligns the trailing axes and prepends size-1 axes to the shorter
operand itself, so the ``Unsqueeze`` changes nothing the op computes.

Proof relied on: multidirectional broadcasting reads an operand
of rank ``r`` at output index ``i`` as the operand padded on the left with size-1 axes
to the output's rank. ``R(x)``'s proven shape is ``[1, ..., 1] + shape(x)`` (``k`` literal
ones, the other dims proven equal), and each op has another operand (not ``R(x)``) of a
proven rank at least ``r + k``, so its output rank stays: padded ``x`` and padded ``R(x)``
are the same tensor, so every output element
reads the same operand elements, computed by the same scalar op (bit for bit).
"""

from __future__ import annotations

__all__ = ["DropLeadingOnesBeforeBroadcastPass"]

import logging

import onnx_ir as ir

from onnx_symdims.rewrite._facts import FactsPass, is_literal_one

logger = logging.getLogger(__name__)

#: Ops whose inputs broadcast multidirectionally (numpy style): every input.
_MULTIDIRECTIONAL = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual",
        "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "Max", "Min", "Sum",
        "Mean", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    }
)  # fmt: skip

_RESHAPE_LIKE = frozenset({"Reshape", "Unsqueeze", "Flatten"})


class DropLeadingOnesBeforeBroadcastPass(FactsPass):
    """Replaces ``Op(R(x), b)`` by ``Op(x, b)`` when ``R`` only prepends size-1 axes.

    ``R`` is a ``Reshape``, ``Unsqueeze`` or ``Flatten`` whose output shape is proven
    ``[1, ..., 1] + shape(x)``; every use of its output is a broadcasting input of an op
    (``Add``, ``Mul``, ``Where``, ...) in the same graph with another operand of a
    proven rank at least ``R(x)``'s (it keeps the output's rank); the output is no graph
    output. ``R`` then goes. (``Expand`` is left alone: the index-grid rules read the
    reshapes that place a ``Range`` before its ``Expand``.)

    Example::

        >>> import onnx_ir as ir
        >>> from onnx_symdims.rewrite import DropLeadingOnesBeforeBroadcastPass, analyze
        >>> model = ir.from_onnx_text('''
        ...     <ir_version: 10, opset_import: ["" : 18]>
        ...     g (float[H, S, S] bias, float[B, H, S, S] scores) => (float[B, H, S, S] y) {
        ...         zero = Constant<value = int64[1] {0}>()
        ...         u = Unsqueeze(bias, zero)
        ...         y = Add(scores, u)
        ...     }''')
        >>> DropLeadingOnesBeforeBroadcastPass(analyze(model))(model).modified
        True
        >>> [n.op_type for n in model.graph if n.op_type != "Constant"]
        ['Add']

    Attributes:
        fired: ``{"drop_leading_ones_before_broadcast": n}`` (reshapes removed).
        declined: Why candidates were kept, counted by reason.
    """

    op_types = _RESHAPE_LIKE

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        x, y = (node.inputs[0] if node.inputs else None), node.outputs[0]
        if x is None or y.is_graph_output() or not y.uses():
            return
        uses = list(y.uses())
        if not all(_broadcasting_input(use.node, use.idx, graph) for use in uses):
            return
        x_shape, y_shape = self.facts.shape(x), self.facts.shape(y)
        if x_shape is None or y_shape is None:
            self.declined["the shapes around the reshape are not proven"] += 1
            return
        k = len(y_shape) - len(x_shape)
        if k <= 0 or not all(is_literal_one(d) for d in y_shape[:k]):
            self.declined["not only size-1 axes prepended"] += 1
            return
        if not self.facts.same_shape(y_shape[k:], x_shape):
            self.declined["not only size-1 axes prepended"] += 1
            return
        for user in {use.node for use in uses}:
            # Another operand must pad x back: the output rank is the largest input rank.
            ranks = [self._rank(v) for v in user.inputs if v is not None and v is not y]
            if not ranks or None in ranks or max(ranks) < len(y_shape):
                self.declined["no other operand of the rank of the reshaped one"] += 1
                return
        for use in uses:
            use.node.replace_input_with(use.idx, x)
        graph.remove(node, safe=True)
        self.fired["drop_leading_ones_before_broadcast"] += 1

    def _rank(self, value: ir.Value) -> int | None:
        shape = self.facts.shape(value)
        return None if shape is None else len(shape)


def _broadcasting_input(user: ir.Node, index: int, graph: ir.Graph) -> bool:
    if user.domain != "" or user.graph is not graph:
        return False
    return user.op_type in _MULTIDIRECTIONAL
