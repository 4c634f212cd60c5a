"""Walking every value of a model and reading the symbols in its declared dims."""

from __future__ import annotations

__all__ = ["dim_symbols", "dim_texts", "graphs", "main_graph_values", "model_values"]

import logging
from collections.abc import Iterator

import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)


def graphs(model: ir.Model) -> list[ir.Graph | ir.Function]:
    """The main graph, its subgraphs, every function and the functions' subgraphs."""
    result: list[ir.Graph | ir.Function] = [model.graph, *model.graph.subgraphs()]
    for function in model.functions.values():
        result.append(function)
        result.extend(function.subgraphs())
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


def dim_symbols(shape: ir.Shape | None) -> set[str]:
    """The symbol names in the ``dim_param`` texts of ``shape`` (parsed, never failing)."""
    names: set[str] = set()
    if shape is None:
        return names
    for d in shape.dims:
        if not isinstance(d, int) and d.value:
            parsed = expr.parse_dim(d.value)
            if isinstance(parsed, expr.DimExpr) and not parsed.is_unknown:
                names.update(parsed.symbols())
    return names


def dim_texts(shape: ir.Shape | None) -> set[str]:
    """The non-empty ``dim_param`` texts of ``shape``."""
    if shape is None:
        return set()
    return {d.value for d in shape.dims if not isinstance(d, int) and d.value}
