"""Shape computations and value-as-shape propagation, with onnxruntime as the oracle."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from tests.engine._engine_testing import assert_verified, dims, errors, infer, is_fresh, model


def _run(body: str, opset: int = 21, verify: bool = True):
    m, result = infer(body, opset=opset)
    assert not errors(result), errors(result)
    if verify:
        assert_verified(m)
    return m, result


# ----------------------------------------------------------------------------------------
# Shape, Size
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attrs", "value"),
    [
        ("", ["a", "b", 3, "c"]),
        ("<start=1>", ["b", 3, "c"]),
        ("<start=-1>", ["c"]),
        ("<end=-1>", ["a", "b", 3]),
        ("<start=1, end=3>", ["b", 3]),
        ("<start=-10, end=10>", ["a", "b", 3, "c"]),  # clamped to [0, rank]
        ("<start=3, end=1>", []),  # empty slice
    ],
)
def test_shape_start_end(attrs, value):
    m, result = _run(f"g (float[a, b, 3, c] x) => (s) {{ s = Shape{attrs}(x) }}")
    assert dims(m, "s") == [len(value)]
    assert [str(v) for v in result.context.value_as_shape("s")] == [str(v) for v in value]


def test_shape_of_unknown_rank_has_unknown_length():
    m = model("g (float x) => (s) { s = Shape(x) }")
    m.graph.inputs[0].shape = None  # rank unknown
    result = SymbolicShapeInferencePass()(m)
    (length,) = dims(m, "s")
    assert is_fresh(result, length)


def test_size_value_is_the_product():
    m, result = _run(
        "g (float[a, 0, 3] x, float[a, b] y) => (n, k) { n = Size(x) \n k = Size(y) }",
        verify=False,  # scalars: no dims to compare
    )
    assert dims(m, "n") == []
    assert result.context.value_as_shape("n") == (0,)
    assert result.context.value_as_shape("k") == (expr.sym("a") * expr.sym("b"),)


# ----------------------------------------------------------------------------------------
# Reshape
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x", "target", "attrs", "expected"),
    [
        ("[b, s, 64]", "{0, 0, 4, 16}", "", ["b", "s", 4, 16]),  # 0 copies
        ("[b, s, 64]", "{0, -1}", "", ["b", "64*s"]),  # -1 by exact division
        ("[b, s, 64]", "{-1, 64}", "", ["b*s", 64]),
        ("[b, 8, 8]", "{0, 4, -1}", "", ["b", 4, 16]),
        ("[b, 0, 4]", "{0, 0, 4}", "<allowzero=1>", [0, 0, 4]),  # 0 is a size
        ("[b, 0, 4]", "{-1, 2}", "", [0, 2]),  # an empty input
        ("[6, 4]", "{3, -1}", "", [3, 8]),
    ],
)
def test_reshape_constant_targets(x, target, attrs, expected):
    m, _ = _run(
        f"g (float{x} x) => (y) <int64[{target.count(',') + 1}] t = {target}> "
        f"{{ y = Reshape{attrs}(x, t) }}"
    )
    assert dims(m, "y") == expected


def test_reshape_with_a_zero_sized_input_and_allowzero_is_verified():
    m, _ = _run(
        "g (float[b, 0] x) => (y) <int64[3] t = {0, 3, 0}> { y = Reshape<allowzero=1>(x, t) }",
        verify=False,
    )
    assert dims(m, "y") == [0, 3, 0]


def test_reshape_rejects_two_minus_ones_and_bad_counts():
    _, result = infer("g (float[b, 4] x) => (y) <int64[2] t = {-1, -1}> { y = Reshape(x, t) }")
    assert any("more than one -1" in e for e in errors(result))
    _, result = infer("g (float[3, 4] x) => (y) <int64[2] t = {5, -1}> { y = Reshape(x, t) }")
    assert any("cannot reshape" in e for e in errors(result))
    _, result = infer("g (float[3, 4] x) => (y) <int64[2] t = {5, 2}> { y = Reshape(x, t) }")
    assert any("cannot reshape" in e for e in errors(result))


GATHER_CONCAT_RESHAPE = """g (float[batch, seq, 64] x) => (y)
<int64 zero = {0}, int64 one = {1}, int64[1] axes = {0}, int64[2] heads = {4, 16}> {
    s = Shape(x)
    b = Gather(s, zero)
    q = Gather(s, one)
    bu = Unsqueeze(b, axes)
    qu = Unsqueeze(q, axes)
    t = Concat<axis=0>(bu, qu, heads)
    y = Reshape(x, t)
}"""


def test_concat_of_shape_pieces_resolves_reshape_symbolically():
    m, result = _run(GATHER_CONCAT_RESHAPE)
    assert dims(m, "b") == []
    assert result.context.value_as_shape("b") == (expr.sym("batch"),)
    assert dims(m, "t") == [4]
    assert dims(m, "y") == ["batch", "seq", 4, 16]


def test_reshape_flatten_with_a_product_element():
    # (b*s, 64): if b*s were 0, onnxruntime would copy x's dim 0 (b) instead; that is
    # only possible when b or s is 0, i.e. x is empty, and then dim 0 must be 0 too.
    m, _ = _run(
        """g (float[b, s, 64] x) => (y) <int64 zero = {0}, int64 one = {1}, int64[1] axes = {0},
        int64[1] c64 = {64}> {
            sh = Shape(x)
            b0 = Gather(sh, zero)
            s0 = Gather(sh, one)
            bs = Mul(b0, s0)
            bsu = Unsqueeze(bs, axes)
            t = Concat<axis=0>(bsu, c64)
            y = Reshape(x, t)
        }"""
    )
    assert dims(m, "y") == ["b*s", 64]


@pytest.mark.parametrize(("b", "n", "p", "s"), [(2, 3, 1, 2), (2, 5, 0, 0), (3, 4, 4, 0)])
def test_reshape_symbolic_element_that_may_mean_copy_is_exact(b, n, p, s):
    # Target (-1, p+s, 8) on [b, 4, n, 8]: when p+s == 0 the element means "copy
    # x.shape[1] = 4". The written dims are exact in both regimes (onnxruntime checks).
    m, result = _run(
        """g (float[b, 4, n, 8] x, float[p] u, float[s] v) => (y)
        <int64[1] m1 = {-1}, int64[1] c8 = {8}> {
            pu = Shape(u)
            sv = Shape(v)
            ps = Add(pu, sv)
            t = Concat<axis=0>(m1, ps, c8)
            y = Reshape(x, t)
        }""",
        verify=False,
    )
    d0, d1, d2 = result.context.shape_of("y")
    assert d2 == 8 and not is_fresh(result, str(d0)) and not is_fresh(result, str(d1))
    if p + s and n != p + s:
        return  # the reshape is invalid there: nothing to compare
    bindings = {"b": b, "n": n, "p": p, "s": s}
    session = ort.InferenceSession(ir.to_proto(m).SerializeToString())
    feeds = {
        "x": np.zeros((b, 4, n, 8), np.float32),
        "u": np.zeros(p, np.float32),
        "v": np.zeros(s, np.float32),
    }
    (y,) = session.run(None, feeds)
    assert [expr.evaluate(d, bindings) for d in (d0, d1, d2)] == list(y.shape)


def test_reshape_symbolic_element_equal_to_the_copied_dim_is_kept():
    m, _ = _run(
        """g (float[b, n, 8] x) => (y) <int64[1] m1 = {-1}, int64[2] s12 = {1, 2}> {
            sh = Shape<start=0, end=2>(x)
            t = Concat<axis=0>(sh, m1)
            y = Reshape(x, t)
        }"""
    )
    assert dims(m, "y") == ["b", "n", 8]


def test_reshape_opset_1_uses_the_attribute():
    m, _ = _run(
        "g (float[b, 6] x) => (y) { y = Reshape<shape=[0, 2, 3]>(x) }", opset=1, verify=False
    )
    assert dims(m, "y") == ["b", 2, 3]


# ----------------------------------------------------------------------------------------
# Concat, Gather
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("axis", "expected"),
    [(0, ["a+c", 3]), (-2, ["a+c", 3])],
)
def test_concat_adds_along_the_axis(axis, expected):
    m, _ = _run(f"g (float[a, 3] x, float[c, 3] y) => (z) {{ z = Concat<axis={axis}>(x, y) }}")
    assert dims(m, "z") == expected


def test_concat_prefers_an_int_for_other_dims_and_handles_zero_size():
    m, _ = _run(
        "g (float[a, n] x, float[0, 5] y) => (z) { z = Concat<axis=0>(x, y) }", verify=False
    )
    assert dims(m, "z") == ["a", 5]


def test_concat_records_equal_non_axis_dims():
    _, result = infer("g (float[a, n] x, float[c, m] y) => (z) { z = Concat<axis=0>(x, y) }")
    assert result.context.has_constraint("m", "n")


@pytest.mark.parametrize(
    ("indices", "shape", "value"),
    [
        ("int64 i = {-1}", [], ["c"]),  # scalar index: the axis disappears
        ("int64[2] i = {2, 0}", [2], ["c", "a"]),
        ("int64[2, 1] i = {1, 1}", [2, 1], ["b", "b"]),
    ],
)
def test_gather_on_shape_values(indices, shape, value):
    m, result = _run(
        f"g (float[a, b, c] x) => (y) <{indices}> {{ s = Shape(x) \n y = Gather(s, i) }}",
        verify=bool(shape),
    )
    assert dims(m, "y") == shape
    assert [str(v) for v in result.context.value_as_shape("y")] == value


def test_gather_on_data_axis_and_out_of_range_index():
    m, _ = _run(
        "g (float[a, b, 5] x, int64[k, 2] i) => (y) { y = Gather<axis=1>(x, i) }", verify=False
    )
    assert dims(m, "y") == ["a", "k", 2, 5]
    _, result = infer(
        "g (float[a, b] x) => (y) <int64 i = {3}> { s = Shape(x) \n y = Gather(s, i) }"
    )
    assert any("out of range" in e for e in errors(result))


# ----------------------------------------------------------------------------------------
# Unsqueeze, Squeeze
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("axes", "expected"),
    [("{0}", [1, "a", 3]), ("{-1}", ["a", 3, 1]), ("{1, -1}", ["a", 1, 3, 1])],
)
def test_unsqueeze_negative_axes(axes, expected):
    m, _ = _run(
        f"g (float[a, 3] x) => (y) <int64[{axes.count(',') + 1}] ax = {axes}> {{ y = Unsqueeze(x, ax) }}"
    )
    assert dims(m, "y") == expected


def test_squeeze_without_axes_only_when_every_dim_is_known():
    m, _ = _run("g (float[1, 3, 1] x) => (y) { y = Squeeze(x) }")
    assert dims(m, "y") == [3]
    m, result = infer("g (float[1, n, 3] x) => (y) { y = Squeeze(x) }")
    assert dims(m, "y") is None  # n may be 1 at runtime: the rank is unknown
    assert not errors(result)


def test_squeeze_negative_axis_and_runtime_axes():
    m, _ = _run("g (float[a, 1, n] x) => (y) <int64[1] ax = {-2}> { y = Squeeze(x, ax) }")
    assert dims(m, "y") == ["a", "n"]
    m, result = infer("g (float[a, 1, n] x, int64[1] ax) => (y) { y = Squeeze(x, ax) }")
    assert len(dims(m, "y")) == 2
    assert all(is_fresh(result, d) for d in dims(m, "y"))  # which axis goes is unknown


# ----------------------------------------------------------------------------------------
# Cast, Identity, Constant, ConstantOfShape, Range, Expand
# ----------------------------------------------------------------------------------------
def test_cast_keeps_values_between_integer_types():
    m, result = _run(
        """g (float[a, b] x) => (y) {
            s = Shape(x)
            c = Cast<to=6>(s)
            y = Cast<to=7>(c)
        }"""
    )
    assert result.context.value_as_shape("y") == (expr.sym("a"), expr.sym("b"))
    assert m.graph.node(1).outputs[0].dtype.name == "INT32"


@pytest.mark.parametrize(
    ("node", "shape", "value"),
    [
        ("Constant<value_int=7>()", [], (7,)),
        ("Constant<value_ints=[1, -1]>()", [2], (1, -1)),
        ("Constant<value_float=0.5>()", [], None),
        ("Constant<value_floats=[0.5, 1.5, 2.5]>()", [3], None),
        ("Constant<value=int64[2, 2] {1, 2, 3, 4}>()", [2, 2], (1, 2, 3, 4)),
    ],
)
def test_constant_forms(node, shape, value):
    m, result = _run(f"g (float x) => (y) {{ y = {node} }}", verify=False)
    assert dims(m, "y") == shape
    assert result.context.value_as_shape("y") == value


def test_constant_of_shape_takes_the_symbolic_shape():
    m, _ = _run(
        """g (float[b, s] x) => (y, z) <int64[0] empty = {}> {
            sh = Shape(x)
            y = ConstantOfShape<value=int64[1] {1}>(sh)
            z = ConstantOfShape(empty)
        }"""
    )
    assert dims(m, "y") == ["b", "s"]
    assert dims(m, "z") == []


@pytest.mark.parametrize(
    ("start", "delta", "expected"),
    [
        (0, 1, "n"),
        (1, 1, "max(n-1,0)"),
        (0, 2, "(n+1)//2"),
    ],
)
def test_range_with_symbolic_limit(start, delta, expected):
    m, _ = _run(
        f"""g (float[n] x) => (r) <int64 z = {{0}}, int64 st = {{{start}}}, int64 d = {{{delta}}}> {{
            s = Shape(x)
            lim = Gather(s, z)
            r = Range(st, lim, d)
        }}"""
    )
    assert dims(m, "r") == [expected]


def test_range_with_float_constants():
    m, _ = _run(
        """g (float x) => (r) <float a = {0.5}, float b = {3.0}, float d = {0.5}> {
            r = Range(a, b, d)
        }"""
    )
    assert dims(m, "r") == [5]


def test_expand_to_a_shape_computed_from_another_tensor():
    m, _ = _run(
        """g (float[1, 4] x, float[b, s, 1] y) => (z, w) {
            sh = Shape(y)
            z = Expand(x, sh)
            w = Expand(y, sh)
        }"""
    )
    assert dims(m, "z") == ["b", "s", 4]
    assert dims(m, "w") == ["b", "s", 1]


def test_identity_passes_everything():
    m, result = _run("g (float[a, 2] x) => (y) { s = Shape(x) \n y = Identity(s) }")
    assert result.context.value_as_shape("y") == (expr.sym("a"), 2)
    assert dims(m, "y") == [2]


def test_why_a_possibly_zero_element_must_not_be_trusted():
    """onnxruntime itself shows the copy semantics the fresh dims above guard against."""
    m = model(
        """g (float[b, 4, n, 8] x, float[p] u, float[s] v) => (y)
        <int64[1] m1 = {-1}, int64[1] c8 = {8}> {
            pu = Shape(u)
            sv = Shape(v)
            ps = Add(pu, sv)
            t = Concat<axis=0>(m1, ps, c8)
            y = Reshape(x, t)
        }"""
    )
    session = ort.InferenceSession(
        ir.serde.serialize_model(m).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    feeds = {
        "x": np.zeros((2, 4, 0, 8), np.float32),
        "u": np.zeros((0,), np.float32),
        "v": np.zeros((0,), np.float32),
    }
    (y,) = session.run(None, feeds)
    naive = (4 * 2, 0, 8)  # the naive claim [4*b, p+s, 8] with b=2, p+s=0
    assert y.shape == (0, 4, 8)  # the 0 copied x's dim 1: not p+s
    assert y.shape != naive


def test_reshape_element_past_the_input_rank_is_kept():
    # A 0 at axis >= rank(x) is an error, so the element is never "copy" in a valid run.
    m, _ = _run(
        """g (float[n] x, float[b, s] y) => (z) <int64[2] ones = {1, 1}> {
            sh = Shape(y)
            t = Concat<axis=0>(ones, sh)
            z = Reshape(x, t)
        }""",
        verify=False,
    )
    assert dims(m, "z") == [1, 1, "b", "s"]


def test_nonempty_inputs_makes_copy_ambiguous_elements_exact():
    body = """g (float[b, 4, n, 8] x, float[p] u, float[s] v) => (y)
        <int64[1] m1 = {-1}, int64[1] c8 = {8}> {
            pu = Shape(u)
            sv = Shape(v)
            ps = Add(pu, sv)
            t = Concat<axis=0>(m1, ps, c8)
            y = Reshape(x, t)
        }"""
    m = model(body)
    SymbolicShapeInferencePass(nonempty_inputs=True)(m)
    # -1 is b*4*n*8 / ((p+s)*8): exact whenever the reshape succeeds.
    assert dims(m, "y")[1:] == ["p+s", 8]
    m = model(body)
    SymbolicShapeInferencePass(symbol_ranges={"p": (1, None)})(m)
    assert dims(m, "y")[1:] == ["p+s", 8]  # p >= 1 alone proves p+s >= 1


def test_concat_prefers_a_model_name_over_a_fresh_symbol():
    m, result = _run(
        """g (float[n] x, float[b, 3] y) => (z) {
            nz = NonZero(x)
            t = Transpose(nz)
            z = Concat<axis=1>(t, y)
        }""",
        verify=False,
    )
    assert is_fresh(result, dims(m, "t")[0])
    assert dims(m, "z") == ["b", 4]  # t's rows are y's rows: the declared name wins


@pytest.mark.parametrize("raw", [True, False], ids=["raw_data", "int64_data"])
@pytest.mark.parametrize(
    "array",
    [
        np.array(-3, dtype=np.int64),
        np.array([2, -1, 9_000_000_000], dtype=np.int64),
        np.zeros((0, 2), dtype=np.int64),
        np.arange(2048, dtype=np.int64).reshape(2, 1024),  # too large: shape only
    ],
    ids=["scalar", "vector", "empty", "large"],
)
def test_constant_int64_proto_forms(raw, array):
    """Exported models store int64 constants as raw bytes or as int64_data: same facts."""
    import onnx

    tensor = onnx.numpy_helper.from_array(array)
    if not raw:
        tensor.ClearField("raw_data")
        tensor.int64_data.extend(array.reshape(-1).tolist())
    node = onnx.helper.make_node("Constant", [], ["y"], value=tensor)
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT64, None)],
    )
    m = ir.from_proto(
        onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    )
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "y") == list(array.shape)
    expected = tuple(array.reshape(-1).tolist()) if array.size <= 1024 else None
    assert result.context.value_as_shape("y") == expected
