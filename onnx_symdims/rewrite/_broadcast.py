"""Lets an element-wise op broadcast a one-element constant instead of an ``Expand`` of it.

``Min(x, Expand(3, Shape(x)))`` (``torch.full_like(x, 3)``) computes every output element
as ``min(x[i], 3)``; so does ``Min(x, 3)``, whose broadcasting repeats the 3 for every
element. When the operand is ``Expand(c, s)`` or ``ConstantOfShape(s)`` of a one-element
constant ``c`` (or any value :func:`~._uniform.uniform_value` proves all ``c``, e.g. the
mask ``Where(arange(n) >= 0, 0.0, -inf)``), every one of its elements is ``c``, and the op's output keeps its value
as long as its shape does: the output shape with ``c`` in place of the expanded operand
(the broadcast of the other operands' proven shapes and ``c``'s) must be proven equal to
the original output's. The ``Expand`` (and the ``Shape`` that computed its target) then
usually has no other use and is removed (``Add(scores, zeros)`` of T5's cross-attention
bias then meets ``AddByZero``).

Only ops whose every output element is the same function of the two operand elements,
whatever kernel onnxruntime picks for a scalar operand: ``+ - * /`` (IEEE operations,
correctly rounded), comparisons, logical and bitwise ops, ``Where``; ``Min``, ``Max`` and
``Mod`` on integers only (onnxruntime's scalar and tensor ``Min``/``Max`` kernels order
``-0.0`` and ``+0.0`` differently). ``Pow`` is left out: a scalar exponent takes
onnxruntime's ``x * x * x`` fast path, which rounds unlike ``pow``.

Proof relied on: ``c``'s one element (a constant, never an overridable input) and the
proven shapes of the other operands and the output (:class:`~onnx_symdims.rewrite.ShapeFacts`).
"""

from __future__ import annotations

__all__ = ["BroadcastScalarOperandsPass"]

import dataclasses
import logging
from collections import Counter

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import INTEGER_TYPES, ShapeFacts, constant_tensor
from onnx_symdims.rewrite._uniform import uniform_value

logger = logging.getLogger(__name__)

Dim = expr.Dim

#: Element-wise ops with multidirectional broadcasting whose result per element does not
#: depend on how the operands are laid out.
_ANY_DTYPE = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "And",
        "Or",
        "Xor",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "Where",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitShift",
    }
)
#: Exact on integers; on floats onnxruntime's kernels may differ in the sign of a zero.
_INTEGER_ONLY = frozenset({"Min", "Max", "Mod"})


def broadcast_shape(
    facts: ShapeFacts, shapes: list[tuple[Dim, ...]]
) -> tuple[Dim, ...] | None:
    """The multidirectional broadcast of ``shapes``, or ``None`` when not proven.

    Each output dim is the one dim left after dropping the proven 1s, all others proven
    equal to it (``1`` when every dim is 1).
    """
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for k in range(rank, 0, -1):
        dims = [s[len(s) - k] for s in shapes if len(s) >= k]
        kept = [d for d in dims if not (isinstance(d, int) and d == 1)]
        if not kept:
            out.append(1)
            continue
        first = kept[0]
        if not all(facts.same_dim(first, d) for d in kept[1:]):
            return None
        out.append(first)
    return tuple(out)


@dataclasses.dataclass
class BroadcastScalarOperandsPass(ir.passes.InPlacePass):
    """Replaces an element-wise op's operand ``Expand(c, s)`` (``ConstantOfShape(s)``) of a one-element constant ``c`` by ``c`` when the output shape is proven unchanged.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"broadcast_scalar_operand": n}`` (operands replaced).
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
            op_type = node.op_type  # first: most nodes are of neither kind
            if op_type not in _ANY_DTYPE and op_type not in _INTEGER_ONLY:
                continue
            if node.graph is None or node.domain != "" or not node.outputs:
                continue
            candidates = {}
            for i, value in enumerate(node.inputs):
                scalar = self._scalar_of(value)
                if scalar is not None:
                    candidates[i] = scalar
            if not candidates:
                continue
            if (
                node.op_type in _INTEGER_ONLY
                and self.facts.dtype(node.outputs[0]) not in INTEGER_TYPES
            ):
                self.declined[
                    f"{node.op_type} of floats (kernels may differ in a zero's sign)"
                ] += 1
                continue
            self._replace(graph, node, candidates)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _scalar_of(self, value: ir.Value | None) -> ir.TensorProtocol | ir.Value | None:
        """The one-element constant every element of ``value`` equals, or ``None``.

        An ``Expand`` gives its constant input (a value); a ``ConstantOfShape`` its
        ``value`` attribute (a tensor; float 0 by default).
        """
        producer = value.producer() if value is not None else None
        if producer is None or producer.domain != "":
            return None
        if producer.op_type == "Expand" and len(producer.inputs) == 2:
            c = producer.inputs[0]
            tensor = constant_tensor(c) if c is not None else None
            if tensor is None or tensor.size != 1:
                return None
            return c
        if producer.op_type == "ConstantOfShape":
            attr = producer.attributes.get("value")
            if attr is None:
                return ir.tensor(0.0, dtype=ir.DataType.FLOAT)
            if attr.type is not ir.AttributeType.TENSOR or attr.value.size != 1:
                return None  # malformed: inference reported it
            return ir.tensor(attr.value.numpy().reshape(()))
        if producer.op_type == "Constant" and _one_element(value):
            return None
        uniform = uniform_value(self.facts, value)  # a mask Where(arange(n) >= 0, 0, -inf)
        return None if uniform is None else ir.tensor(uniform)

    def _replace(self, graph: ir.Graph, node: ir.Node, candidates: dict) -> None:
        facts = self.facts
        y = node.outputs[0]
        result = facts.shape(y)
        shapes = [facts.shape(v) for v in node.inputs]
        if result is None:
            self.declined["the output rank is not proven"] += 1
            return
        # All candidates at once, else each alone (the others may be needed for the shape).
        for chosen in [list(candidates)] + (
            [[i] for i in candidates] if len(candidates) > 1 else []
        ):
            new_shapes = []
            for i, shape in enumerate(shapes):
                if i in chosen:
                    scalar = candidates[i]
                    shape = facts.shape(scalar) if isinstance(scalar, ir.Value) else ()
                if shape is None:
                    break
                new_shapes.append(shape)
            else:
                broadcast = broadcast_shape(facts, new_shapes)
                if broadcast is not None and facts.same_shape(broadcast, result):
                    for i in chosen:
                        self._use_scalar(graph, node, i, candidates[i])
                    return
        self.declined["the output shape without the expansion is not proven equal"] += 1

    def _use_scalar(self, graph: ir.Graph, node: ir.Node, i: int, scalar) -> None:
        if not isinstance(scalar, ir.Value):
            const = ir.node("Constant", [], attributes={"value": scalar})
            graph.insert_before(node, const)
            scalar = const.outputs[0]
        node.replace_input_with(i, scalar)
        self.fired["broadcast_scalar_operand"] += 1


def _one_element(value: ir.Value) -> bool:
    tensor = constant_tensor(value)
    return tensor is not None and tensor.size == 1
