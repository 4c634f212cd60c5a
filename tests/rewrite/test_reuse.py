"""ReuseEqualValuesPass: a later integer tensor proven equal to an earlier one is replaced by it.

Firing cases run before and after in onnxruntime (sizes 0 and 1 and both parities
included); declining cases name their reason, or show that values the shapes do not
prove equal are left apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import ReuseEqualValuesPass
from tests.rewrite._rewrite_testing import apply_pass, assert_equivalent, model, ops

SIZES = [{"N": n, "H": h} for n, h in ((1, 0), (2, 1), (1, 2), (3, 7), (2, 10))]

FIRES = {
    # Swin's window padding: (2 - (h//2) % 2) % 2 is (h//2) % 2 for every h >= 0.
    "swin_padding_recomputed": (
        """
        g (float[N, H] x) => (float[N, ?] y) {
            h = Shape<start = 1, end = 2>(x)
            two = Constant<value = int64[1] {2}>()
            m1 = Constant<value = int64[1] {-1}>()
            half = Div(h, two)
            pad_a = Mod(half, two)
            neg = Mul(m1, pad_a)
            plus = Add(two, neg)
            pad_b = Mod(plus, two)
            zero = Constant<value = int64[1] {0}>()
            pads = Concat<axis = 0>(zero, pad_a, zero, pad_b)
            p = Pad(x, pads)
            y = Relu(p)
        }
        """,
        ["Shape", "Div", "Mod", "Concat", "Pad", "Relu"],
    ),
    # TorchScript takes Shape() of every layer's activations: all [N, H].
    "shape_of_each_layer": (
        """
        g (float[N, H] x) => (float[?, ?] y) {
            s1 = Shape(x)
            a = Reshape(x, s1)
            b = Relu(a)
            s2 = Shape(b)
            c = Reshape(b, s2)
            d = Sigmoid(c)
            s3 = Shape(d)
            y = Reshape(d, s3)
        }
        """,
        ["Shape", "Reshape", "Relu", "Reshape", "Sigmoid", "Reshape"],
    ),
    # The later value is read inside a branch: the earlier one is visible there too.
    "used_by_a_subgraph": (
        """
        g (float[N, H] x, bool c) => (float[?, ?] y) {
            s1 = Shape(x)
            a = Reshape(x, s1)
            b = Relu(a)
            s2 = Shape(b)
            y = If(c) <
                then_branch = t () => (float[?, ?] r) { r = Reshape(b, s2) },
                else_branch = e () => (float[?, ?] r) { r = Identity(b) }
            >
        }
        """,
        ["Shape", "Reshape", "Relu", "If"],
    ),
}


@pytest.mark.parametrize("case", FIRES)
def test_reuse_equal_values_fires(case):
    body, expected_ops = FIRES[case]
    before, m, rewrite = apply_pass(ReuseEqualValuesPass, body)
    assert rewrite.fired["reuse_equal_value"] >= 1
    assert ops(m) == expected_ops
    given = {"c": lambda sizes: np.array(sizes["H"] % 2 == 0)}
    assert_equivalent(before, m, SIZES, given=given if case == "used_by_a_subgraph" else None)


DECLINES = {
    "the later value is a graph output": (
        """
        g (float[N, H] x) => (float[?, ?] y, int64[2] s2) {
            s1 = Shape(x)
            a = Reshape(x, s1)
            b = Relu(a)
            s2 = Shape(b)
            y = Reshape(b, s2)
        }
        """,
        "the later value is a graph output (it keeps its name)",
    ),
    "its node computes another value still used": (
        """
        g (float[N, H] x) => (float[?] y, int64[1] lo, float[?] z) {
            h = Shape<start = 1, end = 2>(x)
            s = Shape(x)
            n, h2 = Split<num_outputs = 2>(s)
            lo = Identity(n)
            y = Reshape(x, h2)
            z = Reshape(x, h)
        }
        """,
        "its node computes other values still used",
    ),
    "the graph is not in topological order": (
        """
        g (float[N, H] x) => (float[?, ?] y) {
            y = Reshape(b, s2)
            s2 = Shape(b)
            b = Relu(a)
            a = Reshape(x, s1)
            s1 = Shape(x)
        }
        """,
        "the graph is not in topological order",
    ),
}


@pytest.mark.parametrize("case", DECLINES)
def test_reuse_equal_values_declines(case):
    body, reason = DECLINES[case]
    m = model(body)
    before_ops = ops(m)
    _, m, rewrite = apply_pass(ReuseEqualValuesPass, body)
    assert not rewrite.fired
    assert ops(m) == ops(model(body))
    assert rewrite.declined[reason] >= 1
    assert ops(m) == before_ops


@pytest.mark.parametrize(
    "body",
    [
        # Two NonZero counts of different masks: distinct symbols, never merged.
        """
        g (float[N, H] x, float[N, H] z) => (float[?, ?] y, float[?, ?] w) {
            h = Constant<value = float {0.5}>()
            gx = Greater(x, h)
            gz = Greater(z, h)
            nx = NonZero(gx)
            nz = NonZero(gz)
            sx = Shape(nx)
            sz = Shape(nz)
            fx = Cast<to = 1>(nx)
            fz = Cast<to = 1>(nz)
            y = Reshape(fx, sx)
            w = Reshape(fz, sz)
        }
        """,
        # Same dims, other order: [N, H] and [H, N] differ unless N == H.
        """
        g (float[N, H] x) => (float[?, ?] y) {
            s1 = Shape(x)
            a = Reshape(x, s1)
            t = Transpose<perm = [1, 0]>(a)
            s2 = Shape(t)
            y = Reshape(t, s2)
        }
        """,
    ],
    ids=["data_dependent_counts", "permuted_dims"],
)
def test_values_not_proven_equal_stay_apart(body):
    _, m, rewrite = apply_pass(ReuseEqualValuesPass, body)
    assert not rewrite.fired
    assert ops(m) == ops(model(body))


def test_values_with_equal_elements_of_other_dtypes_stay_apart():
    """``Shape(x)`` and its int32 cast hold the same elements; the cast must not become
    the int64 tensor (found by a mutation audit: no test had two dtypes)."""
    body = """
        g (float[N, H] x) => (int32[?] y, int64[?] z) {
            s = Shape(x)
            s32 = Cast<to = 6>(s)
            t = Shape(x)
            u = Relu(x)
            s_again = Shape(u)
            c = Cast<to = 6>(s_again)
            y = Concat<axis = 0>(s32, c)
            z = Concat<axis = 0>(t, s)
        }
    """
    before, m, rewrite = apply_pass(ReuseEqualValuesPass, body)
    # the int64 shapes merge with each other and the int32 casts with each other only
    assert rewrite.fired == {"reuse_equal_value": 3}
    assert_equivalent(before, m, SIZES)


def test_a_value_whose_twin_was_removed_becomes_the_one_reused():
    """Replacing ``m`` (N gathered from ``s``) by ``n`` removes ``s``; the later ``t``, equal
    to ``s``, must then stay (found by a mutation audit: only fuzz seed 386 had a removed
    value to reuse)."""
    body = """
        g (float[N, H] x) => (int64[2] y, float[?, ?] z) {
            n = Shape<start = 0, end = 1>(x)
            s = Shape(x)
            zero = Constant<value = int64[1] {0}>()
            m = Gather(s, zero)
            y = Concat<axis = 0>(n, m)
            u = Relu(x)
            t = Shape(u)
            z = Reshape(u, t)
        }
    """
    before, m, rewrite = apply_pass(ReuseEqualValuesPass, body)
    assert rewrite.fired == {"reuse_equal_value": 1}  # m by n; t stays
    assert ops(m) == ["Shape", "Concat", "Relu", "Shape", "Reshape"]
    assert_equivalent(before, m, SIZES)
