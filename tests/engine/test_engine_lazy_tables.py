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
