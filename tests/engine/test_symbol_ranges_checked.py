"""``symbol_ranges`` is checked where inference takes it, as ``OptimizePass`` checks it.

An empty range (``(5, 1)``) promises nothing, yet every proof took it as a fact: a slice of
up to 3 elements of ``x[N]`` was written ``[0]`` (``N = 4`` gives 3); a range given as text
(``"1:"``) made ``y`` a fresh symbol without a word. Found by helper-83 (stop 44).
"""

from __future__ import annotations

import pytest

import onnx_symdims
from onnx_symdims.passes import SymbolicShapeInferencePass, checked_symbol_ranges
from onnx_symdims.rewrite import OptimizePass
from tests.cli._cli_testing import model_from_text

SLICE_TO_3 = """g (float[N] x) => (y) <int64[1] z = {0}, int64[1] e = {3}> {
    y = Slice(x, z, e)
}"""

MALFORMED = [
    ({"N": (5, 1)}, ValueError),
    ({"N": (-1, None)}, ValueError),
    ({"N": (None, -2)}, ValueError),
    ({"N": "1:"}, TypeError),
    ({"N": (1,)}, TypeError),
    ({"N": (1.0, 4)}, TypeError),
    ({"N": (True, 4)}, TypeError),
]


@pytest.mark.parametrize(("ranges", "error"), MALFORMED)
def test_a_malformed_symbol_range_is_refused_by_each_entry_point(ranges, error):
    with pytest.raises(error, match="symbol_ranges"):
        onnx_symdims.infer_symbolic_shapes(model_from_text(SLICE_TO_3), symbol_ranges=ranges)
    with pytest.raises(error, match="symbol_ranges"):
        SymbolicShapeInferencePass(symbol_ranges=ranges)
    with pytest.raises(error, match="symbol_ranges"):
        OptimizePass(symbol_ranges=ranges)


@pytest.mark.parametrize(
    ("ranges", "written"),
    [
        ({"N": (4, 4)}, [3]),
        ({"N": (0, 2)}, ["N"]),
        ({"N": (5, None)}, [3]),
        ({}, ["min(3, N)"]),
    ],
)
def test_a_valid_symbol_range_is_used(ranges, written):
    assert checked_symbol_ranges(ranges) == ranges
    model = model_from_text(SLICE_TO_3)
    onnx_symdims.infer_symbolic_shapes(model, symbol_ranges=ranges)
    dims = list(model.graph.outputs[0].shape)
    assert [d if isinstance(d, int) else str(d).replace(" ", "") for d in dims] == [
        w if isinstance(w, int) else w.replace(" ", "") for w in written
    ]
