"""The subgraphs a node holds, read once for every walk of nested graphs."""

from __future__ import annotations

__all__ = ["node_subgraphs"]

import onnx_ir as ir

_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS


def node_subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs held by ``node``'s attributes (``If`` branches, ``Loop``/``Scan`` bodies)."""
    graphs: list[ir.Graph] = []
    for attr in node.attributes.data.values():  # the UserDict's dict: faster to iterate
        kind = attr.type
        if kind is _GRAPH:
            graphs.append(attr.value)
        elif kind is _GRAPHS:
            graphs.extend(attr.value)
    return graphs
