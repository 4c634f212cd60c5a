"""The engine's inlined hot paths give exactly what the general paths give."""

from __future__ import annotations

import gc

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import expr
from onnx_symdims.passes import _inference
from onnx_symdims.shapes import IRDimWriter, NodeContext, ShapesContext, _tensors
from tests.engine._engine_testing import model
from tests.engine.test_engine_constants import _facts

# Constants whose outputs leave the inline commit: a sequence type known to the context
# (the type commit is the general one), a declared intermediate shape (merged), a
# declared type, and a Constant that is also a graph output (an anchor).
CASES = {
    "non-tensor types in the context": """
        g (float[batch, seq] x) => (float[batch, seq] y) {
            s = SequenceConstruct(x, x)
            n = SequenceLength(s)
            one = Constant<value = int64[1] {1}>()
            minus = Constant<value = int64[1] {-1}>()
            sh = Shape(x)
            zero = Constant<value = int64 {0}>()
            b = Gather<axis=0>(sh, zero)
            bu = Unsqueeze(b, one)
            t = Concat<axis=0>(bu, minus)
            y = Reshape(x, t)
        }""",
    "declared intermediate shape and type": """
        g (float[batch, seq] x) => (float[batch, seq] y) <int64[1] minus, int64 zero> {
            zero = Constant<value = int64 {0}>()
            minus = Constant<value = int64[1] {-1}>()
            axes = Constant<value = int64[1] {0}>()
            sh = Shape(x)
            b = Gather<axis=0>(sh, zero)
            bu = Unsqueeze(b, axes)
            t = Concat<axis=0>(bu, minus)
            y = Reshape(x, t)
        }""",
    "constant graph output": """
        g (float[batch] x) => (int64[2] c, float[batch] y) {
            c = Constant<value = int64[2] {3, 4}>()
            y = Relu(x)
        }""",
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_inline_commit_matches_the_general_commit(text, monkeypatch):
    assert _facts(text, True, monkeypatch) == _facts(text, False, monkeypatch)


def _node_context() -> tuple[NodeContext, ir.Node]:
    m = model(
        """
        g (float[batch] x) => (float[batch] y, float[batch] z) {
            y, z = Split<num_outputs = 2>(x)
        }"""
    )
    node = next(iter(m.graph))
    node_ctx = NodeContext(ShapesContext(), None)  # type: ignore[arg-type]
    node_ctx.reset(node, 21)
    return node_ctx, node


def test_set_output_stores_what_set_shape_stores():
    node_ctx, node = _node_context()
    ctx = node_ctx.ctx
    batch = expr.sym("batch")
    node_ctx.set_output(0, [batch, 2], ir.DataType.FLOAT)  # a list: stored as a tuple
    assert ctx.peek_shape(node.outputs[0]) == (batch, 2)
    assert type(ctx.peek_shape(node.outputs[0])) is tuple
    assert ctx.peek_dtype(node.outputs[0]) == ir.DataType.FLOAT
    node_ctx.set_output(1, None, ir.DataType.INT64)  # rank unknown, dtype still set
    assert ctx.shape_of(node.outputs[1]) is None
    assert ctx.peek_dtype(node.outputs[1]) == ir.DataType.INT64
    node_ctx.set_output(0, (3,))  # no dtype: the known one stays
    assert ctx.peek_shape(node.outputs[0]) == (3,)
    assert ctx.peek_dtype(node.outputs[0]) == ir.DataType.FLOAT
    node_ctx.set_output(5, (1,))  # past the outputs: ignored
    with pytest.raises(Exception, match="negative dim"):
        node_ctx.set_output(0, (-2,))


def test_writer_shares_one_shape_for_lists_and_tuples():
    writer = IRDimWriter()
    batch = expr.sym("batch")
    first = writer.shape((batch, 4))
    assert writer.shape([batch, 4]) is first
    assert [d if isinstance(d, int) else d.value for d in first] == ["batch", 4]


@pytest.mark.parametrize("enabled", [True, False])
def test_proto_and_path_calls_restore_the_collector(enabled, tmp_path):
    m = model(
        """
        g (float[batch, seq] x) => (float[batch, seq] y) {
            y = Relu(x)
        }"""
    )
    proto = ir.to_proto(m)
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        out = onnx_symdims.infer_symbolic_shapes(proto)
        assert gc.isenabled() is enabled
        loaded = onnx_symdims.infer_symbolic_shapes(path)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert [d.dim_param for d in out.graph.output[0].type.tensor_type.shape.dim] == [
        "batch",
        "seq",
    ]
    assert [d.value for d in loaded.graph.outputs[0].shape] == ["batch", "seq"]


def test_engine_module_keeps_the_inline_switch():
    # The inline Constant path is a switch tests flip (results are the same either way).
    assert _inference.InferenceEngine.constant_fast_path is True


def _int32_and_bool_tensors() -> list[onnx.TensorProto]:
    """Small int32 and bool tensors in each storage (typed field, raw bytes), odd ones too."""
    tensors = []
    for dims in ([], [1], [3], [2, 2], [0]):
        n = int(np.prod(dims)) if dims else 1
        ints = list(range(-n, 0))
        bools = [i % 3 == 0 for i in range(n)]
        tensors += [
            onnx.helper.make_tensor("i", onnx.TensorProto.INT32, dims, ints),
            onnx.numpy_helper.from_array(np.array(ints, dtype=np.int32).reshape(dims)),
            onnx.helper.make_tensor("b", onnx.TensorProto.BOOL, dims, bools),
            onnx.numpy_helper.from_array(np.array(bools, dtype=bool).reshape(dims)),
        ]
    odd = [
        (onnx.TensorProto.BOOL, [], {"int32_data": [2]}),  # a bool stored as 2
        (onnx.TensorProto.BOOL, [], {"raw_data": bytes([3])}),
        (onnx.TensorProto.INT32, [2], {"int32_data": [1]}),  # too few elements
        (onnx.TensorProto.INT32, [2], {"raw_data": bytes(4)}),
    ]
    for data_type, dims, fields in odd:
        tensor = onnx.TensorProto(data_type=data_type, dims=dims)
        for name, data in fields.items():
            if name == "raw_data":
                tensor.raw_data = data
            else:
                getattr(tensor, name).extend(data)
        tensors.append(tensor)
    return tensors


@pytest.mark.parametrize("index", range(len(_int32_and_bool_tensors())))
def test_int32_and_bool_elements_read_directly_match_numpy(index):
    tensor = ir.serde.TensorProtoTensor(_int32_and_bool_tensors()[index])
    direct = _tensors._read_int32_or_bool_proto(tensor)
    try:
        generic = tuple(int(x) for x in tensor.numpy().reshape(-1).tolist())
    except ValueError:  # a length numpy cannot reshape: left to the generic read
        generic = None
    assert direct is None or direct == generic
    if direct is None:  # the odd ones and empty typed fields; the usual take the direct read
        assert generic in (None, (), (1,))
    if generic is not None:
        assert _tensors.int_elements(tensor) == generic


SCALAR_ARITHMETIC = """
    g (float[batch, seq] x) => (float[batch, seq] y) {
        sh = Shape(x)
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        two = Constant<value = int64 {2}>()
        b = Gather<axis=0>(sh, zero)
        s = Gather<axis=0>(sh, one)
        p = Mul(b, s)
        q = Div(p, two)
        r = Sub(q, one)
        c = Greater(r, zero)
        w = Where(c, q, two)
        m = Max(w, b, s)
        axes = Constant<value = int64[1] {0}>()
        mu = Unsqueeze(m, axes)
        su = Unsqueeze(s, axes)
        bu = Unsqueeze(b, axes)
        t = Concat<axis=0>(bu, su)
        y = Reshape(x, t)
    }"""


def test_scalar_elements_match_the_general_broadcast(monkeypatch):
    # The scalar path of the element-wise ops gives what broadcast_elements gives.
    from onnx_symdims.ops import elementwise

    m = model(SCALAR_ARITHMETIC)
    fast_ctx = onnx_symdims.SymbolicShapeInferencePass()(m).context
    fast = {node.outputs[0].name: fast_ctx.value_of(node.outputs[0]) for node in m.graph}

    def general(ctx, fn, inputs, out_shape):
        if out_shape is not None and all(isinstance(d, int) for d in out_shape):
            operands = [(ctx.input_shape(i), ctx.input_value(i)) for i in inputs]
            if all(s is not None for s, _ in operands) and any(
                e is not None for _, e in operands
            ):
                result = elementwise.broadcast_elements(fn, operands)
                if result is not None and result[0] == out_shape:
                    ctx.set_output_value(0, result[1])

    monkeypatch.setattr(elementwise, "_propagate_values", general)
    m = model(SCALAR_ARITHMETIC)
    slow_ctx = onnx_symdims.SymbolicShapeInferencePass()(m).context
    slow = {node.outputs[0].name: slow_ctx.value_of(node.outputs[0]) for node in m.graph}
    assert fast == slow
    assert fast["m"] is not None and fast["w"] is not None


# Declared shapes the commit meets: subgraph outputs (anchors of their graph) and
# intermediates (value_info), declaring exactly the inferred dims, the same dims in
# another spelling, an int where a symbol is inferred and the reverse, nothing (empty,
# "?", "unk__3", -1), another rank, and a stale size.
DECLARED = {
    "loop body outputs": """
        g (float[N, C] x, int64 trip) => (float[N, ?] acc, int64 count) {
            t = Constant<value = bool {1}>()
            c0 = Constant<value = int64 {0}>()
            count, acc = Loop(trip, t, c0, x) <body = body (int64 i, bool c_in, int64 n_in,
                    float[N, C] a_in) => (bool c_out, int64 n_out, float[N, C] a_out) {
                c_out = Identity(c_in)
                one = Constant<value = int64 {1}>()
                n_out = Add(n_in, one)
                a_out = Relu(a_in)
            }>
        }""",
    "if branch outputs in several spellings": """
        g (float[N, C] x, bool cond) => (float[N, ?] y) {
            y = If(cond) <then_branch = then_g () => (float[N, "(C)"] t_out) {
                t_out = Relu(x)
            }, else_branch = else_g () => (float["unk__3", "?"] e_out) {
                e_out = Sigmoid(x)
            }>
        }""",
    "subgraph ints and symbols": """
        g (float[N, 4] x, bool cond) => (float[N, ?] y) {
            y = If(cond) <then_branch = then_g () => (float[2, "4"] t_out) {
                t_out = Relu(x)
            }, else_branch = else_g () => (float[N, 4, 1] e_out) {
                e_out = Sigmoid(x)
            }>
        }""",
    "value_info": """
        g (float[N, C] x) => (float[N, C] y)
            <float[N, C] a, float[N, "?"] b, float["(N)", C] c, float[N, 7] d, float[-1, C] e,
             float["N + 1", C] f> {
            a = Relu(x)
            b = Relu(a)
            c = Relu(b)
            d = Relu(c)
            e = Relu(d)
            f = Relu(e)
            y = Relu(f)
        }""",
}


def _declared_run(text: str) -> dict:
    m = model(text)
    result = _inference.SymbolicShapeInferencePass()(m)
    ctx = result.context
    values = result.snapshot.values
    return {
        "facts": [(v.name, ctx.peek_shape(v), ctx.peek_dtype(v)) for v in values],
        "written": [
            (
                v.name,
                None
                if v.shape is None
                else [d if isinstance(d, int) else d.value for d in v.shape],
                v.dtype,
            )
            for v in values
        ],
        "diagnostics": [str(d) for d in result.diagnostics],
        "declarations used": ctx.declarations_used,
        "symbols": sorted(ctx.generated_symbols),
    }


@pytest.mark.parametrize("text", DECLARED.values(), ids=DECLARED.keys())
def test_declared_written_matches_the_merge(text, monkeypatch):
    fast = _declared_run(text)
    monkeypatch.setattr(_inference, "_declared_written", lambda *args: None)
    assert fast == _declared_run(text)


def test_declared_written_takes_only_what_the_merge_fills_or_keeps():
    ctx = ShapesContext()
    writer = IRDimWriter()
    n, c = ctx.read_dim_text("N"), ctx.read_dim_text("C")

    def written(declared, inferred, anchor=False):
        found = _inference._declared_written(ir.Shape(declared), inferred, anchor, ctx, writer)
        return None if found is None else [d if isinstance(d, int) else d.value for d in found]

    assert written(["N", 4], (n, 4)) == ["N", 4]
    # "(N)" reads as N: the canonical "N" is written on a non-anchor, an anchor keeps it.
    assert written(["(N)", 4], (n, 4)) == ["N", 4]
    assert written(["(N)", 4], (n, 4), anchor=True) == ["(N)", 4]
    # Declaring nothing: the inferred dim is written.
    for nothing in (None, "?", "unk__1", -1, "-1"):
        assert written(["N", nothing], (n, c)) == ["N", "C"]
    assert written(["unk__1", 4], (n, 4), anchor=True) is None  # a name on an anchor
    # Anything the merge decides otherwise (a conflict, an int, another rank) takes it.
    assert written(["N", "4"], (n, 4), anchor=True) is None
    assert written(["N", 4], (n, c)) is None
    assert written(["N", "C"], (n, 4)) is None
    assert written(["C", 4], (n, 4)) is None
    assert written(["N"], (n, 4)) is None
    assert written(["N", 4], None) is None
