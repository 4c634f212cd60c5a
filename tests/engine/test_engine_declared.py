"""Declared shapes that inference contradicts, and their spelling (issue 10 §3).

A declared intermediate shape (``value_info``) is a claim no runtime checks; a graph
output's declared shape is an anchor. Neither may leave a wrong dim on the written
model: a provably false (or, on an intermediate, unimplied) declared dim is replaced by
the inferred one, with a warning naming the value and both shapes; ``strict`` raises.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims.passes import AnchorConstraintPropagationPass, SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext
from tests.engine._engine_testing import assert_verified, dims, infer, model, value

CHAIN = """g (float[N, 3] x) => (z) {
    y = Relu(x)
    s = Shape(y)
    z = Reshape(y, s)
}"""


def _declare(text: str, name: str, shape: list) -> ir.Model:
    m = model(text)
    v = value(m, name)
    v.shape = ir.Shape(shape)
    v.dtype = ir.DataType.FLOAT
    return m


def _warnings(result) -> list[str]:
    return [d.message for d in result.diagnostics if d.severity == "warning"]


@pytest.mark.parametrize(
    ("declared", "both"),
    [
        ([1, 3], "declared [1, 3], inferred [N, 3]"),  # stale: batch declared 1
        (["N", 4], "declared [N, 4], inferred [N, 3]"),  # two different ints
        (["N"], "declared [N], inferred [N, 3]"),  # another rank
    ],
)
def test_false_intermediate_value_info_is_replaced(declared, both):
    m = _declare(CHAIN, "y", declared)
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "y") == ["N", 3]
    assert dims(m, "z") == ["N", 3]  # downstream never sees the false claim
    assert any("output 'y'" in w and both in w for w in _warnings(result)), _warnings(result)
    assert_verified(m)  # onnxruntime runs N != 1: a kept declared 1 would be wrong
    for options in ({"strict": True}, {"policy": "strict"}):
        with pytest.raises(ShapeInferenceError, match="output 'y'"):
            SymbolicShapeInferencePass(**options)(_declare(CHAIN, "y", declared))


def test_declared_int_on_a_minted_dim_is_kept():
    """Where inference knows nothing (a fresh symbol), the declared int is the only fact.

    (A runtime shape: a data-dependent size with a recorded bound, such as a ``NonZero``
    count, is not one; see tests/engine/test_anchor_policy.py.)
    """
    text = """g (int64[2] s) => (z) {
        nz = ConstantOfShape(s)
        z = Identity(nz)
    }"""
    m = model(text)
    v = value(m, "nz")
    v.shape = ir.Shape([2, 5])
    v.dtype = ir.DataType.FLOAT
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "nz") == [2, 5]
    assert dims(m, "z") == [2, 5]
    assert not _warnings(result)


@pytest.mark.parametrize(
    ("declared", "written"),
    [
        ("((batch*total_seq_len)//batch)", "total_seq_len"),  # an exporter's spelling
        ("total_seq_len*1", "total_seq_len"),
        ("(total_seq_len + 0)", "total_seq_len"),
    ],
)
def test_exporter_text_equal_to_the_inferred_dim_is_written_canonically(declared, written):
    text = """g (float[total_seq_len, 3] x) => (z) {
        y = Relu(x)
        z = Identity(y)
    }"""
    m = _declare(text, "y", [declared, 3])
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "y") == [written, 3]
    assert not _warnings(result)


def test_declared_name_where_an_int_is_inferred_stays_with_the_equality():
    m, result = infer("g (float[3, 4] x) => (float[N, 4] y) { y = Relu(x) }")
    assert dims(m, "y") == ["N", 4]
    assert result.context.has_constraint("N", 3)
    assert not _warnings(result)


KV = """g (float[batch, past_seq, 8] k, float[batch, seq, 8] n, float[batch, total_seq] mask)
    => (float[batch, total_seq, 8] kv, float["?", "?", ""] probs) {
    kv = Concat<axis=1>(k, n)
    ax = Constant<value=int64[1] {2}>()
    m3 = Unsqueeze(mask, ax)
    s = Add(kv, m3)
    probs = Relu(s)
}"""


def test_empty_output_dims_filled_by_the_engine_are_rewritten_by_the_anchor_pass():
    m = model(KV)
    m.graph.outputs[1].shape = ir.Shape([None, "?", None])  # empty and anonymous dims
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "probs")[1] == "broadcast(past_seq+seq,total_seq)"
    AnchorConstraintPropagationPass(result.context, snapshot=result.snapshot)(m)
    # past_seq+seq == total_seq (the kv anchor): the same rewrite as on intermediates.
    assert dims(m, "s") == ["batch", "total_seq", 8]
    assert dims(m, "probs") == ["batch", "total_seq", 8]
    assert dims(m, "k") == ["batch", "past_seq", 8]  # declared dims keep their text


def test_declared_output_dims_are_not_rewritten():
    text = KV.replace('float["?", "?", ""] probs', 'float[batch, "past_seq+seq", 8] probs')
    m = model(text)
    result = SymbolicShapeInferencePass()(m)
    AnchorConstraintPropagationPass(result.context, snapshot=result.snapshot)(m)
    assert dims(m, "probs") == ["batch", "past_seq+seq", 8]  # the author's text


def test_self_bounds_hold():
    ctx = ShapesContext()
    assert ctx.has_less_equal_constraint("y", "y")
    assert ctx.has_constraint("y", "y")
    assert not ctx.has_less_equal_constraint("x", "y")
    assert not ctx.has_less_equal_constraint("", "")


@pytest.mark.parametrize("declared", ["-1", -1, "-2+1"])
def test_negative_declared_dims_declare_nothing(declared):
    """Some producers write -1 for "unknown": never a size (it went downstream before)."""
    text = """g (float[N, 3] x) => (float[M, 3] z) {
        y = Relu(x)
        z = Concat<axis=0>(y, x)
    }"""
    m = _declare(text, "y", [declared, 3])
    m.graph.outputs[0].shape = ir.Shape([declared, 3])
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "y") == ["N", 3]
    assert dims(m, "z") == ["2*N", 3]  # filled in: the declared text names no dim
    assert not [d for d in result.diagnostics if d.severity in ("warning", "error")]
    assert_verified(m)


def test_declared_symbolic_dim_proven_different_is_replaced():
    text = """g (float[N, 3] x) => (z) <int64[4] pads = {1, 0, 0, 0}> {
        p = Pad<mode="constant">(x, pads)
        z = Identity(p)
    }"""
    m = _declare(text, "p", ["N", 3])  # stale: N rows declared, N+1 computed
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "p") == ["N+1", 3]
    assert any("declared N but inferred N+1" in w for w in _warnings(result))
    # Another name is not provably different, but N+1 holds in every run and M = N+1 is
    # implied by nothing: the inferred dim is written, with a conflict.
    m = _declare(text, "p", ["M", 3])
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "p") == ["N+1", 3]
    assert dims(m, "z") == ["N+1", 3]
    assert any("declared M is not implied by inferred N+1" in w for w in _warnings(result))
