"""``dim_symbols`` reads the symbols of a shape's texts, frozen or not."""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims.passes._model_dims import dim_symbols


def test_the_symbols_of_texts_ints_and_empty_dims():
    dims = [3, ir.SymbolicDim("batch"), ir.SymbolicDim("past+seq"), ir.SymbolicDim(None)]
    for frozen in (False, True):
        shape = ir.Shape(dims, frozen=frozen)
        assert dim_symbols(shape) == {"batch", "past", "seq"}
    assert dim_symbols(None) == set()
    assert dim_symbols(ir.Shape([1, 2])) == set()


def test_a_frozen_shape_answers_a_new_set_each_time():
    shape = ir.Shape([ir.SymbolicDim("N")], frozen=True)
    first = dim_symbols(shape)
    first.add("M")  # the caller's own set: the cached answer is not changed
    assert dim_symbols(shape) == {"N"}
