"""Tests of the indexing, data-dependent, einsum, generator and string-normalizer hooks.

Every table row is a small graph. Its expected dims were derived by hand from the ONNX
spec (an expected dim is parsed with ``parse_expr`` and compared as a canonical
``DimExpr``); most rows are also run through onnxruntime on a few bindings of the input
symbols (including 0 where the op allows it), and every inferred dim, dtype, value and
recorded upper bound is checked against the real tensors (:func:`check_against_ort`).
Fresh data-dependent symbols are bound to the size observed at runtime; the same
symbol must then have the same size everywhere and satisfy its recorded bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import onnxruntime as ort
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapesContext
from tests.ops._ort_oracle import check_constraints, ort_session

ort.set_default_logger_severity(3)

Feeds = Mapping[str, Callable[[np.random.Generator, tuple[int, ...], Mapping[str, int]], Any]]


# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------
def header(opset: int) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>'


def parse(text: str) -> onnx.ModelProto:
    """The model, with graph output types removed so no declared anchor hides a result."""
    proto = onnx.parser.parse_model(text)
    for output in proto.graph.output:
        output.ClearField("type")
    return proto


def infer(text: str) -> tuple[ir.Model, ShapesContext, list]:
    model = ir.serde.deserialize_model(parse(text))
    result = SymbolicShapeInferencePass()(model)
    return model, result.context, result.diagnostics


def values_by_name(model: ir.Model) -> dict[str, ir.Value]:
    return {v.name: v for node in model.graph for v in node.outputs if v.name}


def as_dim(d: str | int) -> expr.Dim:
    return d if isinstance(d, int) else expr.parse_expr(d)


def assert_shapes(model: ir.Model, ctx: ShapesContext, expected: Mapping[str, Any]) -> None:
    """``expected``: value name -> ``None`` (unknown rank) or a sequence of dims (text)."""
    values = values_by_name(model)
    for name, dims in expected.items():
        shape = ctx.shape_of(values[name])
        if dims is None:
            assert shape is None, f"{name}: expected unknown rank, got {shape}"
            continue
        assert shape is not None, f"{name}: rank unknown, expected {dims}"
        printed = [expr.to_onnx(d) for d in shape]
        assert tuple(shape) == tuple(as_dim(d) for d in dims), f"{name}: {printed} != {dims}"


def _default_feed(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 3, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check_against_ort(
    text: str,
    bindings_list: Sequence[Mapping[str, int]],
    feeds: Feeds | None = None,
    seed: int = 0,
) -> None:
    """Runs the model on each binding and checks every inferred fact of every node output.

    Dims must evaluate to the real size (symbols not in the bindings are data-dependent:
    bound to their first bare occurrence, then checked everywhere), dtypes must match,
    known value elements must equal the real elements, and every recorded upper bound
    and equality must hold.
    """
    model, ctx, diagnostics = infer(text)
    assert not [d for d in diagnostics if d.severity == "error"], diagnostics
    proto = parse(text)
    graph_outputs = {o.name for o in proto.graph.output}
    names = [v.name for node in model.graph for v in node.outputs if v.name]
    for name in names:
        if name not in graph_outputs:
            proto.graph.output.add().name = name
    session = ort_session(proto)
    out_names = [o.name for o in session.get_outputs()]
    values = values_by_name(model)
    checked = 0
    for bindings in bindings_list:
        rng = np.random.default_rng(seed)
        inputs = {}
        for value_info in proto.graph.input:
            if value_info.name in {i.name for i in proto.graph.initializer}:
                continue
            tensor_type = value_info.type.tensor_type
            shape = tuple(
                d.dim_value
                if d.HasField("dim_value")
                else expr.evaluate(expr.parse_dim(d.dim_param), bindings)
                for d in tensor_type.shape.dim
            )
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
            make = (feeds or {}).get(value_info.name)
            array = make(rng, shape, bindings) if make else _default_feed(rng, shape, dtype)
            inputs[value_info.name] = np.asarray(array, dtype=dtype).reshape(shape)
        actual = dict(zip(out_names, session.run(None, inputs)))
        free = dict(bindings)
        # Data-dependent symbols take the size seen at their first bare occurrence.
        for name in names:
            shape = ctx.shape_of(values[name])
            if shape is None:
                continue
            assert len(shape) == actual[name].ndim, (
                f"{name}: rank {len(shape)} vs {actual[name].shape}"
            )
            for d, real in zip(shape, actual[name].shape):
                if isinstance(d, expr.DimExpr) and d.is_symbol and d.name not in free:
                    free[d.name] = real
        for name in names:
            real = actual[name]
            shape = ctx.shape_of(values[name])
            if shape is not None:
                got = tuple(expr.evaluate(d, free) for d in shape)
                assert got == real.shape, f"{name}: {got} != {real.shape} under {free}"
                checked += 1
            dtype = ctx.dtype_of(values[name])
            assert dtype == ir.DataType.from_numpy(real.dtype), (
                f"{name}: dtype {dtype} vs {real.dtype}"
            )
            elements = ctx.value_of(values[name])
            if elements is not None:
                assert len(elements) == real.size, (
                    f"{name}: {len(elements)} elements vs {real.size}"
                )
                for e, r in zip(elements, real.reshape(-1).tolist()):
                    if isinstance(e, int) or not e.is_unknown:
                        assert expr.evaluate(e, free) == r, (
                            f"{name}: value {elements} vs {real}"
                        )
        check_constraints(ctx, free)
    assert checked, "no output shape was checked"


def bound_of(ctx: ShapesContext, symbol: str) -> list[expr.Dim]:
    """The recorded upper bounds of ``symbol``."""
    return [rhs for lhs, rhs in ctx.less_equal_constraint_dims() if lhs == expr.sym(symbol)]


def run_case(case: dict) -> None:
    model, ctx, diagnostics = infer(case["text"])
    assert not [d for d in diagnostics if d.severity == "error"], diagnostics
    assert_shapes(model, ctx, case["expected"])
    for symbol, bound in case.get("bounds", {}).items():
        assert bound_of(ctx, symbol) == ([] if bound is None else [as_dim(bound)]), symbol
    if "bindings" in case:
        check_against_ort(case["text"], case["bindings"], case.get("feeds"))


def case(id: str, text: str, expected: Mapping[str, Any], **kw: Any) -> Any:
    return pytest.param(dict(text=text, expected=expected, **kw), id=id)


def ints_below(dim: str, dtype: Any = np.int64) -> Callable:
    """A feed of integers in ``[0, bindings[dim])`` (for indices)."""

    def make(rng: np.random.Generator, shape: tuple[int, ...], b: Mapping[str, int]) -> Any:
        bound = int(dim) if dim.isdigit() else b[dim]
        return rng.integers(0, max(bound, 1), size=shape).astype(dtype)

    return make


def const(value: Any) -> Callable:
    return lambda rng, shape, b: value


# ----------------------------------------------------------------------------------------
# GatherElements, GatherND
# ----------------------------------------------------------------------------------------
GATHER_CASES = [
    case(
        "gather_elements_axis0",
        f"""{header(13)} g (float[N, 4] x, int64[M, 4] i) => (y) {{ y = GatherElements<axis=0>(x, i) }}""",
        {"y": ("M", 4)},
        bindings=[{"N": 3, "M": 5}, {"N": 0, "M": 0}],
        feeds={"i": ints_below("N")},
    ),
    case(
        "gather_elements_negative_axis_opset11",
        f"""{header(11)} g (float[N, 4] x, int64[N, K] i) => (y) {{ y = GatherElements<axis=-1>(x, i) }}""",
        {"y": ("N", "K")},
        bindings=[{"N": 2, "K": 3}, {"N": 0, "K": 2}, {"N": 3, "K": 0}],
        feeds={"i": ints_below("4")},
    ),
    case(
        "gather_elements_shape_value",
        f"""{header(13)} g (float[A, B, C] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[2] {{2, 0}}>()
            y = GatherElements(s, i)
        }}""",
        {"y": (2,)},
        values={"y": ("C", "A")},
        bindings=[{"A": 2, "B": 3, "C": 4}, {"A": 0, "B": 1, "C": 5}],
    ),
    case(
        "gather_nd_opset11",
        f"""{header(11)} g (float[N, 3] x, int64[K, 2] i) => (y) {{ y = GatherND(x, i) }}""",
        {"y": ("K",)},
        bindings=[{"N": 4, "K": 5}, {"N": 2, "K": 0}],
        feeds={
            "i": lambda rng, s, b: np.stack(
                [rng.integers(0, b["N"], s[0]), rng.integers(0, 3, s[0])], -1
            )
        },
    ),
    case(
        "gather_nd_slices",
        f"""{header(13)} g (float[N, 5, 6] x, int64[K, 2] i) => (y) {{ y = GatherND(x, i) }}""",
        {"y": ("K", 6)},
        bindings=[{"N": 3, "K": 4}, {"N": 2, "K": 0}],
        feeds={
            "i": lambda rng, s, b: np.stack(
                [rng.integers(0, b["N"], s[0]), rng.integers(0, 5, s[0])], -1
            )
        },
    ),
    case(
        "gather_nd_batch_dims_opset12",
        f"""{header(12)} g (float[B, 5, 6] x, int64[B, K, 1] i) => (y) {{ y = GatherND<batch_dims=1>(x, i) }}""",
        {"y": ("B", "K", 6)},
        bindings=[{"B": 2, "K": 3}, {"B": 0, "K": 2}, {"B": 3, "K": 0}],
        feeds={"i": ints_below("5")},
    ),
    case(
        # onnxruntime accepts an indices batch that is a multiple of the data batch and
        # the output follows indices: taking the batch from data would be wrong.
        "gather_nd_batch_from_indices",
        f"""{header(13)} g (float[1, 3, 4] x, int64[P, 1] i) => (y) {{ y = GatherND<batch_dims=1>(x, i) }}""",
        {"y": ("P", 4)},
        bindings=[{"P": 2}, {"P": 1}],
        feeds={"i": ints_below("3")},
    ),
    case(
        "gather_nd_runtime_depth_unknown_rank",
        f"""{header(13)} g (float[N, 5, 6] x, int64[K, J] i) => (y) {{ y = GatherND(x, i) }}""",
        {"y": None},
    ),
    case(
        "gather_nd_shape_value",
        f"""{header(13)} g (float[A, B, C] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[2, 1] {{2, -3}}>()
            y = GatherND(s, i)
        }}""",
        {"y": (2,)},
        values={"y": ("C", "A")},
        bindings=[{"A": 2, "B": 3, "C": 4}],
    ),
]


def assert_values(model: ir.Model, ctx: ShapesContext, expected: Mapping[str, Any]) -> None:
    values = values_by_name(model)
    for name, elements in expected.items():
        got = ctx.value_of(values[name])
        if elements is None:
            assert got is None, f"{name}: value should be unknown, got {got}"
        else:
            assert got is not None, f"{name}: value unknown"
            assert tuple(got) == tuple(as_dim(e) for e in elements), f"{name}: {got}"


def run_full_case(case: dict) -> None:
    run_case(case)
    if "values" in case:
        model, ctx, _ = infer(case["text"])
        assert_values(model, ctx, case["values"])


@pytest.mark.parametrize("case", GATHER_CASES)
def test_gather(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# ScatterND, ScatterElements, Scatter
# ----------------------------------------------------------------------------------------
def distinct_rows(n: str, k: str) -> Callable:
    """``[k, 1]`` distinct indices in ``[0, n)`` (ScatterND with reduction none)."""
    return lambda rng, s, b: rng.permutation(b[n])[: b[k]].reshape(s)


SCATTER_CASES = [
    case(
        "scatter_nd_opset11",
        f"""{header(11)} g (float[N, 4] x, int64[K, 1] i, float[K, 4] u) => (y) {{ y = ScatterND(x, i, u) }}""",
        {"y": ("N", 4)},
        bindings=[{"N": 5, "K": 3}, {"N": 0, "K": 0}, {"N": 2, "K": 0}],
        feeds={"i": distinct_rows("N", "K")},
    ),
    case(
        "scatter_nd_add_opset16",
        f"""{header(16)} g (float[N, 4] x, int64[K, 2] i, float[K] u) => (y) {{ y = ScatterND<reduction="add">(x, i, u) }}""",
        {"y": ("N", 4)},
        bindings=[{"N": 3, "K": 6}],
        feeds={
            "i": lambda rng, s, b: np.stack(
                [rng.integers(0, b["N"], s[0]), rng.integers(0, 4, s[0])], -1
            )
        },
    ),
    case(
        "scatter_nd_shape_value",
        f"""{header(13)} g (float[A, B, C] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[1, 1] {{1}}>()
            u = Constant<value=int64[1] {{7}}>()
            y = ScatterND(s, i, u)
        }}""",
        {"y": (3,)},
        values={"y": ("A", 7, "C")},
        bindings=[{"A": 2, "B": 3, "C": 4}, {"A": 0, "B": 1, "C": 0}],
    ),
    case(
        "scatter_nd_add_shape_value_opset16",
        f"""{header(16)} g (float[A, B, C] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[2, 1] {{-2, 1}}>()
            u = Constant<value=int64[2] {{7, 1}}>()
            y = ScatterND<reduction="add">(s, i, u)
        }}""",
        {"y": (3,)},
        values={"y": ("A", "B+8", "C")},
        bindings=[{"A": 2, "B": 3, "C": 4}],
    ),
    case(
        "scatter_nd_max_shape_value_opset18",
        f"""{header(18)} g (float[A, B] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[1, 1] {{0}}>()
            u = Constant<value=int64[1] {{3}}>()
            y = ScatterND<reduction="max">(s, i, u)
        }}""",
        {"y": (2,)},
        values={"y": ("max(A,3)", "B")},
        bindings=[{"A": 2, "B": 3}, {"A": 5, "B": 0}],
    ),
    case(
        # Two writes of one element without reduction: the order is unspecified.
        "scatter_nd_duplicate_index_value_unknown",
        f"""{header(13)} g (float[A, B] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[2, 1] {{1, 1}}>()
            u = Constant<value=int64[2] {{7, 8}}>()
            y = ScatterND(s, i, u)
        }}""",
        {"y": (2,)},
        values={"y": None},
    ),
    case(
        "scatter_elements_opset11",
        f"""{header(11)} g (float[N, 4] x, int64[N, K] i, float[N, K] u) => (y) {{ y = ScatterElements<axis=-1>(x, i, u) }}""",
        {"y": ("N", 4)},
        bindings=[{"N": 3, "K": 1}, {"N": 0, "K": 1}],
        feeds={"i": ints_below("4")},
    ),
    case(
        "scatter_elements_mul_shape_value_opset16",
        f"""{header(16)} g (float[A, B] x) => (y) {{
            s = Shape(x)
            i = Constant<value=int64[1] {{0}}>()
            u = Constant<value=int64[1] {{5}}>()
            y = ScatterElements<reduction="mul">(s, i, u)
        }}""",
        {"y": (2,)},
        values={"y": ("5*A", "B")},
        bindings=[{"A": 2, "B": 3}, {"A": 0, "B": 1}],
    ),
    case(
        "scatter_elements_min_opset18",
        f"""{header(18)} g (float[N, 4] x, int64[M, 4] i, float[M, 4] u) => (y) {{ y = ScatterElements<axis=0, reduction="min">(x, i, u) }}""",
        {"y": ("N", 4)},
        bindings=[{"N": 3, "M": 5}],
        feeds={"i": ints_below("N")},
    ),
    case(
        "scatter_deprecated_opset9",
        f"""{header(9)} g (float[N, 4] x, int64[1, 4] i, float[1, 4] u) => (y) {{ y = Scatter<axis=0>(x, i, u) }}""",
        {"y": ("N", 4)},
        bindings=[{"N": 3}],
        feeds={"i": ints_below("N")},
    ),
    case(
        "scatter_unknown_data_shape_keeps_rank",
        f"""{header(13)} g (float[N, 4] x, int64[R] r, int64[M, 4] i, float[M, 4] u) => (y) {{
            z = Reshape(x, r)
            y = ScatterElements(z, i, u)
        }}""",
        {"y": ("ScatterElements_o0_d0", "ScatterElements_o0_d1")},
    ),
]


@pytest.mark.parametrize("case", SCATTER_CASES)
def test_scatter(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# TopK
# ----------------------------------------------------------------------------------------
def k_up_to(dim: str) -> Callable:
    return lambda rng, s, b: np.array([min(2, b[dim])], dtype=np.int64)


TOPK_CASES = [
    case(
        "topk_attr_opset9",
        f"""{header(9)} g (float[N, 8] x) => (v, i) {{ v, i = TopK<k=3>(x) }}""",
        {"v": ("N", 3), "i": ("N", 3)},
        bindings=[{"N": 2}, {"N": 0}],
    ),
    case(
        "topk_attr_axis0_opset7",
        f"""{header(7)} g (float[N, 8] x) => (v, i) {{ v, i = TopK<k=2, axis=0>(x) }}""",
        {"v": (2, 8), "i": (2, 8)},
        bindings=[{"N": 2}, {"N": 5}],
    ),
    case(
        "topk_const_k_opset10",
        f"""{header(10)} g (float[N, 8] x) => (v, i) {{
            k = Constant<value=int64[1] {{3}}>()
            v, i = TopK(x, k)
        }}""",
        {"v": ("N", 3), "i": ("N", 3)},
        bindings=[{"N": 2}, {"N": 0}],
    ),
    case(
        "topk_symbolic_k_from_shape_opset11",
        f"""{header(11)} g (float[N, M] x, float[P] y) => (v, i) {{
            s = Shape(y)
            v, i = TopK<largest=0>(x, s)
        }}""",
        {"v": ("N", "P"), "i": ("N", "P")},
        bindings=[
            {"N": 2, "M": 5, "P": 3},
            {"N": 0, "M": 4, "P": 0},
            {"N": 3, "M": 2, "P": 2},
        ],
    ),
    case(
        "topk_runtime_k_is_bounded_opset24",
        f"""{header(24)} g (float[N, M] x, int64[1] k) => (v, i) {{ v, i = TopK<axis=-2>(x, k) }}""",
        {"v": ("TopK_v_k", "M"), "i": ("TopK_v_k", "M")},
        bounds={"TopK_v_k": "N"},
        bindings=[{"N": 3, "M": 4}, {"N": 0, "M": 2}],
        feeds={"k": k_up_to("N")},
    ),
    case(
        "topk_runtime_k_of_empty_axis_is_zero",
        f"""{header(11)} g (float[N, 0] x, int64[1] k) => (v, i) {{ v, i = TopK(x, k) }}""",
        {"v": ("N", 0), "i": ("N", 0)},
    ),
    case(
        "topk_unknown_rank",
        f"""{header(11)} g (float[N, M] x, int64[1] k, int64[R] r) => (v, i) {{
            y = Reshape(x, r)
            v, i = TopK(y, k)
        }}""",
        {"v": None, "i": None},
    ),
]


@pytest.mark.parametrize("case", TOPK_CASES)
def test_topk(case: dict) -> None:
    run_full_case(case)


def k_up_to_all(*dims: str) -> Callable:
    return lambda rng, s, b: np.array(min(2, *(b[d] for d in dims)), dtype=np.int64).reshape(s)


SHARED_K_CASES = [
    case(
        "same_k_value",
        f"""{header(11)} g (float[N, M] x, float[P, Q] y, int64[1] k) => (v1, v2) {{
            v1, i1 = TopK(x, k)
            v2, i2 = TopK<axis=0>(y, k)
        }}""",
        {"v1": ("N", "TopK_v1_k"), "i2": ("TopK_v1_k", "Q")},
        bindings=[{"N": 3, "M": 4, "P": 5, "Q": 2}, {"N": 2, "M": 0, "P": 0, "Q": 3}],
        feeds={"k": k_up_to_all("M", "P")},
    ),
    case(
        "copies_of_k_through_reshaping_ops",
        f"""{header(13)} g (float[N, M] x, float[P] y, int64 k) => (v1, v2, v3) {{
            zero = Constant<value=int64[1] {{0}}>()
            one = Constant<value=int64[1] {{1}}>()
            k1 = Unsqueeze(k, zero)
            k2 = Reshape(k, one)
            k3 = Identity(k1)
            v1, i1 = TopK(x, k1)
            v2, i2 = TopK(y, k2)
            v3, i3 = TopK<axis=0>(x, k3)
        }}""",
        {"v1": ("N", "TopK_v1_k"), "v2": ("TopK_v1_k",), "v3": ("TopK_v1_k", "M")},
        bindings=[{"N": 3, "M": 4, "P": 5}, {"N": 2, "M": 2, "P": 0}],
        feeds={"k": k_up_to_all("N", "M", "P")},
    ),
    case(
        "different_k_values",
        f"""{header(11)} g (float[N, M] x, int64[1] k, int64[1] j) => (v1, v2) {{
            v1, i1 = TopK(x, k)
            v2, i2 = TopK(x, j)
        }}""",
        {"v1": ("N", "TopK_v1_k"), "v2": ("N", "TopK_v2_k")},
        bindings=[{"N": 3, "M": 4}],
        feeds={"k": const(np.array([1])), "j": const(np.array([3]))},
    ),
]


@pytest.mark.parametrize("case", SHARED_K_CASES)
def test_topk_runtime_k_one_symbol_per_value(case: dict) -> None:
    # TopK fails unless K <= the axis dim, so the dim is K itself: the same K, the same dim.
    run_case(case)


def test_topk_shared_k_is_bounded_by_every_axis() -> None:
    _, ctx, _ = infer(f"""{header(11)} g (float[N, M] x, float[Q] y, int64[1] k) => (v1, v2) {{
        v1, i1 = TopK(x, k)
        v2, i2 = TopK(y, k)
    }}""")
    assert sorted(map(str, bound_of(ctx, "TopK_v1_k"))) == ["M", "Q"]


def test_topk_dtypes() -> None:
    model, ctx, _ = infer(f"""{header(11)} g (double[N, 8] x) => (v, i) {{
        k = Constant<value=int64[1] {{3}}>()
        v, i = TopK(x, k)
    }}""")
    values = values_by_name(model)
    assert ctx.dtype_of(values["v"]) == ir.DataType.DOUBLE
    assert ctx.dtype_of(values["i"]) == ir.DataType.INT64


# ----------------------------------------------------------------------------------------
# NonZero
# ----------------------------------------------------------------------------------------
NONZERO_CASES = [
    case(
        "nonzero_symbolic_opset9",
        f"""{header(9)} g (float[N, M] x) => (y) {{ y = NonZero(x) }}""",
        {"y": (2, "NonZero_y_nnz")},
        bounds={"NonZero_y_nnz": "M*N"},
        bindings=[{"N": 3, "M": 4}, {"N": 0, "M": 4}, {"N": 1, "M": 1}],
    ),
    case(
        # A static input shape is not its contents: still data-dependent, bounded by 12.
        "nonzero_static_shape_opset13",
        f"""{header(13)} g (int64[3, 4] x) => (y) {{ y = NonZero(x) }}""",
        {"y": (2, "NonZero_y_nnz")},
        bounds={"NonZero_y_nnz": 12},
        bindings=[{}],
    ),
    case(
        "nonzero_empty_input_is_exact",
        f"""{header(13)} g (float[0, M] x) => (y) {{ y = NonZero(x) }}""",
        {"y": (2, 0)},
        bindings=[{"M": 3}],
    ),
    case(
        "nonzero_small_int_constant_is_exact",
        f"""{header(13)} g (float[N] x) => (y) {{
            w = Constant<value=int64[2, 2] {{1, 0, 0, 3}}>()
            y = NonZero(w)
        }}""",
        {"y": (2, 2)},
        values={"y": (0, 1, 0, 1)},
        bindings=[{"N": 1}],
    ),
    case(
        "nonzero_small_float_initializer_is_exact",
        f"""{header(13)} g (float[N] x) => (y) <float[3] w = {{0.0, 2.5, -1.0}}> {{ y = NonZero(w) }}""",
        {"y": (1, 2)},
        values={"y": (1, 2)},
        bindings=[{"N": 1}],
    ),
    case(
        # An initializer that is also a graph input can be overridden at runtime.
        "nonzero_overridable_initializer_is_not_read",
        f"""{header(13)} g (float[3] w) => (y) <float[3] w = {{0.0, 2.5, -1.0}}> {{ y = NonZero(w) }}""",
        {"y": (1, "NonZero_y_nnz")},
        bounds={"NonZero_y_nnz": 3},
    ),
    case(
        "nonzero_unknown_rank",
        f"""{header(13)} g (float[N, M] x, int64[R] r) => (y) {{
            z = Reshape(x, r)
            y = NonZero(z)
        }}""",
        {"y": ("NonZero_o0_d0", "NonZero_y_nnz")},
        bounds={"NonZero_y_nnz": None},
    ),
]


@pytest.mark.parametrize("case", NONZERO_CASES)
def test_nonzero(case: dict) -> None:
    run_full_case(case)


def test_nonzero_scalar_follows_spec() -> None:
    """ONNX: "for scalar input, NonZero produces output shape (0, N)"; nnz <= 1."""
    model, ctx, _ = infer(f"""{header(13)} g (float x) => (y) {{ y = NonZero(x) }}""")
    assert_shapes(model, ctx, {"y": (0, "NonZero_y_nnz")})
    assert bound_of(ctx, "NonZero_y_nnz") == [1]


def test_nonzero_scalar_departs_from_onnxruntime() -> None:
    """Documented departure: onnxruntime returns ``(1, nnz)`` for a scalar, the spec
    (and ONNX's own inference) ``(0, nnz)``. We follow the spec; this test fails if
    onnxruntime changes, so the choice is revisited."""
    text = f"""{header(13)} g (float x) => (y) {{ y = NonZero(x) }}"""
    session = ort.InferenceSession(
        parse(text).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    for value, nnz in ((0.0, 0), (3.0, 1)):
        (y,) = session.run(None, {"x": np.array(value, dtype=np.float32)})
        assert y.shape == (1, nnz)  # onnxruntime: rank 1 row
    model, ctx, _ = infer(text)
    assert ctx.shape_of(values_by_name(model)["y"])[0] == 0  # ours: the spec's 0


# ----------------------------------------------------------------------------------------
# Compress
# ----------------------------------------------------------------------------------------
COMPRESS_CASES = [
    case(
        "compress_axis0_opset9",
        f"""{header(9)} g (float[N, 4] x, bool[L] c) => (y) {{ y = Compress<axis=0>(x, c) }}""",
        {"y": ("Compress_y_count", 4)},
        bounds={"Compress_y_count": "min(L,N)"},
        bindings=[{"N": 3, "L": 5}, {"N": 4, "L": 2}, {"N": 0, "L": 3}, {"N": 2, "L": 0}],
    ),
    case(
        "compress_negative_axis_opset11",
        f"""{header(11)} g (float[N, 4] x, bool[L] c) => (y) {{ y = Compress<axis=-1>(x, c) }}""",
        {"y": ("N", "Compress_y_count")},
        bounds={"Compress_y_count": "min(L,4)"},
        bindings=[{"N": 3, "L": 5}, {"N": 0, "L": 2}],
    ),
    case(
        "compress_flattened",
        f"""{header(11)} g (float[N, 4] x, bool[L] c) => (y) {{ y = Compress(x, c) }}""",
        {"y": ("Compress_y_count",)},
        bounds={"Compress_y_count": "min(4*N,L)"},
        bindings=[{"N": 3, "L": 5}, {"N": 1, "L": 9}, {"N": 0, "L": 2}],
    ),
    case(
        "compress_static_dim_and_condition",
        f"""{header(11)} g (float[3, 4] x, bool[5] c) => (y) {{ y = Compress<axis=0>(x, c) }}""",
        {"y": ("Compress_y_count", 4)},
        bounds={"Compress_y_count": 3},
        bindings=[{}],
    ),
    case(
        "compress_constant_all_true",
        f"""{header(11)} g (float[N, 4] x) => (y) {{
            c = Constant<value=bool[3] {{1, 1, 1}}>()
            y = Compress<axis=0>(x, c)
        }}""",
        {"y": ("min(3,N)", 4)},
        bindings=[{"N": 2}, {"N": 5}, {"N": 0}],
    ),
    case(
        "compress_constant_mixed_static_dim",
        f"""{header(11)} g (float[2, N] x) => (y) {{
            c = Constant<value=bool[3] {{1, 0, 1}}>()
            y = Compress<axis=0>(x, c)
        }}""",
        {"y": (1, "N")},
        bindings=[{"N": 3}],
    ),
    case(
        "compress_constant_mixed_symbolic_dim",
        f"""{header(11)} g (float[N, 4] x) => (y) {{
            c = Constant<value=bool[3] {{1, 0, 1}}>()
            y = Compress<axis=0>(x, c)
        }}""",
        {"y": ("Compress_y_count", 4)},
        bounds={"Compress_y_count": "min(2,N)"},
        bindings=[{"N": 1}, {"N": 2}, {"N": 3}, {"N": 0}],
    ),
    case(
        "compress_constant_all_false",
        f"""{header(11)} g (float[N, 4] x) => (y) {{
            c = Constant<value=bool[2] {{0, 0}}>()
            y = Compress(x, c)
        }}""",
        {"y": (0,)},
        bindings=[{"N": 2}],
    ),
    case(
        "compress_shape_value",
        f"""{header(11)} g (float[A, B, C] x) => (y) {{
            s = Shape(x)
            c = Constant<value=bool[3] {{1, 0, 1}}>()
            y = Compress<axis=0>(s, c)
        }}""",
        {"y": (2,)},
        values={"y": ("A", "C")},
        bindings=[{"A": 2, "B": 3, "C": 0}],
    ),
]


@pytest.mark.parametrize("case", COMPRESS_CASES)
def test_compress(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# Unique
# ----------------------------------------------------------------------------------------
UNIQUE_CASES = [
    case(
        "unique_flattened",
        f"""{header(11)} g (int64[N, M] x) => (y, i, r, c) {{ y, i, r, c = Unique(x) }}""",
        {
            "y": ("Unique_y_count",),
            "i": ("Unique_y_count",),
            "r": ("M*N",),
            "c": ("Unique_y_count",),
        },
        bounds={"Unique_y_count": "M*N"},
        bindings=[{"N": 3, "M": 4}, {"N": 0, "M": 2}, {"N": 1, "M": 1}],
    ),
    case(
        # OSI returns rank 1 here; the output keeps the input rank.
        "unique_axis",
        f"""{header(11)} g (int64[N, M] x) => (y, i, r, c) {{ y, i, r, c = Unique<axis=1, sorted=0>(x) }}""",
        {
            "y": ("N", "Unique_y_count"),
            "i": ("Unique_y_count",),
            "r": ("M",),
            "c": ("Unique_y_count",),
        },
        bounds={"Unique_y_count": "M"},
        bindings=[{"N": 2, "M": 5}, {"N": 0, "M": 3}, {"N": 3, "M": 0}],
    ),
    case(
        "unique_negative_axis_only_y",
        f"""{header(11)} g (float[N, M, 2] x) => (y) {{ y = Unique<axis=-3>(x) }}""",
        {"y": ("Unique_y_count", "M", 2)},
        bounds={"Unique_y_count": "N"},
        bindings=[{"N": 4, "M": 2}, {"N": 0, "M": 2}],
    ),
    case(
        "unique_single_element",
        f"""{header(11)} g (float[1, 1] x) => (y, i, r, c) {{ y, i, r, c = Unique(x) }}""",
        {"y": (1,), "i": (1,), "r": (1,), "c": (1,)},
        bindings=[{}],
    ),
    case(
        "unique_empty",
        f"""{header(11)} g (float[0, M] x) => (y, i, r, c) {{ y, i, r, c = Unique(x) }}""",
        {"y": (0,), "i": (0,), "r": (0,), "c": (0,)},
        bindings=[{"M": 3}],
    ),
    case(
        "unique_constant_is_exact",
        f"""{header(11)} g (float[N] x) => (y, i, r, c) {{
            w = Constant<value=int64[5] {{3, 1, 3, 2, 1}}>()
            y, i, r, c = Unique(w)
        }}""",
        {"y": (3,), "i": (3,), "r": (5,), "c": (3,)},
        bindings=[{"N": 1}],
    ),
    case(
        "unique_float_constant_is_exact",
        f"""{header(11)} g (float[N] x) => (y, i, r, c) {{
            w = Constant<value=float[6] {{1.5, -2.0, 1.5, 0.0, 3.25, -2.0}}>()
            y, i, r, c = Unique<sorted=0>(w)
        }}""",
        {"y": (4,), "i": (4,), "r": (6,), "c": (4,)},
        bindings=[{"N": 1}],
    ),
    case(
        "unique_double_constant_slices_are_exact",
        f"""{header(11)} g (float[N] x) => (y, i, r, c) {{
            w = Constant<value=double[3, 2] {{1.0, 2.5, 1.0, 2.5, 0.5, 2.5}}>()
            y, i, r, c = Unique<axis=0>(w)
        }}""",
        {"y": (2, 2), "i": (2,), "r": (3,), "c": (2,)},
        bindings=[{"N": 1}],
    ),
    case(
        # 0.0 and -0.0 are equal, yet some runtimes hash them apart: not counted here.
        "unique_float_constant_with_both_zeros_is_fresh",
        f"""{header(11)} g (float[N] x) => (y) {{
            w = Constant<value=float[3] {{0.0, -0.0, 1.0}}>()
            y = Unique(w)
        }}""",
        {"y": ("Unique_y_count",)},
        bounds={"Unique_y_count": 3},
        bindings=[{"N": 1}],
    ),
]


def test_unique_bfloat16_constant_is_exact() -> None:
    # onnxruntime has no bfloat16 Unique; the values are exact in float64 (ONNX spec).
    model = ir.from_onnx_text(f"""{header(11)} g (float[N] x) => (y, c) {{
        y, i, r, c = Unique(w)
    }}""")
    w = ir.Value(name="w", type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([5]))
    array = np.array([1.0, 0.5, 1.0, -3.0, 0.5], dtype=ml_dtypes.bfloat16)
    w.const_value = ir.tensor(array, name="w")
    model.graph.register_initializer(w)
    node = next(iter(model.graph))
    node.replace_input_with(0, w)
    result = SymbolicShapeInferencePass()(model)
    assert result.context.shape_of(node.outputs[0]) == (3,)
    assert result.context.shape_of(node.outputs[3]) == (3,)


@pytest.mark.parametrize("case", UNIQUE_CASES)
def test_unique(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# StringNormalizer (locale C.UTF-8: the default en_US.UTF-8 may not be installed)
# ----------------------------------------------------------------------------------------
def words(*items: str) -> Callable:
    """A feed cycling through ``items`` to the fed shape."""

    def make(rng: np.random.Generator, shape: tuple[int, ...], b: Mapping[str, int]) -> Any:
        flat = [items[k % len(items)] for k in range(int(np.prod(shape)))]
        return np.array(flat, dtype=object).reshape(shape)

    return make


def normalizer(inputs: str, attrs: str, body: str = "y = StringNormalizer<{a}>(x)") -> str:
    attrs = ", ".join(p for p in ('locale="C.UTF-8"', attrs) if p)
    return f"""{header(10)} g ({inputs}) => (y) {{ {body.format(a=attrs)} }}"""


STRING_NORMALIZER_CASES = [
    case(
        "no_stopwords_keeps_the_shape",
        normalizer("string[C] x", 'case_change_action="UPPER"'),
        {"y": ("C",)},
        bindings=[{"C": 1}, {"C": 4}],
        feeds={"x": words("a", "B")},
    ),
    case(
        "no_stopwords_two_dims",
        normalizer("string[1, C] x", ""),
        {"y": (1, "C")},
        bindings=[{"C": 3}],
        feeds={"x": words("a")},
    ),
    case(
        "runtime_stopwords_count_is_bounded",
        normalizer("string[C] x", 'stopwords=["a"]'),
        {"y": ("StringNormalizer_y_count",)},
        bounds={"StringNormalizer_y_count": "C"},
        bindings=[{"C": 3}, {"C": 2}],
        feeds={"x": words("a", "b")},
    ),
    case(
        # Every element is a stop word: onnxruntime returns one empty string, [1, 1].
        "runtime_stopwords_two_dims",
        normalizer("string[1, C] x", 'stopwords=["a"]'),
        {"y": (1, "StringNormalizer_y_count")},
        bindings=[{"C": 2}],
        feeds={"x": words("a")},
    ),
    case(
        "one_element_stays_one",
        normalizer("string[1] x", 'stopwords=["a"]'),
        {"y": (1,)},
        bindings=[{}],
        feeds={"x": words("a")},
    ),
    case(
        "constant_case_insensitive",
        normalizer(
            "float[N] z",
            'stopwords=["monday"]',
            """x = Constant<value=string[4] {{"Monday", "tuesday", "MONDAY", "x"}}>()
            y = StringNormalizer<{a}>(x)""",
        ),
        {"y": (2,)},
        bindings=[{"N": 1}],
    ),
    case(
        "constant_case_sensitive",
        normalizer(
            "float[N] z",
            'stopwords=["monday"], is_case_sensitive=1',
            """x = Constant<value=string[1, 3] {{"Monday", "monday", "x"}}>()
            y = StringNormalizer<{a}>(x)""",
        ),
        {"y": (1, 2)},
        bindings=[{"N": 1}],
    ),
    case(
        "constant_all_stopwords_is_one",
        normalizer(
            "float[N] z",
            'stopwords=["a", "b"]',
            """x = Constant<value=string[3] {{"a", "B", "a"}}>()
            y = StringNormalizer<{a}>(x)""",
        ),
        {"y": (1,)},
        bindings=[{"N": 1}],
    ),
    case(
        # Case rules beyond ASCII depend on the locale: the count stays unknown.
        "constant_non_ascii_case_insensitive_is_fresh",
        normalizer(
            "float[N] z",
            'stopwords=["\u00e9"]',
            """x = Constant<value=string[3] {{"\u00c9", "e", "x"}}>()
            y = StringNormalizer<{a}>(x)""",
        ),
        {"y": ("StringNormalizer_y_count",)},
        bounds={"StringNormalizer_y_count": 3},
        bindings=[{"N": 1}],
    ),
]


@pytest.mark.parametrize("case", STRING_NORMALIZER_CASES)
def test_string_normalizer(case: dict) -> None:
    run_case(case)


def test_string_normalizer_of_a_matrix_fails() -> None:
    _, _, diagnostics = infer(normalizer("string[2, 3] x", ""))
    assert any("[C] or [1, C]" in d.message for d in diagnostics if d.severity == "error")


# ----------------------------------------------------------------------------------------
# NonMaxSuppression
# ----------------------------------------------------------------------------------------
def boxes(rng: np.random.Generator, shape: tuple[int, ...], b: Mapping[str, int]) -> Any:
    corner = rng.random((*shape[:-1], 2))
    return np.concatenate([corner, corner + rng.random((*shape[:-1], 2))], axis=-1)


NMS_CASES = [
    case(
        "nms_const_max_opset10",
        f"""{header(10)} g (float[B, S, 4] b, float[B, C, S] s) => (y) {{
            m = Constant<value=int64[1] {{2}}>()
            y = NonMaxSuppression(b, s, m)
        }}""",
        {"y": ("NonMaxSuppression_y_selected", 3)},
        bounds={"NonMaxSuppression_y_selected": "B*C*min(2,S)"},
        bindings=[
            {"B": 2, "C": 3, "S": 5},
            {"B": 1, "C": 2, "S": 1},
            {"B": 0, "C": 2, "S": 3},
        ],
        feeds={"b": boxes},
    ),
    case(
        "nms_runtime_max_opset11",
        f"""{header(11)} g (float[B, S, 4] b, float[B, C, S] s, int64[1] m) => (y) {{
            y = NonMaxSuppression<center_point_box=0>(b, s, m)
        }}""",
        {"y": ("NonMaxSuppression_y_selected", 3)},
        bounds={"NonMaxSuppression_y_selected": "B*C*S"},
        bindings=[{"B": 2, "C": 3, "S": 5}],
        feeds={"b": boxes, "m": const(np.array([10]))},
    ),
    case(
        "nms_without_max_selects_nothing",
        f"""{header(11)} g (float[B, S, 4] b, float[B, C, S] s) => (y) {{ y = NonMaxSuppression(b, s) }}""",
        {"y": (0, 3)},
        bindings=[{"B": 2, "C": 3, "S": 5}],
        feeds={"b": boxes},
    ),
    case(
        "nms_negative_max_selects_nothing",
        f"""{header(11)} g (float[B, S, 4] b, float[B, C, S] s) => (y) {{
            m = Constant<value=int64[1] {{-1}}>()
            y = NonMaxSuppression(b, s, m)
        }}""",
        {"y": (0, 3)},
        bindings=[{"B": 2, "C": 3, "S": 5}],
        feeds={"b": boxes},
    ),
]


@pytest.mark.parametrize("case", NMS_CASES)
def test_non_max_suppression(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# Einsum
# ----------------------------------------------------------------------------------------
def einsum(equation: str, inputs: str, names: str = "a, b", opset: int = 12) -> str:
    return f"""{header(opset)} g ({inputs}) => (y) {{ y = Einsum<equation="{equation}">({names}) }}"""


EINSUM_CASES = [
    case(
        "einsum_matmul",
        einsum("ij,jk->ik", "float[M, K] a, float[K, N] b"),
        {"y": ("M", "N")},
        bindings=[
            {"M": 2, "K": 3, "N": 4},
            {"M": 0, "K": 3, "N": 2},
            {"M": 2, "K": 0, "N": 2},
        ],
    ),
    case(
        "einsum_implicit_output_sorted",
        einsum("ij,jk", "float[M, K] a, float[K, N] b"),
        {"y": ("M", "N")},
        bindings=[{"M": 2, "K": 3, "N": 4}],
    ),
    case(
        # Implicit output: ellipsis first, then single letters in ASCII order (j < k
        # swaps the operand order), so "...kj" is a transpose.
        "einsum_implicit_transpose_with_ellipsis",
        einsum("...kj", "float[B, M, K] a", "a"),
        {"y": ("B", "K", "M")},
        bindings=[{"B": 2, "M": 3, "K": 4}],
    ),
    case(
        # Spec: "A" < "a" in the implicit order. onnxruntime 1.32 rejects any upper-case
        # label in implicit mode (a runtime bug), so there is no oracle run here.
        "einsum_implicit_uppercase_first",
        einsum("bA", "float[M, K] a", "a"),
        {"y": ("K", "M")},
    ),
    case(
        "einsum_batched_ellipsis_broadcast",
        einsum("...ij,...jk->...ik", "float[B1, M, K] a, float[B2, K, N] b"),
        {"y": ("broadcast(B1,B2)", "M", "N")},
        bindings=[
            {"B1": 1, "B2": 3, "M": 2, "K": 2, "N": 4},
            {"B1": 2, "B2": 2, "M": 1, "K": 3, "N": 0},
        ],
    ),
    case(
        "einsum_diagonal",
        einsum("ii->i", "float[N, N] a", "a"),
        {"y": ("N",)},
        bindings=[{"N": 3}, {"N": 0}],
    ),
    case(
        "einsum_trace_implicit",
        einsum("ii", "float[N, N] a", "a"),
        {"y": ()},
        bindings=[{"N": 3}],
    ),
    case(
        "einsum_outer_with_spaces",
        einsum("i , j -> ij", "float[M] a, float[N] b"),
        {"y": ("M", "N")},
        bindings=[{"M": 2, "N": 3}, {"M": 0, "N": 1}],
    ),
    case(
        # One label, two different symbols: broadcast(A, B), never the first one.
        "einsum_label_broadcast",
        einsum("ij,ij->ij", "float[A, K] a, float[B, K] b"),
        {"y": ("broadcast(A,B)", "K")},
        bindings=[
            {"A": 1, "B": 3, "K": 2},
            {"A": 4, "B": 1, "K": 2},
            {"A": 2, "B": 2, "K": 0},
        ],
    ),
    case(
        "einsum_label_broadcast_static",
        einsum("ij,ik->ijk", "float[A, 3] a, float[4, 5] b"),
        {"y": (4, 3, 5)},
        bindings=[{"A": 1}, {"A": 4}],
    ),
    case(
        # Legal in the spec and numpy (ellipsis dims are summed); onnxruntime 1.32
        # rejects an explicit output without the inputs' ellipsis, so no oracle run.
        "einsum_sum_out_ellipsis",
        einsum("...i->i", "float[B, C, N] a", "a", opset=21),
        {"y": ("N",)},
    ),
    case(
        "einsum_output_ellipsis_without_input_ellipsis",
        einsum("ij,jk->...ik", "float[M, K] a, float[K, N] b"),
        {"y": ("M", "N")},
        bindings=[{"M": 2, "K": 3, "N": 5}],
    ),
    case(
        "einsum_unknown_rank_operand",
        f"""{header(12)} g (float[M, K] a, float[K, N] b, int64[R] r) => (y) {{
            c = Reshape(b, r)
            y = Einsum<equation="ij,jk->ik">(a, c)
        }}""",
        {"y": ("M", "Einsum_o0_d1")},
    ),
]


@pytest.mark.parametrize("case", EINSUM_CASES)
def test_einsum(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# OneHot, Det
# ----------------------------------------------------------------------------------------
ONEHOT_CASES = [
    case(
        "onehot_const_depth_opset9",
        f"""{header(9)} g (int64[N, M] i) => (y) {{
            d = Constant<value=int64 {{10}}>()
            v = Constant<value=float[2] {{0.0, 1.0}}>()
            y = OneHot(i, d, v)
        }}""",
        {"y": ("N", "M", 10)},
        bindings=[{"N": 2, "M": 3}, {"N": 0, "M": 3}],
    ),
    case(
        "onehot_axis0_opset11",
        f"""{header(11)} g (int64[N, M] i) => (y) {{
            d = Constant<value=int64[1] {{4}}>()
            v = Constant<value=float[2] {{0.0, 1.0}}>()
            y = OneHot<axis=0>(i, d, v)
        }}""",
        {"y": (4, "N", "M")},
        bindings=[{"N": 2, "M": 3}],
    ),
    case(
        "onehot_negative_axis_symbolic_depth",
        f"""{header(11)} g (int64[N, M] i, float[D] z) => (y) {{
            d = Shape(z)
            v = Constant<value=float[2] {{0.0, 1.0}}>()
            y = OneHot<axis=-2>(i, d, v)
        }}""",
        {"y": ("N", "D", "M")},
        bindings=[{"N": 2, "M": 3, "D": 5}],
    ),
    case(
        # onnxruntime casts a float depth to int64 (truncation): 3.7 -> 3.
        "onehot_float_depth_truncates",
        f"""{header(11)} g (int64[N] i) => (y) {{
            d = Constant<value=float {{3.7}}>()
            v = Constant<value=float[2] {{0.0, 1.0}}>()
            y = OneHot(i, d, v)
        }}""",
        {"y": ("N", 3)},
        bindings=[{"N": 4}],
    ),
    case(
        "onehot_runtime_depth",
        f"""{header(11)} g (int64[N] i, int64 d, float[2] v) => (y) {{ y = OneHot(i, d, v) }}""",
        {"y": ("N", "OneHot_o0_d1")},
        bindings=[{"N": 4}],
        feeds={"d": const(np.array(6))},
    ),
    case(
        "det_batched",
        f"""{header(11)} g (float[B, M, M] x) => (y) {{ y = Det(x) }}""",
        {"y": ("B",)},
        bindings=[{"B": 2, "M": 3}, {"B": 0, "M": 2}],
    ),
    case(
        "det_matrix",
        f"""{header(11)} g (float[M, M] x) => (y) {{ y = Det(x) }}""",
        {"y": ()},
        bindings=[{"M": 3}, {"M": 1}],
    ),
    case(
        # onnxruntime 1.32 has no Det-22 kernel: spec only.
        "det_opset22",
        f"""{header(22)} g (double[B, C, M, M] x) => (y) {{ y = Det(x) }}""",
        {"y": ("B", "C")},
    ),
]


@pytest.mark.parametrize("case", ONEHOT_CASES)
def test_onehot_det(case: dict) -> None:
    run_full_case(case)


# ----------------------------------------------------------------------------------------
# Generators
# ----------------------------------------------------------------------------------------
# onnxruntime 1.32 has no kernels for the opset-22 versions of the random ops (and
# rejects a Multinomial batch of 0): those rows are checked against the spec only.
# fmt: off
GENERATOR_CASES = [
    (9, "y = EyeLike<dtype=7>(x)", "float[N, M] x", ("N", "M"), ir.DataType.INT64, True),
    (22, "y = EyeLike<k=1>(x)", "float[N, M] x", ("N", "M"), ir.DataType.FLOAT, True),
    (7, "y = Multinomial<sample_size=5>(x)", "float[B, C] x", ("B", 5), ir.DataType.INT32, True),
    (22, "y = Multinomial<dtype=7>(x)", "float[B, C] x", ("B", 1), ir.DataType.INT64, False),
    (7, "y = RandomNormalLike(x)", "float[N, M] x", ("N", "M"), ir.DataType.FLOAT, True),
    (15, "y = RandomUniformLike<dtype=11>(x)", "float[N, M] x", ("N", "M"), ir.DataType.DOUBLE, True),
    (22, "y = RandomUniformLike<dtype=11>(x)", "float[N, M] x", ("N", "M"), ir.DataType.DOUBLE, False),
    (7, "y = RandomNormal<shape=[2, 3]>()", "float[N] x", (2, 3), ir.DataType.FLOAT, True),
    (13, "y = RandomUniform<shape=[0, 4], dtype=11>()", "float[N] x", (0, 4), ir.DataType.DOUBLE, True),
    (22, "y = RandomUniform<shape=[0, 4], dtype=11>()", "float[N] x", (0, 4), ir.DataType.DOUBLE, False),
    (15, "y = Bernoulli(x)", "float[N, M] x", ("N", "M"), ir.DataType.FLOAT, True),
    (15, "y = Bernoulli<dtype=9>(x)", "double[N] x", ("N",), ir.DataType.BOOL, True),
    (22, "y = Bernoulli<dtype=9>(x)", "double[N] x", ("N",), ir.DataType.BOOL, False),
]
# fmt: on


@pytest.mark.parametrize(
    ("opset", "node", "inputs", "dims", "dtype", "oracle"), GENERATOR_CASES
)
def test_generators(
    opset: int, node: str, inputs: str, dims: tuple, dtype: ir.DataType, oracle: bool
) -> None:
    text = f"""{header(opset)} g ({inputs}) => (y) {{ {node} }}"""
    model, ctx, diagnostics = infer(text)
    assert not diagnostics
    assert_shapes(model, ctx, {"y": dims})
    assert ctx.dtype_of(values_by_name(model)["y"]) == dtype
    if oracle:
        check_against_ort(
            text, [{"N": 3, "M": 2, "B": 2, "C": 4}, {"N": 0, "M": 0, "B": 1, "C": 3}]
        )


# ----------------------------------------------------------------------------------------
# Malformed nodes: an error diagnostic, never a crash
# ----------------------------------------------------------------------------------------
# fmt: off
MALFORMED = [
    (13, "float[N, 4] x, int64[N] i", "y = GatherElements(x, i)", "same rank"),
    (13, "float[N, 4] x, int64[N, 4] i", "y = GatherElements<axis=2>(x, i)", "out of range"),
    (13, "float[N, 4] x, int64[K, 3] i", "y = GatherND(x, i)", "exceeds"),
    (13, "float[N, 4] x, int64[K, 1] i", "y = GatherND<batch_dims=2>(x, i)", "batch_dims"),
    (13, "float[N, 4] x, int64[K, 1] i, float[K] u", "y = ScatterND(x, i, u)", "updates rank"),
    (16, "float[N, 4] x, int64[K, 1] i, float[K, 4] u", 'y = ScatterND<reduction="max">(x, i, u)', "reduction"),
    (13, "float[N, 4] x, int64[N, 2] i, float[N, 3] u", "y = ScatterElements(x, i, u)", "differ"),
    (9, "float[N, 4] x", "v, i = TopK<k=5>(x)", "exceeds"),
    (9, "float[N, 4] x", "v, i = TopK(x)", "'k' is required"),
    (11, "float[N, 4] x, int64[2] k", "v, i = TopK(x, k)", "one element"),
    (11, "float x, bool[L] c", "y = Compress(x, c)", "rank >= 1"),
    (11, "float[N, 4] x, bool[L] c", "y = Compress<axis=2>(x, c)", "out of range"),
    (11, "float[N, 4] x", "y = Unique<axis=-3>(x)", "out of range"),
    (11, "float[B, S] b, float[B, C, S] s", "y = NonMaxSuppression(b, s)", "boxes must have rank 3"),
    (12, "float[M, K] a, float[K, N] b", 'y = Einsum<equation="ij,jk->iz">(a, b)', "not in any input"),
    (12, "float[M, K] a, float[K, N] b", 'y = Einsum<equation="ij->ij">(a, b)', "terms"),
    (12, "float[M, K] a", 'y = Einsum<equation="ijk->i">(a)', "labels"),
    (12, "float[M, K] a", 'y = Einsum<equation="i.j->i">(a)', "not a letter"),
    (12, "float[M, K] a", 'y = Einsum<equation="ij->ii">(a)', "repeats"),
    (12, "float[2, 3] a, float[4, 3] b", 'y = Einsum<equation="ij,ij->ij">(a, b)', "broadcast"),
    (11, "int64[N] i, float[2] v", "d = Constant<value=int64 {-2}>() y = OneHot(i, d, v)", "depth"),
    (11, "int64[N] i, float[2] v", "d = Constant<value=int64 {3}>() y = OneHot<axis=2>(i, d, v)", "out of range"),
    (11, "float[3, 4] x", "y = Det(x)", "square"),
    (11, "float[3] x", "y = Det(x)", "rank >= 2"),
    (9, "float[3] x", "y = EyeLike(x)", "2-D"),
    (9, "float[3, 3] x", "y = EyeLike<dtype=1000>(x)", "element type"),
    (7, "float[3] x", "y = Multinomial(x)", "2-D"),
    (7, "float[3] x", "y = RandomNormal()", "'shape' is required"),
    (7, "float[3] x", "y = RandomUniform<shape=[2, -1]>()", "negative"),
]
# fmt: on


@pytest.mark.parametrize(("opset", "inputs", "nodes", "message"), MALFORMED)
def test_malformed_node_gives_diagnostic(
    opset: int, inputs: str, nodes: str, message: str
) -> None:
    nodes = nodes.replace(") y =", ")\n y =")
    outputs = "v, i" if "v, i =" in nodes else "y"
    _, _, diagnostics = infer(f"""{header(opset)} g ({inputs}) => ({outputs}) {{ {nodes} }}""")
    errors = [d for d in diagnostics if d.severity == "error"]
    assert len(errors) == 1, diagnostics
    assert message in errors[0].message, errors[0].message
    assert "internal error" not in errors[0].message


def test_nonzero_of_known_shape_value_is_exact() -> None:
    text = f"""{header(13)} g (float[3, 0, 2] x) => (y) {{
        s = Shape(x)
        y = NonZero(s)
    }}"""
    model, ctx, _ = infer(text)
    assert_shapes(model, ctx, {"y": (1, 2)})
    assert_values(model, ctx, {"y": (0, 2)})
    check_against_ort(text, [{}])


def test_fresh_symbol_never_reuses_a_model_name() -> None:
    """A model dim already called ``NonZero_y_nnz`` must not be equated with our nnz."""
    model, ctx, _ = infer(
        f"""{header(13)} g (float[NonZero_y_nnz, 2] x) => (y) {{ y = NonZero(x) }}"""
    )
    nnz = ctx.shape_of(values_by_name(model)["y"])[1]
    assert isinstance(nnz, expr.DimExpr) and nnz.is_symbol
    assert nnz.name != "NonZero_y_nnz"
    assert bound_of(ctx, nnz.name) == [expr.parse_expr("2*NonZero_y_nnz")]


# The ops the indexing.py of old held (now also data_dependent, einsum, generators).
FAMILY = {
    "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter", "TopK",
    "NonZero", "Compress", "Unique", "NonMaxSuppression", "Einsum", "OneHot", "EyeLike",
    "Multinomial", "RandomNormalLike", "RandomUniformLike", "RandomNormal", "RandomUniform",
    "Bernoulli", "Det",
}  # fmt: skip


@pytest.mark.parametrize("op_type", sorted(FAMILY))
def test_every_opset_has_a_hook(op_type: str) -> None:
    """Each opset 7..latest where the op exists resolves to a hook of this family."""
    from onnx_symdims.ops import _registry, data_dependent, einsum, generators, indexing

    modules = {m.__name__ for m in (indexing, data_dependent, einsum, generators)}
    latest = onnx.defs.onnx_opset_version()
    found = 0
    for opset in range(7, latest + 1):
        try:
            onnx.defs.get_schema(op_type, opset, "")
        except onnx.defs.SchemaError:
            continue
        hook = _registry.lookup("", op_type, opset)
        assert hook is not None, f"{op_type} at opset {opset} has no hook"
        assert hook.__module__ in modules, f"{op_type}: {hook.__module__}"
        found += 1
    assert found


def test_topk_versions_pick_attribute_or_input() -> None:
    from onnx_symdims.ops import _registry, data_dependent

    assert _registry.lookup("", "TopK", 9) is data_dependent.infer_topk_attr
    assert _registry.lookup("", "TopK", 10) is data_dependent.infer_topk
    assert _registry.lookup("", "TopK", 24) is data_dependent.infer_topk


def test_gather_is_not_registered_here() -> None:
    from onnx_symdims.ops import _registry, indexing

    assert _registry.lookup("", "Gather", 13) is None or (
        _registry.lookup("", "Gather", 13).__module__ != indexing.__name__
    )
