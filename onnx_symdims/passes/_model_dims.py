"""Walking every value of a model and reading the symbols in its declared dims."""

from __future__ import annotations

__all__ = [
    "ModelSnapshot",
    "dim_symbols",
    "dim_texts",
    "graph_nodes",
    "in_topological_order",
    "model_values",
    "structural_problems",
    "text_symbols",
    "topological_order",
]

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, repeat
from operator import itemgetter
from types import MappingProxyType

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes import (
    direct_subgraphs,
    graph_nodes,
    graph_values,
    initializer_values,
)

logger = logging.getLogger(__name__)


_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS
_new_tuple = tuple.__new__
_GRAPH_AND_NODES = itemgetter(0, 2)  # of a _subgraphs_with_depth entry
_DEPTH = itemgetter(1)
#: The subgraph_nodes of a snapshot of a model without subgraphs or functions (shared).
_NO_SUBGRAPHS: Mapping = MappingProxyType({})


def _subgraphs(nodes: Iterable[ir.Node]) -> list[ir.Graph]:
    """Every graph nested in ``nodes``, in pre-order (cheaper than a traversal).

    Iterative: a valid model may nest hundreds of Ifs.
    """
    found: list[ir.Graph] = []
    stack = direct_subgraphs(nodes)[::-1]
    while stack:
        sub = stack.pop()
        found.append(sub)
        stack.extend(reversed(direct_subgraphs(sub)))
    return found


def in_topological_order(nodes: list[ir.Node]) -> bool:
    """True when every input of a node is produced by an earlier node (or outside).

    False also when an input is defined nowhere (no producer, not a graph input or
    initializer of any graph): :func:`structural_problems` then says what is wrong.
    """
    # The nodes not visited yet: an input produced by one of them (or by the node
    # itself) comes too late. One set lookup per input; this runs on every model.
    pending = set(nodes)
    visited = pending.remove
    for node in nodes:
        for value in node._inputs:  # the slots (see passes/_inference.py)
            if value is not None:
                producer = value._producer
                if producer is None:
                    if value.graph is None:  # a name nothing defines
                        return False
                elif producer in pending:
                    return False
        visited(node)
    return True


def _label(node: ir.Node) -> str:
    return repr(node.name) if node.name else f"{node.op_type} (unnamed)"


def structural_problems(
    nodes: list[ir.Node], unsorted: Iterable[ir.Node]
) -> list[tuple[ir.Node, str]]:
    """What makes ``nodes`` (one graph) invalid: undefined inputs, self-loops, cycles.

    Args:
        nodes: The graph's nodes.
        unsorted: The nodes a topological sort could not place (on a cycle, or after
            one).

    Returns:
        ``(node, message)`` pairs, in graph order.
    """
    left = set(unsorted)
    # Nodes only downstream of a cycle drop out when consumers are peeled off backwards;
    # what remains is on a cycle (or between two).
    consumers: dict[ir.Node, int] = dict.fromkeys(left, 0)
    for node in left:
        for value in node.inputs:
            producer = None if value is None else value.producer()
            if producer in consumers and producer is not node:
                consumers[producer] += 1
    ready = [node for node, n in consumers.items() if n == 0]
    while ready:
        node = ready.pop()
        del consumers[node]
        for value in node.inputs:
            producer = None if value is None else value.producer()
            if producer in consumers and producer is not node:
                consumers[producer] -= 1
                if consumers[producer] == 0:
                    ready.append(producer)
    problems: list[tuple[ir.Node, str]] = []
    for node in nodes:
        problems.extend(
            (node, f"input {value.name!r} is defined by no node, initializer or input")
            for value in node.inputs
            if value is not None and value.producer() is None and value.graph is None
        )
        if node not in left:
            continue
        own = [v.name for v in node.inputs if v is not None and v.producer() is node]
        if own:
            problems.append((node, f"input {own[0]!r} is the node's own output (a self-loop)"))
        elif node in consumers:
            later, producer = next(
                (v, p)
                for v in node.inputs
                if v is not None and (p := v.producer()) is not None and p in consumers
            )
            message = (
                f"the node is on a cycle: input {later.name!r} is computed from its "
                f"output (through node {_label(producer)})"
            )
            problems.append((node, message))
        else:
            problems.append(
                (node, "the node depends on a cycle: its inputs are never computed")
            )
    return problems


class ModelSnapshot(tuple):
    """The nodes and values of a model, collected in one walk.

    Walking an ``ir.Graph`` (a linked list) is slow in Python; the passes walk it once
    and share this. It stays valid while no node or value is added or removed (shapes
    and types may change). Immutable; compared and hashed by identity. A tuple of its
    fields underneath: built by one C call (setting eight slots one by one cost 12k
    instructions of every inference), rather than a frozen dataclass, whose generation
    costs about 1 ms of every process's first call (the cold start).

    Attributes:
        model: The model walked.
        main_nodes: The main graph's nodes, in graph order.
        values: Every value once: main graph, its subgraphs, the functions and their
            subgraphs; per graph its inputs, outputs, initializers, node outputs.
        anchors: The main graph's inputs and outputs.
        main_values: Inputs, outputs and node outputs of the main graph (no subgraphs).
        main_sorted: Whether every main-graph node comes after the producers of its
            inputs (so the graph order is a topological order).
        nested: Whether the model has a subgraph or a model-local function (else its
            nesting bound is 0, see :func:`onnx_symdims.passes._deep.nesting_bound`).
        nesting: The model's :func:`~onnx_symdims.passes._deep.nesting_bound`, found in
            the same walk (``None``: not known, compute it).
        subgraph_nodes: The nodes of each subgraph and function, in graph order (walked
            once: the engine infers a subgraph's nodes from this list).
    """

    __slots__ = ()

    model: ir.Model = property(itemgetter(0))  # type: ignore[assignment]
    main_nodes: list[ir.Node] = property(itemgetter(1))  # type: ignore[assignment]
    values: list[ir.Value] = property(itemgetter(2))  # type: ignore[assignment]
    anchors: frozenset[ir.Value] = property(itemgetter(3))  # type: ignore[assignment]
    main_values: list[ir.Value] = property(itemgetter(4))  # type: ignore[assignment]
    main_sorted: bool = property(itemgetter(5))  # type: ignore[assignment]
    nested: bool = property(itemgetter(6))  # type: ignore[assignment]
    nesting: int | None = property(itemgetter(7))  # type: ignore[assignment]
    subgraph_nodes: Mapping[ir.Graph | ir.Function, list[ir.Node]] = property(itemgetter(8))  # type: ignore[assignment]

    def __new__(  # noqa: PYI034  # typing.Self needs Python 3.11
        cls,
        model: ir.Model,
        main_nodes: list[ir.Node],
        values: list[ir.Value],
        anchors: frozenset[ir.Value],
        main_values: list[ir.Value],
        main_sorted: bool = False,
        nested: bool = True,
        nesting: int | None = None,
        subgraph_nodes: Mapping[ir.Graph | ir.Function, list[ir.Node]] = _NO_SUBGRAPHS,
    ) -> ModelSnapshot:
        fields = (
            model,
            main_nodes,
            values,
            anchors,
            main_values,
            main_sorted,
            nested,
            nesting,
            subgraph_nodes,
        )
        return _new_tuple(cls, fields)

    # A snapshot is one walk of one model: two are never the same (nor hashed by their
    # lists' contents).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple:  # copy and pickle: the fields, as the constructor takes
        return (ModelSnapshot, tuple(self))

    def __repr__(self) -> str:
        return (
            f"ModelSnapshot({len(self.main_nodes)} main nodes, {len(self.values)} values, "
            f"main_sorted={self.main_sorted}, nested={self.nested})"
        )

    @classmethod
    def of(cls, model: ir.Model) -> ModelSnapshot:
        """Walks ``model`` once."""
        main = model.graph
        main_nodes = graph_nodes(main)
        inputs = graph_values(main.inputs)
        outputs = graph_values(main.outputs)
        initializers = tuple(initializer_values(main))
        main_values: list[ir.Value] = [*inputs, *outputs]
        extend = main_values.extend
        # in_topological_order(main_nodes), in the same walk: an input that is not a
        # graph input, an initializer or the output of a node visited before is suspect
        # (it comes too late if its producer is in the graph). A set lookup per input
        # (the usual input is defined) instead of a call of ``producer()``.
        defined: set[ir.Value | None] = {None, *inputs, *initializers}
        define = defined.update
        add = defined.add
        append = main_values.append
        suspects: list[ir.Value] = []
        holders: list[ir.Node] = []  # the nodes that hold a subgraph
        # The properties' slots (node._inputs for node.inputs...): a property read is a
        # Python call, several per node (see passes/_inference.py). Plain loops rather
        # than C helpers (attrgetter, set operations on tuples): the interpreter reads a
        # slot faster than attrgetter's generic lookup, and a set operation on a tuple
        # builds a set first.
        for node in main_nodes:
            for value in node._inputs:
                if value not in defined:  # rare: a loop, not a generator per node
                    suspects.append(value)  # type: ignore[arg-type]  # noqa: PERF401
            outputs_ = node._outputs
            if len(outputs_) == 1:
                # The usual node: set.add and list.append of the one output cost less
                # than half of update and extend (which take any iterable): ~500
                # instructions a node.
                output = outputs_[0]
                add(output)
                append(output)
            else:
                define(outputs_)
                extend(outputs_)
            attributes = node._attributes.data
            if attributes:
                for attr in attributes.values():
                    kind = attr._type
                    if kind is _GRAPH or kind is _GRAPHS:
                        holders.append(node)
                        break
        main_sorted = _sorted_despite(suspects, main_nodes)
        nested: list[tuple[ir.Graph | ir.Function, list[ir.Node]]] = []
        bound = 0  # the deepest subgraph nesting of the main graph, then the functions'
        if holders:
            found = _subgraphs_with_depth(holders)
            nested.extend(map(_GRAPH_AND_NODES, found))
            bound = max(map(_DEPTH, found), default=0)
        functions = model.functions
        if functions:
            for function in functions.values():
                function_nodes = graph_nodes(function)
                found = _subgraphs_with_depth(function_nodes)
                nested.append((function, function_nodes))
                nested.extend(map(_GRAPH_AND_NODES, found))
                # One call level, then the function's own nesting (see nesting_bound).
                bound += 1 + max(map(_DEPTH, found), default=0)
        # Every value once, first seen first: the main graph's inputs and outputs lead
        # (_rewrite_model relies on it), then per nested graph its inputs, outputs,
        # initializers and node outputs.
        parts: list[Iterable[ir.Value]] = [inputs, outputs, initializers, main_values]
        add = parts.append
        for graph, nodes in nested:
            add(graph_values(graph.inputs))
            add(graph_values(graph.outputs))
            if graph.__class__ is ir.Graph or isinstance(graph, ir.Graph):
                add(initializer_values(graph))
            for node in nodes:
                add(node._outputs)
        fields = (
            model,
            main_nodes,
            list(dict.fromkeys(chain.from_iterable(parts))),
            frozenset((*inputs, *outputs)),
            main_values,
            main_sorted,
            bool(nested),
            bound,
            dict(nested) if nested else _NO_SUBGRAPHS,
        )
        return _new_tuple(cls, fields)  # what the constructor does, without its call


def _sorted_despite(suspects: list[ir.Value], nodes: list[ir.Node]) -> bool:
    """Whether ``nodes`` are in order though each suspect input came before its definition.

    A suspect is fine when it has no producer and belongs to a graph (an input or
    initializer of an enclosing or another graph, as :func:`in_topological_order` lets
    through) or is produced outside ``nodes``; not when a node of ``nodes`` produces it
    (it comes too late) or nothing defines it.
    """
    if not suspects:
        return True
    producers = set()
    for value in suspects:
        producer = value.producer()
        if producer is None:
            if value.graph is None:  # a name nothing defines
                return False
        else:
            producers.add(producer)
    return not producers.intersection(nodes)


def _subgraphs_with_depth(
    nodes: Iterable[ir.Node],
) -> list[tuple[ir.Graph, int, list[ir.Node]]]:
    """:func:`_subgraphs` held by ``nodes``, with their depth and their nodes.

    Depth 1 for a graph held by one of ``nodes`` (a node, or a function's nodes), 2 for
    one held by a node of such a graph, and so on: what :func:`~onnx_symdims.passes.
    _deep.nesting_bound` counts. Each graph's nodes are listed once, for this walk and
    the caller's.
    """
    found: list[tuple[ir.Graph, int, list[ir.Node]]] = []
    stack = list(zip(reversed(direct_subgraphs(nodes)), repeat(1)))
    while stack:
        sub, depth = stack.pop()
        sub_nodes = graph_nodes(sub)
        found.append((sub, depth, sub_nodes))
        inner = direct_subgraphs(sub_nodes)
        if inner:
            stack.extend(zip(reversed(inner), repeat(depth + 1)))
    return found


def model_values(
    model: ir.Model, snapshot: ModelSnapshot | None = None
) -> Iterator[tuple[ir.Value, bool]]:
    """Every value of the model once, with whether it is a main-graph input/output.

    Covers the main graph, its subgraphs and the functions, initializers included.
    ``snapshot`` (of this model) saves the walk.
    """
    if snapshot is None or snapshot.model is not model:
        snapshot = ModelSnapshot.of(model)
    anchors = snapshot.anchors
    for value in snapshot.values:
        yield value, value in anchors


_TEXT_SYMBOLS: dict[str, frozenset[str]] = {}
_SYMBOLIC_DIM = ir.SymbolicDim


def text_symbols(text: str) -> frozenset[str]:
    """The symbol names of a ``dim_param`` text (parsed once per process, never failing)."""
    names = _TEXT_SYMBOLS.get(text)
    if names is None:
        parsed = expr.parse_dim(text)
        names = frozenset()
        if isinstance(parsed, expr.DimExpr) and not parsed.is_unknown:
            names = parsed.symbols()
        if len(_TEXT_SYMBOLS) > 100_000:  # a function of the text: bounded, not kept
            _TEXT_SYMBOLS.clear()
        _TEXT_SYMBOLS[text] = names
    return names


_FROZEN_SYMBOLS: dict[int, tuple[ir.Shape, frozenset[str]]] = {}


def _frozen_shape_symbols(shape: ir.Shape) -> frozenset[str]:
    """Symbols of a frozen (hence shared and immutable) shape, computed once per object."""
    hit = _FROZEN_SYMBOLS.get(id(shape))
    if hit is None or hit[0] is not shape:
        names = _symbols_of_dims(shape._dims)
        if len(_FROZEN_SYMBOLS) > 100_000:
            _FROZEN_SYMBOLS.clear()
        hit = _FROZEN_SYMBOLS[id(shape)] = (shape, frozenset(names))
    return hit[1]


def dim_symbols(shape: ir.Shape | None) -> set[str]:
    """The symbol names in the ``dim_param`` texts of ``shape`` (parsed, never failing)."""
    if shape is None:
        return set()
    if shape._frozen:  # slots, not properties: every shape of a main graph
        return set(_frozen_shape_symbols(shape))
    return _symbols_of_dims(shape._dims)


def _symbols_of_dims(dims: Iterable[int | ir.SymbolicDim]) -> set[str]:
    """The symbol names in the texts of an ``ir.Shape``'s stored dims."""
    names: set[str] = set()
    for d in dims:
        # An ir.SymbolicDim's class is tested first: its isinstance check against int
        # (a Protocol subclass) costs more than the rest of the loop.
        cls = d.__class__
        if cls is int or (cls is not _SYMBOLIC_DIM and isinstance(d, int)):
            continue
        text = d._value
        if text:
            found = _TEXT_SYMBOLS.get(text)
            names |= text_symbols(text) if found is None else found
    return names


def dim_texts(shape: ir.Shape | None) -> set[str]:
    """The non-empty ``dim_param`` texts of ``shape``."""
    if shape is None:
        return set()
    return {d.value for d in shape.dims if not isinstance(d, int) and d.value}


def topological_order(
    graph: ir.Graph,
    nodes: list[ir.Node] | None = None,
    presorted: bool = False,
    problems: list[tuple[ir.Node, str]] | None = None,
) -> list[ir.Node]:
    """The nodes of ``graph`` in an order where producers precede consumers.

    Valid models are already sorted; otherwise a stable Kahn sort is done without
    touching the graph. Nodes on a cycle keep their relative order at the end.
    ``nodes``: ``list(graph)`` when already at hand; ``presorted``: they are known to
    be in order (checked by :class:`ModelSnapshot`); ``problems`` receives what makes
    an unsorted graph invalid (see :func:`structural_problems`).
    """
    if nodes is None:
        nodes = graph_nodes(graph)
    if presorted or in_topological_order(nodes):
        return nodes
    position = {node: i for i, node in enumerate(nodes)}
    pending: dict[ir.Node, int] = {}
    consumers: dict[ir.Node, list[ir.Node]] = {node: [] for node in nodes}
    for node in nodes:
        producers = {
            p
            for value in node.inputs
            if value is not None and (p := value.producer()) is not None and p in position
        }
        pending[node] = len(producers)
        for p in producers:
            consumers[p].append(node)
    ready = [node for node in nodes if pending[node] == 0]
    order: list[ir.Node] = []
    while ready:
        ready.sort(key=position.__getitem__, reverse=True)
        node = ready.pop()
        order.append(node)
        for consumer in consumers[node]:
            pending[consumer] -= 1
            if pending[consumer] == 0:
                ready.append(consumer)
    unsorted: list[ir.Node] = []
    if len(order) < len(nodes):
        done = set(order)
        unsorted = [node for node in nodes if node not in done]
        order.extend(unsorted)
    if problems is not None:
        problems.extend(structural_problems(nodes, unsorted))
    return order
