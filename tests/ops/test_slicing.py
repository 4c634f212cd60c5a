"""Tests for the slicing family: Slice, Split, Flatten, Transpose, Tile, Pad, Trilu,
CumSum, DepthToSpace, SpaceToDepth, ReverseSequence, Col2Im, CenterCropPad.

Each case states the expected dims (``"?"`` is a fresh symbol minted by the engine) and
is then checked against onnxruntime on several bindings of the input symbols, 0
included where the op allows it: every inferred dim must evaluate to the real size,
fresh symbols must be used consistently, and recorded constraints must hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnx.defs
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.ops import movement, slicing
from onnx_symdims.ops._registry import lookup
from onnx_symdims.ops.slicing import slice_length
from onnx_symdims.shapes import ShapesContext
from tests.ops._ort_oracle import check_constraints, exposed_model, infer, ort_session

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
INT32_MAX = 2**31 - 1

_NP_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
}


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------
def _graph(opset: int, signature: str, body: str) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]> g ({signature}) => (float out) {{\n{body}\n out = Identity(x)\n}}'


def _infer(text: str) -> tuple[ir.Model, ShapesContext]:
    inferred = infer(text)
    return inferred.model, inferred.context


def _printed(ctx: ShapesContext, name: str) -> list[object] | None:
    shape = ctx.shape_of(name)
    if shape is None:
        return None
    return [
        d
        if isinstance(d, int)
        else ("?" if d.is_symbol and ctx.is_generated(d.name) else expr.to_onnx(d))
        for d in shape
    ]


def _errors(ctx: ShapesContext) -> list[str]:
    return [d.message for d in ctx.diagnostics if d.severity == "error"]


def _bind(d: expr.Dim, actual: int, ctx: ShapesContext, bindings: dict[str, int]) -> None:
    """Binds a fresh symbol to the size it stands for (once; later uses must agree)."""
    if isinstance(d, expr.DimExpr) and d.is_symbol and ctx.is_generated(d.name):
        assert bindings.setdefault(d.name, actual) == actual, f"{d.name} used for two sizes"


def _feeds(
    proto: onnx.ModelProto, bindings: Mapping[str, int], given: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for value in proto.graph.input:
        if value.name in given:
            feeds[value.name] = np.asarray(given[value.name])
            continue
        tensor_type = value.type.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else bindings[d.dim_param]
            for d in tensor_type.shape.dim
        ]
        feeds[value.name] = rng.standard_normal(shape).astype(_NP_TYPES[tensor_type.elem_type])
    return feeds


def check_with_ort(
    text: str,
    bindings_list: Sequence[Mapping[str, int]],
    given: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Runs the model on each binding and checks every inferred shape and value."""
    inferred = infer(text)
    ctx = inferred.context
    proto = exposed_model(inferred)
    session = ort_session(proto)
    names = [o.name for o in session.get_outputs()]
    for model_bindings in bindings_list:
        feeds = _feeds(proto, model_bindings, given or {})
        results = dict(zip(names, session.run(names, feeds)))
        bindings = dict(model_bindings)
        for name, array in results.items():
            shape = ctx.shape_of(name)
            if shape is not None:
                assert len(shape) == array.ndim, (name, shape, array.shape)
                for d, actual in zip(shape, array.shape):
                    _bind(d, actual, ctx, bindings)
        for name, array in results.items():
            shape = ctx.shape_of(name)
            if shape is not None:
                got = [expr.evaluate(d, bindings) for d in shape]
                assert got == list(array.shape), (name, shape, model_bindings)
            elements = ctx.value_of(name)
            if elements is not None and all(
                not expr.is_symbolic(e) or not e.is_unknown for e in elements
            ):
                got = [expr.evaluate(e, bindings) for e in elements]
                assert got == array.reshape(-1).tolist(), (name, elements, model_bindings)
        check_constraints(ctx, bindings)


def _const(name: str, values: Sequence[int]) -> str:
    return f"{name} = Constant<value_ints={list(values)}>()"


# ---------------------------------------------------------------------------------------
# Slice
# ---------------------------------------------------------------------------------------
def _slice13(starts, ends, axes=None, steps=None, signature="float[N, M] x", opset=13):
    lines = [_const("st", starts), _const("en", ends)]
    args = ["x", "st", "en"]
    if axes is not None or steps is not None:
        lines.append(_const("ax", axes if axes is not None else range(len(starts))))
        args.append("ax")
    if steps is not None:
        lines.append(_const("sp", steps))
        args.append("sp")
    lines.append(f"y = Slice({', '.join(args)})")
    return _graph(opset, signature, "\n".join(lines))


SLICE_CASES = {
    # 0:1 on a dim that may be 0 is min(1, N), not 1.
    "first_row": (_slice13([0], [1], [0]), ["min(1,N)", "M"]),
    "drop_first": (_slice13([1], [INT64_MAX], [0]), ["max(N-1,0)", "M"]),
    "drop_first_int32_end": (_slice13([1], [INT32_MAX], [0]), ["max(N-1,0)", "M"]),
    "drop_last": (_slice13([0], [-1], [0]), ["max(N-1,0)", "M"]),
    "last_row": (_slice13([-1], [INT64_MAX], [0]), None),
    "every_other": (_slice13([0], [INT64_MAX], [0], [2]), ["(N+1)//2", "M"]),
    "every_third_from_1": (_slice13([1], [INT64_MAX], [1], [3]), None),
    "reverse": (_slice13([-1], [INT64_MIN], [0], [-1]), ["N", "M"]),
    "reverse_step2": (_slice13([-1], [INT64_MIN], [0], [-2]), ["(N+1)//2", "M"]),
    # ONNX (unlike numpy) clamps a negative-step start into [0, d-1]: x[-5:-10:-1] of 3 is 1.
    "reverse_clamped_start": (_slice13([-5], [-10], [0], [-1]), None),
    "reverse_partial": (_slice13([2], [0], [1], [-1]), None),
    "negative_axis": (_slice13([0], [2], [-1]), ["N", "min(2,M)"]),
    "two_axes": (_slice13([1, 0], [3, -2], [1, 0]), ["max(N-2,0)", "max(0,min(M-1,2))"]),
    "default_axes": (_slice13([0, 1], [2, INT64_MAX]), ["min(2,N)", "max(M-1,0)"]),
    "constant_dims": (
        _slice13([1, -1], [-1, -4], [0, 1], [1, -1], signature="float[5, 6] x"),
        [3, 3],
    ),
    "empty_by_order": (_slice13([3], [1], [1], signature="float[N, 5] x"), ["N", 0]),
    "opset10": (_slice13([1], [3], [0], opset=10), None),
    "opset11": (_slice13([-3], [INT64_MAX], [0], opset=11), None),
}


@pytest.mark.parametrize("name", list(SLICE_CASES))
def test_slice(name):
    text, expected = SLICE_CASES[name]
    _, ctx = _infer(text)
    assert not _errors(ctx)
    if expected is not None:
        assert _printed(ctx, "y") == expected
    else:
        assert "?" not in _printed(ctx, "y"), "constant indices must not need fresh symbols"
    bindings = [{"N": n, "M": m} for n, m in [(0, 0), (1, 2), (3, 1), (7, 5)]]
    check_with_ort(text, bindings)


def test_slice_v1_attributes():
    text = _graph(
        9,
        "float[N, M, 4] x",
        "y = Slice<starts=[1, -3], ends=[2147483647, -1], axes=[1, 2]>(x)\n"
        "w = Slice<starts=[1], ends=[1000000], axes=[1]>(x)\n"
        "z = Slice<starts=[0], ends=[1]>(x)",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["N", "max(M-1,0)", 2]
    assert _printed(ctx, "z") == ["min(1,N)", "M", 4]
    # A large but finite end is not "to the end": the axis may be longer.
    assert _printed(ctx, "w") == ["N", "max(0,min(M-1,999999))", 4]
    check_with_ort(text, [{"N": 0, "M": 0}, {"N": 2, "M": 1}, {"N": 3, "M": 5}])


SHAPE_PRELUDE = """
  sh = Shape(x)
  i0 = Constant<value_ints=[0]>()
  i1 = Constant<value_ints=[1]>()
  n = Gather<axis=0>(sh, i0)
  m = Gather<axis=0>(sh, i1)
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # end = M from Shape(x): min(M, N) on axis 0
        ("y = Slice(x, i0, m, i0)", ["min(M,N)", "M"]),
        # start = N (nonnegative) to the end of axis 1
        (f"{_const('big', [INT64_MAX])}\n y = Slice(x, n, big, i1)", ["N", "max(M-N,0)"]),
        # x[:, m-n:m] with unprovable sign of m - n: the start is m-n+M*[m-n < 0], an
        # exact indicator; N for N <= M, N-M up to 2M, then M
        (
            "d = Sub(m, n)\n y = Slice(x, d, m, i1)",
            ["N", "max(0,min(N-M*min(1,max(N-M,0)),M))"],
        ),
        # x[:, -n:] : -N may be -0, which means "from 0": M for N = 0, else min(N, M)
        (
            f"{_const('big', [INT64_MAX])}\n neg = Neg(n)\n y = Slice(x, neg, big, i1)",
            ["N", "max(0,min(M-M*min(1,N)+N,M))"],
        ),
        # x[:, -(n+1):] is provably negative: adjusted start M-N-1
        (
            f"{_const('big', [INT64_MAX])}\n p = Add(n, i1)\n neg = Neg(p)\n y = Slice(x, neg, big, i1)",
            ["N", "min(N+1,M)"],
        ),
    ],
)
def test_slice_symbolic_indices(body, expected):
    text = _graph(13, "float[N, M] x", SHAPE_PRELUDE + body)
    _, ctx = _infer(text)
    assert not _errors(ctx)
    assert _printed(ctx, "y") == expected
    check_with_ort(
        text,
        [
            {"N": n, "M": m}
            for n, m in [(0, 0), (0, 3), (2, 1), (3, 3), (2, 7), (5, 2), (7, 3), (1, 0)]
        ],
    )


def test_slice_past_plus_seq_window():
    text = _graph(
        13,
        "float[B, P] past, float[B, S] cur, float[B, T] x",
        """
  i1 = Constant<value_ints=[1]>()
  ps = Shape(past)
  cs = Shape(cur)
  p = Gather<axis=0>(ps, i1)
  s = Gather<axis=0>(cs, i1)
  e = Add(p, s)
  y = Slice(x, p, e, i1)
""",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["B", "max(0,min(T-P,S))"]
    bindings = [
        {"B": 1, "P": p, "S": s, "T": t}
        for p, s, t in [(0, 0, 0), (0, 3, 3), (2, 3, 5), (4, 3, 5), (6, 1, 5), (2, 0, 9)]
    ]
    check_with_ort(text, bindings)


def test_slice_runtime_starts_only_touch_their_axis():
    text = _graph(
        13,
        "float[N, M, 8] x, int64[1] st",
        f"{_const('en', [INT64_MAX])}\n{_const('ax', [1])}\n y = Slice(x, st, en, ax)",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["N", "?", 8]
    assert ctx.has_less_equal_constraint(ctx.shape_of("y")[1], expr.sym("M"))
    for start in (0, 2, -1, 100):
        check_with_ort(text, [{"N": 2, "M": 3}], {"st": np.array([start])})


def test_slice_runtime_axes_keeps_rank_and_bounds():
    text = _graph(
        13,
        "float[N, 0, 8] x, int64[1] ax",
        f"{_const('st', [1])}\n{_const('en', [3])}\n y = Slice(x, st, en, ax)",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["?", 0, "?"]
    for axis in (0, 2, -1):
        check_with_ort(text, [{"N": 4}], {"ax": np.array([axis])})


def test_slice_value_as_shape():
    text = _graph(
        13,
        "float[N, M, 5] x",
        """
  sh = Shape(x)
  st = Constant<value_ints=[1]>()
  en = Constant<value_ints=[3]>()
  tail = Slice(sh, st, en)
  i0 = Constant<value_ints=[0]>()
  rs = Constant<value_ints=[-1]>()
  en2 = Constant<value_ints=[-4]>()
  rev = Slice(sh, rs, en2, i0, rs)
""",
    )
    _, ctx = _infer(text)
    assert [expr.to_onnx(e) for e in ctx.value_of("tail")] == ["M", "5"]
    assert [expr.to_onnx(e) for e in ctx.value_of("rev")] == ["5", "M", "N"]
    check_with_ort(text, [{"N": 2, "M": 3}, {"N": 0, "M": 4}])


def test_slice_and_transpose_of_a_table_value():
    """TorchScript's ``F.pad``: pads as a ``[k, 2]`` table, reversed along axis 0, transposed.

    The table ``[[1, 2], [N, M]]`` (torch's last-axis-first pad pairs) flows through a
    backward Slice along axis 0 and a Transpose to the pads ``[N, 1, M, 2]`` of ``Pad``,
    whose output dims need every element.
    """
    text = _graph(
        13,
        "float[N, M] x",
        f"""
  sh = Shape(x)
  {_const("front", [1, 2])}
  cat = Concat<axis=0>(front, sh)
  {_const("rows", [-1, 2])}
  table = Reshape(cat, rows)
  {_const("st", [-1])}
  {_const("en", [INT64_MIN + 1])}
  {_const("ax", [0])}
  rev = Slice(table, st, en, ax, st)
  {_const("one", [1])}
  {_const("big", [9])}
  cols = Slice(table, one, big, one)
  flipped = Transpose<perm=[1, 0]>(rev)
  {_const("flat_shape", [-1])}
  pads = Reshape(flipped, flat_shape)
  y = Pad(x, pads)
""",
    )
    _, ctx = _infer(text)
    assert [expr.to_onnx(e) for e in ctx.value_of("rev")] == ["N", "M", "1", "2"]
    assert [expr.to_onnx(e) for e in ctx.value_of("cols")] == ["2", "M"]
    assert [expr.to_onnx(e) for e in ctx.value_of("pads")] == ["N", "1", "M", "2"]
    assert _printed(ctx, "y") == ["M+2*N", "M+3"]
    check_with_ort(text, [{"N": 2, "M": 3}, {"N": 0, "M": 4}, {"N": 5, "M": 0}])


def test_transpose_of_a_3d_value():
    text = _graph(
        13,
        "float[A, B, C] x",
        f"""
  sh = Shape(x)
  {_const("more", [4, 5, 6])}
  cat = Concat<axis=0>(sh, more)
  {_const("dims", [1, 2, 3])}
  cube = Reshape(cat, dims)
  t = Transpose<perm=[2, 0, 1]>(cube)
""",
    )
    _, ctx = _infer(text)
    assert [expr.to_onnx(e) for e in ctx.value_of("t")] == ["A", "4", "B", "5", "C", "6"]
    check_with_ort(text, [{"A": 2, "B": 3, "C": 1}])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            f"{_const('st', [0])}\n{_const('en', [1])}\n{_const('ax', [0])}\n{_const('sp', [0])}\n y = Slice(x, st, en, ax, sp)",
            "step",
        ),
        (
            f"{_const('st', [0, 0])}\n{_const('en', [1, 1])}\n{_const('ax', [0, -2])}\n y = Slice(x, st, en, ax)",
            "repeated",
        ),
        (f"{_const('st', [0, 0])}\n{_const('en', [1])}\n y = Slice(x, st, en)", "lengths"),
        (
            f"{_const('st', [0])}\n{_const('en', [1])}\n{_const('ax', [2])}\n y = Slice(x, st, en, ax)",
            "out of range",
        ),
    ],
)
def test_slice_malformed_gives_diagnostic(body, message):
    _, ctx = _infer(_graph(13, "float[N, M] x", body))
    errors = _errors(ctx)
    assert errors and message in errors[0]
    assert ctx.shape_of("y") is None


_INDICES = (-6, -2, -1, 0, 1, 3, 6, INT64_MIN, INT64_MAX)


def _every_slice(data: str, step: int) -> tuple[list[str], list[tuple[str, bool]]]:
    """Graph lines slicing ``data`` along axis 0 with every start and end of _INDICES.

    Returns the lines and each output's name with whether its length depends on the
    runtime (a backward slice ending at INT64_MAX).
    """
    lines = [_const("ax", [0]), _const("sp", [step])]
    names = []
    for i, start in enumerate(_INDICES):
        lines.append(_const(f"s{i}", [start]))
        for j, end in enumerate(_INDICES):
            if i == 0:
                lines.append(_const(f"e{j}", [end]))
            names.append((f"y{i}_{j}", step < 0 and end == INT64_MAX))
            lines.append(f"{names[-1][0]} = Slice({data}, s{i}, e{j}, ax, sp)")
    return lines, names


@pytest.mark.parametrize("step", [-3, -1, 1, 2])
def test_slice_constant_indices_on_symbolic_dim_match_onnxruntime(step):
    """Every start/end pair on ``x[N]`` is exact for N in 0..7.

    The only fresh symbols are for a backward slice ending at INT64_MAX, which
    onnxruntime reads as "before the first element" while the spec clamps it to N-1.
    """
    lines, names = _every_slice("x", step)
    text = _graph(13, "float[N] x", "\n".join(lines))
    _, ctx = _infer(text)
    assert not _errors(ctx)
    for name, runtime_dependent in names:
        assert ("?" in _printed(ctx, name)) == runtime_dependent, name
    check_with_ort(text, [{"N": n} for n in range(8)])


@pytest.mark.parametrize("step", [-3, -1, 1, 2])
def test_slice_of_a_known_vector_matches_onnxruntime(step):
    """Every start/end pair on the Shape of a rank-5 input: static lengths, sliced elements.

    The static-axis length and the vector's elements take their own paths (no symbolic
    machinery); a backward slice ending at INT64_MAX still gets a fresh symbol and no value.
    """
    lines, names = _every_slice("sh", step)
    text = _graph(13, "float[N, 2, M, 3, 4] x", "\n".join(["sh = Shape(x)", *lines]))
    _, ctx = _infer(text)
    assert not _errors(ctx)
    for name, runtime_dependent in names:
        assert ("?" in _printed(ctx, name)) == runtime_dependent, name
        assert (ctx.value_of(name) is None) == runtime_dependent, name
    check_with_ort(text, [{"N": 1, "M": 5}, {"N": 0, "M": 2}])


def test_slice_symbolic_indices_match_onnxruntime():
    """Starts/ends K, K+1, -(K+1) (from a shape), steps +-1, +-2, +-(K+1) on x[N]."""
    lines = [
        "ks = Shape(k)",
        _const("one", [1]),
        "kp = Add(ks, one)",
        "kn = Neg(kp)",
        _const("big", [INT64_MAX]),
        _const("small", [INT64_MIN]),
        _const("ax", [0]),
        _const("m2", [-2]),
        _const("m1", [-1]),
        _const("p2", [2]),
    ]
    indices = ["ks", "kp", "kn", "big", "small", "one"]
    names = []
    for step in ("m2", "m1", "one", "p2", "kp", "kn"):
        backward = step in ("m2", "m1", "kn")
        for a in indices:
            for b in indices:
                names.append((f"y_{a}_{b}_{step}", backward and b == "big"))
                lines.append(f"{names[-1][0]} = Slice(x, {a}, {b}, ax, {step})")
    text = _graph(13, "float[N] x, float[K] k", "\n".join(lines))
    _, ctx = _infer(text)
    assert not _errors(ctx)
    for name, runtime_dependent in names:
        assert ("?" in _printed(ctx, name)) == runtime_dependent, (name, _printed(ctx, name))
    check_with_ort(text, [{"N": n, "K": k} for n in range(6) for k in range(6)])


def test_slice_length_unprovable_sign_is_none():
    n, k = expr.sym("n"), expr.sym("k")
    assert slice_length(n, 0, 1, k - 2, expr.DIM_SCOPE) is None  # the step's sign
    assert slice_length(n, 0, 1, expr.unknown(), expr.DIM_SCOPE) is None
    assert slice_length(0, k - 1, 3, 1, expr.DIM_SCOPE) == 0
    assert slice_length(n, -1, INT32_MAX, -1, expr.DIM_SCOPE) is None  # spec vs runtime
    assert slice_length(5, -1, INT64_MAX, -1, expr.DIM_SCOPE) is None


# ---------------------------------------------------------------------------------------
# Split
# ---------------------------------------------------------------------------------------
def _split(opset, call, signature="float[N, M] x", outputs=("a", "b"), prelude=""):
    return _graph(opset, signature, f"{prelude}\n {', '.join(outputs)} = {call}")


SPLIT_CASES = {
    "attr_sizes_v11": (
        _split(11, "Split<axis=1, split=[1, 3]>(x)", "float[N, 4] x"),
        {"a": ["N", 1], "b": ["N", 3]},
        [{"N": 0}, {"N": 3}],
    ),
    "attr_even_v7": (
        _split(7, "Split(x)"),
        {"a": ["N/2", "M"], "b": ["N/2", "M"]},
        [{"N": 0, "M": 1}, {"N": 4, "M": 2}],
    ),
    "input_sizes_v13": (
        _split(13, "Split<axis=-1>(x, sz)", "float[N, 5] x", prelude=_const("sz", [2, 3])),
        {"a": ["N", 2], "b": ["N", 3]},
        [{"N": 0}, {"N": 2}],
    ),
    "even_v13": (
        _split(13, "Split<axis=1>(x)", outputs=("a", "b", "c")),
        {"a": ["N", "M/3"], "b": ["N", "M/3"], "c": ["N", "M/3"]},
        [{"N": 2, "M": 0}, {"N": 1, "M": 6}],
    ),
    "num_outputs_v18": (
        _split(18, "Split<num_outputs=3>(x)", outputs=("a", "b", "c")),
        {
            "a": ["(N+2)//3", "M"],
            "b": ["(N+2)//3", "M"],
            "c": ["N-2*((N+2)//3)", "M"],
        },
        [{"N": n, "M": 2} for n in (0, 2, 3, 4, 7, 8, 9)],
    ),
    "num_outputs_constant_v18": (
        _split(18, "Split<axis=1, num_outputs=4>(x)", "float[N, 7] x", ("a", "b", "c", "d")),
        {"a": ["N", 2], "b": ["N", 2], "c": ["N", 2], "d": ["N", 1]},
        [{"N": 1}],
    ),
    "empty_split_input_is_even_v13": (
        _split(13, "Split(x, sz)", prelude="sz = Constant<value=int64[0] {}>()"),
        {"a": ["N/2", "M"], "b": ["N/2", "M"]},
        [{"N": 4, "M": 3}],
    ),
    "even_v18_without_num_outputs": (
        _split(18, "Split(x)"),
        {"a": ["N/2", "M"], "b": ["N/2", "M"]},
        [{"N": 2, "M": 3}],
    ),
}


@pytest.mark.parametrize("name", list(SPLIT_CASES))
def test_split(name):
    text, expected, bindings = SPLIT_CASES[name]
    _, ctx = _infer(text)
    assert not _errors(ctx)
    for output, dims in expected.items():
        assert _printed(ctx, output) == dims
    check_with_ort(text, bindings)


def test_split_runtime_sizes_are_not_an_even_split():
    text = _split(13, "Split<axis=1>(x, sz)", "float[N, M] x, int64[2] sz")
    _, ctx = _infer(text)
    a, b = ctx.shape_of("a")[1], ctx.shape_of("b")[1]
    assert _printed(ctx, "a") == ["N", "?"] and _printed(ctx, "b") == ["N", "?"]
    assert a is not b
    assert ctx.has_constraint(a + b, expr.sym("M"))
    for sizes in ([1, 4], [5, 0], [0, 5]):
        check_with_ort(text, [{"N": 2, "M": 5}], {"sz": np.array(sizes)})


def test_split_symbolic_sizes_round_trip_concat():
    text = _graph(
        13,
        "float[A, 3] p, float[B, 3] q",
        """
  x = Concat<axis=0>(p, q)
  ps = Shape(p)
  qs = Shape(q)
  i0 = Constant<value_ints=[0]>()
  pa = Gather<axis=0>(ps, i0)
  qb = Gather<axis=0>(qs, i0)
  sz = Concat<axis=0>(pa, qb)
  a, b = Split<axis=0>(x, sz)
""",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "a") == ["A", 3]
    assert _printed(ctx, "b") == ["B", 3]
    check_with_ort(text, [{"A": 0, "B": 2}, {"A": 3, "B": 1}])


def test_split_value_as_shape():
    text = _split(
        13,
        "Split(sh, sz)",
        "float[N, M, 4] x",
        prelude=f"sh = Shape(x)\n {_const('sz', [1, 2])}",
    )
    _, ctx = _infer(text)
    assert [expr.to_onnx(e) for e in ctx.value_of("a")] == ["N"]
    assert [expr.to_onnx(e) for e in ctx.value_of("b")] == ["M", "4"]
    check_with_ort(text, [{"N": 2, "M": 3}])


@pytest.mark.parametrize(
    ("opset", "signature", "call", "outputs", "message"),
    [
        (13, "float[5, 2] x", "Split(x)", ("a", "b"), "not divisible"),
        (11, "float[5, 2] x", "Split<split=[2, 2]>(x)", ("a", "b"), "add up"),
        (11, "float[N, 2] x", "Split<split=[2, 2, 1]>(x)", ("a", "b"), "2 outputs"),
        (11, "float[N, 2] x", "Split<split=[-1, 3]>(x)", ("a", "b"), "negative"),
        (18, "float[N, 2] x", "Split<num_outputs=3>(x)", ("a", "b"), "num_outputs"),
        (18, "float[5, 2] x", "Split<num_outputs=4>(x)", ("a", "b", "c", "d"), "cannot split"),
        (11, "float[N, 2] x", "Split<axis=2>(x)", ("a", "b"), "out of range"),
    ],
)
def test_split_malformed_gives_diagnostic(opset, signature, call, outputs, message):
    _, ctx = _infer(_split(opset, call, signature, outputs))
    errors = _errors(ctx)
    assert errors and message in errors[0], errors


# ---------------------------------------------------------------------------------------
# Flatten, Transpose
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("opset", "axis", "expected"),
    [
        (13, 0, [1, "4*M*N"]),
        (13, 1, ["N", "4*M"]),
        (13, 3, ["4*M*N", 1]),
        (13, -1, ["M*N", 4]),
        (9, 2, ["M*N", 4]),
        (21, -3, [1, "4*M*N"]),
    ],
)
def test_flatten(opset, axis, expected):
    text = _graph(opset, "float[N, M, 4] x", f"y = Flatten<axis={axis}>(x)")
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == expected
    check_with_ort(text, [{"N": 0, "M": 3}, {"N": 2, "M": 3}])


@pytest.mark.parametrize(("opset", "axis"), [(9, -1), (13, 4), (13, -4)])
def test_flatten_bad_axis(opset, axis):
    _, ctx = _infer(_graph(opset, "float[N, M, 4] x", f"y = Flatten<axis={axis}>(x)"))
    assert any("axis" in e for e in _errors(ctx))


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ("", [4, "M", "N"]),
        ("<perm=[1, 0, 2]>", ["M", "N", 4]),
        ("<perm=[2, 0, 1]>", [4, "N", "M"]),
    ],
)
def test_transpose(attrs, expected):
    text = _graph(13, "float[N, M, 4] x", f"y = Transpose{attrs}(x)")
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == expected
    check_with_ort(text, [{"N": 0, "M": 3}, {"N": 2, "M": 5}])


@pytest.mark.parametrize(
    ("perm", "message"),
    [("[0, 0, 1]", "permutation"), ("[0, 1]", "rank"), ("[0, 1, 3]", "permutation")],
)
def test_transpose_bad_perm_gives_diagnostic(perm, message):
    _, ctx = _infer(_graph(13, "float[N, M, 4] x", f"y = Transpose<perm={perm}>(x)"))
    errors = _errors(ctx)
    assert errors and message in errors[0]


# ---------------------------------------------------------------------------------------
# Tile
# ---------------------------------------------------------------------------------------
def test_tile_constant_and_symbolic_repeats():
    text = _graph(
        13,
        "float[N, M] x, float[K] r",
        """
  c = Constant<value_ints=[2, 0]>()
  y = Tile(x, c)
  rs = Shape(r)
  one = Constant<value_ints=[1]>()
  reps = Concat<axis=0>(rs, one)
  z = Tile(x, reps)
""",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["2*N", 0]
    assert _printed(ctx, "z") == ["K*N", "M"]
    check_with_ort(text, [{"N": 0, "M": 2, "K": 3}, {"N": 2, "M": 3, "K": 2}])


def test_tile_runtime_repeats():
    text = _graph(13, "float[N, 0] x, int64[2] reps", "y = Tile(x, reps)")
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["?", 0]
    check_with_ort(text, [{"N": 2}], {"reps": np.array([3, 2])})


def test_tile_wrong_repeats_length():
    _, ctx = _infer(_graph(13, "float[N, M] x", f"{_const('c', [2])}\n y = Tile(x, c)"))
    assert any("repeats" in e for e in _errors(ctx))


# ---------------------------------------------------------------------------------------
# Pad
# ---------------------------------------------------------------------------------------
PAD_CASES = {
    "attr_v7": (
        _graph(7, "float[N, M] x", "y = Pad<pads=[0, 1, 2, 3]>(x)"),
        ["N+2", "M+4"],
        [{"N": 0, "M": 0}, {"N": 2, "M": 3}],
    ),
    "attr_negative_v7": (
        _graph(7, "float[N, M] x", "y = Pad<pads=[-1, 0, 0, 2]>(x)"),
        ["N-1", "M+2"],
        [{"N": 1, "M": 0}, {"N": 3, "M": 3}],
    ),
    "input_v13_reflect": (
        _graph(
            13, "float[N, M] x", f'{_const("p", [0, 1, 0, 1])}\n y = Pad<mode="reflect">(x, p)'
        ),
        ["N", "M+2"],
        [{"N": 1, "M": 2}, {"N": 3, "M": 4}],
    ),
    "axes_v18": (
        _graph(
            18,
            "float[N, M, 4] x",
            f"{_const('p', [1, 2])}\n{_const('a', [-2])}\n cv = Constant<value_float=0.0>()\n y = Pad(x, p, cv, a)",
        ),
        ["N", "M+3", 4],
        [{"N": 0, "M": 0}, {"N": 2, "M": 3}],
    ),
    "symbolic_pads_v13": (
        _graph(
            13,
            "float[N, M] x, float[K] r",
            """
  rs = Shape(r)
  z = Constant<value_ints=[0, 0, 0]>()
  p = Concat<axis=0>(z, rs)
  y = Pad(x, p)
""",
        ),
        ["N", "K+M"],
        [{"N": 2, "M": 0, "K": 3}, {"N": 1, "M": 2, "K": 0}],
    ),
}


@pytest.mark.parametrize("name", list(PAD_CASES))
def test_pad(name):
    text, expected, bindings = PAD_CASES[name]
    _, ctx = _infer(text)
    assert not _errors(ctx)
    assert _printed(ctx, "y") == expected
    check_with_ort(text, bindings)


def test_pad_runtime_pads_keeps_rank():
    text = _graph(13, "float[N, M] x, int64[4] p", "y = Pad(x, p)")
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["?", "?"]
    check_with_ort(text, [{"N": 2, "M": 3}], {"p": np.array([1, 0, 0, 2])})


def test_pad_value_as_shape():
    text = _graph(
        13, "float[N, M] x", f"sh = Shape(x)\n {_const('p', [1, 2])}\n y = Pad(sh, p)"
    )
    _, ctx = _infer(text)
    assert [expr.to_onnx(e) for e in ctx.value_of("y")] == ["0", "N", "M", "0", "0"]
    check_with_ort(text, [{"N": 2, "M": 3}])


@pytest.mark.parametrize(
    ("opset", "body", "message"),
    [
        (13, f"{_const('p', [0, 1])}\n y = Pad(x, p)", "pads"),
        (7, "y = Pad<pads=[0, -5, 0, 0]>(x)", "negative"),
        (7, "y = Pad(x)", "required"),
        (
            18,
            f"{_const('p', [1, 1, 1, 1])}\n{_const('a', [0, 0])}\n cv = Constant<value_float=0.0>()\n y = Pad(x, p, cv, a)",
            "repeated",
        ),
    ],
)
def test_pad_malformed_gives_diagnostic(opset, body, message):
    _, ctx = _infer(_graph(opset, "float[N, 3] x", body))
    errors = _errors(ctx)
    assert errors and message in errors[0], errors


# ---------------------------------------------------------------------------------------
# Same-shape ops
# ---------------------------------------------------------------------------------------
def test_same_shape_ops():
    text = _graph(
        14,
        "float[N, M] x, int64[M] lens",
        """
  k = Constant<value_int=1>()
  t = Trilu<upper=0>(x, k)
  ax = Constant<value_int=-1>()
  c = CumSum<exclusive=1, reverse=1>(x, ax)
  r = ReverseSequence<batch_axis=1, time_axis=0>(x, lens)
""",
    )
    _, ctx = _infer(text)
    for name in ("t", "c", "r"):
        assert _printed(ctx, name) == ["N", "M"]
    check_with_ort(text, [{"N": 3, "M": 2}], {"lens": np.array([3, 1])})


@pytest.mark.parametrize(
    ("signature", "body", "message"),
    [
        ("float[N] x", "t = Trilu(x)", "rank"),
        ("float[N, M] x", "ax = Constant<value_int=2>()\n c = CumSum(x, ax)", "out of range"),
        (
            "float[N, M] x, int64[M] lens",
            "r = ReverseSequence<batch_axis=0, time_axis=0>(x, lens)",
            "batch_axis",
        ),
        ("float[N, 4] x, int64[3] lens", "r = ReverseSequence(x, lens)", "sequence_lens"),
    ],
)
def test_same_shape_ops_malformed(signature, body, message):
    _, ctx = _infer(_graph(14, signature, body))
    errors = _errors(ctx)
    assert errors and message in errors[0], errors


# ---------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("opset", "op", "signature", "expected", "bindings"),
    [
        (
            13,
            'DepthToSpace<blocksize=2, mode="CRD">',
            "float[N, C, H, W] x",
            ["N", "C/4", "2*H", "2*W"],
            [{"N": 1, "C": 8, "H": 2, "W": 0}, {"N": 0, "C": 4, "H": 3, "W": 1}],
        ),
        (
            7,
            "DepthToSpace<blocksize=3>",
            "float[N, 18, H, W] x",
            ["N", 2, "3*H", "3*W"],
            [{"N": 1, "H": 2, "W": 1}],
        ),
        (
            13,
            "SpaceToDepth<blocksize=2>",
            "float[N, C, H, W] x",
            ["N", "4*C", "H/2", "W/2"],
            [{"N": 1, "C": 3, "H": 4, "W": 0}, {"N": 2, "C": 0, "H": 2, "W": 6}],
        ),
        (
            7,
            "SpaceToDepth<blocksize=2>",
            "float[N, 3, 6, W] x",
            ["N", 12, 3, "W/2"],
            [{"N": 1, "W": 2}],
        ),
    ],
)
def test_depth_space(opset, op, signature, expected, bindings):
    text = _graph(opset, signature, f"y = {op}(x)")
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == expected
    check_with_ort(text, bindings)


@pytest.mark.parametrize(
    ("op", "signature", "message"),
    [
        ("DepthToSpace<blocksize=2>", "float[1, 6, 2, 2] x", "divisible"),
        ("SpaceToDepth<blocksize=2>", "float[1, 6, 3, 2] x", "divisible"),
        ("SpaceToDepth<blocksize=0>", "float[1, 6, 3, 2] x", "blocksize"),
        ("DepthToSpace", "float[1, 4, 2, 2] x", "blocksize"),
        ("DepthToSpace<blocksize=2>", "float[4, 2, 2] x", "rank"),
    ],
)
def test_depth_space_malformed(op, signature, message):
    _, ctx = _infer(_graph(13, signature, f"y = {op}(x)"))
    errors = _errors(ctx)
    assert errors and message in errors[0], errors


# ---------------------------------------------------------------------------------------
# Col2Im, CenterCropPad
# ---------------------------------------------------------------------------------------
def test_col2im():
    text = _graph(
        18,
        "float[N, 10, 25] x",
        f"{_const('img', [5, 5])}\n{_const('blk', [1, 5])}\n y = Col2Im<pads=[0, 2, 0, 2]>(x, img, blk)",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["N", 2, 5, 5]
    check_with_ort(text, [{"N": 0}, {"N": 2}])


def test_col2im_runtime_image_shape_keeps_rank():
    text = _graph(
        18,
        "float[N, 10, 25] x, int64[2] img",
        f"{_const('blk', [1, 5])}\n y = Col2Im<pads=[0, 2, 0, 2]>(x, img, blk)",
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == ["N", 2, "?", "?"]
    check_with_ort(text, [{"N": 1}], {"img": np.array([5, 5])})


@pytest.mark.parametrize(
    ("attrs", "shape", "expected"),
    [("", [3, 5, 2], [3, 5, 2]), ("<axes=[-1, 0]>", [2, 6], [6, "M", 2])],
)
def test_center_crop_pad(attrs, shape, expected):
    text = _graph(
        18, "float[N, M, 4] x", f"{_const('s', shape)}\n y = CenterCropPad{attrs}(x, s)"
    )
    _, ctx = _infer(text)
    assert _printed(ctx, "y") == expected
    check_with_ort(text, [{"N": 1, "M": 3}, {"N": 7, "M": 0}])


def test_center_crop_pad_wrong_shape_length():
    _, ctx = _infer(
        _graph(18, "float[N, M] x", f"{_const('s', [1])}\n y = CenterCropPad(x, s)")
    )
    assert any("axes" in e for e in _errors(ctx))


# ---------------------------------------------------------------------------------------
# Registration: every version from opset 7 on is handled here
# ---------------------------------------------------------------------------------------
_FAMILY = {
    "Slice": 1, "Split": 2, "Flatten": 1, "Transpose": 1, "Tile": 6, "Pad": 2, "Trilu": 14,
    "CumSum": 11, "DepthToSpace": 1, "SpaceToDepth": 1, "ReverseSequence": 10, "Col2Im": 18,
    "CenterCropPad": 18,
}  # fmt: skip


@pytest.mark.parametrize("op", list(_FAMILY))
def test_every_version_from_opset_7_has_a_hook(op):
    first = max(7, _FAMILY[op])
    for opset in range(first, onnx.defs.onnx_opset_version() + 1):
        hook = lookup("", op, opset)
        assert hook is not None and hook.__module__ in (slicing.__name__, movement.__name__), (
            op,
            opset,
        )


@pytest.mark.parametrize(
    ("op", "opset", "hook"),
    [
        ("Slice", 9, "infer_slice_v1"),
        ("Slice", 10, "infer_slice"),
        ("Split", 12, "infer_split_v2"),
        ("Split", 13, "infer_split_v13"),
        ("Split", 17, "infer_split_v13"),
        ("Split", 18, "infer_split_v18"),
        ("Pad", 10, "infer_pad_v2"),
        ("Pad", 11, "infer_pad_v11"),
        ("Pad", 18, "infer_pad_v18"),
    ],
)
def test_behaviour_changes_pick_the_right_hook(op, opset, hook):
    module = slicing if hasattr(slicing, hook) else movement
    assert lookup("", op, opset) is getattr(module, hook)
