"""The shortcuts that cut a small model's fixed cost do what the long way did."""

from __future__ import annotations

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes import ShapesContext, is_anonymous_dim_text

_TEXTS = ["7/:2", "batch size", "N", "2*M + K", "?", "d7_2", "batch_size", "-1", "a.b", " * "]


def _reserved_the_long_way(texts: list[str]) -> ShapesContext:
    """What the inference pass did before ``reserve_model_texts``."""
    ctx = ShapesContext()
    names = set(texts)
    for text in texts:
        parsed = expr.parse_dim(text)
        if isinstance(parsed, expr.DimExpr):
            names.update(parsed.symbols())
    ctx.reserve_names(names)
    for text in sorted(texts):
        if not is_anonymous_dim_text(text):
            ctx.read_dim_text(text)
    return ctx


def test_reserve_model_texts_names_and_reads_as_the_long_way():
    for texts in (_TEXTS, _TEXTS[::-1], ["x y", "x_y", "x-y"]):
        long_way = _reserved_the_long_way(texts)
        ctx = ShapesContext()
        ctx.reserve_model_texts(texts)
        assert ctx.opaque_dim_names == long_way.opaque_dim_names
        assert ctx._reserved == long_way._reserved
        assert ctx.mutations == long_way.mutations
        for text in texts:  # texts read later read the same
            assert ctx.read_dim_text(text) is long_way.read_dim_text(text)
        # fresh symbols avoid the same names
        assert [ctx.new_symbol(h).name for h in ("N", "d7_2", "K")] == [
            long_way.new_symbol(h).name for h in ("N", "d7_2", "K")
        ]


def test_dims_from_ir_reads_declared_text_and_mints_for_empty_dims():
    ctx = ShapesContext()
    shape = ir.Shape([2, "N", None, -1, "?", "2*N"])
    dims = ctx.dims_from_ir(shape, "x")
    assert dims[:2] == (2, expr.sym("N"))
    assert [d.name for d in dims[2:5]] == ["x_d2", "x_d3", "x_d4"]
    assert dims[5] is expr.parse_dim("2*N")


def test_axis_suffix_check_finds_every_text_the_clearing_changes():
    from onnx_symdims.passes._exporter_names import clear_exporter_output_names
    from onnx_symdims.passes._inference import _has_axis_suffix

    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[{dims}] y) {{ y = Relu(x) }}
    """
    for dims, invented in (
        ("Reluy_dim_0, 4", True),
        ("N, Reluy_dim_1", True),
        ("N, 4", False),
        ("a_dim_x, 4", False),
    ):
        model = ir.from_onnx_text(text.format(dims=dims))
        assert _has_axis_suffix(model) or not invented
        assert bool(clear_exporter_output_names(model)) == invented


def test_set_output_checks_a_cached_shape_as_the_first_time():
    from onnx_symdims.shapes import NodeContext

    model = ir.from_onnx_text(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (y) { y = Relu(x) }
        """
    )
    node = next(iter(model.graph))
    ctx = ShapesContext()
    node_ctx = NodeContext(ctx, None)
    node_ctx.reset(node, 17)
    n = expr.sym("N")
    for _ in range(2):  # the second time the tuple is known valid
        node_ctx.set_output(0, (n, 4))
        assert ctx.peek_shape(node.outputs[0]) == (n, 4)
    for _ in range(2):  # an unknown dim is never cached as valid: a fresh symbol each time
        node_ctx.set_output(0, (expr.unknown("x"), 4))
        minted = ctx.peek_shape(node.outputs[0])[0]
        assert minted.is_symbol and ctx.is_generated(minted.name)


def test_read_dim_text_reads_plain_text_alike_and_opaque_text_per_context():
    first, second = ShapesContext(), ShapesContext()
    second.reserve_names(["d7_2"])
    for ctx in (first, second, ShapesContext()):
        assert ctx.read_dim_text("N") is expr.parse_dim("N")
        assert ctx.read_dim_text("2*M + K") is expr.parse_dim("2*M + K")
        assert ctx.read_dim_text("-1") == -1  # "12" is a name (opaque, per context)
    # An opaque text's name depends on the context's reserved names: never shared.
    assert first.read_dim_text("7/:2").name == "d7_2"
    assert second.read_dim_text("7/:2").name == "d7_2_1"
    assert second.opaque_dim_names == {"7/:2": "d7_2_1"}
