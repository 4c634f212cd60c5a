"""SymbolicShapeInferencePass: walking, writing, policies, anchors, diagnostics, façade."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import expr, ops
from onnx_symdims.passes import SymbolicShapeInferencePass, SymbolicShapeInferenceResult
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext
from tests.engine._engine_testing import (
    assert_verified,
    dims,
    errors,
    infer,
    is_fresh,
    model,
    value,
)

CHAIN = """g (float[batch, seq, 64] x) => (float[batch, seq, 4, 16] y) <int64[2] heads = {4, 16}> {
    s = Shape<start=0, end=2>(x)
    t = Concat<axis=0>(s, heads)
    y = Reshape(x, t)
}"""


def test_result_carries_context_and_exact_modified_flag():
    m = model(CHAIN)
    first = SymbolicShapeInferencePass()(m)
    assert isinstance(first, SymbolicShapeInferenceResult)
    assert first.model is m
    assert first.modified
    assert isinstance(first.context, ShapesContext)
    assert first.context.value_as_shape("t") == (
        first.context.shape_of("x")[0],
        first.context.shape_of("x")[1],
        4,
        16,
    )
    second = SymbolicShapeInferencePass()(m)
    assert not second.modified  # idempotent: the second run writes the same text
    assert dims(m, "t") == [4]


def test_the_pass_composes_with_onnx_ir_pass_managers():
    m = model(CHAIN)
    manager = ir.passes.PassManager([SymbolicShapeInferencePass()], steps=3)
    result = manager(m)
    assert result.modified
    assert dims(m, "s") == [2]


def test_shared_context_accumulates_and_diagnostics_are_per_run():
    ctx = ShapesContext()
    bad = "g (float[3] a, float[4] b) => (c) { c = Add(a, b) }"
    r1 = SymbolicShapeInferencePass(context=ctx)(model(bad))
    r2 = SymbolicShapeInferencePass(context=ctx)(model(bad))
    assert r1.context is r2.context is ctx
    assert len(r1.diagnostics) == len(r2.diagnostics) == 1
    assert len(ctx.diagnostics) == 2


def test_graph_input_and_output_text_is_never_rewritten():
    m, _ = infer(
        """g (float["batch size", "N + 1"] x) => (float["batch size", "N + 1"] y, float[a, ""] z) {
            y = Relu(x)
            z = Identity(x)
        }""",
        policy="override",
    )
    assert dims(m, "x") == ["batch size", "N + 1"]
    assert dims(m, "y") == ["batch size", "N + 1"]  # declared spelling kept on outputs
    # An empty declared dim on an output is filled in; a declared name is kept.
    assert dims(m, "z") == ["a", "N+1"]


def test_anchor_equalities_are_recorded():
    _, result = infer(
        """g (float[batch, past, 8] k, float[batch, seq, 8] n) => (float[batch, total, 8] kv) {
            kv = Concat<axis=1>(k, n)
        }"""
    )
    assert result.context.has_constraint("past+seq", "total")


@pytest.mark.parametrize(
    ("declared", "written", "message"),
    [
        ("float[N, 5] y", ["N", 3], "declared shape [N, 5] is false, inferred [N, 3]"),
        ("float[5, 4] y", ["N", 3], "axis 1: declared 4 but inferred 3"),
        ("float[N, 3, 1] y", ["N", 3], "declared rank 3 but inferred rank 2"),
    ],
)
def test_provably_false_output_anchor_gets_the_inferred_shape(declared, written, message):
    text = f"g (float[N, 3] x) => ({declared}) {{ y = Relu(x) }}"
    m, result = infer(text)
    assert dims(m, "y") == written  # a false declared dim would be a wrong dim
    warnings = [d.message for d in result.diagnostics if d.severity == "warning"]
    assert any("graph output 'y'" in w and message in w for w in warnings), warnings
    assert not result.context.constraints()  # nothing recorded from a false anchor
    # One notion of strict: strict=True and policy="strict" both raise.
    for options in ({"strict": True}, {"policy": "strict"}):
        with pytest.raises(ShapeInferenceError, match="graph output 'y'"):
            infer(text, **options)


INTERMEDIATE = """g (float[N, 3] x) => (z) {
    y = Relu(x)
    z = Identity(y)
}"""


def _with_declared(shape: list) -> ir.Model:
    m = model(INTERMEDIATE)
    y = m.graph.node(0).outputs[0]
    y.shape = ir.Shape(shape)
    y.dtype = ir.DataType.FLOAT
    return m


@pytest.mark.parametrize(
    ("policy", "declared", "written_y", "written_z"),
    [
        ("refine", ["N", None], ["N", 3], ["N", 3]),  # empty dim filled
        (
            "refine",
            ["unk__0", 3],
            ["N", 3],
            ["N", 3],
        ),  # ONNX's anonymous name declares nothing
        # N holds in every run, M == N is implied by nothing: the inferred dim, a warning
        ("refine", ["M", 3], ["N", 3], ["N", 3]),
        # N may be anything: the declared 7 is not implied (stale value_info), a warning
        ("refine", [7, 3], ["N", 3], ["N", 3]),
        ("skip", ["N", None], ["N", None], ["N", 3]),
        ("override", ["M", None], ["N", 3], ["N", 3]),
    ],
)
def test_policies_on_declared_intermediates(policy, declared, written_y, written_z):
    m = _with_declared(declared)
    result = SymbolicShapeInferencePass(policy)(m)
    assert dims(m, "y") == written_y
    assert dims(m, "z") == written_z
    assert (
        value(m, "z").dtype == ir.DataType.FLOAT
    )  # z declared nothing: every policy fills it
    assert not errors(result)


def test_declared_name_on_an_intermediate_is_an_anchor_only_by_option():
    result = SymbolicShapeInferencePass()(_with_declared(["M", 3]))
    assert not result.context.has_constraint("M", "N")
    result = SymbolicShapeInferencePass(value_info_anchors=True)(_with_declared(["M", 3]))
    assert result.context.has_constraint("M", "N")


def test_declared_int_replaces_a_fresh_symbol_downstream():
    m, result = infer(
        """g (float[N] x) => (y) {
            nz = NonZero(x)
            y = Identity(nz)
        }"""
    )
    nnz = dims(m, "nz")[1]
    assert is_fresh(result, nnz)
    # A runtime shape: a fresh symbol inference knows nothing about (a NonZero count has
    # a recorded bound, a declared name is not trusted there: test_anchor_policy.py).
    m = model("g (int64[2] s) => (y) { nz = ConstantOfShape(s) \n y = Identity(nz) }")
    m.graph.node(0).outputs[0].shape = ir.Shape([1, "count"])
    SymbolicShapeInferencePass()(m)
    assert dims(m, "y") == [1, "count"]  # the declared name knows more than a fresh one


def test_strict_option_raises_naming_the_node():
    m = model("g (float[3] a, float[4] b) => (c) { c = Add(a, b) }")
    m.graph.node(0).name = "bad_add"
    with pytest.raises(ShapeInferenceError, match="bad_add"):
        SymbolicShapeInferencePass(strict=True)(m)


def test_out_of_order_nodes_are_inferred_without_reordering_the_graph():
    m = model(CHAIN)
    nodes = list(m.graph)
    for node in nodes:
        m.graph.remove(node)
    m.graph.extend(reversed(nodes))
    SymbolicShapeInferencePass()(m)
    assert [n.op_type for n in m.graph] == ["Reshape", "Concat", "Shape"]
    assert dims(m, "y") == ["batch", "seq", 4, 16]


def test_progress_callback_reaches_the_total():
    calls = []
    SymbolicShapeInferencePass(progress=lambda done, total: calls.append((done, total)))(
        model(CHAIN)
    )
    assert calls[-1] == (3, 3)


def test_invalid_policy_is_rejected():
    with pytest.raises(ValueError, match="policy"):
        SymbolicShapeInferencePass("merge")


# ----------------------------------------------------------------------------------------
# Diagnostics on malformed nodes: never a crash
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ("y = Concat<axis=0>(x, v)", "different ranks"),  # wrong rank
        ("y = Reshape(x)", "required input 1 is missing"),  # missing input
        ("y = Concat<axis=1.5>(x, x)", "must be INT"),  # bad attribute type
        ("y = Gather<axis=4>(x, i)", "out of range"),  # bad attribute value
        ("y = Add(x, w)", "cannot broadcast"),  # incompatible shapes
        ("y = Reshape(x, bad)", "invalid target dim -3"),
        ("y = Squeeze(x, ax)", "cannot squeeze axis 1 of size 3"),
    ],
)
def test_malformed_node_gives_a_diagnostic_and_unknown_outputs(nodes, message):
    m, result = infer(
        f"""g (float[N, 3] x, float[4] v, float[4] w, int64[2] i) => (z)
        <int64[2] bad = {{-3, 2}}, int64[1] ax = {{1}}> {{
            {nodes}
            z = Relu(y)
        }}"""
    )
    assert any(message in e for e in errors(result)), errors(result)
    assert dims(m, "y") is None
    assert dims(m, "z") is None  # the following node still ran


def test_a_bug_in_a_hook_is_reported_and_ONNX_takes_over(monkeypatch):
    def broken(ctx, node):
        raise RuntimeError("boom")

    real_lookup = ops.lookup
    monkeypatch.setattr(
        ops,
        "lookup",
        lambda d, op, v: broken if op == "Transpose" else real_lookup(d, op, v),
    )
    m, result = infer("g (float[N, 3] x) => (y) { y = Transpose<perm=[1, 0]>(x) }")
    assert any("internal error" in e and "boom" in e for e in errors(result))
    assert dims(m, "y") == [3, "N"]


# ----------------------------------------------------------------------------------------
# Fallback to ONNX's per-node inference
# ----------------------------------------------------------------------------------------
@pytest.fixture
def no_hook(monkeypatch):
    """Pretend the listed ops have no hook."""

    def install(*op_types):
        real_lookup = ops.lookup
        monkeypatch.setattr(
            ops,
            "lookup",
            lambda d, op, v: None if op in op_types else real_lookup(d, op, v),
        )

    return install


def test_fallback_maps_symbolic_dims_back(no_hook):
    no_hook("Transpose")
    m, result = infer(
        """g (float["batch size", N, 3] x) => (y) {
            t = Transpose<perm=[2, 0, 1]>(x)
            y = Relu(t)
        }"""
    )
    # "batch size" is not an expression: written as the name its symbol reads back as.
    assert dims(m, "t") == [3, "batch_size", "N"]
    assert dims(m, "y") == [3, "batch_size", "N"]
    assert dims(m, "x") == ["batch size", "N", 3]  # the declared input keeps its text
    assert not result.diagnostics
    assert_verified(m)


def test_fallback_uses_known_small_values(no_hook):
    no_hook("Reshape")
    m, _ = infer("""g (float[2, 12] x) => (y) <int64[2] t = {-1, 4}> { y = Reshape(x, t) }""")
    assert dims(m, "y") == [6, 4]


def test_fallback_anonymous_dims_become_fresh_symbols(no_hook):
    no_hook("Concat")
    m, result = infer("g (float[N] a, float[M] b) => (c) { c = Concat<axis=0>(a, b) }")
    (d,) = dims(m, "c")
    assert is_fresh(result, d)  # ONNX writes unk__N; we write a symbol of our own


def test_op_without_schema_or_hook_is_a_warning():
    m = ir.from_onnx_text(
        """<ir_version: 10, opset_import: ["" : 21, "my.domain" : 1]>
        g (float[N] x) => (y) { t = my.domain.Mystery(x) \n y = Relu(t) }"""
    )
    result = SymbolicShapeInferencePass()(m)
    assert [d.severity for d in result.diagnostics] == ["warning"]
    assert "no ONNX schema" in result.diagnostics[0].message
    assert dims(m, "y") is None


def test_model_local_function_goes_through_onnx_function_inference():
    m = ir.from_onnx_text(
        """<ir_version: 10, opset_import: ["" : 21, "local" : 1]>
        g (float[N, 3] x) => (y) { y = local.Twice(x) }
        <domain: "local", opset_import: ["" : 21]>
        Twice (a) => (b) { c = Concat<axis=1>(a, a) \n b = Relu(c) }"""
    )
    result = SymbolicShapeInferencePass()(m)
    assert not result.diagnostics
    assert dims(m, "y") == ["N", 6]


def test_if_without_hook_infers_branches_and_output():
    m, _ = infer(
        """g (bool c, float[N, 3] x) => (y) {
            y = If(c) <
                then_branch = g1 () => (float[N, 3] a) { a = Relu(x) },
                else_branch = g2 () => (float[N, 3] b) { b = Neg(x) }
            >
        }"""
    )
    assert dims(m, "y") == ["N", 3]


# ----------------------------------------------------------------------------------------
# infer_symbolic_shapes: the three input kinds
# ----------------------------------------------------------------------------------------
def test_infer_symbolic_shapes_on_ir_model_is_in_place():
    m = model(CHAIN)
    assert onnx_symdims.infer_symbolic_shapes(m) is m
    assert dims(m, "t") == [4]


def test_infer_symbolic_shapes_on_model_proto_returns_a_new_proto():
    proto = ir.serde.serialize_model(model(CHAIN))
    before = proto.SerializeToString()
    out = onnx_symdims.infer_symbolic_shapes(proto)
    assert isinstance(out, onnx.ModelProto)
    assert proto.SerializeToString() == before
    inferred = {vi.name: vi for vi in out.graph.value_info}
    assert [d.dim_value for d in inferred["t"].type.tensor_type.shape.dim] == [4]


def test_infer_symbolic_shapes_on_a_path(tmp_path):
    path = tmp_path / "m.onnx"
    ir.save(model(CHAIN), path)
    m = onnx_symdims.infer_symbolic_shapes(str(path))
    assert isinstance(m, ir.Model)
    assert dims(m, "s") == [2]
    assert list(tmp_path.iterdir()) == [path]  # no temporary files left behind


def test_infer_symbolic_shapes_rejects_other_types():
    with pytest.raises(TypeError):
        onnx_symdims.infer_symbolic_shapes(42)
    assert onnx_symdims.__version__


def test_fallback_passes_schema_defaults_explicitly(no_hook):
    # ONNX's STFT inference reads a missing `onesided` as 0; the schema and onnxruntime
    # say 1 (a one-sided spectrum: 16 // 2 + 1 = 9 bins).
    no_hook("STFT")
    m, result = infer(
        """g (float[1, 128, 1] signal) => (out) <int64 step = {8}, int64 length = {16}> {
            out = STFT(signal, step, , length)
        }""",
        opset=17,
    )
    assert not result.diagnostics
    assert dims(m, "out") == [1, 15, 9, 2]
    assert_verified(m)


def test_initializer_backing_a_graph_input_is_not_a_constant():
    # Its contents and shape are only defaults: a run may feed other ones.
    m = model(
        """g (float[1, 1, 4, 4] x, float[4] scales, float start) => (y, r)
        <float[4] scales = {1.0, 1.0, 2.0, 2.0}, float start = {0.0},
         float limit = {4.0}, float delta = {1.0}> {
            y = Resize(x, , scales)
            r = Range(start, limit, delta)
        }"""
    )
    SymbolicShapeInferencePass()(m)
    values = {v.name: v for n in m.graph for v in n.outputs}
    y_dims = list(values["y"].shape.dims)
    assert len(y_dims) == 4 and not any(isinstance(d, int) for d in y_dims)
    (r_dim,) = values["r"].shape.dims
    assert not isinstance(r_dim, int)


def test_weights_are_never_read(tmp_path):
    # The weight lives in an external file that does not exist: inference must not touch it.
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.zeros((64, 32), np.float32), "W")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, text in (("location", "missing.bin"), ("offset", "0"), ("length", "8192")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, text
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[weight],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    inferred = onnx_symdims.infer_symbolic_shapes(str(path))
    assert dims(inferred, "y") == ["batch", 32]


def test_anonymous_question_mark_dims_are_never_one_symbol():
    # Tools write "?" for "unknown": two "?" are not the same dim. Treating them as one
    # name would equate nnz1 and nnz2 through the output anchors.
    m, result = infer(
        """g (float[N] x, float["?"] w) => (int64[1, "?"] nz, int64[1, "?"] nz2) {
            nz = NonZero(x)
            nz2 = NonZero(w)
        }"""
    )
    assert result.context.constraints() == []
    nnz, nnz2 = dims(m, "nz")[1], dims(m, "nz2")[1]
    assert nnz != nnz2 and "?" not in (nnz, nnz2)  # filled in: "?" declares nothing
    assert dims(m, "w") == ["?"]  # the input's text is kept


def test_nodes_out_of_order_are_inferred_in_topological_order():
    """A graph listed consumer-first is walked producer-first, and left as it was."""
    helper = onnx.helper
    nodes = [
        helper.make_node("Reshape", ["x", "t"], ["y"]),
        helper.make_node("Concat", ["s", "four"], ["t"], axis=0),
        helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array([2, 4], dtype=np.int64), "four")],
    )
    m = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    result = SymbolicShapeInferencePass()(m)
    assert [n.op_type for n in m.graph] == ["Reshape", "Concat", "Shape"]
    assert dims(m, "y") == ["N", 2, 4]
    assert result.context.value_as_shape("t") == (expr.sym("N"), 2, 4)
