"""Helpers for the constraint tests: building models, running the passes, onnxruntime truth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.passes._anchors import (
    AnchorConstraintPropagationPass,
    AnchorPropagationResult,
)
from onnx_symdims.shapes import ShapesContext

HEADER = '<ir_version: 10, opset_import: ["" : 21]>\n'


def all_values(model: ir.Model) -> dict[str, ir.Value]:
    """Every named value of the model (main graph, subgraphs and functions) by name."""
    values: dict[str, ir.Value] = {}
    graphs = [model.graph, *model.graph.subgraphs()]
    for function in model.functions.values():
        graphs.extend([function, *function.subgraphs()])
    for graph in graphs:
        for value in [*graph.inputs, *graph.outputs]:
            values.setdefault(value.name, value)
        for node in graph:
            for value in node.outputs:
                values.setdefault(value.name, value)
    return values


def build(
    text: str, shapes: Mapping[str, Sequence[int | str | None]] | None = None
) -> ir.Model:
    """Parses ONNX text (``HEADER`` prepended) and sets ``shapes`` on values by name.

    The ONNX text parser does not accept expressions such as ``2*dnz`` in a type, so
    such dims are set here.
    """
    model = ir.from_onnx_text(HEADER + text)
    values = all_values(model)
    for name, dims in (shapes or {}).items():
        values[name].shape = ir.Shape(dims)
    return model


def dims_text(value: ir.Value) -> list[str | int | None] | None:
    """The dims of ``value`` as written on the model (``None`` for an empty dim)."""
    if value.shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in value.shape.dims]


def shapes_text(model: ir.Model) -> dict[str, list | None]:
    """``{name: dims_text}`` for every value of the model."""
    return {name: dims_text(value) for name, value in all_values(model).items()}


def copy_model(model: ir.Model) -> ir.Model:
    return ir.serde.deserialize_model(ir.serde.serialize_model(model))


def infer_and_propagate(
    model: ir.Model, **options
) -> tuple[ShapesContext, AnchorPropagationResult]:
    """Runs inference then the anchor pass with the inference's context."""
    inferred = SymbolicShapeInferencePass()(model)
    result = AnchorConstraintPropagationPass(inferred.context, **options)(model)
    return inferred.context, result


# ------------------------------------------------------------------------------------------
# onnxruntime as the oracle
# ------------------------------------------------------------------------------------------
def runtime_shapes(model: ir.Model, feeds: Mapping[str, np.ndarray]) -> dict[str, tuple]:
    """Runs ``model`` with onnxruntime and returns the shape of every main-graph value.

    Every node output becomes a graph output of a copy of the model, with no declared
    shape (a wrong declared shape must not influence the run).
    """
    import onnxruntime as ort

    proto = ir.serde.serialize_model(model)
    graph = proto.graph
    types = {v.name: v.dtype for v in all_values(model).values() if v.dtype is not None}
    del graph.value_info[:]
    del graph.output[:]
    for node in graph.node:
        for name in node.output:
            if name:
                graph.output.append(
                    onnx.helper.make_tensor_value_info(name, int(types[name]), None)
                )
    session = ort.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in graph.output]
    results = session.run(names, dict(feeds))
    shapes = {name: tuple(np.asarray(r).shape) for name, r in zip(names, results)}
    shapes.update({name: tuple(a.shape) for name, a in feeds.items()})
    return shapes


def _learn(d: expr.Dim, actual: int, bindings: dict[str, int]) -> bool:
    """Binds the single unbound symbol of a linear dim from its runtime size."""
    if isinstance(d, int):
        return False
    unbound = d.symbols() - bindings.keys()
    if len(unbound) != 1:
        return False
    (name,) = unbound
    monomials, constant = expr.coefficients(d)
    coeff = None
    rest: expr.Dim = constant
    for monomial, c in monomials.items():
        if monomial.is_symbol and monomial.name == name:
            coeff = c
        else:
            rest = expr.add(rest, expr.mul(c, monomial))
    if coeff is None or (not isinstance(rest, int) and rest.symbols() - bindings.keys()):
        return False
    try:
        rest_value = expr.evaluate(rest, bindings)
    except (ArithmeticError, ValueError, KeyError):
        return False
    if (actual - rest_value) % coeff:
        return False
    bindings[name] = (actual - rest_value) // coeff
    return True


def check_against_runtime(
    model: ir.Model, actual: Mapping[str, tuple], known: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Asserts every dim written on the main graph evaluates to the runtime size.

    Symbols are bound from the runtime shapes (bare symbols first, then linear dims with
    one unbound symbol); a dim whose symbols cannot all be bound is skipped, but every
    bare symbol always is bound. Returns the bindings.
    """
    bindings = dict(known or {})
    dims: list[tuple[str, int, expr.Dim, int]] = []
    for name, value in all_values(model).items():
        if name not in actual or value.shape is None:
            continue
        shape = actual[name]
        assert len(value.shape) == len(shape), (name, value.shape, shape)
        for axis, d in enumerate(value.shape.dims):
            if isinstance(d, int):
                dims.append((name, axis, d, shape[axis]))
            elif d.value:
                dims.append((name, axis, expr.parse_dim(d.value), shape[axis]))
    progress = True
    while progress:
        progress = False
        for _, _, d, size in dims:
            if _learn(d, size, bindings):
                progress = True
    checked = 0
    for name, axis, d, size in dims:
        if not isinstance(d, int) and d.symbols() - bindings.keys():
            continue
        assert expr.evaluate(d, bindings) == size, (
            name,
            axis,
            expr.to_onnx(d),
            size,
            bindings,
        )
        checked += 1
    assert checked, "nothing was checked"
    return bindings


def make_feeds(
    model: ir.Model,
    bindings: Mapping[str, int],
    rng: np.random.Generator,
    data: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs whose dims are the declared dims evaluated under ``bindings``.

    Float inputs are 0/1 valued (so data-dependent counts vary, zero included); a value
    in ``data`` is used as given.
    """
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.inputs:
        if data and value.name in data:
            feeds[value.name] = data[value.name]
            continue
        shape = [
            d if isinstance(d, int) else expr.evaluate(expr.parse_dim(d.value), bindings)
            for d in value.shape.dims
        ]
        dtype = value.dtype.numpy()
        if dtype == np.bool_:
            feeds[value.name] = rng.random(shape) < 0.5
        else:
            feeds[value.name] = (rng.random(shape) < 0.5).astype(dtype)
    return feeds
