"""Drops a reshape into a layout and the reshapes back out of it around element-wise ops.

GPT-2's ``Conv1D`` (TorchScript exports) flattens to 2-D for its ``Gemm`` and views the
result back to 3-D: ``Reshape(Gemm, [b, s, 4h])``, the GELU's ``Mul``/``Pow``/``Tanh``
on it, then the next ``Conv1D``'s ``Reshape(_, [-1, 4h])``. The GELU computes the same
elements on the 2-D ``Gemm`` output: both reshapes go (two nodes per layer; onnxsim's
fixed-shape mode removes them, onnxslim does not).

Proof relied on: ``Reshape``, ``Flatten``, ``Squeeze`` and ``Unsqueeze`` keep the row-major
order of the elements and only relabel their positions. An element-wise op whose other
operands each hold one element (of rank at most the input's, so broadcasting grows
neither layout) computes each output element from the element at the same flat position,
the same scalar op on the same values (bit for bit; onnxruntime picks its kernels by the
flat sizes and which operands hold one element, the same in both layouts). So
``f(R1(x)) = R1'(f(x))`` for the relabelling ``R1'`` of ``R1``, and a reshape-like op whose
output shape is proven equal to ``x``'s turns ``R1'(f(x))`` back into ``f(x)``, the same
elements in the same order; one whose shape is ``x``'s with size-1 axes inserted (or
removed) is an ``Unsqueeze`` (``Squeeze``) of ``f(x)``, the other dims proven equal in
order.
"""

from __future__ import annotations

__all__ = ["ReshapesAroundElementwisePass"]

import logging

import onnx_ir as ir

from onnx_symdims.rewrite._facts import FactsPass, is_literal_one, set_type, take_over
from onnx_symdims.rewrite._layout import size_one_axes, size_one_axes_nodes

logger = logging.getLogger(__name__)

#: Ops that only relabel element positions (row-major order kept).
_RESHAPE_LIKE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})

#: Ops (default domain) whose output element at each position is a function of the
#: operand elements at that position after broadcasting, with no attribute naming an axis.
_ELEMENTWISE = frozenset(
    {
        "Abs",
        "Acos",
        "Acosh",
        "Add",
        "And",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "BitShift",
        "BitwiseAnd",
        "BitwiseNot",
        "BitwiseOr",
        "BitwiseXor",
        "Cast",
        "Ceil",
        "Celu",
        "Clip",
        "Cos",
        "Cosh",
        "Div",
        "Elu",
        "Equal",
        "Erf",
        "Exp",
        "Floor",
        "Gelu",
        "Greater",
        "GreaterOrEqual",
        "HardSigmoid",
        "HardSwish",
        "Identity",
        "IsInf",
        "IsNaN",
        "LeakyRelu",
        "Less",
        "LessOrEqual",
        "Log",
        "Max",
        "Min",
        "Mish",
        "Mod",
        "Mul",
        "Neg",
        "Not",
        "Or",
        "Pow",
        "Reciprocal",
        "Relu",
        "Round",
        "Selu",
        "Sigmoid",
        "Sign",
        "Sin",
        "Sinh",
        "Softplus",
        "Softsign",
        "Sqrt",
        "Sub",
        "Tan",
        "Tanh",
        "Where",
        "Xor",
    }
)

#: Element-wise nodes recreated per reshape at most: the walk stays local.
_MAX_REGION = 32


class ReshapesAroundElementwisePass(FactsPass):
    """Replaces ``R2(f(R1(x)))`` by ``f(x)`` when ``R2`` gives back ``x``'s shape.

    ``R1`` and ``R2`` are reshape-like (``Reshape``, ``Flatten``, ``Squeeze``,
    ``Unsqueeze``); ``f`` is a connected set of element-wise ops (``Add``, ``Mul``,
    ``Tanh``, ``Where``, ``Cast``, ...) reading ``R1(x)``, each other operand proven to hold
    one element with a rank at most ``x``'s; every use of a value of ``f`` is another op
    of ``f`` or such an ``R2`` (several allowed), none is a graph output. ``f``'s nodes are
    recreated on ``x``; ``R1`` and every ``R2`` go.

    Example::

        >>> import onnx_ir as ir
        >>> from onnx_symdims.rewrite import ReshapesAroundElementwisePass, analyze
        >>> model = ir.from_onnx_text('''
        ...     <ir_version: 10, opset_import: ["" : 18]>
        ...     g (float[N, 8] x) => (float[N, 8] y) {
        ...         t3 = Constant<value = int64[3] {0, 2, 4}>()
        ...         r = Reshape(x, t3)
        ...         g = Tanh(r)
        ...         t2 = Constant<value = int64[2] {-1, 8}>()
        ...         y = Reshape(g, t2)
        ...     }''')
        >>> ReshapesAroundElementwisePass(analyze(model))(model).modified
        True
        >>> [n.op_type for n in model.graph if n.op_type != "Constant"]
        ['Tanh']

    Attributes:
        fired: ``{"reshapes_around_elementwise": n}`` (``R1`` nodes removed, with their
            ``R2``).
        declined: Why candidates were kept, counted by reason.
    """

    op_types = _RESHAPE_LIKE

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        x, y = node.inputs[0] if node.inputs else None, node.outputs[0]
        if x is None or y.is_graph_output():
            return
        if not any(_elementwise(use.node, graph) for use in y.uses()):
            return
        x_shape, y_shape = self.facts.shape(x), self.facts.shape(y)
        if x_shape is None or y_shape is None:
            self.declined["the shapes around the reshape are not proven"] += 1
            return
        if all(is_literal_one(d) for d in x_shape):
            # one element (a scalar in shape arithmetic): LiftScalarArithmetic's domain
            self.declined["one element"] += 1
            return
        region = self._region(graph, y)
        if region is None:
            return
        nodes, ends = region
        inside = {y}.union(*(n.outputs for n in nodes))
        for n in nodes:
            for value in n.inputs:
                if value is None or value in inside:
                    continue
                if not self._one_element(value, len(x_shape)):
                    self.declined["an operand of the element-wise ops is not one element"] += 1
                    return
            if self.facts.shape(n.outputs[0]) != y_shape:
                self.declined[
                    "an element-wise result's shape is not proven the reshaped one"
                ] += 1
                return
        plans: dict[ir.Node, tuple[str, list[int]] | None] = {}
        for end in ends:
            end_shape = self.facts.shape(end.outputs[0])
            if end_shape is None:
                self.declined["a reshape back is not proven to give the input's shape"] += 1
                return
            if self.facts.same_shape(end_shape, x_shape):
                plans[end] = None  # the end goes
                continue
            # x's shape with size-1 axes inserted or removed: one Unsqueeze or Squeeze
            plans[end] = size_one_axes(self.facts, x_shape, end_shape)
            if plans[end] is None or end.inputs[0] is y:
                self.declined["a reshape back is not proven to give the input's shape"] += 1
                return
        if sum(end.outputs[0].is_graph_output() for end in ends) > 1:
            # a recreated value keeps one graph output's name at most
            self.declined["two reshapes back are graph outputs"] += 1
            return
        ordered = _topological(nodes, y)
        if ordered is None:
            self.declined["the element-wise ops form a cycle"] += 1
            return
        self._rewrite(graph, node, ordered, plans)

    def _region(
        self, graph: ir.Graph, y: ir.Value
    ) -> tuple[list[ir.Node], list[ir.Node]] | None:
        """The element-wise nodes reading ``y`` transitively, and the reshapes back."""
        nodes: list[ir.Node] = []
        seen: set[ir.Node] = set()
        ends: list[ir.Node] = []
        pending = [y]
        while pending:
            value = pending.pop()
            if value.is_graph_output():
                self.declined["an element-wise result is a graph output"] += 1
                return None
            for use in value.uses():
                user = use.node
                if user in seen:
                    continue
                seen.add(user)
                if _elementwise(user, graph):
                    if len(nodes) == _MAX_REGION:
                        self.declined["too many element-wise ops"] += 1
                        return None
                    nodes.append(user)
                    pending.extend(user.outputs)
                elif (
                    user.op_type in _RESHAPE_LIKE
                    and user.domain == ""
                    and user.graph is graph
                    and use.idx == 0
                    and all(v is not value for v in user.inputs[1:])
                    # x itself cannot take a graph output's name (x may be an input)
                    and not (value is y and user.outputs[0].is_graph_output())
                ):
                    ends.append(user)
                else:
                    self.declined["an element-wise result has another use"] += 1
                    return None
        if not ends:
            self.declined["no reshape back"] += 1
            return None
        return nodes, ends

    def _one_element(self, value: ir.Value, rank: int) -> bool:
        shape = self.facts.shape(value)
        return (
            shape is not None and len(shape) <= rank and all(is_literal_one(d) for d in shape)
        )

    def _rewrite(
        self,
        graph: ir.Graph,
        reshape: ir.Node,
        nodes: list[ir.Node],
        plans: dict[ir.Node, tuple[str, list[int]] | None],
    ) -> None:
        x, y = reshape.inputs[0], reshape.outputs[0]
        ends = list(plans)
        # ``nodes`` producers first, each recreated right before its original: its
        # operands (``x``, one-element values, earlier recreated ones) are computed by then.
        renamed: dict[ir.Value, ir.Value] = {y: x}
        for old in nodes:
            new = ir.Node(
                "",
                old.op_type,
                [renamed.get(v, v) if v is not None else None for v in old.inputs],
                attributes=list(old.attributes.values()),
                version=old.version,
                name=f"{old.name}_relaid" if old.name else None,
            )
            graph.insert_before(old, new)
            out, new_out = old.outputs[0], new.outputs[0]
            set_type(new_out, self.facts.dtype(out))
            renamed[out] = new_out
        # A graph output's end last: the recreated value then keeps its name.
        for end in sorted(ends, key=lambda e: e.outputs[0].is_graph_output()):
            if end.inputs[0] is y:  # R2(R1(x)) next to the element-wise uses: x itself
                end.outputs[0].replace_all_uses_with(x)
                continue
            value = renamed[end.inputs[0]]
            plan = plans[end]
            if plan is not None:  # an Unsqueeze/Squeeze of the recreated value instead
                added = size_one_axes_nodes(graph, value, plan)
                graph.insert_before(end, added)
                value = added[-1].outputs[0]
                set_type(value, self.facts.dtype(end.outputs[0]))
            # a recreated value whose dtype is unknown stays untyped (see set_type)
            set_type(value, value.dtype, end.outputs[0].shape)
            take_over(end.outputs[0], value, "relaid")
        graph.remove([*ends, *reversed(nodes), reshape], safe=True)
        self.fired["reshapes_around_elementwise"] += 1


def _elementwise(node: ir.Node, graph: ir.Graph) -> bool:
    return (
        node.op_type in _ELEMENTWISE
        and node.domain == ""
        and node.graph is graph
        and len(node.outputs) == 1
    )


def _topological(nodes: list[ir.Node], y: ir.Value) -> list[ir.Node] | None:
    """``nodes`` (each reading ``y`` or another's output) producers first; None on a cycle."""
    ready = {y}
    pending, ordered = list(nodes), []
    inside = set().union(*(n.outputs for n in nodes))
    while pending:
        later = []
        for n in pending:
            if all(v not in inside or v in ready for v in n.inputs):
                ordered.append(n)
                ready.update(n.outputs)
            else:
                later.append(n)
        if len(later) == len(pending):
            return None
        pending = later
    return ordered
