"""Tables made on first use, kept apart or shared still answer as the eager ones did."""

from __future__ import annotations

from onnx_symdims.shapes import ShapesContext


def test_printer_words_are_never_minted_nor_given_to_opaque_texts():
    ctx = ShapesContext()
    ctx.reserve_model_texts(["max!", "floor %", "abs"])
    # Opaque texts sanitized to a printer's function name take a suffix.
    assert ctx.opaque_dim_names == {"floor %": "floor_1", "max!": "max_1"}
    assert ctx.new_symbol("Min").name == "Min_1"
    assert ctx.new_symbol("ceiling").name == "ceiling_1"
    assert ctx.new_symbol("ceiling").name == "ceiling_2"
    # A model's own name is reserved as before, a printer's word is not its name.
    assert ctx.new_symbol("abs").name == "abs_1"
    assert ctx.new_symbol("seq").name == "seq"
    assert not ctx.is_generated("max")


def test_a_declared_dtype_is_read_once_and_forget_reads_it_again():
    import onnx_ir as ir

    ctx = ShapesContext()
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    w = ir.Value(name="w", const_value=ir.tensor([1, 2], dtype=ir.DataType.INT32))
    untyped = ir.Value(name="u")
    assert ctx.dtype_of(x) == ir.DataType.FLOAT
    assert ctx.dtype_of(w) == ir.DataType.INT32  # the constant's dtype
    assert ctx.dtype_of(untyped) is None
    assert ctx.peek_dtype(x) is None  # kept apart: not an inferred dtype
    # Read once, as a declared shape is: the value's facts are what was read.
    x.dtype = ir.DataType.INT64
    assert ctx.dtype_of(x) == ir.DataType.FLOAT
    # An inferred dtype comes first; forgetting the value reads the IR again.
    ctx.set_dtype(untyped, ir.DataType.BOOL)
    assert ctx.dtype_of(untyped) == ir.DataType.BOOL
    ctx.forget(x)
    assert ctx.dtype_of(x) == ir.DataType.INT64
    ctx.forget(untyped)
    assert ctx.dtype_of(untyped) is None


def test_plain_dims_are_found_once_and_compound_ones_every_time():
    from onnx_symdims import expr
    from onnx_symdims.passes import _inference

    n = expr.sym("plain_n")
    compound = expr.add(n, 1)
    for dims in [(2, n), [2, n], ()]:
        assert _inference._all_plain(dims)
        assert _inference._all_plain(dims)  # the second time from the table
    assert _inference._PLAIN[(2, n)] is True
    for dims in [(2, compound), [n, compound], (n, expr.floordiv(n, 2))]:
        assert not _inference._all_plain(dims)
        assert not _inference._all_plain(dims)
    assert _inference._PLAIN[(2, compound)] is False


def test_a_sanitized_hint_reads_the_same_the_second_time():
    from onnx_symdims.shapes import sanitize_symbol_name

    expected = {
        "/model/layers.0/Reshape_3": "model_layers_0_Reshape_3",
        "2d": "d2d",
        "": "d",
        "___": "d",
        "a__b..c": "a_b_c",
        "seq": "seq",
    }
    for _ in range(2):
        assert {hint: sanitize_symbol_name(hint) for hint in expected} == expected
    ctx = ShapesContext()
    assert [ctx.new_symbol("/x.y").name for _ in range(2)] == ["x_y", "x_y_1"]
