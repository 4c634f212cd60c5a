"""``IRDimWriter``: the shapes it writes are the ``ir.Shape`` objects onnx-ir would build."""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes import IRDimWriter, _convert


def test_fast_frozen_shapes_are_what_the_constructor_builds():
    assert _convert._MAKE_FROZEN_SHAPE is not None  # this onnx-ir: the fast path is taken
    dims = (2, expr.sym("batch"), expr.add(expr.sym("seq"), 1), True)
    written = IRDimWriter().shape(dims)
    expected = ir.Shape([2, ir.SymbolicDim("batch"), ir.SymbolicDim("seq+1"), 1], frozen=True)
    assert written.frozen
    assert written == expected
    assert [type(d) for d in written.dims] == [int, ir.SymbolicDim, ir.SymbolicDim, int]
    assert [written.get_denotation(i) for i in range(4)] == [None] * 4
    assert _convert._state(written)[1].keys() == _convert._state(expected)[1].keys()


def test_the_writer_shares_one_shape_per_dims():
    writer = IRDimWriter()
    dims = (expr.sym("n"), 4)
    assert writer.shape(dims) is writer.shape(list(dims))
