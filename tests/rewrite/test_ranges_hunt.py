"""Soundness hunt of ``optimize(symbol_ranges=..., input_shapes=...)``: reproducers.

Each test is a finding of stop 43's hunt, failing before its fix.
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


@pytest.mark.parametrize("bounds", [(5, 1), (-3, 2), (-3, -3), (None, -1)])
def test_an_empty_symbol_range_is_refused_as_on_the_command_line(bounds):
    """It was accepted (the CLI refuses it: ``--symbol-range`` expects ``0 <= LO <= HI``);
    with ``(5, 1)`` the rounds took ``N >= 5`` as proven and inlined the If's then branch,
    so every run (``N = 1``, ``2``, ...) returned ``x`` instead of ``Concat(x, x)``."""
    with pytest.raises(ValueError, match="expected 0 <= lower <= upper"):
        OptimizePass(symbol_ranges={"N": bounds})(model(DECIDED_IF))
