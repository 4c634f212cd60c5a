"""What the rewrite rules may rely on: shapes and values the graph itself proves.

A rule asks :class:`ShapeFacts`, never the dim text of the IR. The facts come from one
run of :class:`~onnx_symdims.passes.SymbolicShapeInferencePass` over the model with
every declared shape of a computed value set aside (:func:`analyze`): what is left
follows from the graph inputs' declared shapes, the initializers and the ops alone.
A stale ``value_info`` or a graph output declared with a wrong dim can therefore never
justify a rewrite, and neither can the anchor equalities that declared outputs imply
(they hold only for inputs the author intended, not for every input onnxruntime
accepts).

Values created after the analysis (by a rule, or by onnxscript's passes between two
rounds) have no facts except when they are constants; a rule asking about them
declines. The pipeline analyzes again at the start of each round, incrementally: only
the nodes created since are inferred (``analyze(model, previous)``).

Example::

    >>> import onnx_ir as ir
    >>> from onnx_symdims.rewrite import ShapeFacts
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (float[N, 4] x) => (float[N, 4] y) {
    ...         s = Shape(x)
    ...         y = Expand(x, s)
    ...     }
    ... ''')
    >>> facts = ShapeFacts.analyze(model)
    >>> y = model.graph.outputs[0]
    >>> facts.same_shape(facts.shape(y), facts.shape(model.graph.inputs[0]))
    True
"""

from __future__ import annotations

__all__ = [
    "INTEGER_AND_BOOL_TYPES",
    "INTEGER_TYPES",
    "FactsPass",
    "ShapeFacts",
    "analyze",
    "clear_computed_shapes",
    "constant_tensor",
    "overridable_defaults_hidden",
    "int_attribute",
    "ints_attribute",
    "keep_output_type",
    "set_type",
    "shape_slice",
    "take_over",
]

import contextlib
import dataclasses
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import ClassVar

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import FactScope, ShapesContext, nested_nodes, refine_dim

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]

#: Element types whose arithmetic is exact (no rounding, no signed zeros).
INTEGER_TYPES = frozenset(
    {
        ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
    }
)  # fmt: skip
INTEGER_AND_BOOL_TYPES = INTEGER_TYPES | {ir.DataType.BOOL}


def _computed_values(graph: ir.Graph | ir.Function):
    """Every value a node of ``graph`` (or of a subgraph in it) computes."""
    for node in nested_nodes(graph):  # (RecursiveGraphIterator fails on graph references)
        yield from node.outputs


class ShapeFacts:
    """Proven shapes, dtypes and small integer values of a model's values.

    Args:
        context: The context of an inference run whose shapes are facts (see
            :func:`analyze`).
        nodes: The nodes whose outputs' facts ``context`` holds.
    """

    def __init__(
        self, context: ShapesContext, nodes: frozenset[ir.Node] = frozenset()
    ) -> None:
        self.context = context
        self.scope = context.scope
        self.nodes = nodes
        #: Facts derived from these by other modules (keyed by module), kept as long as
        #: these are: a value's producer never changes in the IR.
        self.derived: dict[str, dict] = {}

    def input_bounds(self, model: ir.Model) -> dict[str, tuple[int | None, int | None]]:
        """The proven bounds of the graph inputs' symbolic dims, where any is known.

        Such a bound holds in every run the model that proved it succeeds on (a dim
        ``>= 1`` because a ``Reshape`` divided by it, say), so an analysis of a rewritten
        model may assume it where only those runs matter (see :func:`analyze`).
        """
        bounds = {}
        for value in model.graph.inputs:
            for d in self.shape(value) or ():
                if isinstance(d, expr.DimExpr) and d.is_symbol and d.name not in bounds:
                    lo, hi = self.scope.bounds(d)
                    if (lo is not None and lo > 0) or hi is not None:
                        bounds[d.name] = (lo, hi)
        return bounds

    @classmethod
    def analyze(cls, model: ir.Model) -> ShapeFacts:
        """Infers the facts of ``model`` (see :func:`analyze`)."""
        return analyze(model)

    # ------------------------------------------------------------------------------
    # Reading facts
    # ------------------------------------------------------------------------------
    def shape(self, value: ir.Value | None) -> Shape | None:
        """The proven dims of ``value``, or ``None`` when its rank is not proven."""
        if value is None:
            return None
        ctx = self.context
        if ctx.has_shape(value):
            return ctx.peek_shape(value)
        tensor = constant_tensor(value)
        if tensor is not None:
            return tuple(tensor.shape.numpy())
        if value.is_graph_input():
            return ctx.shape_of(value)
        return None

    def dtype(self, value: ir.Value | None) -> ir.DataType | None:
        """The element type of ``value`` (inferred, or its declared one)."""
        if value is None:
            return None
        dtype = self.context.peek_dtype(value)
        if dtype is None:
            dtype = value.dtype
        return dtype

    def elements(self, value: ir.Value | None) -> Shape | None:
        """The proven elements of a small integer ``value`` (row-major), or ``None``.

        Elements may be unknown ``DimExpr`` (partially known values).
        """
        if value is None:
            return None
        ctx = self.context
        if ctx.has_shape(value) or constant_tensor(value) is not None:
            return ctx.value_of(value)
        return None

    def int_elements(self, value: ir.Value | None) -> tuple[int, ...] | None:
        """The elements of ``value`` when every one is a proven integer."""
        elements = self.elements(value)
        if elements is None or not all(isinstance(e, int) for e in elements):
            return None
        return elements  # type: ignore[return-value]

    # ------------------------------------------------------------------------------
    # Proofs
    # ------------------------------------------------------------------------------
    def same_dim(self, a: Dim, b: Dim) -> bool:
        """True when ``a == b`` holds in every successful run."""
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if (isinstance(a, expr.DimExpr) and a.is_unknown) or (
            isinstance(b, expr.DimExpr) and b.is_unknown
        ):
            return False
        return a is b or self.scope.prove_eq(a, b)

    def same_shape(self, a: Sequence[Dim] | None, b: Sequence[Dim] | None) -> bool:
        """True when shapes ``a`` and ``b`` are proven equal (same rank, equal dims)."""
        if a is None or b is None or len(a) != len(b):
            return False
        return all(self.same_dim(x, y) for x, y in zip(a, b))

    def if_nonempty(self, dims: Sequence[Dim], tensor: Sequence[Dim]) -> tuple[Dim, ...]:
        """``dims`` as they read in the runs where a tensor of shape ``tensor`` has elements.

        Every dim of ``tensor`` is then ``>= 1``, which can make a case split for empty
        tensors go (``4*b*min(1,s)`` reads ``4*b`` when ``s >= 1``). A proof built on the
        result holds in those runs only: a rule using it must show otherwise that the
        empty runs agree (e.g. by an output shape proven without it).
        """
        scope = self.scope
        if not isinstance(scope, FactScope) or any(
            isinstance(d, int) and d < 1 for d in tensor
        ):
            return tuple(dims)  # no facts to add, or never any elements: nothing to gain
        nonempty = scope.copy()
        for d in tensor:
            if not isinstance(d, int):
                nonempty.assume_ge(d, 1)
        return tuple(refine_dim(d, nonempty) for d in dims)

    def at_least(self, d: Dim, bound: int) -> bool:
        """True when ``d >= bound`` holds in every successful run."""
        if isinstance(d, int):
            return d >= bound
        if d.is_unknown:
            return False
        return self.scope.prove_ge(d, bound)


@contextlib.contextmanager
def overridable_defaults_hidden(model: ir.Model) -> Iterator[None]:
    """Within the block, the initializers that are graph inputs have no ``const_value``.

    Such an initializer is only a default that a feed replaces (IR >= 4), but onnxscript's
    pattern rules read any ``const_value`` as a constant: a zero ``Conv``/``Gemm`` bias
    given as an input was dropped, ``Min(Min(x, c), 1)`` folded ``c``, a ``Pad`` merged
    into the ``Conv`` with the default pads (found by hand). And onnxscript's folder pops
    the initializer of a replaced node's input once nothing reads it, a graph input's
    too, which then needs a feed where the original ran without one. After the block
    each tensor is back on its value, and the value an initializer again, whatever the
    block raised.
    """
    hidden = [
        (value, value.const_value)
        for value in model.graph.inputs
        if value.is_initializer() and value.const_value is not None
    ]
    for value, _ in hidden:
        value.const_value = None
    try:
        yield
    finally:
        for value, tensor in hidden:
            value.const_value = tensor
            if not value.is_initializer():
                model.graph.register_initializer(value)


def constant_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    """The tensor of an initializer or ``Constant`` node (never of an overridable input).

    An initializer that is also a graph input is only a default: a feed replaces it.
    """
    if value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value
    node = value.producer()
    if node is None or node.op_type != "Constant" or node.domain != "":
        return None
    attr = node.attributes.get("value")
    if (
        attr is not None
        and len(node.attributes) == 1
        and len(node.outputs) == 1
        and attr.type is ir.AttributeType.TENSOR
    ):
        # Attr.as_tensor (in get_const_tensor) checks the tensor protocol at run time,
        # which costs ~50 us a call on Python 3.11 (8 % of optimize on a Llama export).
        return attr.value
    try:
        return ir.convenience.get_const_tensor(value)  # value_int, value_floats, ...
    except ValueError:  # a malformed Constant node: not a constant we can read
        return None


def analyze(
    model: ir.Model,
    previous: ShapeFacts | None = None,
    assume: dict[str, tuple[int | None, int | None]] | None = None,
) -> ShapeFacts:
    """Infers shapes of ``model`` from its inputs, initializers and ops alone.

    Every declared shape of a computed value (``value_info``, graph outputs, subgraph
    values) is set aside for the run, so only proven facts remain; the shapes written
    into the IR are the inferred ones. The caller restores what it wants declared (see
    :class:`~onnx_symdims.rewrite.OptimizePass`).

    With ``previous`` (the facts of an earlier analysis of this model), only the nodes
    created since are inferred, on top of ``previous``'s context. Sound because every
    rewrite of the pipeline keeps the meaning of each value it leaves in the model (a
    rewrite that changes a value creates a new node): a fact of an old value still
    holds in every run where the model that proved it succeeds, and so in every run of
    the original model. Facts proven by a node a rewrite removed may still be used;
    they hold on every run of the original model, which is what a rewrite must
    preserve (the final shapes the pipeline writes come from a fresh analysis).

    With ``assume`` (``{symbol: (lower, upper)}``, from :meth:`ShapeFacts.input_bounds`
    of the original model), a fresh analysis starts from those bounds on the graph
    inputs' dims: its facts then hold in the runs the original model succeeds on, not
    in every run of ``model`` (the fusion guard compares shapes so; the shapes the
    pipeline writes come from an analysis without it).

    Args:
        model: The model, whose computed values' IR shapes are replaced by the
            inferred ones.
        previous: Facts of an earlier analysis of ``model`` to build on.
        assume: Bounds of graph-input symbols to start a fresh analysis from.

    Returns:
        The facts of the run.
    """
    if previous is None:
        clear_computed_shapes(model)
        context = ShapesContext()
        for name, (lower, upper) in (assume or {}).items():
            context.scope.set_range(name, lower=lower, upper=upper)
        SymbolicShapeInferencePass(context=context)(model)
        return ShapeFacts(context, frozenset(nested_nodes(model.graph)))
    context = previous.context
    known = previous.nodes
    nodes = nested_nodes(model.graph)
    new = [node for node in nodes if node not in known]
    if new:
        for node in new:
            for value in node.outputs:
                value.shape = None  # what a rewrite wrote there is not proven here
                context.forget(value)
        SymbolicShapeInferencePass(context=context, known_nodes=known)(model)
    return ShapeFacts(context, frozenset(nodes))


def clear_computed_shapes(model: ir.Model) -> None:
    """Sets aside the IR shape of every value a node computes (graphs and functions).

    What is left to infer from follows from the graph inputs, initializers and ops alone.
    """
    for value in _computed_values(model.graph):
        value.shape = None
    for function in model.functions.values():
        for value in _computed_values(function):
            value.shape = None


#: What :func:`int_attribute` and :func:`ints_attribute` return for a malformed attribute.
MALFORMED = None


def is_literal_one(d: Dim) -> bool:
    """True for the int dim 1 (a symbolic dim may be 1 in some runs only)."""
    return isinstance(d, int) and d == 1


def int_attribute(node: ir.Node, name: str, default: int | None = None) -> int | None:
    """The int attribute ``name`` of ``node``, ``default`` when absent.

    ``None`` when it has another type (``axis`` given as a list): the rules decline such a
    node, which inference already reported, instead of raising.
    """
    attr = node.attributes.get(name)
    if attr is None:
        return default
    return attr.as_int() if attr.type is ir.AttributeType.INT else MALFORMED


def ints_attribute(
    node: ir.Node, name: str, default: tuple[int, ...] | None = None
) -> tuple[int, ...] | None:
    """The ints attribute ``name`` of ``node`` as a tuple (see :func:`int_attribute`)."""
    attr = node.attributes.get(name)
    if attr is None:
        return default
    return tuple(attr.as_ints()) if attr.type is ir.AttributeType.INTS else MALFORMED


def shape_slice(node: ir.Node | None, facts: ShapeFacts) -> tuple[ir.Value, int, int] | None:
    """``(x, start, end)`` of a ``Shape(x, start, end)`` node over a non-empty range.

    The bounds are normalized as the spec does (negative ones count from ``x``'s proven
    rank, then clamped into ``[0, rank]``); ``None`` for any other node or an unknown rank.
    """
    if node is None or node.op_type != "Shape" or node.domain != "" or not node.inputs:
        return None
    x = node.inputs[0]
    shape = facts.shape(x) if x is not None else None
    if shape is None:
        return None
    rank = len(shape)

    def bound(name: str, default: int) -> int | None:
        b = int_attribute(node, name, default)
        return None if b is None else min(max(b + rank if b < 0 else b, 0), rank)

    start, end = bound("start", 0), bound("end", rank)
    if start is None or end is None:
        return None
    return (x, start, end) if start < end else None  # type: ignore[return-value]


def set_type(
    value: ir.Value, dtype: ir.DataType | None, shape: ir.Shape | None = None
) -> None:
    """Writes ``dtype`` (and ``shape``, if given) on a value a rewrite made.

    With an unknown ``dtype`` the value stays untyped and shapeless: onnx_ir serializes
    neither a ``TensorType(None)`` nor a shape without a type, and a dtype is unknown
    where inference failed (a ``Conv`` whose window is larger than its input, at sizes
    ``--symbol-range`` fixes) or met an op it does not know. An untyped intermediate
    value is valid ONNX; the next round's inference types it when it can.

    Args:
        value: The new value.
        dtype: Its element type (``ShapeFacts.dtype`` of the value it replaces).
        shape: Its shape, or ``None`` to leave it as it is.
    """
    if dtype is None:
        return
    value.dtype = dtype
    if shape is not None:
        value.shape = shape


def keep_output_type(old: ir.Value, new: ir.Value) -> None:
    """Gives ``new``, about to become a graph output in ``old``'s place, ``old``'s type.

    Only when ``new`` has none: a graph output needs a type (onnx's checker, onnxruntime),
    and inference leaves ``new`` untyped where it fails (see :func:`set_type`). ``old``'s
    type is the one declared on the output (or inferred for it); its shape comes along
    when ``new`` has none either. Both are copied: ``Value.dtype = ...`` mutates a type in
    place.
    """
    if new.type is not None or old.type is None:
        return
    if isinstance(old.type, ir.TensorType):
        new.type = ir.TensorType(old.type.dtype)
    else:
        new.type = old.type
    if new.shape is None and old.shape is not None:
        new.shape = old.shape.copy()


def take_over(old: ir.Value, new: ir.Value, suffix: str) -> None:
    """Points every use of ``old`` at ``new``; a graph output keeps its name on ``new``."""
    if old.is_graph_output():
        name = old.name
        keep_output_type(old, new)
        old.replace_all_uses_with(new, replace_graph_outputs=True)
        old.name, new.name = None, name
    else:
        new.name = f"{old.name}_{suffix}" if old.name else None
        old.replace_all_uses_with(new)


@dataclasses.dataclass
class FactsPass(ir.passes.InPlacePass):
    """A rewrite of the main graph's nodes of :attr:`op_types` that asks ``facts`` for proofs.

    Subclasses set :attr:`op_types` and implement :meth:`visit`.

    Attributes:
        facts: The proven facts of the model (see :func:`analyze`).
        fired: Rewrites applied, by name.
        declined: Why candidates were kept, counted by reason.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    #: The default-domain op types :meth:`visit` is called on.
    op_types: ClassVar[frozenset[str]] = frozenset()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        op_types = self.op_types
        for node in list(graph):
            # The op type first: most nodes are not of op_types (every pass of every round
            # reads each node). node.graph is None: a node an earlier visit removed.
            if node.op_type in op_types and node.domain == "" and node.graph is not None:
                self.visit(graph, node)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        """Rewrites around ``node`` when the facts prove it sound; counts what it did."""
        raise NotImplementedError
