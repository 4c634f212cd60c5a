"""``Cast`` to an integer of float scalars computed from constants (ViT's TorchScript
export: ``Cast<to=INT64>(Pow(16.0, 0.5))`` in a Reshape target).

The fold is sound only where the float value is bit for bit what onnxruntime computes:
each case states whether the value is folded, and onnxruntime checks every known value
(``check_against_ort`` compares the elements too).
"""

from __future__ import annotations

import pytest

from tests.ops._ort_oracle import check_against_ort, infer, model_text

_RESHAPE = """
    z = Constant<value=int64[1] {0}>()
    cu = Unsqueeze(c, z)
    sh = Concat<axis=0>(c1, cu, cu, c48)
    y = Reshape(pos, sh)
"""


def _vit(body: str, constants: str = "") -> str:
    extra = f", {constants}" if constants else ""
    return model_text(
        17,
        "float[1, 16, 48] pos",
        body + _RESHAPE,
        constants=f"int64[1] c1 = {{1}}, int64[1] c48 = {{48}}{extra}",
    )


@pytest.mark.parametrize(
    ("body", "constants"),
    [
        # ViT (TorchScript): Pow(16.0, 0.5)
        (
            """a = Constant<value=float {16.0}>()
            b = Constant<value=float {0.5}>()
            p = Pow(a, b)
            c = Cast<to=7>(p)""",
            "",
        ),
        # Cast(Sqrt(Cast(num_patches, float))) with a constant num_patches
        ("f = Cast<to=1>(np)\n r = Sqrt(f)\n c = Cast<to=7>(r)", "int64 np = {16}"),
        # double, value_float constants, Floor
        (
            """a = Constant<value_float=8.0>()
            d = Cast<to=11>(a)
            t = Constant<value=double {2.0}>()
            q = Div(d, t)
            fl = Floor(q)
            c = Cast<to=7>(fl)""",
            "",
        ),
    ],
)
def test_reshape_target_from_float_constants_is_folded(body, constants):
    inferred = check_against_ort(_vit(body, constants), [{}])
    assert inferred.elements("c") == [4]
    assert inferred.shape("y") == [1, 4, 4, 48]


@pytest.mark.parametrize(
    ("body", "constants", "value"),
    [
        # Correctly rounded ops, then truncation toward zero
        (
            "f = Cast<to=1>(n)\n m = Mul(f, k)\n q = Div(m, t)",
            "int64 n = {7}, float k = {3.0}, float t = {2.0}",
            10,
        ),
        ("s = Sub(a, b)", "float a = {1.0}, float b = {3.5}", -2),
        ("r = Sqrt(a)", "float a = {2.0}", 1),
        ("r = Sqrt(a)", "float a = {1000000.0}", 1000),
        ("m = Mul(a, a)\n r = Sqrt(m)", "float a = {0.1}", 0),
        ("n = Neg(a)\n r = Abs(n)\n c2 = Ceil(r)", "float a = {2.25}", 3),
        # ORT multiplies for Pow exponents 2 and 3 (also an int64 exponent)
        ("p = Pow(a, e)", "float a = {1.5}, int64 e = {3}", 3),
        ("p = Pow(a, e)", "float a = {2.5}, float e = {2.0}", 6),
        # Pow(x, 0.5) of a perfect square
        ("p = Pow(a, e)", "double a = {144.0}, double e = {0.5}", 12),
        ("p = Pow(a, e)", "float a = {1.0}, float e = {0.5}", 1),
    ],
)
def test_folded_values_match_onnxruntime(body, constants, value):
    last = body.split("=")[-2].split()[-1]
    text = model_text(
        17,
        "float[2] x",
        f"{body}\n c = Cast<to=7>({last})\n y = Identity(x)",
        constants=constants,
    )
    inferred = check_against_ort(text, [{}])
    assert inferred.elements("c") == [value]


@pytest.mark.parametrize(
    ("body", "constants", "to"),
    [
        # Pow through the C library: not folded (result not exact, or exponent not 0.5)
        ("p = Pow(a, e)", "float a = {15.0}, float e = {0.5}", 7),
        ("p = Pow(a, e)", "float a = {8.0}, float e = {0.3333333}", 7),
        ("p = Pow(a, e)", "float a = {2.0}, float e = {4.0}", 7),
        # Non-finite, subnormal, out of the target range: not folded
        ("p = Div(a, e)", "float a = {1.0}, float e = {0.0}", 7),
        ("p = Sqrt(a)", "float a = {-4.0}", 7),
        ("p = Mul(a, e)", "float a = {1e-30}, float e = {1e-10}", 7),
        ("p = Mul(a, e)", "float a = {3e9}, float e = {1.0}", 6),
        ("p = Identity(a)", "float a = {-1.0}", 12),
        # Half precision: runtimes round through float32 their own way
        ("h = Cast<to=10>(a)\n p = Add(h, h)", "float a = {1.0}", 7),
    ],
)
def test_not_folded(body, constants, to):
    text = model_text(
        17,
        "float[2] x",
        f"{body}\n c = Cast<to={to}>(p)\n y = Identity(x)",
        constants=constants,
    )
    # UINT32 of -1 is undefined behaviour in C++: not run
    inferred = check_against_ort(text, [{}]) if to != 12 else infer(text)
    assert inferred.elements("c") is None


def test_cast_to_bool_is_nonzero():
    text = model_text(
        17,
        "float[2] x",
        "p = Mul(a, e)\n c = Cast<to=9>(p)\n y = Identity(x)",
        constants="float a = {0.5}, float e = {0.5}",
    )
    inferred = check_against_ort(text, [{}])
    assert inferred.elements("c") == [1]


def test_symbolic_dims_cast_to_float_are_not_folded():
    """``Cast(Sqrt(Cast(num_patches, float)))`` with a symbolic count: no value."""
    text = model_text(
        17,
        "float[B, P, 48] x",
        """
        s = Shape(x)
        p = Gather<axis=0>(s, i1)
        f = Cast<to=1>(p)
        r = Sqrt(f)
        c = Cast<to=7>(r)
        y = Identity(x)
        """,
        outputs="float[B, P, 48] y",
        constants="int64 i1 = {1}",
    )
    inferred = check_against_ort(text, [{"B": 1, "P": 16}, {"B": 2, "P": 0}])
    assert inferred.elements("c") is None


def test_large_float_tensor_cast_is_not_read():
    """Only one-element values are folded: a float tensor's Cast reads no producer."""
    text = model_text(
        17,
        "float[2] x",
        "a = Add(x, x)\n c = Cast<to=7>(a)\n y = Identity(x)",
    )
    inferred = check_against_ort(text, [{}])
    assert inferred.elements("c") is None
