"""Tests of the sequence hooks (onnxruntime as oracle).

A sequence carried through a ``Loop`` is tested with the control-flow hooks.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx.reference
import onnxruntime as ort
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, check_runs, infer, infer_graph, model_text


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


# ----------------------------------------------------------------------------------------
# Sequences
# ----------------------------------------------------------------------------------------
def test_sequence_ops():
    result = infer_graph("""
g (float[N, 3] a, float[N, 3] b) => (c0, c1, n, e, parts, back, at) {
  s = SequenceConstruct(a, b)
  c0 = ConcatFromSequence<axis=0>(s)
  c1 = ConcatFromSequence<axis=-1, new_axis=1>(s)
  n = SequenceLength(s)
  s3 = SequenceInsert(s, a)
  e = SequenceAt(s3, n)
  parts = SplitToSequence<axis=1, keepdims=0>(a)
  back = ConcatFromSequence<axis=0, new_axis=1>(parts)
  one = Constant<value = int64 {1}>()
  s1 = SplitToSequence<axis=1>(a, one)
  at = SequenceAt(s1, one)
}
""")
    assert result.shape("c0") == ["2*N", 3]
    assert result.shape("c1") == ["N", 3, 2]
    assert result.context.value_of(result.value("n")) == (2,)
    assert result.shape("e") == ["N", 3]
    assert result.shape("parts") == ["N"]
    assert result.shape("back") == [3, "N"]
    assert result.shape("at") == ["N", 1]
    check_runs(result, [{"a": f32(n, 3), "b": f32(n, 3)} for n in (0, 2)])


def test_sequence_with_different_elements_has_no_element_shape():
    result = infer_graph("""
g (float[N, 3] a, float[M, 3] b) => (c, first) {
  s = SequenceConstruct(a, b)
  c = ConcatFromSequence<axis=0>(s)
  zero = Constant<value = int64 {0}>()
  first = SequenceAt(s, zero)
}
""")
    assert result.dims("s") is None
    assert result.shape("c") == ["M+N", 3]
    assert result.shape("first") == ["N", 3]
    check_runs(result, [{"a": f32(n, 3), "b": f32(m, 3)} for n, m in ((0, 2), (3, 1))])


@pytest.mark.parametrize(
    ("split", "keepdims", "seq_shape", "length", "joined"),
    [
        ("", 1, ["N", 1], "M", ["N", "M"]),
        ("", 0, ["N"], "M", ["M*N"]),
        ("two", 1, None, "(M+1)//2", ["N", "M"]),
        ("sizes", 1, None, 2, ["N", "M"]),
    ],
    ids=["no_split", "no_split_squeezed", "scalar_split", "split_list"],
)
def test_split_to_sequence_symbolic(split, keepdims, seq_shape, length, joined):
    args = {"": "x", "two": "x, two", "sizes": "x, sizes"}[split]
    result = infer_graph(f"""
g (float[N, M] x, int64[2] sizes) => (parts, n, joined) {{
  two = Constant<value = int64 {{2}}>()
  parts = SplitToSequence<axis=1, keepdims={keepdims}>({args})
  n = SequenceLength(parts)
  joined = ConcatFromSequence<axis={1 if keepdims else 0}>(parts)
}}
""")
    assert result.shape("parts") == seq_shape
    (n,) = result.context.value_of(result.value("n"))
    assert (n if isinstance(n, int) else expr.to_onnx(n)) == length
    if joined is not None:
        assert result.shape("joined") == joined
    feeds = [{"x": f32(2, m), "sizes": np.array([1, m - 1], np.int64)} for m in (1, 4, 5)]
    check_runs(result, feeds)


@pytest.mark.parametrize("split", ["x, sizes", "x, step"])
def test_sequence_at_of_a_split_by_unknown_sizes(split):
    """TorchScript's ``tensor_split``: chunk sizes computed at run time.

    An element keeps every dim but the split one (a size of its own: chunks differ).
    """
    result = infer_graph(f"""
g (float[N, M, 3] x, int64[3] sizes, int64 step) => (first, last) {{
  parts = SplitToSequence<axis=1>({split})
  zero = Constant<value = int64 {{0}}>()
  first = SequenceAt(parts, zero)
  minus_one = Constant<value = int64 {{-1}}>()
  last = SequenceAt(parts, minus_one)
}}
""")
    first, last = result.shape("first"), result.shape("last")
    assert first[0] == last[0] == "N" and first[2] == last[2] == 3
    assert first[1] != last[1]
    feeds = [
        {"x": f32(2, m, 3), "sizes": np.array([1, m - 3, 2], np.int64), "step": np.array(2)}
        for m in (3, 4, 7)
    ]
    check_runs(result, feeds)


def test_concat_from_sequence_without_axis_gives_a_diagnostic():
    result = infer_graph("""
g (float[N] a) => (y) {
  s = SequenceConstruct(a, a)
  y = ConcatFromSequence(s)
}
""")
    assert result.messages("error"), result.context.diagnostics
    assert all(result.dims(v.name) is None for v in result.model.graph.outputs)


# ----------------------------------------------------------------------------------------
# Optionals
# ----------------------------------------------------------------------------------------
def test_optional_element_shapes():
    # An optional input's declared element shape is its shape; a tensor passes through.
    result = infer_graph(
        """
g (optional(float[N, 3]) o, float[M] t, optional(seq(float[N])) os) => (y, h, z, w, s) {
  y = OptionalGetElement(o)
  h = OptionalHasElement(o)
  p = Optional(t)
  z = OptionalGetElement(p)
  w = OptionalGetElement(t)
  s = OptionalGetElement(os)
}
""",
        opset=18,
    )
    assert result.shape("y") == ["N", 3]
    assert result.shape("h") == []
    assert result.shape("p") == ["M"]
    assert result.shape("z") == ["M"]
    assert result.shape("w") == ["M"]
    assert result.shape("s") == ["N"]
    assert result.dtype("y") == result.dtype("z") == result.dtype("s")
    feeds = [
        {"o": f32(n, 3), "t": f32(m), "os": [f32(n), f32(n)]} for n, m in ((2, 5), (0, 1))
    ]
    check_runs(result, feeds)


def test_empty_optional_has_no_element_shape():
    result = infer_graph(
        """
g (float[N] x) => (h) {
  e = Optional<type = float>()
  h = OptionalHasElement(e)
}
""",
        opset=18,
    )
    assert result.dims("e") is None
    assert result.shape("h") == []
    check_runs(result, [{"x": f32(2)}])


def test_optional_get_element_of_a_constant_keeps_its_contents():
    # The element of Optional(constant) is the constant: a Reshape target stays known.
    text = model_text(
        18,
        "float[N, 6] x",
        """
        target = Constant<value = int64[2] {-1, 3}>()
        o = Optional(target)
        t = OptionalGetElement(o)
        y = Reshape(x, t)
        """,
    )
    result = check_against_ort(text, [{"N": 2}, {"N": 0}, {"N": 5}])
    assert result.elements("t") == [-1, 3]
    assert result.shape("y") == ["2*N", 3]


def test_split_to_sequence_by_a_scalar_keeps_the_axis_as_the_spec_says():
    """``keepdims`` is ignored when ``split`` is given (the ONNX spec, the reference evaluator).

    onnxruntime departs: with a scalar ``split`` of 1 and ``keepdims=0`` it squeezes the
    split axis (``[2, 3]`` gives elements ``[2]``; a split of 2 fails in its Reshape). The
    engine follows the spec; this test also pins onnxruntime's departure.
    """
    text = """<ir_version: 10, opset_import: ["" : 21]>
g (float[N, 3] x) => (first) {
  one = Constant<value = int64 {1}>()
  parts = SplitToSequence<axis=1, keepdims=0>(x, one)
  zero = Constant<value = int64 {0}>()
  first = SequenceAt(parts, zero)
}
"""
    assert infer(text).shape("first") == ["N", 1]
    proto = onnx.parser.parse_model(text)
    feeds = {"x": f32(2, 3)}
    (spec,) = onnx.reference.ReferenceEvaluator(proto).run(None, feeds)
    assert spec.shape == (2, 1)
    session = ort.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (departed,) = session.run(None, feeds)
    assert departed.shape == (2,)
