"""The per-call shortcuts of a small model's run give what the long way gave."""

from __future__ import annotations

import gc

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import _api, expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import NodeContext, ShapesContext, _context, _tensors

_SHAPES = [
    [2, "N", "2*N", 0],
    ["N", None, -1, "?", " * ", "", "-1", "-3", "7/:2", "batch size", "N"],
    ["7/:2", "M+1", "abs"],
    [],
]


def _long_way(ctx: ShapesContext, shape: ir.Shape, hint: str) -> tuple:
    """dims_from_ir's general loop, without the shortcut for texts read before."""
    return ctx._dims_from_ir(shape, hint)


@pytest.mark.parametrize("dims", _SHAPES)
def test_dims_from_ir_reads_as_the_general_loop_first_and_later_time(dims):
    shape = ir.Shape(dims)
    for _ in range(2):  # the second time the plain texts are known
        ctx, long_ctx = ShapesContext(), ShapesContext()
        for c in (ctx, long_ctx):
            c.reserve_names(["d7_2"])  # an opaque text's name is the context's own
        got = ctx.dims_from_ir(shape, "x")
        expected = _long_way(long_ctx, shape, "x")
        assert got == expected
        assert all(a is b for a, b in zip(got, expected) if not isinstance(a, int))
        assert ctx.generated_symbols == long_ctx.generated_symbols
        assert ctx.mutations == long_ctx.mutations
        assert ctx.opaque_dim_names == long_ctx.opaque_dim_names


def test_dims_from_ir_keeps_only_texts_every_context_reads_alike():
    ctx = ShapesContext()
    ctx.dims_from_ir(ir.Shape(["N", "-1", "?", "7/:2", "K*2"]), "x")
    known = _context._DECLARED_DIMS
    assert known["N"] is expr.sym("N") and known["K*2"] is expr.parse_dim("K*2")
    for text in ("-1", "?", "7/:2"):  # not a dim, anonymous, opaque
        assert text not in known
    # An opaque text stays per context, after any number of reads.
    other = ShapesContext()
    other.reserve_names(["d7_2"])
    (dim,) = other.dims_from_ir(ir.Shape(["7/:2"]), "x")
    assert dim.name == "d7_2_1"


@pytest.mark.parametrize("kind", [list, set, frozenset, iter])
def test_reserve_model_texts_reads_the_same_from_any_iterable_and_again(kind):
    texts = ["7/:2", "batch size", "N", "2*M + K", "?", "d7_2", "-1", "a.b", " * "]
    first = ShapesContext()
    first.reserve_model_texts(list(texts))
    for _ in range(2):  # the second time the model's texts are known
        ctx = ShapesContext()
        ctx.reserve_model_texts(kind(texts))
        assert ctx._reserved == first._reserved
        assert ctx.opaque_dim_names == first.opaque_dim_names
        assert ctx.mutations == first.mutations


def test_reserve_model_texts_reserves_opaque_names_against_the_reserved_ones():
    ctx = ShapesContext()
    ctx.reserve_names(["d7_2"])
    ctx.reserve_model_texts({"7/:2", "N"})
    assert ctx.opaque_dim_names == {"7/:2": "d7_2_1"}
    assert ctx.new_symbol("N").name == "N_1"


_MODEL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x, float[batch, seq, 8] y) => (z) {
    s = Add(x, y)
    t = Shape(s)
    z = Reshape(s, t)
}
"""


def _written(model: ir.Model) -> list[tuple[str, str, str]]:
    return [(v.name, str(v.shape), str(v.type)) for n in model.graph for v in n.outputs]


def test_the_default_call_infers_as_a_pass_made_for_it():
    by_api = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(_MODEL))
    by_pass = ir.from_onnx_text(_MODEL)
    SymbolicShapeInferencePass()(by_pass)
    assert _written(by_api) == _written(by_pass)
    assert _written(by_api)[-1] == ("z", "[batch,seq,8]", "FLOAT")
    # The shared pass has the default options, and keeps no state between calls.
    shared, fresh = _api._DEFAULT_PASS, SymbolicShapeInferencePass()
    assert vars(shared) == vars(fresh)
    assert shared.context is None


def test_the_call_with_options_uses_them():
    model = ir.from_onnx_text(_MODEL)
    with pytest.raises(ValueError, match="policy"):
        onnx_symdims.infer_symbolic_shapes(model, policy="nonsense")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_call_restores_the_collector_state(enabled, monkeypatch):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(_MODEL))
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError):
            onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(_MODEL), policy="nonsense")
        assert gc.isenabled() is enabled

        def boom(*args, **kwargs):
            assert not gc.isenabled()  # off during the passes
            raise RuntimeError("boom")

        monkeypatch.setattr(SymbolicShapeInferencePass, "call_without_gc", boom)
        with pytest.raises(RuntimeError, match="boom"):
            onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(_MODEL))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_values_of_one_dtype_get_their_own_type_objects():
    """Types are never shared: ``Value.dtype = ...`` changes the type object in place.

    (onnxscript's constant folding and its bfloat16 converter set ``value.dtype``: a
    type shared by two values would change both.)
    """
    model = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(_MODEL))
    s, t, z = (n.outputs[0] for n in model.graph)
    assert s.type == z.type == ir.TensorType(ir.DataType.FLOAT)
    assert s.type is not z.type
    s.dtype = ir.DataType.FLOAT16
    assert z.dtype == ir.DataType.FLOAT and t.dtype == ir.DataType.INT64


def test_node_context_reads_a_constant_input_once_as_the_context_reads_it():
    weight = ir.Value(
        name="w", const_value=ir.tensor(np.array([[1, 2, 3]], dtype=np.int64), name="w")
    )
    fed = ir.Value(name="f", const_value=ir.tensor(np.array([4], dtype=np.int64), name="f"))
    ir.Graph([fed], [], nodes=[])  # an initializer that is also an input: a default only
    node = ir.Node("", "Add", [weight, fed])
    ctx, long_ctx = ShapesContext(), ShapesContext()
    node_ctx = NodeContext(ctx, None)
    node_ctx.reset(node, 17)
    before = _tensors.untracked_reads()
    assert node_ctx.input_shape(0) == long_ctx.shape_of(weight) == (1, 3)
    assert node_ctx.input_value(0) == long_ctx.value_of(weight) == (1, 2, 3)
    assert node_ctx.input_value(1) is long_ctx.value_of(fed) is None
    assert node_ctx.input_shape(1) == long_ctx.shape_of(fed)
    reads = _tensors.untracked_reads() - before
    # read once each, then from the tables; counted as the context's own reads count
    assert node_ctx.input_shape(0) == (1, 3) and node_ctx.input_value(0) == (1, 2, 3)
    assert _tensors.untracked_reads() - before == reads
    assert ctx.declarations_used == long_ctx.declarations_used


@pytest.mark.parametrize("slots", [True, False])
def test_read_declared_shape_reads_as_constant_tensor_and_tensor_dims(slots, monkeypatch):
    from onnx import TensorProto, helper

    proto = helper.make_tensor("p", TensorProto.FLOAT, [2, 5], [0.0] * 10)
    values = [
        ir.Value(name="p", const_value=ir.serde.TensorProtoTensor(proto)),
        ir.Value(name="t", const_value=ir.tensor(np.zeros((3, 1), dtype=np.float32))),
        ir.Value(name="s", const_value=ir.tensor(np.array(1.0, dtype=np.float32))),
        ir.Value(name="d", shape=ir.Shape(["N", 4]), type=ir.TensorType(ir.DataType.FLOAT)),
    ]
    fed = ir.Value(name="f", shape=ir.Shape([7]), const_value=ir.tensor(np.zeros(2)))
    ir.Graph([fed], [], nodes=[])
    values.append(fed)
    monkeypatch.setattr(_context, "_VALUE_SLOTS", slots)
    ctx = ShapesContext()
    for value in values:
        before = _tensors.untracked_reads()
        tensor = _tensors.constant_tensor(value)
        expected = (
            _tensors.tensor_dims(tensor)
            if tensor is not None
            else ShapesContext().dims_from_ir(value.shape, value.name)
        )
        _tensors._UNTRACKED_READS[0] = before
        assert ctx.read_declared_shape(value) == expected
        assert _tensors.untracked_reads() == before + 1
    assert [ctx.read_declared_shape(v) for v in values] == [
        (2, 5),
        (3, 1),
        (),
        (expr.sym("N"), 4),
        (7,),
    ]
