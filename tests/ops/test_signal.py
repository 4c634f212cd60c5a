"""The ai.onnx audio front end (DFT, STFT, windows, MelWeightMatrix) against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text

LENGTHS = [{"B": 2, "L": 40}, {"B": 1, "L": 16}, {"B": 0, "L": 23}, {"B": 3, "L": 17}]

# (id, opset, inputs, body, expected y)
CASES = [
    ("dft17_onesided", 17, "float[B, L, 1] x", "y = DFT<onesided=1>(x)", ["B", "L//2+1", 2]),
    ("dft17_full", 17, "float[B, L, 2] x", "y = DFT(x)", ["B", "L", 2]),
    ("dft17_axis2", 17, "float[B, 3, L, 1] x", "y = DFT<onesided=1, axis=2>(x)", ["B", 3, "L//2+1", 2]),
    ("dft17_length", 17, "float[B, L, 1] x", """
        n = Constant<value=int64 {10}>()
        y = DFT<onesided=1>(x, n)""", ["B", 6, 2]),
    ("dft17_inverse", 17, "float[B, L, 2] x", "y = DFT<inverse=1>(x)", ["B", "L", 2]),
    ("dft20_default_axis", 20, "float[B, L, 1] x", "y = DFT<onesided=1>(x)", ["B", "L//2+1", 2]),
    ("dft20_axis_input", 20, "float[L, B, 1] x", """
        ax = Constant<value=int64 {0}>()
        y = DFT<onesided=1>(x, , ax)""", ["L//2+1", "B", 2]),
    ("dft20_length_from_shape", 20, "float[B, L, 1] x", """
        s = Shape(x)
        n1 = Slice(s, c1, c2)
        n = Squeeze(n1)
        ax = Constant<value=int64 {-2}>()
        y = DFT(x, n, ax)""", ["B", "L", 2]),
    ("stft_frame_length", 17, "float[B, L, 1] x", """
        st = Constant<value=int64 {4}>()
        fl = Constant<value=int64 {16}>()
        y = STFT(x, st, , fl)""", ["B", "(L-16)//4+1", 9, 2]),
    ("stft_window", 17, "float[B, L, 1] x, float[16] w", """
        st = Constant<value=int64 {3}>()
        y = STFT<onesided=0>(x, st, w)""", ["B", "(L-16)//3+1", 16, 2]),
    ("stft_window_and_length", 17, "float[B, L, 2] x, float[8] w", """
        st = Constant<value=int64 {8}>()
        fl = Constant<value=int64 {8}>()
        y = STFT<onesided=0>(x, st, w, fl)""", ["B", "(L-8)//8+1", 8, 2]),
    ("hann_from_shape", 17, "float[B, L] x", """
        s = Shape(x)
        n1 = Slice(s, c1, c2)
        n = Squeeze(n1)
        y = HannWindow(n)""", ["L"]),
    ("hamming", 17, "float[B] x", """
        n = Constant<value=int64 {10}>()
        y = HammingWindow<periodic=0>(n)""", [10]),
    ("blackman", 17, "float[B] x", """
        n = Constant<value=int32 {7}>()
        y = BlackmanWindow(n)""", [7]),
    ("mel", 17, "float[B] x", """
        a = Constant<value=int64 {8}>()
        b = Constant<value=int64 {16}>()
        c = Constant<value=int64 {8000}>()
        d = Constant<value=float {0.0}>()
        e = Constant<value=float {4000.0}>()
        y = MelWeightMatrix(a, b, c, d, e)""", [9, 8]),
    ("mel_from_shape", 17, "float[B, L] x", """
        s = Shape(x)
        n1 = Slice(s, c1, c2)
        n = Squeeze(n1)
        a = Constant<value=int64 {4}>()
        c = Constant<value=int64 {8000}>()
        d = Constant<value=float {0.0}>()
        e = Constant<value=float {3000.0}>()
        y = MelWeightMatrix(a, n, c, d, e)""", ["L//2+1", 4]),
]  # fmt: skip


def _equal(got, want) -> bool:
    if got is None or len(got) != len(want):
        return False
    for g, w in zip(got, want):
        w_dim = w if isinstance(w, int) else expr.parse_dim(w)
        for binding in ({"B": 2, "L": 40}, {"B": 1, "L": 17}, {"B": 3, "L": 16}):
            if expr.evaluate(g, binding) != expr.evaluate(w_dim, binding):
                return False
    return True


@pytest.mark.parametrize(
    ("opset", "inputs", "body", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_signal(opset, inputs, body, expected):
    text = model_text(opset, inputs, body, constants="int64[1] c1 = {1}, int64[1] c2 = {2}")
    inferred = check_against_ort(text, LENGTHS if "L" in inputs else [{"B": 2}, {"B": 0}])
    assert not inferred.errors and not inferred.warnings, inferred.warnings
    assert _equal(inferred.dims("y"), expected), (inferred.shape("y"), expected)


@pytest.mark.parametrize(("opset", "args"), [(17, "x"), (20, "x, , ax")])
def test_inverse_onesided_dft_is_real(opset, args):
    """irfft (ONNX's backend test): real, ``2 * (bins - 1)`` long without dft_length."""
    text = model_text(opset, "float[B, M, 10, 2] x", f"""
        ax = Constant<value=int64 {{1}}>()
        y = DFT<onesided=1, inverse=1{", axis=1" if opset == 17 else ""}>({args})""")  # fmt: skip
    inferred = check_against_ort(text, [{"B": 2, "M": 6}, {"B": 1, "M": 5}, {"B": 0, "M": 2}])
    assert inferred.shape("y") == ["B", "2*M-2", 10, 1]


def test_runtime_axis_leaves_every_signal_dim_fresh():
    text = model_text(20, "float[B, L, 1] x, int64 ax", "y = DFT<onesided=1>(x, , ax)")
    feeds = {"ax": np.array(0, dtype=np.int64)}  # the batch axis is a legal axis too
    inferred = check_against_ort(text, [{"B": 6, "L": 4}], feeds)
    assert inferred.dims("y")[2] == 2
    assert all(inferred.context.is_generated(d.name) for d in inferred.dims("y")[:2])


@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -2])
def test_runtime_axis_of_a_full_transform_keeps_every_dim(inverse, axis):
    # Without onesided or dft_length, whichever axis is transformed keeps its size.
    text = model_text(20, "float[B, L, 2] x, int64 ax", f"y = DFT<inverse={inverse}>(x, , ax)")
    feeds = {"ax": np.array(axis, dtype=np.int64)}
    inferred = check_against_ort(text, [{"B": 3, "L": 4}, {"B": 1, "L": 7}], feeds)
    assert inferred.shape("y") == ["B", "L", 2]


def test_runtime_axis_with_a_dft_length_keeps_the_dims_of_that_length():
    text = model_text(20, "float[B, 8, 1] x, int64 ax", """
        n = Constant<value=int64 {8}>()
        y = DFT(x, n, ax)""")  # fmt: skip
    for axis in (0, 1):
        feeds = {"ax": np.array(axis, dtype=np.int64)}
        inferred = check_against_ort(text, [{"B": 3}], feeds)
        first, second, last = inferred.dims("y")
        assert (second, last) == (8, 2)
        assert inferred.context.is_generated(first.name)


def test_stft_records_that_the_frame_fits():
    text = model_text(17, "float[B, L, 1] x", """
        st = Constant<value=int64 {4}>()
        fl = Constant<value=int64 {16}>()
        y = STFT(x, st, , fl)""")  # fmt: skip
    inferred = infer(text)
    assert inferred.context.has_less_equal_constraint(16, expr.sym("L"))


def test_window_output_datatype():
    text = model_text(17, "float[B] x", """
        n = Constant<value=int64 {10}>()
        y = BlackmanWindow<output_datatype=11>(n)""", "double y")  # fmt: skip
    inferred = check_against_ort(text, [{"B": 1}])
    assert inferred.dtype("y") == ir.DataType.DOUBLE


def test_runtime_window_size_is_fresh():
    text = model_text(17, "int64 n", "y = HannWindow(n)")
    inferred = check_against_ort(text, [{}], {"n": np.array(12, dtype=np.int64)})
    assert inferred.dims("y")[0].is_symbol


MALFORMED = [
    (17, "float[B, L, 3] x", "y = DFT(x)"),
    (17, "float[B, L, 1] x", "y = DFT<axis=2>(x)"),
    (17, "float[B, 8, 1] x", """
        st = Constant<value=int64 {4}>()
        fl = Constant<value=int64 {16}>()
        y = STFT(x, st, , fl)"""),
    (17, "float[B, L, 1] x, float[8] w", """
        st = Constant<value=int64 {4}>()
        fl = Constant<value=int64 {16}>()
        y = STFT(x, st, w, fl)"""),
    (17, "float[B, L, 1] x", """
        st = Constant<value=int64 {0}>()
        fl = Constant<value=int64 {4}>()
        y = STFT(x, st, , fl)"""),
]  # fmt: skip


@pytest.mark.parametrize(("opset", "inputs", "body"), MALFORMED)
def test_malformed_is_a_diagnostic(opset, inputs, body):
    assert infer(model_text(opset, inputs, body)).errors
