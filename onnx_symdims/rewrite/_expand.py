"""Drops an ``Expand`` whose elements reach only element-wise ops that broadcast anyway.

Exports build masks and positions at full size before using them: ViT's attention mask is
``Where(Expand(ge[1, 1, n, 1], [batch, 1, n, n]), 0, -inf)`` added to the ``[batch, 2, n,
n]`` scores; BART's positions are ``Gather(table, Expand(arange(seq), [batch, seq]) + 2)``
added to the ``[batch, seq, d]`` embeddings. The ``Add`` at the end broadcasts its
operands to the same output without the ``Expand``: the ``Expand`` (and the ``Shape`` and
``Concat`` that computed its target) go, and the ops between run on the smaller tensor.

An op by its neutral element (``x + c``, ``x - c``, ``x * c``, ``x / c``, ``x and c``,
``x or c`` with ``c`` proven all ``0``/``1``/``true``/``false``, see :mod:`._uniform`) is such
an expansion too: every output element is an element of ``x`` (RoBERTa's ``And(padding[B,
1, 1, n], arange(n)[:, None] >= 0)``).

From ``Expand(x, s)``, the rule follows every use of the expanded value and of each value
computed from it by an element-wise op, tracking the shape each would have with ``x`` in
place of the expansion (the proven broadcast of the operands' shapes). An op whose output
shape then stays proven equal to its original shape *absorbs* the expansion: its output
is unchanged and nothing past it is touched. Every other op on the way is recreated on
the smaller operands (a rewrite never changes a value it leaves in the model). Any other
use (a graph output, a subgraph, an op outside the list, a shape not proven) keeps the
``Expand``.

Proof relied on: ``Expand(x, s)[i] = x[b(i)]`` and each listed op computes
``out[i] = f(a[b_a(i)], c[b_c(i)], …)`` with broadcast index maps ``b``; composed broadcast
maps are broadcast maps, so with the output shape proven equal every output element reads
the same operand elements as before. ``Gather(data, idx)`` on axis 0 with the expansion in
``idx`` counts as element-wise in ``idx`` (its output is ``idx``'s shape followed by
``data.shape[1:]``, which right-aligned broadcasting keeps together). The ops compute each
element the same whatever the operand layout: ``+ - * /`` (correctly rounded IEEE
operations), comparisons, logical and bitwise ops, ``Where``, ``Neg``, ``Abs``, ``Sign``,
``IsNaN``, ``IsInf``, ``Not``, ``Identity``; ``Min``, ``Max``, ``Mod`` and ``Cast`` on
integers and booleans only (onnxruntime's float ``Min``/``Max`` kernels order ``-0.0`` and
``+0.0`` differently; see :mod:`._broadcast`). An op that can fail on an element (a
``Gather`` index out of range, an integer ``Div``/``Mod`` by 0) is recreated only when the
expansion is empty only where ``x`` is: with a batch of 0 the original computes nothing,
the recreated op would compute on all of ``x``.

Example::

    >>> import onnx_ir as ir
    >>> from onnx_symdims.rewrite import DropExpandBeforeBroadcastPass, analyze
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (bool[1, 1, N, 1] m, float[B, 2, N, N] scores) => (float[B, 2, N, N] y) {
    ...         s = Shape(scores)
    ...         one = Constant<value = int64[1] {1}>()
    ...         b = Shape<end = 1>(scores)
    ...         n = Shape<start = 2, end = 3>(scores)
    ...         target = Concat<axis = 0>(b, one, n, n)
    ...         full = Expand(m, target)
    ...         zero = Constant<value = float {0}>()
    ...         low = Constant<value = float {-1000}>()
    ...         bias = Where(full, zero, low)
    ...         y = Add(scores, bias)
    ...     }
    ... ''')
    >>> drop = DropExpandBeforeBroadcastPass(analyze(model))
    >>> drop(model).modified
    True
    >>> [n.op_type for n in model.graph if n.op_type not in ("Constant", "Shape", "Concat")]
    ['Where', 'Add']
"""

from __future__ import annotations

__all__ = ["DropExpandBeforeBroadcastPass"]

import dataclasses
import heapq
import logging
from collections import Counter

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._broadcast import broadcast_shape
from onnx_symdims.rewrite._facts import (
    INTEGER_AND_BOOL_TYPES,
    FactsPass,
    int_attribute,
    set_type,
)
from onnx_symdims.rewrite._uniform import uniform_value, zero_sign_unseen, zero_signs

logger = logging.getLogger(__name__)

Dim = expr.Dim

#: Ops whose output element is the same function of the operand elements it reads,
#: whatever the operands' layout, for any element type.
_ANY_DTYPE = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "And",
        "Or",
        "Xor",
        "Not",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "Where",
        "Neg",
        "Abs",
        "Sign",
        "IsNaN",
        "IsInf",
        "Identity",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
        "BitShift",
    }
)
#: The same on integers and booleans only.
_INTEGER_ONLY = frozenset({"Min", "Max", "Mod", "Cast"})


#: Ops that are an ``Expand`` of one operand when the other is all their neutral element:
#: the element and the operand positions it may take (``x - 0``, not ``0 - x``).
_NEUTRAL = {
    "Add": (0, (0, 1)),
    "Sub": (0, (1,)),
    "Mul": (1, (0, 1)),
    "Div": (1, (1,)),
    "And": (True, (0, 1)),
    "Or": (False, (0, 1)),
}

#: The sign bit of the zero that keeps every sign: ``x + (-0.0)``, ``x - (+0.0)`` are ``x``
#: bit for bit; ``x + (+0.0)`` turns ``-0.0`` into ``+0.0``.
_EXACT_ZERO_SIGN = {"Add": True, "Sub": False}

#: Ops recreated per dropped Expand at most: the walk stays local (no cone of one
#: Expand is walked twice over a long graph).
_MAX_RECOMPUTED = 16


@dataclasses.dataclass
class DropExpandBeforeBroadcastPass(FactsPass):
    """Removes ``Expand(x, s)`` when the element-wise ops reading it give the same outputs from ``x``.

    Args:
        facts: The proven facts of the model (see :func:`~onnx_symdims.rewrite.analyze`).

        exact_floats: Keep the sign of every zero an output can see: a float ``x + 0.0``
            (``x - (-0.0)``) is taken for ``x`` only where no output sees the sign of a
            zero of its result (:func:`~._uniform.zero_sign_unseen`).

    Attributes:
        fired: ``{"drop_expand_before_broadcast": n}`` (``Expand`` nodes removed).
        declined: Why an ``Expand`` was kept, counted by reason.
    """

    exact_floats: bool = True
    op_types = frozenset({"Expand", *_NEUTRAL})

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.opset_imports.get("", 0) < 8:  # Expand and multidirectional broadcasting
            self.fired = Counter()
            self.declined = Counter()
            return ir.passes.PassResult(model, modified=False)
        self._order = {node: i for i, node in enumerate(model.graph)}
        self._sign_memo: dict[ir.Value, str] = {}
        return super().call(model)

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        if len(node.inputs) != 2 or None in node.inputs:
            return
        x, y = node.inputs[0], node.outputs[0]
        if node.op_type != "Expand":
            x = self._expanded_operand(node)
            if x is None:
                return
            if isinstance(x, str):
                self.declined[x] += 1
                return
        x_shape = self.facts.shape(x)
        if x_shape is None:
            self.declined["the input's shape is not proven"] += 1
            return
        plan = self._plan(graph, y, x_shape)
        if isinstance(plan, str):
            self.declined[plan] += 1
            return
        recomputed, absorbing = plan
        self._rewrite(graph, x, y, recomputed, absorbing)
        graph.remove([*reversed(recomputed), node], safe=True)
        self.fired["drop_expand_before_broadcast"] += 1

    # --------------------------------------------------------------------------------
    def _plan(
        self, graph: ir.Graph, y: ir.Value, x_shape: tuple[Dim, ...]
    ) -> tuple[list[ir.Node], list[ir.Node]] | str:
        """The ops to recreate (in graph order) and the ops absorbing the expansion, or why not."""
        facts = self.facts
        smaller: dict[ir.Value, tuple[Dim, ...]] = {y: x_shape}
        recomputed: list[ir.Node] = []
        absorbing: list[ir.Node] = []
        pending: list[tuple[int, int, ir.Node]] = []
        queued: set[ir.Node] = set()

        def follow(value: ir.Value) -> str | None:
            if value.is_graph_output():
                return "an expanded value is a graph output"
            for user, _ in value.uses():
                if user in queued:
                    continue
                if user.graph is not graph:
                    return "an expanded value is read in a subgraph"
                if user not in self._order:
                    return "an expanded value reaches an op made in this round"
                queued.add(user)
                heapq.heappush(pending, (self._order[user], id(user), user))
            return None

        if (why := follow(y)) is not None:
            return why
        while pending:
            _, _, user = heapq.heappop(pending)
            new_shape = self._shape_without(user, smaller)
            if isinstance(new_shape, str):
                return new_shape
            out = user.outputs[0]
            old_shape = facts.shape(out)
            if old_shape is None:
                return "an output shape is not proven"
            if facts.same_shape(new_shape, old_shape):
                absorbing.append(user)
                continue
            if len(recomputed) == _MAX_RECOMPUTED:
                return f"more than {_MAX_RECOMPUTED} ops before the expansion is absorbed"
            if self._may_fail(user) and not self._keeps_every_element(x_shape, y):
                return (
                    "an op that may fail on an element would run where the expansion is empty"
                )
            recomputed.append(user)
            smaller[out] = new_shape
            if (why := follow(out)) is not None:
                return why
        if not absorbing:
            return "no op absorbs the expansion"
        return recomputed, absorbing

    def _expanded_operand(self, node: ir.Node) -> ir.Value | str | None:
        """``x`` of ``op(x, c)`` whose ``c`` is all the op's neutral element, else ``None``.

        Every output element is then an element of ``x`` (``x + 0``, ``x * 1``, ``x and
        true``, …): the op is ``Expand(x)`` to the broadcast shape. A float ``x + 0.0``
        turns ``-0.0`` into ``+0.0``: with :attr:`exact_floats` it counts only when no
        output sees the sign of a zero of the result (else the reason, a ``str``).
        """
        neutral, positions = _NEUTRAL[node.op_type]
        for i in positions:
            c = node.inputs[i]
            uniform = uniform_value(self.facts, c)
            if uniform is not None and bool(uniform == neutral):
                x = node.inputs[1 - i]
                if self.facts.dtype(x) == self.facts.dtype(node.outputs[0]):
                    return self._sign_kept(node, x, c)
        return None

    def _sign_kept(self, node: ir.Node, x: ir.Value, c: ir.Value) -> ir.Value | str:
        """``x``, or why a float ``x + 0.0`` may show an output another sign of zero."""
        if (
            not self.exact_floats
            or node.op_type not in _EXACT_ZERO_SIGN
            or self.facts.dtype(x) in INTEGER_AND_BOOL_TYPES
            or zero_signs(self.facts, c) == {_EXACT_ZERO_SIGN[node.op_type]}
        ):
            return x
        why = zero_sign_unseen(self.facts, node.outputs[0], node.graph, self._sign_memo)
        return f"float x + 0.0 is +0.0 at x = -0.0 and {why}" if why else x

    def _may_fail(self, node: ir.Node) -> bool:
        """Whether ``node`` can fail on some element (an index out of range, ``x // 0``)."""
        if node.op_type == "Gather":
            return True
        return (
            node.op_type in ("Div", "Mod")
            and self.facts.dtype(node.outputs[0]) in INTEGER_AND_BOOL_TYPES
        )

    def _keeps_every_element(self, x_shape: tuple[Dim, ...], y: ir.Value) -> bool:
        """True when ``Expand(x) -> y`` is empty only where ``x`` is.

        A recreated op runs on ``x``'s elements; the original ran on ``y``'s, none at all
        when ``y`` is empty (a batch of 0). An op that may fail on an element is recreated
        only when each dim of ``y`` is proven ``>= 1`` or is ``x``'s own dim.
        """
        facts = self.facts
        y_shape = facts.shape(y)
        if y_shape is None:
            return False
        offset = len(y_shape) - len(x_shape)
        return all(
            facts.at_least(d, 1) or (k >= offset and facts.same_dim(x_shape[k - offset], d))
            for k, d in enumerate(y_shape)
        )

    def _shape_without(
        self, node: ir.Node, smaller: dict[ir.Value, tuple[Dim, ...]]
    ) -> tuple[Dim, ...] | str:
        """``node``'s output shape with the smaller operands, or why it is not proven."""
        facts = self.facts
        op = node.op_type
        if node.domain != "" or len(node.outputs) != 1:
            return f"an expanded value reaches {node.domain or 'ai.onnx'}.{op}"
        if op == "Gather":
            data, indices = [*node.inputs, None, None][:2]
            if data is None or indices is None or data in smaller:
                return "an expanded value is gathered from"
            data_shape = facts.shape(data)
            axis = int_attribute(node, "axis", 0)
            if data_shape is None or not data_shape or axis not in (0, -len(data_shape)):
                return "an expanded value indexes a Gather on an axis other than 0"
            return (*smaller[indices], *data_shape[1:])
        if op in _INTEGER_ONLY:
            dtypes = [facts.dtype(v) for v in (*node.inputs, node.outputs[0]) if v is not None]
            if not all(t in INTEGER_AND_BOOL_TYPES for t in dtypes):
                return f"an expanded value reaches {op} of floats"
        elif op not in _ANY_DTYPE:
            return f"an expanded value reaches {op}"
        shapes = []
        for value in node.inputs:
            if value is None:
                return f"{op} has a missing input"
            shape = smaller.get(value)
            if shape is None:
                shape = facts.shape(value)
            if shape is None:
                return "an operand shape is not proven"
            shapes.append(shape)
        broadcast = broadcast_shape(facts, shapes)
        if broadcast is None:
            return "the broadcast without the expansion is not proven"
        return broadcast

    def _rewrite(
        self,
        graph: ir.Graph,
        x: ir.Value,
        y: ir.Value,
        recomputed: list[ir.Node],
        absorbing: list[ir.Node],
    ) -> None:
        replacement: dict[ir.Value, ir.Value] = {y: x}
        for node in recomputed:
            new = ir.Node(
                node.domain,
                node.op_type,
                [replacement.get(v, v) if v is not None else None for v in node.inputs],
                attributes=list(node.attributes.values()),
                version=node.version,
            )
            old = node.outputs[0]
            out = new.outputs[0]
            set_type(out, self.facts.dtype(old))
            out.name = f"{old.name}_unexpanded" if old.name else None
            graph.insert_before(node, new)
            replacement[old] = out
        for node in absorbing:
            for i, value in enumerate(node.inputs):
                if value in replacement:
                    node.replace_input_with(i, replacement[value])
