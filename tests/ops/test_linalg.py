"""MatMul, Gemm, MatMulInteger and QLinearMatMul, checked against onnxruntime."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text, same_dims

# ----------------------------------------------------------------------------------------
# MatMul
# ----------------------------------------------------------------------------------------
MATMUL_CASES = [
    # (A, B, expected, bindings): numpy.matmul rules
    ("[N, K]", "[K, M]", ["N", "M"], [{"N": 2, "K": 3, "M": 4}, {"N": 0, "K": 3, "M": 5}]),
    # A 1-D operand is promoted and the added axis dropped again.
    ("[K]", "[K, M]", ["M"], [{"K": 3, "M": 4}, {"K": 0, "M": 2}]),
    ("[N, K]", "[K]", ["N"], [{"N": 2, "K": 3}, {"N": 3, "K": 0}]),
    ("[K]", "[K]", [], [{"K": 3}, {"K": 0}]),
    ("[K]", "[B, K, M]", ["B", "M"], [{"B": 2, "K": 3, "M": 4}]),
    ("[B, N, K]", "[K]", ["B", "N"], [{"B": 2, "N": 3, "K": 4}]),
    # Batch dims broadcast; 1 yields to the other side.
    ("[B, 1, N, K]", "[S, K, M]", ["B", "S", "N", "M"], [{"B": 2, "S": 3, "N": 4, "K": 5, "M": 2}]),
    ("[2, N, K]", "[1, K, M]", [2, "N", "M"], [{"N": 3, "K": 4, "M": 5}]),
    ("[0, N, K]", "[K, M]", [0, "N", "M"], [{"N": 3, "K": 4, "M": 5}]),
    # Two different symbolic batch dims: broadcast(B, C), never one of them.
    ("[B, N, K]", "[C, K, M]", ["broadcast(B,C)", "N", "M"],
     [{"B": 3, "C": 3, "N": 2, "K": 4, "M": 5}, {"B": 1, "C": 4, "N": 2, "K": 3, "M": 2}]),
    # A symbolic batch dim against an integer other than 1 is that integer.
    ("[B, N, K]", "[4, K, M]", [4, "N", "M"], [{"B": 4, "N": 2, "K": 3, "M": 5}, {"B": 1, "N": 2, "K": 3, "M": 5}]),
]  # fmt: skip


@pytest.mark.parametrize("opset", [7, 9, 13, 21])
@pytest.mark.parametrize(("a", "b", "expected", "bindings"), MATMUL_CASES)
def test_matmul(opset, a, b, expected, bindings):
    text = model_text(opset, f"float{a} a, float{b} b", "y = MatMul(a, b)")
    inferred = check_against_ort(text, bindings)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")
    assert inferred.dtype("y") == ir.DataType.FLOAT


def test_matmul_different_symbolic_inner_dims_are_accepted_and_recorded():
    text = model_text(13, "float[N, K1] a, float[K2, M] b", "y = MatMul(a, b)")
    inferred = check_against_ort(text, [{"N": 2, "K1": 3, "K2": 3, "M": 4}])
    assert inferred.shape("y") == ["N", "M"]
    assert inferred.context.has_constraint("K1", "K2")


def test_matmul_integer_and_symbolic_inner_dims_are_accepted():
    text = model_text(13, "float[N, K] a, float[3, M] b", "y = MatMul(a, b)")
    inferred = check_against_ort(text, [{"N": 2, "K": 3, "M": 4}])
    assert inferred.shape("y") == ["N", "M"]
    assert not inferred.errors


def test_matmul_unknown_rank_gives_unknown_rank():
    inferred = infer(model_text(13, "float[N, K] a, float[K, M] b", "y = MatMul(a, b)"), ["b"])
    assert inferred.dims("y") is None
    assert not inferred.errors


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ("[N, 3]", "[4, M]", "inner dimensions differ"),
        ("[3]", "[4]", "inner dimensions differ"),
        ("[2, N, 3]", "[5, 3, M]", "cannot broadcast"),
        ("", "[3, M]", "rank >= 1"),
    ],
)
def test_matmul_malformed_gives_a_diagnostic(a, b, message):
    inferred = infer(model_text(13, f"float{a} a, float{b} b", "y = MatMul(a, b)"))
    assert any(message in e for e in inferred.errors), inferred.errors
    assert inferred.dims("y") is None


def test_matmul_integer():
    text = model_text(10, "uint8[N, K] a, uint8[K, M] b", "y = MatMulInteger(a, b)", "int32 y")
    inferred = check_against_ort(text, [{"N": 2, "K": 3, "M": 4}, {"N": 0, "K": 2, "M": 3}])
    assert inferred.shape("y") == ["N", "M"]
    assert inferred.dtype("y") == ir.DataType.INT32


@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul(opset):
    inputs = (
        "uint8[B, N, K] a, float a_s, uint8 a_z, uint8[K, M] b, float b_s, uint8 b_z,"
        " float y_s, uint8 y_z"
    )
    body = "y = QLinearMatMul(a, a_s, a_z, b, b_s, b_z, y_s, y_z)"
    inferred = check_against_ort(
        model_text(opset, inputs, body, "uint8 y"), [{"B": 2, "N": 3, "K": 4, "M": 5}]
    )
    assert inferred.shape("y") == ["B", "N", "M"]
    assert inferred.dtype("y") == ir.DataType.UINT8


# ----------------------------------------------------------------------------------------
# Gemm
# ----------------------------------------------------------------------------------------
GEMM_CASES = [
    # (attributes, A, B, C, expected)
    ("", "[M, K]", "[K, N]", "[N]", ["M", "N"]),
    ("transA=1", "[K, M]", "[K, N]", "[M, N]", ["M", "N"]),
    ("transB=1", "[M, K]", "[N, K]", "[1, N]", ["M", "N"]),
    ("transA=1, transB=1", "[K, M]", "[N, K]", "[M, 1]", ["M", "N"]),
    ("alpha=2.0, beta=0.5", "[M, K]", "[K, N]", "", ["M", "N"]),  # scalar C
    # C's integer dims other than 1 are the output dims (C broadcasts unidirectionally).
    ("", "[M, K]", "[K, N]", "[7]", ["M", 7]),
    ("", "[M, K]", "[K, N]", "[5, 1]", [5, "N"]),
]


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
@pytest.mark.parametrize(("attrs", "a", "b", "c", "expected"), GEMM_CASES)
def test_gemm(opset, attrs, a, b, c, expected):
    op = f"Gemm<{attrs}>" if attrs else "Gemm"
    text = model_text(opset, f"float{a} a, float{b} b, float{c} c", f"y = {op}(a, b, c)")
    sizes = {"M": 2, "K": 3, "N": 4}
    if expected[1] == 7:
        sizes["N"] = 7
    if expected[0] == 5:
        sizes["M"] = 5
    inferred = check_against_ort(text, [sizes, {**sizes, "K": 0}])
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


@pytest.mark.parametrize("opset", [11, 13])
def test_gemm_without_bias(opset):
    text = model_text(opset, "float[M, K] a, float[N, K] b", "y = Gemm<transB=1>(a, b)")
    inferred = check_against_ort(text, [{"M": 2, "K": 3, "N": 4}, {"M": 0, "K": 3, "N": 2}])
    assert inferred.shape("y") == ["M", "N"]


def test_gemm_unknown_operand_gives_fresh_dim():
    inferred = infer(model_text(13, "float[M, K] a, float[K, N] b", "y = Gemm(a, b)"), ["b"])
    dims = inferred.dims("y")
    assert dims is not None and dims[0] == expr.sym("M")
    assert inferred.context.is_generated(dims[1].name)


@pytest.mark.parametrize(
    ("a", "b", "c", "message"),
    [
        ("[M, 3]", "[4, N]", "[N]", "inner dimensions differ"),
        ("[B, M, K]", "[K, N]", "[N]", "must be 2-D"),
        ("[3, K]", "[K, 4]", "[5]", "does not broadcast"),
        ("[M, K]", "[K, N]", "[1, 1, N]", "rank <= 2"),
    ],
)
def test_gemm_malformed_gives_a_diagnostic(a, b, c, message):
    text = model_text(13, f"float{a} a, float{b} b, float{c} c", "y = Gemm(a, b, c)")
    inferred = infer(text)
    assert any(message in e for e in inferred.errors), inferred.errors
    assert inferred.dims("y") is None
