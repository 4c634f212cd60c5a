"""Reading a graph's parts fast: the subgraphs a node holds, its input/output lists."""

from __future__ import annotations

__all__ = [
    "direct_subgraphs",
    "graph_nodes",
    "graph_values",
    "initializer_values",
    "nested_nodes",
    "node_subgraphs",
]

from collections.abc import Iterable, Sequence

import onnx_ir as ir

_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS


def graph_nodes(graph: ir.Graph | ir.Function) -> list[ir.Node]:
    """``list(graph)``: the graph's nodes in order, read from its linked list's boxes.

    Iterating an ``ir.Graph`` runs a generator over the boxes of its linked list that
    calls the ``erased`` property for each node: walking the boxes directly (what that
    generator does, for a graph nothing changes meanwhile) saves a Python call per node
    (model snapshots, loop bodies listed once per inference of their node). Another
    onnx-ir layout takes the iteration.
    """
    try:
        nodes_list = graph._nodes if graph.__class__ is ir.Graph else graph._graph._nodes  # type: ignore[union-attr]
        root = nodes_list._root
    except AttributeError:
        return list(graph)
    nodes: list[ir.Node] = []
    append = nodes.append
    box = root.next
    while box is not root:
        node = box.value
        if node is not None:  # an erased box
            append(node)
        box = box.next
    return nodes


def direct_subgraphs(nodes: Iterable[ir.Node]) -> list[ir.Graph]:
    """The graphs the attributes of ``nodes`` hold (``If`` branches, ``Loop`` bodies...).

    In node and attribute order. One call for a whole node list: most nodes have attributes and no graph, and model
    snapshots run this on every node of every subgraph. The UserDict's dict and the
    attributes' slots (see passes._inference._require_ir_slots). A reference to a
    function's graph attribute (``RefAttr``, no value) holds no graph here: the call's
    graph is substituted where the function body is inferred.
    """
    graphs: list[ir.Graph] = []
    for node in nodes:
        attributes = node._attributes.data
        if attributes:
            for attr in attributes.values():
                kind = attr._type
                if kind is _GRAPH:
                    if attr._value is not None:
                        graphs.append(attr._value)
                elif kind is _GRAPHS:
                    graphs.extend(attr._value or ())
    return graphs


def node_subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs held by ``node``'s attributes (:func:`direct_subgraphs` of one node)."""
    return direct_subgraphs((node,))


def nested_nodes(
    graph: ir.Graph | ir.Function, subgraphs: list[ir.Graph] | None = None
) -> list[ir.Node]:
    """The nodes of ``graph`` and of its subgraphs at any depth.

    The nodes ``ir.traversal.RecursiveGraphIterator`` visits (not in its order), without
    its generator per graph (loop bodies are walked several times per inference), and
    without failing on a function's reference to a graph attribute (which that iterator
    does). ``subgraphs`` receives the subgraphs found.
    """
    nodes: list[ir.Node] = []
    pending = [graph]
    while pending:
        graph_list = graph_nodes(pending.pop())
        nodes.extend(graph_list)
        # Pushed in node order once the graph is listed, as one push per node would be.
        found = direct_subgraphs(graph_list)
        pending.extend(found)
        if subgraphs is not None:
            subgraphs.extend(found)
    return nodes


def graph_values(values: Sequence[ir.Value]) -> Sequence[ir.Value]:
    """A graph's ``inputs`` or ``outputs``, to read (never to change: it may be the graph's own).

    onnx-ir keeps them in a ``UserList``, whose iteration calls ``__getitem__`` in Python
    for each value (and raises ``IndexError`` at the end): its backing list is iterated
    about 10x faster.
    """
    data = getattr(values, "data", None)
    return data if data.__class__ is list else values


def initializer_values(graph: ir.Graph) -> Iterable[ir.Value]:
    """The values of ``graph.initializers`` (read from the backing dict, as above)."""
    initializers = graph.initializers
    data = getattr(initializers, "data", None)
    return data.values() if data.__class__ is dict else initializers.values()
