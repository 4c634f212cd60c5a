"""``FoldFloatsInOnnxruntimePass``: with ``exact_floats=False``, float constants folded by
onnxruntime's own kernels, so the folded model computes the original's bits on this machine.

Each firing case runs the model before and after in onnxruntime (graph optimizations off)
and compares the outputs bit for bit; each declining case shows the node kept.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims.rewrite import _pipeline
from onnx_symdims.rewrite._ort_folding import FoldFloatsInOnnxruntimePass
from tests.rewrite._rewrite_testing import model, ops, proto, session

_rng = np.random.default_rng(11)


def _floats(n: int, scale: float = 1.0) -> str:
    return ", ".join(f"{v:.6f}" for v in _rng.standard_normal(n) * scale)


# DeBERTa's relative position embeddings: LayerNormalization of a weight, then projected
# by MatMul with another weight — a float computation of constants only.
REL_EMBEDDINGS = f"""
    g (float[N, 8] x) => (float[N, 8] y)
    <float[8, 8] rel = {{{_floats(64)}}}, float[8] gamma = {{{_floats(8)}}},
     float[8] beta = {{{_floats(8)}}}, float[8, 8] w = {{{_floats(64)}}}> {{
        n = LayerNormalization<axis = -1>(rel, gamma, beta)
        p = MatMul(n, w)
        e = Exp(p)
        y = MatMul(x, e)
    }}
"""

EXP_OF_CONSTANT = f"""
    g (float[N, 64] x) => (float[N, 64] y) {{
        c = Constant<value = float[64] {{{_floats(64, 5.0)}}}>()
        e = Exp(c)
        y = Mul(x, e)
    }}
"""


def _outputs(m: ir.Model, x: np.ndarray) -> np.ndarray:
    return session(proto(m)).run(None, {"x": x})[0]


@pytest.mark.parametrize(
    ("text", "width", "kept_by_default", "folded"),
    [
        (EXP_OF_CONSTANT, 64, ["Exp", "Mul"], ["Mul"]),
        (REL_EMBEDDINGS, 8, ["LayerNormalization", "MatMul", "Exp", "MatMul"], ["MatMul"]),
    ],
    ids=["exp", "layer_norm_matmul"],
)
def test_float_constants_are_folded_in_onnxruntime_bit_for_bit(
    text, width, kept_by_default, folded
):
    x = _rng.standard_normal((3, width)).astype(np.float32)
    expected = _outputs(model(text), x)
    assert ops(onnx_symdims.optimize(model(text))) == kept_by_default
    after = onnx_symdims.optimize(model(text), exact_floats=False)
    assert ops(after) == folded
    np.testing.assert_array_equal(_outputs(after, x), expected)


def test_without_onnxruntime_the_numpy_reference_folds_what_it_can(monkeypatch):
    """The fallback is onnxscript's folder: numpy bits, and no LayerNormalization."""
    monkeypatch.setattr(_pipeline, "onnxruntime_available", lambda: False)
    after = onnx_symdims.optimize(model(REL_EMBEDDINGS), exact_floats=False)
    # The reference LayerNormalization returns three outputs for a one-output node,
    # which onnxscript's folder declines; everything after it stays as well.
    assert ops(after) == ["LayerNormalization", "MatMul", "Exp", "MatMul"]
    after = onnx_symdims.optimize(model(EXP_OF_CONSTANT), exact_floats=False)
    assert ops(after) == ["Mul"]


def _fold(text: str) -> list[str]:
    m = model(text)
    FoldFloatsInOnnxruntimePass(input_size_limit=16)(m)
    return [n.op_type for n in m.graph]


@pytest.mark.parametrize(
    ("text", "op", "why"),
    [
        (
            """
            g (float[2, 2] x, float[2, 2] w) => (float[2, 2] y) <float[2, 2] w = {1., 2., 3., 4.}> {
                e = Exp(w)
                y = Mul(x, e)
            }
            """,
            "Exp",
            "an initializer that is also a graph input can be fed: not a constant",
        ),
        (
            """
            g (float[2, 2] x) => (float[2, 2] e) <float[2, 2] w = {1., 2., 3., 4.}> {
                e = Exp(w)
            }
            """,
            "Exp",
            "the output is a graph output",
        ),
        (
            f"""
            g (float[5, 5] x) => (float[5, 5] y) <float[5, 5] w = {{{_floats(25)}}}> {{
                e = Exp(w)
                z = Mul(x, w)
                y = Mul(z, e)
            }}
            """,
            "Exp",
            "a large input another node keeps would be copied",
        ),
        (
            """
            g (float[2, 2] x) => (float[2, 2] y) <float[2, 2] w = {1., 2., 3., 4.}> {
                r = RandomNormalLike(w)
                y = Mul(x, r)
            }
            """,
            "RandomNormalLike",
            "a random op is not a function of its inputs",
        ),
        (
            """
            g (float[2, 2] x) => (float[2, 2] y) <float[2, 2] w = {1., 2., 3., 4.}> {
                e = Add(w, w)
                y = Mul(x, e)
            }
            """,
            "Add",
            "numpy adds exactly: onnxscript's folder folds it, not this pass",
        ),
    ],
    ids=["overridable", "graph_output", "shared_large", "random", "exact_op"],
)
def test_declines(text, op, why):
    assert op in _fold(text), why


def test_a_malformed_constant_is_no_constant():
    """A ``Constant`` with two attributes makes onnx-ir raise: the node is just kept."""
    m = model(
        """
        g (float[2] x) => (float[2] y) {
            c = Constant<value_floats = [1., 2.], value_float = 1.>()
            e = Exp(c)
            y = Mul(x, e)
        }
        """
    )
    (exp,) = (n for n in m.graph if n.op_type == "Exp")
    exp.outputs[0].dtype = ir.DataType.FLOAT  # as inference writes it: a float node
    FoldFloatsInOnnxruntimePass()(m)
    assert "Exp" in [n.op_type for n in m.graph]


@pytest.mark.parametrize("typed", [True, False], ids=["sequence_typed", "untyped"])
def test_a_node_giving_a_sequence_is_kept(typed):
    """onnxruntime returns a list for a sequence: nothing to fold into a tensor."""
    m = model(
        """
        g (float[5] x) => (float[5] y) <float[5] w = {1., 2., 3., 4., 5.}> {
            s = SequenceConstruct(w)
            zero = Constant<value = int64 {0}>()
            e = SequenceAt(s, zero)
            y = Mul(x, e)
        }
        """
    )
    (construct,) = (n for n in m.graph if n.op_type == "SequenceConstruct")
    sequence = construct.outputs[0]
    if typed:  # as inference writes it
        sequence.type = ir.SequenceType(ir.TensorType(ir.DataType.FLOAT))
    else:  # an element shape left on the value, as the If test of the backend suite had
        sequence.shape = ir.Shape([5])
    assert not FoldFloatsInOnnxruntimePass()(m).modified
    assert "SequenceConstruct" in ops(m)
