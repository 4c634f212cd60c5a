"""Soundness hunt of ``optimize(symbol_ranges=..., input_shapes=...)``: reproducers.

Each test is a finding, marked ``xfail(strict=True)`` until it is fixed (the suite stays
green; a fix turns it into an XPASS, which fails until the mark is removed).
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import model

#: The If keeps x (one copy) when N >= 5 and doubles it otherwise.
DECIDED_IF = """
    g (float[N, 4] x) => (float[M, 4] y) {
        s = Shape<start = 0, end = 1>(x)
        k = Constant<value = int64[1] {5}>()
        c0 = GreaterOrEqual(s, k)
        c = Squeeze(c0)
        y = If(c) <then_branch = t () => (float[N2, 4] a) { a = Identity(x) },
                   else_branch = e () => (float[N3, 4] b) { b = Concat<axis = 0>(x, x) }>
    }
"""


@pytest.mark.xfail(
    strict=True,
    reason="OptimizePass accepts an empty range (lower > upper), which the CLI rejects "
    "(--symbol-range expects 0 <= LO <= HI); the rounds then take N >= 5 as proven and "
    "inline the If's then branch, so every run (N = 1 or 2 ...) returns x instead of "
    "Concat(x, x)",
)
def test_an_empty_symbol_range_is_refused_as_on_the_command_line():
    with pytest.raises(ValueError):
        OptimizePass(symbol_ranges={"N": (5, 1)})(model(DECIDED_IF))
