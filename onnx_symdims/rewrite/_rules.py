"""Shape-driven rewrite rules, as onnxscript rewrite rules.

Every rule's ``check`` asks :class:`~onnx_symdims.rewrite.ShapeFacts` for a proof and
records why it declined (``rule.declined``, and onnxscript's ``MatchResult.fail``).
The rules are bound to the facts of one model; :func:`shape_rules` builds the set::

    facts = ShapeFacts.analyze(model)
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=shape_rules(facts))

Values created by a rewrite have no facts; a rule asking about them declines, and the
pipeline analyzes again before its next round.

Float convention: ``x * 1``, ``x / 1``, ``x + (-0.0)`` and ``x - (+0.0)`` are ``x`` bit
for bit. ``x + (+0.0)`` and ``x - (-0.0)`` are not: ``-0.0 + 0.0`` is ``+0.0``, and
``1 / that`` is ``+inf`` where ``1 / x`` is ``-inf``. With ``exact_floats`` (the default)
they become ``x`` only where no output sees the sign of a zero
(:func:`~onnx_symdims.rewrite._uniform.zero_sign_unseen`: the result reaches only graph
outputs, ``Softmax``, comparisons, ... through moving ops); with ``exact_floats=False``
always, like onnxruntime's ``NoopElimination`` (outputs equal under IEEE comparison,
``-0.0 == 0.0``, until an op such as ``Div`` tells the signs apart).
"""

from __future__ import annotations

__all__ = [
    "CastToOwnType",
    "ExpandToOwnShape",
    "MaterializeReshapeTarget",
    "NeutralElement",
    "PadByZeros",
    "ReshapeToOwnShape",
    "SliceCoveringAxes",
    "SqueezeToOwnShape",
    "TileToOwnShape",
    "ShapeRulesPass",
    "WhereOnProvenCondition",
    "constant_reshape_target",
    "rule_objects",
    "shape_rules",
]

import logging
from collections import Counter

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import pattern
from onnxscript.rewriter._basics import MatchResult

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import (
    INTEGER_AND_BOOL_TYPES,
    ShapeFacts,
    constant_tensor,
    int_attribute,
    keep_output_type,
)
from onnx_symdims.rewrite._uniform import uniform_value, zero_sign_unseen, zero_signs
from onnx_symdims.shapes import direct_subgraphs

logger = logging.getLogger(__name__)

Dim = expr.Dim


class _FactsRule(pattern.RewriteRuleClassBase):
    """A rule whose checks ask ``facts``; counts what fired and why it declined.

    A rule runs two ways: as an onnxscript rule (``pattern``/``check``/``rewrite``, see
    :func:`shape_rules`) and in :class:`ShapeRulesPass`, which dispatches each node to
    the rules of its op type, binds the node's inputs by position (``inputs``) and its
    first output as ``y``, asks the same ``check`` and applies :meth:`apply`.
    """

    #: The op types the rule looks at (default domain).
    op_types: tuple[str, ...] = ()
    #: Names the node's inputs are bound to, by position (missing inputs bind ``None``).
    inputs: tuple[str, ...] = ("x",)
    #: How many leading inputs the pattern requires.
    required: int = 1

    def __init__(self, facts: ShapeFacts) -> None:
        super().__init__(type(self).__name__)
        self.facts = facts
        self.fired = 0
        #: The model's main graph, when known (set by :class:`ShapeRulesPass`; onnxscript
        #: gives it in the match context).
        self.main_graph: ir.Graph | None = None
        #: Answers of ``zero_sign_unseen`` shared by the rules of one pass (see there).
        self.sign_memo: dict[ir.Value, str] | None = None
        self.declined: Counter = Counter()

    def _fail(self, reason: str) -> MatchResult:
        self.declined[reason] += 1
        return MatchResult().fail(reason)

    def _same_shape_as_input(self, x: ir.Value, y: ir.Value) -> MatchResult:
        facts = self.facts
        if facts.dtype(x) != facts.dtype(y) or facts.dtype(x) is None:
            return self._fail("input and output dtypes are not proven equal")
        if not facts.same_shape(facts.shape(x), facts.shape(y)):
            return self._fail("output shape is not proven equal to the input shape")
        return MatchResult()

    def bind(self, node: ir.Node) -> dict[str, ir.Value | None] | None:
        """The pattern variables for ``node``, or ``None`` when its arity does not fit."""
        given = node.inputs
        if len(given) < self.required or any(v is None for v in given[: self.required]):
            return None
        bindings = {
            name: (given[i] if i < len(given) else None) for i, name in enumerate(self.inputs)
        }
        bindings["y"] = node.outputs[0]
        return bindings

    def forward(self, **bindings) -> ir.Value:
        """The value that replaces ``y`` (rules that only forward an input)."""
        return bindings["x"]

    def rewrite(self, op, **bindings):
        self.fired += 1
        return op.Identity(self.forward(**bindings))

    def apply(self, graph: ir.Graph, node: ir.Node, bindings: dict) -> bool:
        """Applies the rewrite in place of onnxscript's replacement; True when done.

        A graph output keeps its name: the forwarded value takes it over, unless that
        value is itself a graph input or output (it keeps its own name; an ``Identity``
        would be needed, which saves nothing).
        """
        y = bindings["y"]
        x = self.forward(**bindings)
        if y.is_graph_output():
            producer = x.producer()
            # A graph (or branch) output cannot be a graph input, another output, an
            # initializer or a value of an enclosing scope (onnxruntime refuses a
            # subgraph that returns an outer value directly).
            if (
                x.is_graph_input()
                or x.is_graph_output()
                or x.is_initializer()
                or producer is None
                or producer.graph is not node.graph
            ):
                self.declined[
                    "the output is a graph output fed by a value of another scope"
                ] += 1
                return False
            name = y.name
            keep_output_type(y, x)
            y.replace_all_uses_with(x, replace_graph_outputs=True)
            y.name, x.name = None, name
        else:
            y.replace_all_uses_with(x)
        self.fired += 1
        return True


class ExpandToOwnShape(_FactsRule):
    """Replaces ``Expand(x, s)`` by ``x`` when the output shape is proven equal to ``x``'s."""

    op_types = ("Expand",)
    inputs = ("x", "s")
    required = 2

    def pattern(self, op, x, s):
        return op.Expand(x, s, _outputs=["y"])

    def check(self, context, x, s, y, **_):
        return self._same_shape_as_input(x, y)


class TileToOwnShape(_FactsRule):
    """Replaces ``Tile(x, r)`` by ``x`` when the output shape is proven equal to ``x``'s."""

    op_types = ("Tile",)
    inputs = ("x", "r")
    required = 2

    def pattern(self, op, x, r):
        return op.Tile(x, r, _outputs=["y"])

    def check(self, context, x, r, y, **_):
        return self._same_shape_as_input(x, y)


class ReshapeToOwnShape(_FactsRule):
    """Replaces ``Reshape(x, s)`` by ``x`` when the output shape is proven equal to ``x``'s.

    A reshape keeps the row-major order of the elements, so equal shapes mean an equal
    tensor.
    """

    op_types = ("Reshape",)
    inputs = ("x", "s")
    required = 2

    def pattern(self, op, x, s):
        return op.Reshape(x, s, _allow_other_attributes=True, _outputs=["y"])

    def check(self, context, x, s, y, **_):
        return self._same_shape_as_input(x, y)


class SqueezeToOwnShape(_FactsRule):
    """Replaces ``Flatten(x)`` (or another reshape-like op) by ``x`` on proven equal shapes."""

    def __init__(self, facts: ShapeFacts, op_type: str) -> None:
        super().__init__(facts)
        self.name = f"{op_type}ToOwnShape"
        self._op_type = op_type
        self.op_types = (op_type,)

    def pattern(self, op, x):
        return getattr(op, self._op_type)(
            x, _allow_other_inputs=True, _allow_other_attributes=True, _outputs=["y"]
        )

    def check(self, context, x, y, **_):
        return self._same_shape_as_input(x, y)


class SliceCoveringAxes(_FactsRule):
    """Replaces ``Slice(x, ...)`` by ``x`` when every step is 1 and the shape is unchanged.

    With step 1 a slice keeps a contiguous run of each axis; keeping as many elements
    as the axis has means keeping all of them, in order.
    """

    op_types = ("Slice",)

    def pattern(self, op, x):
        return op.Slice(x, _allow_other_inputs=True, _outputs=["y"])

    def check(self, context, x, y, **_):
        node = y.producer()
        steps = node.inputs[4] if len(node.inputs) > 4 else None
        if steps is not None:
            elements = self.facts.int_elements(steps)
            if elements is None or any(e != 1 for e in elements):
                return self._fail("steps are not proven to be all 1")
        return self._same_shape_as_input(x, y)


class PadByZeros(_FactsRule):
    """Replaces ``Pad(x, pads)`` by ``x`` when every pad is proven 0."""

    op_types = ("Pad",)
    inputs = ("x", "pads")
    required = 2

    def pattern(self, op, x, pads):
        return op.Pad(
            x, pads, _allow_other_inputs=True, _allow_other_attributes=True, _outputs=["y"]
        )

    def check(self, context, x, pads, y, **_):
        elements = self.facts.int_elements(pads)
        if elements is None or any(e != 0 for e in elements):
            return self._fail("pads are not proven to be all 0")
        return self._same_shape_as_input(x, y)


class CastToOwnType(_FactsRule):
    """Replaces ``Cast(x, to=t)`` by ``x`` when ``x``'s dtype is proven to be ``t``."""

    op_types = ("Cast",)

    def pattern(self, op, x):
        return op.Cast(x, _allow_other_attributes=True, _outputs=["y"])

    def check(self, context, x, y, **_):
        to = int_attribute(y.producer(), "to")
        dtype = self.facts.dtype(x)
        if to is None or dtype is None or to != dtype.value:
            return self._fail("the input dtype is not proven equal to 'to'")
        return MatchResult()


class WhereOnProvenCondition(_FactsRule):
    """Replaces ``Where(c, a, b)`` by ``a`` (``b``) when ``c`` is proven all true (false).

    The output shape must be proven equal to the chosen operand's.
    """

    op_types = ("Where",)
    inputs = ("c", "a", "b")
    required = 3

    def pattern(self, op, c, a, b):
        return op.Where(c, a, b, _outputs=["y"])

    def check(self, context, c, a, b, y, **_):
        elements = self.facts.int_elements(c)
        if elements is None:
            uniform = uniform_value(self.facts, c)
            elements = None if uniform is None else (bool(uniform),)
        if elements is None or not elements:
            return self._fail("the condition is not proven constant")
        if all(elements):
            self._chosen = a
        elif not any(elements):
            self._chosen = b
        else:
            return self._fail("the condition is proven but mixed")
        return self._same_shape_as_input(self._chosen, y)

    def forward(self, **bindings) -> ir.Value:
        return self._chosen


class NeutralElement(_FactsRule):
    """Replaces ``x * 1``, ``x / 1``, ``x + 0``, ``x - 0`` (``1 * x``, ``0 + x``) by ``x``.

    Also the boolean ``And(x, true)`` and ``Or(x, false)``, either operand order (``x and
    true`` is ``x``, ``x or false`` is ``x``, for every element). The output shape must be
    proven equal to ``x``'s (the constant broadcasts away).

    Float ``x + 0.0`` and ``x - (-0.0)`` turn ``-0.0`` into ``+0.0``; with
    ``exact_floats`` they become ``x`` only when no output sees the sign of a zero of the
    result (:func:`~onnx_symdims.rewrite._uniform.zero_sign_unseen`). ``x + (-0.0)`` and
    ``x - 0.0`` are ``x`` bit for bit, as are ``x * 1`` and ``x / 1``.
    """

    _NEUTRAL = {"Mul": 1, "Div": 1, "Add": 0, "Sub": 0, "And": True, "Or": False}
    #: The sign bit of the zero that keeps every sign (``x + (-0.0)``, ``x - (+0.0)``).
    _EXACT_ZERO_SIGN = {"Add": True, "Sub": False}

    def __init__(
        self,
        facts: ShapeFacts,
        op_type: str,
        constant_first: bool = False,
        exact_floats: bool = True,
    ) -> None:
        super().__init__(facts)
        self.exact_floats = exact_floats
        self._op_type = op_type
        self._constant_first = constant_first
        self.op_types = (op_type,)
        self.inputs = ("c", "x") if constant_first else ("x", "c")
        self.required = 2
        neutral = self._NEUTRAL[op_type]
        word = (
            ("True" if neutral else "False")
            if isinstance(neutral, bool)
            else ("One" if neutral else "Zero")
        )
        self.name = f"{op_type}By{word}" + ("Commuted" if constant_first else "")

    def pattern(self, op, x, c):
        build = getattr(op, self._op_type)
        return (
            build(c, x, _outputs=["y"])
            if self._constant_first
            else build(x, c, _outputs=["y"])
        )

    def check(self, context, x, c, y, **_):
        neutral = self._NEUTRAL[self._op_type]
        if not _all_equal_to(self.facts, c, neutral):
            return self._fail(f"the other operand is not proven to be all {neutral}")
        result = self._same_shape_as_input(x, y)
        if not result or not self.exact_floats or self._op_type not in ("Add", "Sub"):
            return result
        if self.facts.dtype(y) in INTEGER_AND_BOOL_TYPES:
            return result
        if zero_signs(self.facts, c) == {self._EXACT_ZERO_SIGN[self._op_type]}:
            return result  # x + (-0.0), x - (+0.0): every sign kept
        model = getattr(context, "model", None)
        main = model.graph if model is not None else self.main_graph
        why = zero_sign_unseen(self.facts, y, main, self.sign_memo)
        if why:
            return self._fail(f"float x + 0.0 is +0.0 at x = -0.0 and {why}")
        return result


def _all_equal_to(facts: ShapeFacts, value: ir.Value, target: int) -> bool:
    tensor = constant_tensor(value)
    if tensor is not None:
        if tensor.size > 1 << 16:
            return False  # weights-sized: not a neutral element worth reading
        array = tensor.numpy()
        return bool(np.all(array == target))
    elements = facts.int_elements(value)
    if elements is not None:
        return all(e == target for e in elements)
    uniform = uniform_value(facts, value)  # e.g. a mask Where(arange(n) >= 0, 0.0, -inf)
    return uniform is not None and bool(uniform == target)


def constant_reshape_target(
    facts: ShapeFacts, source: tuple[Dim, ...], result: tuple[Dim, ...]
) -> tuple[list[int] | None, str]:
    """A constant ``Reshape`` target (``allowzero=0``) turning ``source`` into ``result``.

    Output dim ``j`` becomes its int, ``0`` (copy) where it is proven equal to input dim
    ``j``, or ``-1`` — at most once, and only when the other output dims are proven
    ``>= 1`` (onnxruntime, like the spec, cannot infer a ``-1`` next to a zero-size
    dim, which the original computed target handled).

    Returns:
        The target (or ``None``) and the reason when there is none.
    """
    target: list[int] = []
    minus_one = None
    for j, d in enumerate(result):
        if isinstance(d, int):
            if d == 0:
                return None, "an output dim is 0 (0 would copy an input dim)"
            target.append(d)
        elif j < len(source) and facts.same_dim(d, source[j]):
            target.append(0)
        elif minus_one is None:
            minus_one = j
            target.append(-1)
        else:
            return None, "more than one output dim is neither an int nor a copied dim"
    if minus_one is not None:
        for j, d in enumerate(result):
            if j != minus_one and not facts.at_least(d, 1):
                return None, "a -1 next to a dim not proven >= 1"
    return target, ""


class MaterializeReshapeTarget(_FactsRule):
    """Replaces a computed ``Reshape`` target by a constant (``0`` copies, at most one ``-1``)."""

    op_types = ("Reshape",)
    inputs = ("x", "s")
    required = 2

    def pattern(self, op, x, s):
        return op.Reshape(x, s, _allow_other_attributes=True, _outputs=["y"])

    def check(self, context, x, s, y, **_):
        if constant_tensor(s) is not None:
            return self._fail("the target is already a constant")
        source, result = self.facts.shape(x), self.facts.shape(y)
        if source is None or result is None:
            return self._fail("input or output rank not proven")
        # The new target is read with allowzero=0 (0 copies) whatever the original said:
        # it is computed from the proven shapes, not from the original target.
        target, reason = constant_reshape_target(self.facts, source, result)
        if target is None:
            return self._fail(reason)
        self._target = target
        return MatchResult()

    def rewrite(self, op, x, s, y=None, **_):
        self.fired += 1
        target = op.Constant(value=ir.tensor(np.array(self._target, np.int64)))
        return op.Reshape(x, target, allowzero=0)

    def apply(self, graph: ir.Graph, node: ir.Node, bindings: dict) -> bool:
        const = ir.node(
            "Constant", [], attributes={"value": ir.tensor(np.array(self._target, np.int64))}
        )
        graph.insert_before(node, const)
        node.replace_input_with(1, const.outputs[0])
        node.attributes.pop("allowzero", None)  # the default, 0: the target copies with 0
        self.fired += 1
        return True


def rule_objects(facts: ShapeFacts, exact_floats: bool = True) -> list[_FactsRule]:
    """One object per shape-driven rule, bound to ``facts``, in the order they are tried.

    ``exact_floats=False`` lets float ``x + 0.0`` become ``x`` wherever the sign of a
    zero may then differ (see :class:`NeutralElement`).
    """
    return [
        ExpandToOwnShape(facts),
        TileToOwnShape(facts),
        ReshapeToOwnShape(facts),
        # Squeeze and Unsqueeze change the rank whenever their axes are non-empty; with
        # empty axes onnxruntime squeezes every 1-dim where the spec keeps the shape, so
        # neither is ever removed here (pairs that cancel are CollapseReshapeChains').
        SqueezeToOwnShape(facts, "Flatten"),
        SliceCoveringAxes(facts),
        PadByZeros(facts),
        CastToOwnType(facts),
        WhereOnProvenCondition(facts),
        *(
            NeutralElement(facts, op, exact_floats=exact_floats)
            for op in ("Mul", "Div", "Add", "Sub")
        ),
        *(NeutralElement(facts, op) for op in ("And", "Or")),
        *(
            NeutralElement(facts, op, constant_first=True, exact_floats=exact_floats)
            for op in ("Mul", "Add", "And", "Or")
        ),
        MaterializeReshapeTarget(facts),
    ]


def shape_rules(facts: ShapeFacts, exact_floats: bool = True) -> pattern.RewriteRuleSet:
    """The shape-driven rules bound to ``facts``, as one onnxscript ``RewriteRuleSet``.

    The rule objects are reachable as ``ruleset.rule_objects`` (fired and declined counts).
    """
    objects = rule_objects(facts, exact_floats)
    ruleset = pattern.RewriteRuleSet([_as_rule(o) for o in objects])
    ruleset.rule_objects = objects  # type: ignore[attr-defined]
    return ruleset


def _as_rule(obj: _FactsRule) -> pattern.RewriteRule:
    return pattern.RewriteRule(
        obj.pattern,
        obj.rewrite,
        obj.check,
        name=obj.name,
        remove_nodes=obj.remove_nodes,
        as_function=obj.as_function,
    )


class ShapeRulesPass(ir.passes.InPlacePass):
    """Applies the shape-driven rules node by node, dispatched by op type.

    The same rules as :func:`shape_rules`, without onnxscript's pattern matcher: each
    node is offered only to the rules of its op type, which keeps the pass linear in
    the nodes on large models.

    Args:
        facts: The proven facts of the model.
        exact_floats: Keep the sign of every zero an output can see (see
            :class:`NeutralElement`).

    Attributes:
        rules: The rule objects (fired and declined counts).
    """

    def __init__(self, facts: ShapeFacts, exact_floats: bool = True) -> None:
        super().__init__()
        self.rules = rule_objects(facts, exact_floats)
        self._by_op: dict[str, list[_FactsRule]] = {}
        for rule in self.rules:
            for op_type in rule.op_types:
                self._by_op.setdefault(op_type, []).append(rule)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        fired = 0
        by_op = self._by_op
        memo: dict[ir.Value, str] = {}
        for rule in self.rules:
            rule.main_graph = model.graph
            rule.sign_memo = memo
        nodes = list(model.graph)
        if direct_subgraphs(nodes):  # their nodes too, each after the node holding it
            nodes = list(ir.traversal.RecursiveGraphIterator(model.graph))
        for node in nodes:
            rules = by_op.get(node.op_type)
            if rules is None or node.domain != "" or node.graph is None:
                continue
            for rule in rules:
                bindings = rule.bind(node)
                if bindings is None:
                    continue
                if rule.check(None, **bindings) and rule.apply(node.graph, node, bindings):
                    fired += 1
                    break
        return ir.passes.PassResult(model, modified=bool(fired))
