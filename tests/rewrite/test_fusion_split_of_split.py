"""SlicesToSplitPass on slices of a slice that is merged first (partial rotary embeddings).

GPT-NeoX rotates the first 4 of 12 dims of each head: ``x[..., :4]`` and ``x[..., 4:]``
are one ``Split``, and ``rotate_half`` cuts ``x[..., :4]`` in halves, a second ``Split``,
which must read the first ``Split``'s output and not the replaced ``Slice``.
"""

from __future__ import annotations

from onnx_symdims.rewrite._split import SlicesToSplitPass
from tests.rewrite._rewrite_testing import assert_equivalent, ops
from tests.rewrite.test_split_concat import SIZES_N, _run

_PARTIAL_ROTARY = """
    g (float[N, 12] x) => (float[N, 12] y) {
        zero = Constant<value = int64[1] {0}>()
        two = Constant<value = int64[1] {2}>()
        four = Constant<value = int64[1] {4}>()
        big = Constant<value = int64[1] {9223372036854775807}>()
        axis = Constant<value = int64[1] {1}>()
        rot = Slice(x, zero, four, axis)
        keep = Slice(x, four, big, axis)
        r1 = Slice(rot, zero, two, axis)
        r2 = Slice(rot, two, big, axis)
        n2 = Neg(r2)
        half = Concat<axis = 1>(n2, r1)
        summed = Add(rot, half)
        y = Concat<axis = 1>(summed, keep)
    }
"""


def test_the_split_of_a_merged_slice_reads_the_outer_split():
    """The inner ``Split`` read the outer ``Slice``'s old output: that ``Slice`` stayed,
    computed beside the ``Split`` that replaced it."""
    before, after, p = _run(SlicesToSplitPass, _PARTIAL_ROTARY)
    assert p.fired == {"slices_to_split": 4}, p.declined
    assert ops(after).count("Split") == 2 and "Slice" not in ops(after)
    (outer,) = [n for n in after.graph if n.op_type == "Split" and n.inputs[0].name == "x"]
    (inner,) = [n for n in after.graph if n.op_type == "Split" and n is not outer]
    assert inner.inputs[0] is outer.outputs[0]
    assert_equivalent(before, after, SIZES_N)
