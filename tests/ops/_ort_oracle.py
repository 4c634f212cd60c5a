"""Test helper: infer a text model, then check every inferred dim against onnxruntime.

Unlike :func:`onnx_symdims.verify.verify_model`, the caller chooses the symbol bindings
(including 0-sized dims) and may feed specific input data (axes, sequence lengths):

* :func:`check_against_ort`: symbol bindings (inputs are generated from the declared
  shapes; some may be given).
* :func:`check_runs`: the input arrays themselves (control flow and sequences, whose
  outputs may be sequences of tensors).

The pieces (:func:`run_ort`, :func:`check_dim`, :func:`check_constraints`) serve the
family-specific oracles of other test files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.expr import _scope
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapesContext

Feeds = Mapping[str, np.ndarray | Callable[[Mapping[str, int]], np.ndarray]]


@dataclasses.dataclass
class Inferred:
    """A model after inference, with its context."""

    model: ir.Model
    context: ShapesContext

    def messages(self, severity: str) -> list[str]:
        """The messages of the diagnostics of ``severity`` (``"error"``, ``"warning"``)."""
        return [d.message for d in self.context.diagnostics if d.severity == severity]

    @property
    def errors(self) -> list[str]:
        return self.messages("error")

    @property
    def warnings(self) -> list[str]:
        return self.messages("warning")

    def bounds(self) -> dict[str, str]:
        """The recorded upper bounds, printed: ``{lhs: rhs}``."""
        return dict(self.context.less_equal_constraints())

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


def model_text(
    opset: int,
    inputs: str,
    body: str,
    outputs: str = "float y",
    *,
    constants: str = "",
    ir_version: int = 9,
    domains: Mapping[str, int] | None = None,
) -> str:
    """A one-graph model in the ONNX text syntax.

    Args:
        opset: The ``ai.onnx`` opset.
        inputs: The graph inputs (``"float[N, 4] x, int64[2] s"``).
        body: The nodes.
        outputs: The graph outputs.
        constants: Initializers that are not graph inputs (``"int64[2] s = {1, 2}"``).
        ir_version: The IR version.
        domains: Other imported domains and their opsets.
    """
    imports = ", ".join(f'"{d}" : {v}' for d, v in {"": opset, **(domains or {})}.items())
    constants = f"<{constants}>" if constants else ""
    return f"""
        <ir_version: {ir_version}, opset_import: [{imports}]>
        g ({inputs}) => ({outputs}) {constants} {{
            {body}
        }}
    """


def same_dims(actual: Sequence[expr.Dim] | None, expected: Sequence[int | str]) -> bool:
    """Compares dims with expected ints/expression texts modulo canonical form.

    ``"?"`` stands for a fresh symbol minted by the engine.
    """
    if actual is None or len(actual) != len(expected):
        return False
    for a, e in zip(actual, expected):
        if e == "?":
            if not (isinstance(a, expr.DimExpr) and a.is_symbol):
                return False
        elif a != (e if isinstance(e, int) else expr.parse_expr(e)):
            return False
    return True


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


def infer_afresh(text: str, monkeypatch: pytest.MonkeyPatch) -> Inferred:
    """Like :func:`infer`, computing everything again: for tests that patch the engine.

    Scopes holding the same facts share their memos (``expr.Scope._use_memos``), which
    keep results such as a Reshape's dims: a second inference of a model would find what
    the first computed, before the patch. The memos used here are new and the test's own
    (``monkeypatch`` puts the shared ones back): what a patched engine computed does not
    outlive the test.
    """
    monkeypatch.setattr(_scope, "_SHARED_MEMOS", {})
    return infer(text)


def infer_graph(text: str, opset: int = 21) -> Inferred:
    """Like :func:`infer` for a graph written without the model header."""
    return infer(f'<ir_version: 10, opset_import: ["" : {opset}]>\n{text}')


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


def exposed_model(inferred: Inferred) -> onnx.ModelProto:
    """The model with every named node output of known type made a graph output."""
    proto = ir.serde.serialize_model(inferred.model)
    del proto.graph.value_info[:]
    for output in proto.graph.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")
    declared = {o.name for o in proto.graph.output}
    for node in inferred.model.graph:
        for value in node.outputs:
            if not value.name or value.name in declared:
                continue
            other = inferred.context.non_tensor_type_of(value)
            dtype = inferred.context.dtype_of(value)
            if other is None and dtype is None:
                continue
            extra = proto.graph.output.add()
            extra.name = value.name
            extra.type.CopyFrom(ir.serde.serialize_type(other or ir.TensorType(dtype)))
    return proto


def ort_session(proto: onnx.ModelProto):
    """An onnxruntime CPU session without graph optimizations (the kernels as they are)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def run_ort(
    inferred: Inferred, binding: Mapping[str, int], feeds: Feeds | None = None
) -> dict[str, np.ndarray]:
    """Runs the model with onnxruntime; returns every node output by name.

    Inputs not in ``feeds`` are generated with the shapes their declared dims take
    under ``binding``.
    """
    session = ort_session(exposed_model(inferred))
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


def check_dim(
    context: ShapesContext, d: expr.Dim, size: int, bound: dict[str, int], where: str
) -> None:
    """Asserts ``d`` is ``size`` under ``bound``.

    A fresh (engine-minted) bare symbol not bound yet takes ``size``; a dim that still
    has an unbound symbol is not checked.
    """
    if isinstance(d, expr.DimExpr) and d.is_symbol and d.name not in bound:
        assert context.is_generated(d.name), f"{where}: unbound declared symbol {d}"
        bound[d.name] = size
        return
    if isinstance(d, expr.DimExpr) and not d.symbols() <= bound.keys():
        return
    got = expr.evaluate(d, bound)
    assert got == size, f"{where}: {expr.to_onnx(d)} = {got}, actual {size} under {bound}"


def check_constraints(context: ShapesContext, bound: Mapping[str, int]) -> None:
    """Asserts every recorded equality and upper bound whose symbols are all bound."""

    def known(d: expr.Dim) -> bool:
        return isinstance(d, int) or d.symbols() <= bound.keys()

    for a, b in context.constraint_dims():
        if known(a) and known(b):
            assert expr.evaluate(a, bound) == expr.evaluate(b, bound), (a, b, dict(bound))
    for lhs, rhs in context.less_equal_constraint_dims():
        if known(lhs) and known(rhs):
            assert expr.evaluate(lhs, bound) <= expr.evaluate(rhs, bound), (
                lhs,
                rhs,
                dict(bound),
            )


def check_against_ort(
    text: str,
    bindings: Sequence[Mapping[str, int]],
    feeds: Feeds | None = None,
) -> Inferred:
    """Infers ``text`` and asserts every inferred dim and dtype matches onnxruntime.

    Symbols of the graph inputs take the binding's sizes; a fresh (engine-minted) bare
    symbol takes the first size it is seen with and must then be consistent. A dim that
    still has an unbound symbol is not checked. Known value elements and recorded
    constraints (equalities, upper bounds) must hold too.
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
                check_dim(inferred.context, d, size, bound, f"{name}[{axis}]")
        for name, array in actual.items():
            _check_elements(inferred, name, array, bound)
        check_constraints(inferred.context, bound)
    return inferred


def check_runs(inferred: Inferred, feeds_list: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Runs the inferred model on each set of input arrays and checks every inferred dim.

    Symbols of graph inputs are bound from the fed arrays; a fresh symbol takes the
    first size it is seen with and must be consistent afterwards (per run). Every
    element of a sequence output must have the sequence's inferred element shape, and
    every recorded constraint must hold.
    """
    for feeds in feeds_list:
        bound: dict[str, int] = {}
        for value in inferred.model.graph.inputs:
            dims = inferred.context.shape_of(value) or ()
            for d, size in zip(dims, np.shape(feeds[value.name])):
                if isinstance(d, expr.DimExpr) and d.is_symbol:
                    bound.setdefault(d.name, size)
        for name, actual in run_ort(inferred, {}, feeds).items():
            dims = inferred.dims(name)
            if dims is None:
                continue
            arrays = actual if isinstance(actual, list) else [actual]
            for k, array in enumerate(arrays):
                assert len(dims) == np.ndim(array), f"{name}: {dims} vs {np.shape(array)}"
                for axis, (d, size) in enumerate(zip(dims, np.shape(array))):
                    check_dim(inferred.context, d, size, bound, f"{name}[{k}][{axis}]")
        check_constraints(inferred.context, bound)


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
