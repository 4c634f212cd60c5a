"""The per-node loop's shortcuts (one loop per walk, inline settle and typing) change nothing."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import data_path, infer_symbolic_shapes
from onnx_symdims.passes import SymbolicShapeInferencePass, _inference
from tests.engine._engine_testing import model

# ConstantOfShape([seq - 1]) has the compound dim seq-1: noting it records a fact, so the
# chain of Adds (shapes) and Identities of a Shape (elements) after it is settled under a
# scope version > 0, where the loop reuses what it settled for the node before.
_CHAIN = """
g (float[batch, seq] x) => (float[n] y) {
    one = Constant<value = int64[1] {1}>()
    s = Shape(x)
    two = Constant<value = int64[1] {2}>()
    n = Slice(s, one, two)
    m = Sub(n, one)
    c = ConstantOfShape(m)
    s0 = Shape(c)
    a0 = Add(c, c)
    {nodes}
    y = Identity(a{last})
}
"""


def _chain(length: int) -> ir.Model:
    nodes = []
    for i in range(1, length):
        nodes += [f"a{i} = Add(a{i - 1}, c)", f"s{i} = Identity(s{i - 1})"]
    text = _CHAIN.replace("{nodes}", "\n    ".join(nodes)).replace("{last}", str(length - 1))
    return model(text)


def _written(m: ir.Model) -> dict[str, tuple[str, list[str] | None]]:
    return {
        v.name: (str(v.type), None if v.shape is None else [str(d) for d in v.shape.dims])
        for node in m.graph
        for v in node.outputs
    }


@pytest.mark.parametrize("length", [3, 120, 250])
def test_progress_is_told_after_every_step_and_the_last_node(length):
    m = _chain(length)
    total = len(m.graph)
    step = max(total // 100, 1)
    calls: list[tuple[int, int]] = []
    SymbolicShapeInferencePass(progress=lambda done, n: calls.append((done, n)))(m)
    expected = [
        (done, total) for done in range(1, total + 1) if done % step == 0 or done == total
    ]
    assert calls == expected
    # Walked in runs of ``step`` nodes or in one run: the same shapes written.
    plain = _chain(length)
    SymbolicShapeInferencePass()(plain)
    assert _written(m) == _written(plain)
    assert [str(d) for d in m.graph.outputs[0].shape.dims] == ["n"]


def test_inline_tensor_types_are_what_new_tensor_type_makes(monkeypatch):
    fast = infer_symbolic_shapes(data_path("tiny_decoder.onnx"))
    monkeypatch.setattr(_inference, "_FAST_TENSOR_TYPE", False)
    slow = infer_symbolic_shapes(data_path("tiny_decoder.onnx"))
    assert _written(fast) == _written(slow)
    typed = [v for node in fast.graph for v in node.outputs if v.type is not None]
    assert typed
    for v in typed:
        assert type(v.type) is ir.TensorType
        assert v.type == ir.TensorType(v.dtype)
        assert v.type.denotation is None
    # Each value has its own type object: setting one dtype leaves the others.
    assert len({id(v.type) for v in typed}) == len(typed)


def test_the_first_non_tensor_type_of_a_run_is_written():
    """The loop reads the context's non-tensor type table per node: the context makes it
    on its first entry (a run of tensors only shares one empty table), and a table read
    once per walk stayed that empty one, so a sequence was written as a tensor type."""
    m = model("""
g (float[N, 4] x) => (float[N, 1] first) {
    a = Relu(x)
    parts = SplitToSequence<axis = 1>(a)
    zero = Constant<value = int64 {0}>()
    first = SequenceAt(parts, zero)
}
""")
    infer_symbolic_shapes(m)
    parts = next(v for node in m.graph for v in node.outputs if v.name == "parts")
    assert isinstance(parts.type, ir.SequenceType), parts.type
    assert [str(d) for d in m.graph.outputs[0].shape] == ["N", "1"]
