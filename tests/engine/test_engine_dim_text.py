"""Reading the model's ``dim_param`` text: opaque text becomes a readable symbol (issue 9).

Text that is not an expression (``7/:2``, ``batch size``) names one dim. The engine
reads it as a symbol whose name the grammar reads back as itself, so a computed dim
``2*d7_2`` re-parses to what was computed (``2*7/:2`` would read as 7). The same text
is the same symbol wherever the model uses it; declared input dims keep their text.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapesContext
from tests.engine._engine_testing import assert_verified, dims, infer, model


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("7/:2", "d7_2"),
        ("batch size", "batch_size"),
        ("N %", "N"),
        (" ", "d"),
        ("99999999999999999999", "d99999999999999999999"),
        ("min(", "min_1"),  # never a function name of the grammar
        ("héllo", "h_llo"),
        # ONNX's dim_param is a name: onnxruntime runs an input declared '4' at any size
        ("4", "d4"),
        ("0", "d0"),
        (" 4", "d4"),
        ("2*3", "d2_3"),
    ],
)
def test_opaque_text_reads_as_a_readable_symbol(text, name):
    ctx = ShapesContext()
    d = ctx.read_dim_text(text)
    assert d is expr.sym(name)
    assert expr.parse_dim(expr.to_onnx(expr.add(expr.mul(2, d), 1))) is expr.add(
        expr.mul(2, d), 1
    )
    assert ctx.read_dim_text(text) is d  # one symbol per text
    assert not ctx.is_generated(name)  # the model's dim, not a minted one
    assert ctx.new_symbol(name).name != name  # never minted again


@pytest.mark.parametrize("text", ["N", "seq.len", "2*N+1", "unk__3", "-1"])
def test_expressions_read_as_themselves(text):
    ctx = ShapesContext()
    assert ctx.read_dim_text(text) == expr.parse_dim(text)
    assert ctx.opaque_dim_names == {}


def test_opaque_names_never_collide_with_model_names():
    ctx = ShapesContext()
    ctx.reserve_names({"d7_2", "a_b"})
    assert ctx.read_dim_text("7/:2") is expr.sym("d7_2_1")
    assert ctx.read_dim_text("a b") is expr.sym("a_b_1")
    assert ctx.read_dim_text("a  b") is expr.sym("a_b_2")  # another text, another dim
    assert ctx.opaque_dim_names == {"7/:2": "d7_2_1", "a b": "a_b_1", "a  b": "a_b_2"}


def test_constraints_given_as_text_use_the_same_symbols():
    ctx = ShapesContext()
    ctx.add_constraint("7/:2", "N")
    assert ctx.has_constraint(ctx.read_dim_text("7/:2"), expr.sym("N"))
    assert ctx.constraints() == [("N", "d7_2")]


def test_one_text_is_one_dim_on_inputs_value_info_and_outputs():
    m, result = infer(
        """g (float["7/:2", 4] x, float["7/:2", 4] y) => (float["7/:2", 8] z) {
            s = Add(x, y)
            z = Concat<axis=1>(s, x)
        }"""
    )
    assert dims(m, "x") == ["7/:2", 4]  # declared input dims keep their text
    assert dims(m, "s") == ["d7_2", 4]  # same symbol on both inputs: no broadcast
    assert dims(m, "z") == ["7/:2", 8]  # the output's declared text, no conflict
    assert not result.diagnostics
    assert not result.context.constraints()  # z's "7/:2" is the same dim as x's
    assert_verified(m)


def test_declared_intermediate_with_opaque_text_is_the_same_dim():
    m = model('g (float["batch size", 4] x) => (z) { y = Relu(x) \n z = Neg(y) }')
    y = m.graph.node(0).outputs[0]
    y.shape = ir.Shape(["batch size", 4])
    y.dtype = ir.DataType.FLOAT
    result = SymbolicShapeInferencePass()(m)
    assert not result.diagnostics
    assert dims(m, "y") == ["batch_size", 4]  # equal to the inferred dim: canonical
    assert dims(m, "z") == ["batch_size", 4]


def test_written_dims_reparse_to_the_computed_value():
    m, _ = infer(
        """g (float["7/:2", 4] x) => (s) {
            c = Concat<axis=0>(x, x)
            shp = Constant<value=int64[1] {-1}>()
            r = Reshape(c, shp)
            st = Constant<value=int64[1] {1}>()
            en = Constant<value=int64[1] {1000000}>()
            s = Slice(r, st, en)
        }"""
    )
    assert dims(m, "c") == ["2*d7_2", 4]
    assert dims(m, "r") == ["8*d7_2"]
    assert expr.evaluate(expr.parse_dim(dims(m, "s")[0]), {"d7_2": 4}) == 31
    assert_verified(m)


def test_symbol_ranges_and_nonempty_inputs_apply_to_opaque_texts():
    text = 'g (float["batch size", 4] x) => (y) { y = Relu(x) }'
    for options in ({"symbol_ranges": {"batch size": (2, 8)}}, {"nonempty_inputs": True}):
        _, result = infer(text, **options)
        low, _ = result.context.scope.bounds(expr.sym("batch_size"))
        assert low >= 1, options
