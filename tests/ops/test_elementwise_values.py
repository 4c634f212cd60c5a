"""Integer values through Abs, Relu, Sign, Neg, Max/Min with constants and Div by a
negative constant: exact expressions of symbolic shape values, checked in onnxruntime.

Each model feeds the computed value to ``ConstantOfShape``, so the output's dim is the
value; the differences of two dims take both signs (and 0) over the bindings, sizes 0
and 1 included. ONNX's integer ``Div`` truncates toward zero (onnxruntime: C++ ``/``):
``Div(3, -2)`` is -1 where floor division gives -2.
"""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer_graph

BINDINGS = [
    {"A": a, "B": b}
    for a, b in [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (2, 5),
        (5, 2),
        (3, 3),
        (7, 2),
        (2, 7),
        (6, 0),
    ]
]

# Each body computes v (int64[1], >= 0 for sizes up to 7) from d = A - B and a = A.
CASES = {
    "abs": "v = Abs(d)",
    # onnxruntime's CPU Relu has no int64 kernel: through int32 (and back). A symbolic
    # int32 element is kept only as a small linear sum of dims (a max is dropped by the
    # value table, sound but unresolved): Relu of a dim, which is the dim.
    "relu_of_dim": "c = Cast<to=6>(a)\n r = Relu(c)\n v = Cast<to=7>(r)",
    "sign": "s = Sign(d)\n v = Add(s, one)",
    "sign_of_dim": "v = Sign(a)",
    "max_const": "v = Max(d, zero)",
    "min_const": "m = Min(d, three)\n v = Add(m, eight)",
    "div_neg": "q = Div(d, mtwo)\n v = Add(q, four)",
    "div_neg3": "q = Div(d, mthree)\n v = Add(q, four)",
    "div_neg_dim": "q = Div(a, mtwo)\n v = Add(q, four)",
    "abs_div_neg": "q = Div(d, mtwo)\n v = Abs(q)",
}


def _model(body: str) -> str:
    return f"""<ir_version: 10, opset_import: ["" : 21]>
    g (float[A] x, float[B] y) => (out) <int64[1] zero = {{0}}, int64[1] one = {{1}},
        int64[1] three = {{3}}, int64[1] four = {{4}}, int64[1] eight = {{8}},
        int64[1] mtwo = {{-2}}, int64[1] mthree = {{-3}}> {{
        a = Shape(x)
        b = Shape(y)
        d = Sub(a, b)
        {body}
        out = ConstantOfShape(v)
    }}"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_value_is_an_exact_expression_of_the_dims(case):
    inferred = check_against_ort(_model(CASES[case]), BINDINGS)
    (dim,) = inferred.dims("out")
    # Resolved: an expression of the input dims (no fresh symbol), right at every binding
    # (check_against_ort compared it with onnxruntime's output shape).
    assert isinstance(dim, int) or dim.symbols() <= {"A", "B"}, expr.to_onnx(dim)


def test_int64_relu_is_max_with_0():
    # No onnxruntime kernel (CPU Relu: float and int8/int32): brute force instead.
    inferred = infer_graph(
        """g (float[A] x, float[B] y) => (r, n) {
            a = Shape(x)
            b = Shape(y)
            d = Sub(a, b)
            r = Relu(d)
            m = Neg(d)
            n = Relu(m)
        }"""
    )
    (r,) = inferred.context.value_of("r")
    (n,) = inferred.context.value_of("n")
    for binding in BINDINGS:
        diff = binding["A"] - binding["B"]
        assert expr.evaluate(r, binding) == max(diff, 0)
        assert expr.evaluate(n, binding) == max(-diff, 0)


def test_truncation_differs_from_floor_division_on_a_negative_quotient():
    inferred = check_against_ort(_model(CASES["div_neg"]), [{"A": 5, "B": 2}])
    (dim,) = inferred.dims("out")
    assert expr.evaluate(dim, {"A": 5, "B": 2}) == 3  # trunc(3 / -2) + 4, not floor's 2


def test_sign_of_a_dim_is_min_1_d():
    inferred = check_against_ort(_model(CASES["sign_of_dim"]), BINDINGS)
    (dim,) = inferred.dims("out")
    assert dim == expr.dmin(1, expr.sym("A"))
