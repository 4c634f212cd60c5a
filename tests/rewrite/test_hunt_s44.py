"""Soundness hunt of ``optimize`` on graphs it had not met (stop 44, helper-81).

Each case sits on the edge of a rule's proof (sizes 0 and 1, negative and INT64-extreme
slice bounds, negative shape arithmetic, facts proven only inside a branch or a loop
body, tensors that grow across loop iterations) and is run in onnxruntime before and
after ``optimize``, every output compared exactly. They all passed when written; they
stay as regressions. The last test reproduced ``x + 0.0 -> x`` before a ``Div`` (``1 /
-0.0`` is ``-inf``); fixed by helper-85 (``NeutralElement`` keeps the sign of a zero an
output can see, ``tests/rewrite/test_signed_zero_rules.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import assert_equivalent, model, proto

NM = [{"N": n, "M": m} for n, m in ((0, 0), (1, 1), (3, 2), (2, 7), (7, 3), (5, 0))]

#: Scalar shape arithmetic on negative values: ONNX's integer Div truncates, Mod takes
#: the divisor's sign (fmod=1 the dividend's); lifted to [1] vectors it must not change.
SHAPE_ARITHMETIC = """
    g (float[N, M] x) => (int64[?] y)
    <int64 z = {0}, int64 o = {1}, int64 c3 = {3}, int64 cm3 = {-3}, int64 c7 = {7},
     int64[1] ax = {0}> {
        s = Shape(x)
        a = Gather<axis = 0>(s, z)
        b = Gather<axis = 0>(s, o)
        d = Sub(a, c7)
        e = Sub(b, c7)
        q = Div(d, cm3)
        r = Mod(e, cm3)
        f = Mod<fmod = 1>(d, c3)
        q1 = Unsqueeze(q, ax)
        r1 = Unsqueeze(r, ax)
        f1 = Unsqueeze(f, ax)
        y = Concat<axis = 0>(q1, r1, f1)
    }
"""

#: Two slices partitioning the last axis with INT64 extremes as bounds (one Split).
EXTREME_SLICES = """
    g (float[N, 6] x) => (float[?, ?] y)
    <int64[1] lo = {-9223372036854775808}, int64[1] mid = {-4},
     int64[1] hi = {9223372036854775807}, int64[1] ax = {-1}> {
        a = Slice(x, lo, mid, ax)
        b = Slice(x, mid, hi, ax)
        y = Concat<axis = 1>(b, a)
    }
"""

#: Backward slices on two axes merged into one Slice (steps -1 and -2, clamped bounds).
BACKWARD_SLICES = """
    g (float[N, M] x) => (float[?, ?] y)
    <int64[1] s1 = {-1}, int64[1] e1 = {-9223372036854775808}, int64[1] a1 = {0},
     int64[1] p1 = {-1}, int64[1] s2 = {9223372036854775807}, int64[1] e2 = {-100},
     int64[1] a2 = {1}, int64[1] p2 = {-2}> {
        a = Slice(x, s1, e1, a1, p1)
        y = Slice(a, s2, e2, a2, p2)
    }
"""

#: A Reshape that only succeeds when N = 1, in the then branch: N = 1 holds only in the
#: runs taking it, so Shape(x) must not become a constant.
BRANCH_ONLY_FACT = """
    g (float[N] x, bool c) => (float[?] y, int64[?] s) {
        y = If(c) <
            then_branch = t () => (float[?] a) {
                one = Constant<value = int64[1] {1}>()
                a = Reshape(x, one)
            },
            else_branch = e () => (float[?] b) { b = Identity(x) }
        >
        s = Shape(x)
    }
"""

#: A loop-carried tensor that doubles every iteration: its Shape in the body is not the
#: initial value's, and the Expand to it is not an identity from the second iteration on.
GROWING_LOOP = """
    g (float[N] x, int64 trip) => (float[?] y, int64[?, 1] s)
    <bool cond = {1}, int64[1] one = {1}> {
        y, s = Loop(trip, cond, x) <
            body = body (int64 i, bool c, float[N] v) => (bool co, float[?] v2, int64[1] sh) {
                co = Identity(c)
                sh0 = Shape(v)
                sh = Add(sh0, one)
                e = Expand(v, sh0)
                v2 = Concat<axis = 0>(e, v)
            }
        >
    }
"""

#: A constant Split with an empty chunk (sizes 0 and 3) folded to two initializers.
EMPTY_CHUNK = """
    g (float[N] x) => (float[?] y, float[?] z) <float[3] c = {1, 2, 3}, int64[2] s = {0, 3}> {
        a, b = Split<axis = 0>(c, s)
        y = Concat<axis = 0>(x, a)
        z = Identity(b)
    }
"""


def _optimized(text: str, **options):
    m = model(text)
    before = proto(m)
    OptimizePass(**options)(m)
    return before, m


@pytest.mark.parametrize(
    ("text", "bindings", "given"),
    [
        pytest.param(SHAPE_ARITHMETIC, NM, None, id="negative_shape_arithmetic"),
        pytest.param(EXTREME_SLICES, [{"N": n} for n in (0, 1, 3)], None, id="extreme_slices"),
        pytest.param(BACKWARD_SLICES, NM, None, id="backward_slices"),
        pytest.param(
            BRANCH_ONLY_FACT,
            [{"N": n} for n in (0, 1, 2, 3)],
            {"c": np.array(False)},
            id="branch_only_fact",
        ),
        pytest.param(
            GROWING_LOOP,
            [{"N": n} for n in (1, 2, 3)],
            {"trip": np.array(3)},
            id="growing_loop",
        ),
        pytest.param(EMPTY_CHUNK, [{"N": n} for n in (0, 1, 2)], None, id="empty_split_chunk"),
    ],
)
def test_near_miss_graphs_keep_their_outputs(text, bindings, given):
    before, after = _optimized(text)
    assert_equivalent(before, after, bindings, given=given)


@pytest.mark.parametrize("bounds", [(1, 1), (2, 2), (0, 0)])
def test_negative_shape_arithmetic_with_the_sizes_fixed(bounds):
    """With N and M fixed the chain folds to a constant: truncating Div, sign of Mod."""
    before, after = _optimized(SHAPE_ARITHMETIC, symbol_ranges={"N": bounds, "M": bounds})
    assert_equivalent(before, after, [{"N": bounds[0], "M": bounds[0]}])


ADD_ZERO_THEN_DIVIDE = """
    g (float[N] x) => (float[N] y) <float z = {0.0}, float o = {1.0}> {
        a = Add(x, z)
        y = Div(o, a)
    }
"""


def test_add_zero_keeps_the_sign_a_later_division_sees():
    before, after = _optimized(ADD_ZERO_THEN_DIVIDE)
    negative_zeros = {"x": lambda sizes: np.full([sizes["N"]], -0.0, np.float32)}
    assert_equivalent(before, after, [{"N": 3}], given=negative_zeros)
