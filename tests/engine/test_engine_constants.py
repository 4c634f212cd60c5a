"""The engine's inline path for ``Constant`` nodes gives exactly what the hook gives."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims.passes import _inference
from tests.engine._engine_testing import model

# Each graph feeds its Constants into shape arithmetic, so their facts are used downstream.
CASES = {
    "int64 scalar and vector": """
        g (float[batch, seq] x) => (float[batch, seq] y) {
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64[1] {1}>()
            s = Shape(x)
            b = Gather<axis=0>(s, zero)
            bu = Unsqueeze(b, one)
            minus = Constant<value = int64[1] {-1}>()
            target = Concat<axis=0>(bu, minus)
            y = Reshape(x, target)
        }""",
    "int64 matrix and empty": """
        g (float[batch, seq] x) => (int64[2, 2] m, int64[0] e, float[batch, seq] y) {
            m = Constant<value = int64[2, 2] {1, 2, 3, 4}>()
            e = Constant<value = int64[0] {}>()
            s = Shape(x)
            t = Concat<axis=0>(s, e)
            y = Reshape(x, t)
        }""",
    "other dtypes and attributes": """
        g (float[batch] x) => (float[batch] y, int32[2] i, float f, int64[3] v, int64 k) {
            i = Constant<value = int32[2] {5, 6}>()
            f = Constant<value_float = 1.5>()
            v = Constant<value_ints = [1, 2, 3]>()
            k = Constant<value_int = 7>()
            y = Relu(x)
        }""",
    "two attributes fail the node": """
        g (float[batch] x) => (float[batch] y) {
            c = Constant<value_int = 1, value_ints = [1, 2]>()
            y = Relu(x)
        }""",
}


def _facts(text: str, fast: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(_inference.InferenceEngine, "constant_fast_path", fast)
    m = model(text)
    result = _inference.SymbolicShapeInferencePass()(m)
    ctx = result.context
    values = [v for node in m.graph for v in node.outputs]
    return {
        "facts": {v.name: (ctx.shape_of(v), ctx.value_of(v), ctx.dtype_of(v)) for v in values},
        "written": {
            v.name: (
                None
                if v.shape is None
                else [d if isinstance(d, int) else d.value for d in v.shape],
                v.dtype,
            )
            for v in [*values, *m.graph.outputs]
        },
        "diagnostics": [str(d) for d in result.diagnostics],
        "symbols": sorted(ctx.generated_symbols),
    }


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_inline_constants_match_the_hook(text, monkeypatch):
    assert _facts(text, True, monkeypatch) == _facts(text, False, monkeypatch)


def test_inline_constants_are_taken_for_int64_tensors(monkeypatch):
    taken: list[str] = []
    original = _inference.InferenceEngine._constant_fast_path

    def counting(self, node: ir.Node) -> bool:
        done = original(self, node)
        if done:
            taken.append(node.outputs[0].name)
        return done

    monkeypatch.setattr(_inference.InferenceEngine, "_constant_fast_path", counting)
    facts = _facts(CASES["int64 scalar and vector"], True, monkeypatch)
    assert taken == ["zero", "one", "minus"]
    assert facts["facts"]["minus"] == ((1,), (-1,), ir.DataType.INT64)
    assert facts["written"]["y"][0] == ["batch", "seq"]
