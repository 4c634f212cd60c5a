"""Helpers for the engine tests: build models from ONNX text, infer, read dims back."""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims.passes import SymbolicShapeInferencePass, SymbolicShapeInferenceResult
from onnx_symdims.verify import verify_model

HEADER = '<ir_version: 10, opset_import: ["" : {opset}]>'


def model(body: str, opset: int = 21) -> ir.Model:
    """``body`` is ``g (inputs) => (outputs) <initializers> { nodes }``."""
    return ir.from_onnx_text(HEADER.format(opset=opset) + "\n" + body)


def infer(
    body: str, opset: int = 21, **options
) -> tuple[ir.Model, SymbolicShapeInferenceResult]:
    m = model(body, opset)
    result = SymbolicShapeInferencePass(**options)(m)
    return m, result


def value(m: ir.Model, name: str) -> ir.Value:
    for node in m.graph:
        for output in node.outputs:
            if output.name == name:
                return output
    for v in m.graph.inputs:
        if v.name == name:
            return v
    raise KeyError(name)


def dims(m: ir.Model, name: str) -> list[int | str | None] | None:
    """The written dims of ``name``: ints, dim_param strings, None for an empty dim."""
    shape = value(m, name).shape
    if shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in shape.dims]


def is_fresh(result: SymbolicShapeInferenceResult, dim: int | str | None) -> bool:
    """True when ``dim`` is a bare symbol minted by the engine."""
    return isinstance(dim, str) and result.context.is_generated(dim)


def assert_verified(m: ir.Model, runs: int = 2) -> None:
    """onnxruntime agrees with every written dim (and at least one dim was checked)."""
    report = verify_model(m, runs=runs)
    assert not report.errors, report.errors
    assert report.mismatches == [], [str(x) for x in report.mismatches]
    assert report.runs == runs
    assert report.checked_dims > 0


def errors(result: SymbolicShapeInferenceResult) -> list[str]:
    return [d.message for d in result.diagnostics if d.severity == "error"]
