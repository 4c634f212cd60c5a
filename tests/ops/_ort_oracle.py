"""Test helper: infer a text model, then check every inferred dim against onnxruntime.

Used by the reduce/normalization, attention and contrib op tests. Unlike
:func:`onnx_symdims.verify.verify_model`, the caller chooses the symbol bindings
(including 0-sized dims) and may feed specific input data (axes, sequence lengths).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapesContext

Feeds = Mapping[str, np.ndarray | Callable[[Mapping[str, int]], np.ndarray]]


@dataclasses.dataclass
class Inferred:
    """A model after inference, with its context."""

    model: ir.Model
    context: ShapesContext

    @property
    def errors(self) -> list[str]:
        return [d.message for d in self.context.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[str]:
        return [d.message for d in self.context.diagnostics if d.severity == "warning"]

    def value(self, name: str) -> ir.Value:
        for node in self.model.graph:
            for value in node.outputs:
                if value.name == name:
                    return value
        raise KeyError(name)

    def dims(self, name: str) -> tuple[expr.Dim, ...] | None:
        """The inferred dims of the value called ``name``."""
        return self.context.shape_of(self.value(name))

    def shape(self, name: str) -> list[int | str] | None:
        """The inferred shape of ``name`` printed (ints stay ints)."""
        dims = self.dims(name)
        if dims is None:
            return None
        return [d if isinstance(d, int) else expr.to_onnx(d) for d in dims]

    def dtype(self, name: str) -> ir.DataType | None:
        return self.context.dtype_of(self.value(name))

    def elements(self, name: str) -> list[int | str] | None:
        """The inferred value-as-shape of ``name`` printed."""
        elements = self.context.value_of(self.value(name))
        if elements is None:
            return None
        return [e if isinstance(e, int) else expr.to_onnx(e) for e in elements]


def infer(text: str, unranked: Sequence[str] = ()) -> Inferred:
    """Parses ``text`` and infers shapes.

    Declared graph output shapes are dropped, and so are the shapes of the graph inputs
    named in ``unranked`` (the text syntax cannot spell "rank unknown").
    """
    model = ir.from_onnx_text(text)
    for value in model.graph.outputs:
        value.shape = None
    for value in model.graph.inputs:
        if value.name in unranked:
            value.shape = None
    result = SymbolicShapeInferencePass()(model)
    return Inferred(model, result.context)


def _input_dims(value: ir.Value, binding: Mapping[str, int]) -> list[int]:
    assert value.shape is not None, f"graph input {value.name} needs a shape"
    return [
        d if isinstance(d, int) else expr.evaluate(expr.parse_dim(d.value), binding)
        for d in value.shape.dims
    ]


def _make_input(rng: np.random.Generator, value: ir.Value, dims: list[int]) -> np.ndarray:
    dtype = value.dtype or ir.DataType.FLOAT
    if dtype == ir.DataType.BOOL:
        return np.ones(dims, dtype=bool)
    if dtype.is_floating_point():
        return rng.standard_normal(dims).astype(dtype.numpy())
    return np.zeros(dims, dtype=dtype.numpy())


def run_ort(
    inferred: Inferred, binding: Mapping[str, int], feeds: Feeds | None = None
) -> dict[str, np.ndarray]:
    """Runs the model with onnxruntime; returns every node output by name."""
    import onnxruntime as ort

    proto = ir.serde.serialize_model(inferred.model)
    del proto.graph.value_info[:]
    for output in proto.graph.output:
        output.type.tensor_type.ClearField("shape")
    declared = {o.name for o in proto.graph.output}
    names = []
    for node in inferred.model.graph:
        for value in node.outputs:
            if not value.name:
                continue
            names.append(value.name)
            dtype = inferred.context.dtype_of(value)
            if value.name not in declared and dtype is not None:
                extra = proto.graph.output.add()
                extra.name = value.name
                extra.type.tensor_type.elem_type = int(dtype)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(0)
    inputs = {}
    for value in inferred.model.graph.inputs:
        given = (feeds or {}).get(value.name)
        if given is None:
            inputs[value.name] = _make_input(rng, value, _input_dims(value, binding))
        else:
            inputs[value.name] = given(binding) if callable(given) else given
    outputs = [o.name for o in session.get_outputs()]
    return dict(zip(outputs, session.run(outputs, inputs)))


def check_against_ort(
    text: str,
    bindings: Sequence[Mapping[str, int]],
    feeds: Feeds | None = None,
) -> Inferred:
    """Infers ``text`` and asserts every inferred dim and dtype matches onnxruntime.

    Symbols of the graph inputs take the binding's sizes; a fresh (engine-minted) bare
    symbol takes the first size it is seen with and must then be consistent. A dim that
    still has an unbound symbol is not checked.
    """
    inferred = infer(text)
    assert not inferred.errors, inferred.errors
    for binding in bindings:
        actual = run_ort(inferred, binding, feeds)
        bound = dict(binding)
        for name, array in actual.items():
            dims = inferred.dims(name)
            dtype = inferred.dtype(name)
            if dtype is not None:
                assert dtype.numpy() == array.dtype, f"{name}: {dtype} vs {array.dtype}"
            if dims is None:
                continue
            assert len(dims) == array.ndim, f"{name}: rank of {dims} vs {array.shape}"
            for axis, (d, size) in enumerate(zip(dims, array.shape)):
                if isinstance(d, expr.DimExpr) and d.is_symbol and d.name not in bound:
                    assert inferred.context.is_generated(d.name), d.name
                    bound[d.name] = size
                if isinstance(d, expr.DimExpr) and not d.symbols() <= bound.keys():
                    continue
                got = expr.evaluate(d, bound)
                assert got == size, (
                    f"{name}[{axis}] = {expr.to_onnx(d)} = {got}, actual {array.shape} "
                    f"under {dict(binding)}"
                )
        for name, array in actual.items():
            _check_elements(inferred, name, array, bound)
    return inferred


def _check_elements(
    inferred: Inferred, name: str, array: np.ndarray, bound: Mapping[str, int]
) -> None:
    """Asserts the known value-as-shape elements of ``name`` equal the actual data."""
    elements = inferred.context.value_of(inferred.value(name))
    if elements is None:
        return
    flat = array.reshape(-1).tolist()
    assert len(elements) == len(flat), f"{name}: {len(elements)} elements vs {array.shape}"
    for k, (e, actual) in enumerate(zip(elements, flat)):
        if isinstance(e, expr.DimExpr) and (e.is_unknown or not e.symbols() <= bound.keys()):
            continue
        assert expr.evaluate(e, bound) == actual, f"{name} element {k}: {e} vs {actual}"
