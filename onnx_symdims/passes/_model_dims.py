"""Walking every value of a model and reading the symbols in its declared dims."""

from __future__ import annotations

__all__ = [
    "dim_symbols",
    "dim_texts",
    "graphs",
    "main_graph_values",
    "model_values",
    "node_subgraphs",
]

import logging
from collections.abc import Iterator

import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)


def node_subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs held by ``node``'s attributes (If branches, Loop/Scan bodies)."""
    graphs: list[ir.Graph] = []
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            graphs.append(attr.value)
        elif attr.type == ir.AttributeType.GRAPHS:
            graphs.extend(attr.value)
    return graphs


def _subgraphs(graph: ir.Graph | ir.Function) -> list[ir.Graph]:
    """Every graph nested in ``graph``'s nodes, recursively (cheaper than a traversal)."""
    found: list[ir.Graph] = []
    for node in graph:
        if not node.attributes:
            continue
        for sub in node_subgraphs(node):
            found.append(sub)
            found.extend(_subgraphs(sub))
    return found


def graphs(model: ir.Model) -> list[ir.Graph | ir.Function]:
    """The main graph, its subgraphs, every function and the functions' subgraphs."""
    result: list[ir.Graph | ir.Function] = [model.graph, *_subgraphs(model.graph)]
    for function in model.functions.values():
        result.append(function)
        result.extend(_subgraphs(function))
    return result


def model_values(model: ir.Model) -> Iterator[tuple[ir.Value, bool]]:
    """Every value of the model once, with whether it is a main-graph input/output.

    Covers the main graph, its subgraphs and the functions, initializers included.
    """
    main = model.graph
    anchors = {*main.inputs, *main.outputs}
    seen: set[ir.Value] = set()
    for graph in graphs(model):
        candidates: list[ir.Value] = [*graph.inputs, *graph.outputs]
        if isinstance(graph, ir.Graph):
            candidates.extend(graph.initializers.values())
        for node in graph:
            candidates.extend(node.outputs)
        for value in candidates:
            if value not in seen:
                seen.add(value)
                yield value, value in anchors


def main_graph_values(graph: ir.Graph) -> Iterator[ir.Value]:
    """Inputs, outputs and node outputs of ``graph`` (not of its subgraphs)."""
    yield from graph.inputs
    yield from graph.outputs
    for node in graph:
        yield from node.outputs


_TEXT_SYMBOLS: dict[str, frozenset[str]] = {}


def _text_symbols(text: str) -> frozenset[str]:
    names = _TEXT_SYMBOLS.get(text)
    if names is None:
        parsed = expr.parse_dim(text)
        names = frozenset()
        if isinstance(parsed, expr.DimExpr) and not parsed.is_unknown:
            names = parsed.symbols()
        _TEXT_SYMBOLS[text] = names
    return names


_FROZEN_SYMBOLS: dict[int, tuple[ir.Shape, frozenset[str]]] = {}


def _frozen_shape_symbols(shape: ir.Shape) -> frozenset[str]:
    """Symbols of a frozen (hence shared and immutable) shape, computed once per object."""
    hit = _FROZEN_SYMBOLS.get(id(shape))
    if hit is None or hit[0] is not shape:
        names: set[str] = set()
        for d in shape.dims:
            if not isinstance(d, int) and d.value:
                names |= _text_symbols(d.value)
        if len(_FROZEN_SYMBOLS) > 100_000:
            _FROZEN_SYMBOLS.clear()
        hit = _FROZEN_SYMBOLS[id(shape)] = (shape, frozenset(names))
    return hit[1]


def dim_symbols(shape: ir.Shape | None) -> set[str]:
    """The symbol names in the ``dim_param`` texts of ``shape`` (parsed, never failing)."""
    names: set[str] = set()
    if shape is None:
        return names
    if shape.frozen:
        return set(_frozen_shape_symbols(shape))
    for d in shape.dims:
        if not isinstance(d, int) and d.value:
            names |= _text_symbols(d.value)
    return names


def dim_texts(shape: ir.Shape | None) -> set[str]:
    """The non-empty ``dim_param`` texts of ``shape``."""
    if shape is None:
        return set()
    return {d.value for d in shape.dims if not isinstance(d, int) and d.value}
