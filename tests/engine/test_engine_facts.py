"""Facts that hold in every successful run: nonnegative dims, nonzero divisors, exact splits.

Each fact is checked twice: the engine uses it (the test fails with a plain ``Scope``,
which is the engine without facts), and onnxruntime agrees on the dims at several sizes,
0 and 1 included where the model runs there.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapesContext
from onnx_symdims.shapes._facts import FactScope, refine_dim
from tests.ops._ort_oracle import Inferred, check_against_ort, model_text

n, m, s, t, b = (expr.sym(name) for name in ("n", "m", "s", "t", "b"))


def _infer(text: str, facts: bool = True, **options) -> Inferred:
    model = ir.from_onnx_text(text)
    for value in model.graph.outputs:
        value.shape = None
    scope = FactScope() if facts else expr.Scope(nonnegative=True)
    result = SymbolicShapeInferencePass(context=ShapesContext(scope), **options)(model)
    return Inferred(model, result.context)


# ----------------------------------------------------------------------------------------
# The scope
# ----------------------------------------------------------------------------------------
def test_nonneg_fact_proves_what_intervals_cannot():
    scope = FactScope()
    d = expr.sub(n, m)
    assert not scope.prove_nonneg(d)
    version = scope.version
    assert scope.assume_nonneg(d)
    assert scope.version > version
    assert scope.prove_nonneg(d)
    assert scope.prove_gt(d, -1)
    assert scope.prove_nonneg(expr.add(d, s))  # d + s: a fact plus a nonnegative rest
    assert not scope.prove_gt(d, 0)
    # Known facts are not new: the version (and every memo keyed on it) stays.
    version = scope.version
    assert not scope.assume_nonneg(d)
    assert not scope.assume_nonneg(expr.add(n, 1))
    assert scope.version == version


def test_nonzero_fact_of_a_dim_is_a_lower_bound():
    scope = FactScope()
    assert scope.assume_nonzero(b)
    assert scope.prove_ge(b, 1)
    d = expr.sub(n, m)
    assert scope.assume_nonzero(d)  # not known >= 0: only "nonzero"
    assert scope.known_nonzero(d) and not scope.prove_nonneg(d)
    assert scope.assume_nonneg(d)
    # now d >= 0 and d != 0 is recorded separately; a new nonzero on d gives d >= 1
    other = FactScope()
    other.assume_nonneg(d)
    other.assume_nonzero(d)
    assert other.prove_ge(d, 1)


def test_divides_fact_and_copy():
    scope = FactScope()
    assert scope.assume_divides(4, n)
    assert scope.known_divides(4, n) and not scope.known_divides(3, n)
    assert scope.known_divides(b, 0) is False  # b may be 0
    copy = scope.copy()
    assert copy.known_divides(4, n)
    copy.assume_nonneg(expr.sub(n, m))
    assert not scope.prove_nonneg(expr.sub(n, m))  # the copy is independent


@pytest.mark.parametrize(
    ("fact", "dim", "expected"),
    [
        (("ge", t, 1), expr.dmin(1, t), 1),
        (("ge", t, 1), expr.add(t, expr.mul(-2, expr.dmin(1, t))), expr.sub(t, 2)),
        (("div", 4, n), expr.floordiv(n, 4), expr.exact_div(n, 4)),
        (("div", 4, n), expr.add(expr.mod(n, 4), s), s),
        (("ge", t, 0), expr.dmin(1, t), expr.dmin(1, t)),  # nothing known: unchanged
        # an exact division whose refined divisor cancels (wav2vec2's attention reshape)
        (
            ("ge", expr.sub(t, 1), 1),
            expr.parse_dim("2*b*(t-1)/(t-2*min(t-1,1)+1)"),
            expr.mul(2, b),
        ),
    ],
)
def test_refine_dim(fact, dim, expected):
    scope = FactScope()
    kind, a, c = fact
    if kind == "ge":
        scope.assume_ge(a, c)
    else:
        scope.assume_divides(a, c)
    assert refine_dim(dim, scope) == expected


# ----------------------------------------------------------------------------------------
# Engine: nonzero divisors (exported GPT-2 computes its positions this way)
# ----------------------------------------------------------------------------------------
GPT2_POSITIONS = model_text(
    18,
    "float[b, s] x",
    """
    sh = Shape(x)
    i0 = Constant<value = int64 {0}>()
    i1 = Constant<value = int64 {1}>()
    bb = Gather<axis=0>(sh, i0)
    ss = Gather<axis=0>(sh, i1)
    bs = Mul(bb, ss)
    q = Div(bs, bb)
    one = Constant<value = int64 {1}>()
    y = Range(i0, q, one)
    """,
    "int64[?] y",
)


def test_divisor_is_nonzero_after_div():
    inferred = _infer(GPT2_POSITIONS)
    assert inferred.elements("q") == ["s"]
    assert inferred.shape("y") == ["s"]
    without = _infer(GPT2_POSITIONS, facts=False)
    assert without.elements("q") != ["s"]
    assert without.shape("y") != ["s"]


def test_divisor_fact_agrees_with_onnxruntime():
    # b = 0 would divide by zero (no successful run): only b >= 1.
    check_against_ort(GPT2_POSITIONS, [{"b": 1, "s": 0}, {"b": 1, "s": 1}, {"b": 3, "s": 5}])


ORDER = model_text(
    18,
    "float[b, s] x",
    """
    sh = Shape(x)
    i0 = Constant<value = int64 {0}>()
    i1 = Constant<value = int64 {1}>()
    bb = Gather<axis=0>(sh, i0)
    ss = Gather<axis=0>(sh, i1)
    before = Greater(bb, i0)
    q = Div(ss, bb)
    q0 = Mul(q, i0)
    b2 = Add(bb, q0)
    after = Greater(b2, i0)
    """,
    "bool after",
)


def test_facts_start_at_their_node():
    inferred = _infer(ORDER)
    assert inferred.elements("after") == [1]
    assert inferred.elements("before") != [1]  # computed before the Div: no leak


IF_DIVIDES = model_text(
    18,
    "float[b, s] x, bool c",
    """
    sh = Shape(x)
    i0 = Constant<value = int64 {0}>()
    i1 = Constant<value = int64 {1}>()
    bb = Gather<axis=0>(sh, i0)
    ss = Gather<axis=0>(sh, i1)
    r = If(c) <
        then_branch = g1 () => (int64 q) { q = Div(ss, bb) },
        else_branch = g2 () => (int64 z) { z = Identity(ss) }
    >
    r0 = Mul(r, i0)
    b2 = Add(bb, r0)
    after = Greater(b2, i0)
    """,
    "bool after",
)


def test_a_branch_that_may_not_run_gives_no_fact():
    inferred = _infer(IF_DIVIDES)
    assert inferred.elements("after") != [1]
    assert not inferred.context.scope.prove_ge(b, 1)


# An STFT's frame_length <= signal length, proved in a branch that may not run: the Min
# of the two after the If was written as the frame length (wrong when the else branch
# runs with a longer frame).
IF_BOUNDS = model_text(
    18,
    "bool c, float[B, L, 1] sig, float[F] w, float[L] v",
    """
    f = Shape(w)
    fs = Squeeze(f)
    z = If(c) <
        then_branch = g1 () => (float[?, ?, ?, ?] zt) {
            step = Constant<value = int64 {1}>()
            zt = STFT(sig, step, w, fs)
        },
        else_branch = g2 () => (float[?, ?, ?, ?] ze) {
            ze = Constant<value = float[1, 1, 1, 2] {0., 0.}>()
        }
    >
    lv = Shape(v)
    m = Min(f, lv)
    y = ConstantOfShape(m)
    """,
    "float[?] y, float[?, ?, ?, ?] z",
)


def test_a_branch_that_may_not_run_bounds_no_outer_symbol():
    inferred = check_against_ort(
        IF_BOUNDS,
        [{"B": 1, "L": 3, "F": 5}, {"B": 1, "L": 6, "F": 2}],
        feeds={"c": lambda sizes: np.array(sizes["F"] <= sizes["L"])},
    )
    assert [str(d) for d in inferred.dims("y")] == ["min(F,L)"]


# ----------------------------------------------------------------------------------------
# Engine: every dim of a tensor that exists is >= 0, also the elements of Shape(x)
# ----------------------------------------------------------------------------------------
NONNEG = model_text(
    18,
    "float[n] a, float[m] c, float[k] x0",
    """
    sa = Shape(a)
    sc = Shape(c)
    d = Sub(sa, sc)
    x = ConstantOfShape(d)
    sh = Shape(x)
    z = Constant<value = int64 {0}>()
    e = Gather<axis=0>(sh, z)
    m1 = Constant<value = int64 {-1}>()
    eq = Equal(e, m1)
    one = Constant<value = int64 {1}>()
    w = Where(eq, one, e)
    w1 = Unsqueeze(w, z)
    y = Expand(x0, w1)
    """,
    "float[?] y",
)


def test_dim_of_an_existing_tensor_is_nonnegative():
    inferred = _infer(NONNEG)
    assert inferred.shape("x") == ["n-m"]
    assert inferred.elements("eq") == [0]
    assert inferred.elements("w") == ["n-m"]
    assert inferred.shape("y") == ["broadcast(n-m,k)"]
    without = _infer(NONNEG, facts=False)
    assert without.elements("eq") != [0]
    assert without.elements("w") != ["n-m"]


def test_nonneg_dims_agree_with_onnxruntime():
    # n < m has no successful run (ConstantOfShape of a negative dim fails).
    check_against_ort(
        NONNEG,
        [
            {"n": 0, "m": 0, "k": 1},
            {"n": 1, "m": 0, "k": 1},
            {"n": 1, "m": 1, "k": 0},
            {"n": 5, "m": 2, "k": 3},
            {"n": 5, "m": 2, "k": 1},
        ],
    )


# ----------------------------------------------------------------------------------------
# Engine: an exact division that executed divides
# ----------------------------------------------------------------------------------------
EXACT_SPLIT = model_text(
    18,
    "float[b, s, h] x",
    """
    y = com.microsoft.BiasSplitGelu(x)
    sh = Shape(x)
    i2 = Constant<value = int64 {2}>()
    hh = Gather<axis=0>(sh, i2)
    half = Div(hh, i2)
    rest = Mod(hh, i2)
    """,
    "float[?, ?, ?] y",
    domains={"com.microsoft": 1},
)


def test_exact_division_that_executed_divides():
    inferred = _infer(EXACT_SPLIT)
    assert inferred.shape("y") == ["b", "s", "h/2"]
    assert inferred.elements("half") == ["h/2"]  # the same dim as the split's
    assert inferred.elements("rest") == [0]
    without = _infer(EXACT_SPLIT, facts=False)
    assert without.elements("half") != ["h/2"]


# ----------------------------------------------------------------------------------------
# Engine: a case split made unnecessary by a later fact collapses downstream
# ----------------------------------------------------------------------------------------
COLLAPSE = model_text(
    18,
    "float[t] x, float[t] x2",
    """
    st = Constant<value = int64[1] {0}>()
    en = Constant<value = int64[1] {1}>()
    first = Slice(x, st, en)
    sh = Shape(x2)
    z = Constant<value = int64 {0}>()
    tt = Gather<axis=0>(sh, z)
    one = Constant<value = int64 {1}>()
    q = Div(one, tt)
    q1 = Unsqueeze(q, z)
    f2 = Expand(first, en)
    y = Relu(first)
    """,
    "float[?] y",
)


def test_case_split_collapses_once_the_fact_holds():
    inferred = _infer(COLLAPSE)
    assert inferred.shape("first") == ["min(1,t)"]  # computed before the Div
    # Relu is walked after the Div in the model's order: t >= 1 from there on.
    assert inferred.shape("y") == [1]


def test_collapsed_dims_agree_with_onnxruntime():
    check_against_ort(COLLAPSE, [{"t": 1}, {"t": 4}])


def test_facts_with_the_memo_on_equal_facts_without():
    from onnx_symdims.passes._inference import InferenceEngine

    results = []
    for memoize in (True, False):
        previous = (InferenceEngine.memoize, InferenceEngine.memo_min_nodes)
        InferenceEngine.memoize, InferenceEngine.memo_min_nodes = memoize, 0
        try:
            inferred = _infer(ORDER)
        finally:
            InferenceEngine.memoize, InferenceEngine.memo_min_nodes = previous
        results.append([inferred.elements(v) for v in ("before", "after", "q")])
    assert results[0] == results[1]


def test_float_division_records_nothing():
    text = model_text(
        18,
        "float[b] x, float[] d",
        "y = Div(x, d)",
        "float[?] y",
    )
    inferred = _infer(text)
    assert not inferred.context.scope.has_facts()


# ----------------------------------------------------------------------------------------
# Old IR: initializers listed as graph inputs are weights
# ----------------------------------------------------------------------------------------
def _weights_model(ir_version: int) -> str:
    return f"""
        <ir_version: {ir_version}, opset_import: ["" : 9]>
        g (float[N, 1] x, int64[2] s) => (float[?, ?] y) <int64[2] s = {{2, 5}}> {{
            w = ConstantOfShape(s)
            y = Add(x, w)
        }}
    """


@pytest.mark.parametrize(
    ("ir_version", "options", "expected"),
    [
        (3, {}, [2, 5]),
        (3, {"constant_initializers": False}, [2, 5]),  # IR < 4: always constants
        (4, {}, None),  # an overridable default
        (10, {}, None),
        (10, {"constant_initializers": True}, [2, 5]),
    ],
)
def test_initializer_inputs(ir_version, options, expected):
    model = ir.from_onnx_text(_weights_model(ir_version))
    result = SymbolicShapeInferencePass(**options)(model)
    inferred = Inferred(model, result.context)
    if expected is None:
        dims = inferred.dims("w")
        assert dims is not None and all(
            isinstance(d, expr.DimExpr) and d.is_symbol for d in dims
        )
    else:
        assert inferred.shape("w") == expected
        assert inferred.shape("y") == expected
    # The model keeps its inputs, and no mark is left on them.
    assert [v.name for v in model.graph.inputs] == ["x", "s"]
    assert not any(v.meta for v in model.graph.inputs)


def test_initializer_inputs_from_the_api_and_cli(tmp_path):
    import onnx

    from onnx_symdims import cli, infer_symbolic_shapes

    proto = onnx.parser.parse_model(_weights_model(10))
    out = infer_symbolic_shapes(proto, constant_initializers=True)
    shapes = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in out.graph.value_info
    }
    assert shapes["w"] == [2, 5]
    path, written = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(proto, path)
    for flags, expected in (([], False), (["--constant-initializers"], True)):
        assert cli.main(["infer", str(path), "-o", str(written), "-q", *flags]) == 0
        got = {vi.name: vi for vi in onnx.load(written).graph.value_info}["w"]
        static = all(d.HasField("dim_value") for d in got.type.tensor_type.shape.dim)
        assert static is expected


def _light_models() -> list[str]:
    import glob
    import os

    import onnx

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return sorted(glob.glob(os.path.join(folder, "light_*.onnx")))


@pytest.mark.parametrize("name", ["light_bvlc_alexnet.onnx", "light_squeezenet.onnx"])
def test_old_ir_cnn_dims_agree_with_onnxruntime(name):
    import os

    import numpy as np
    import onnx

    from tests.ops._ort_oracle import exposed_model, ort_session

    paths = [p for p in _light_models() if os.path.basename(p) == name]
    if not paths:
        pytest.skip(f"{name} is not in this onnx wheel")
    model = ir.load(paths[0])
    assert model.ir_version < 4
    result = SymbolicShapeInferencePass()(model)
    inferred = Inferred(model, result.context)
    weights = set(model.graph.initializers)
    feeds = {
        v.name: np.random.default_rng(0)
        .standard_normal([int(d) for d in v.shape.dims])
        .astype(np.float32)
        for v in model.graph.inputs
        if v.name not in weights
    }
    proto = exposed_model(inferred)
    session = ort_session(proto)
    names = [o.name for o in session.get_outputs()]
    arrays = dict(zip(names, session.run(names, feeds)))
    checked = 0
    for node in model.graph:
        for value in node.outputs:
            if value.name in arrays:
                assert inferred.shape(value.name) == list(arrays[value.name].shape), value.name
                checked += 1
    assert checked == sum(len(node.outputs) for node in model.graph)
    assert isinstance(proto, onnx.ModelProto)


def test_symbol_range_naming_no_symbol_warns():
    text = model_text(18, "float[seq_len] x", "y = Relu(x)", "float[?] y")
    model = ir.from_onnx_text(text)
    result = SymbolicShapeInferencePass(symbol_ranges={"seq_len": (1, None), "sq": (1, 8)})(
        model
    )
    warnings = [d.message for d in result.diagnostics if d.severity == "warning"]
    assert any("'sq'" in w for w in warnings)
    assert not any("'seq_len'" in w for w in warnings)


# ----------------------------------------------------------------------------------------
# Engine: a fact on a monotone expression of one symbol bounds the symbol
# ----------------------------------------------------------------------------------------
CONV_THEN_SLICE = model_text(
    17,
    "float[n, 1, l] x, float[1, 1, 4] w",
    """
    c = Conv<kernel_shape = [4], strides = [2]>(x, w)
    st = Constant<value = int64[1] {2}>()
    en = Constant<value = int64[1] {9223372036854775807}>()
    ax = Constant<value = int64[1] {2}>()
    t = Slice(x, st, en, ax)
    """,
    "float[?, ?, ?] c, float[?, ?, ?] t",
)


@pytest.mark.parametrize(
    ("fact", "k", "proven", "not_proven"),
    [
        # (l - 4)//2 + 1 >= 0 holds exactly where l >= 2
        ("(l-4)//2+1", 0, ("l", 2), ("l", 3)),
        ("max((h+7)//4,2)//2-2", 0, ("h", 9), ("h", 10)),  # (h+7)//4 >= 4: h >= 9
        ("10-2*l", 0, ("5", "l"), ("4", "l")),  # nonincreasing: an upper bound l <= 5
    ],
)
def test_a_monotone_fact_bounds_its_symbol(fact, k, proven, not_proven):
    scope = FactScope()
    scope.assume_ge(expr.parse_dim(fact), k)
    assert scope.prove_ge(*(expr.parse_dim(p) if isinstance(p, str) else p for p in proven))
    assert not scope.prove_ge(
        *(expr.parse_dim(p) if isinstance(p, str) else p for p in not_proven)
    )


def test_a_fact_not_monotone_bounds_nothing():
    scope = FactScope()
    scope.assume_ge(expr.parse_dim("l%4-1"), 0)  # l % 4 >= 1: l is not a multiple of 4
    assert scope.bounds(expr.sym("l")) == (0, None)


def test_a_symbol_bound_from_a_conv_drops_a_later_case_split():
    inferred = _infer(CONV_THEN_SLICE)
    assert inferred.shape("c") == ["n", 1, "l//2-1"]
    assert inferred.shape("t") == ["n", 1, "l-2"]  # l >= 2: the Conv ran
    assert _infer(CONV_THEN_SLICE, facts=False).shape("t") == ["n", 1, "max(l-2,0)"]


def test_a_symbol_bound_from_a_conv_agrees_with_onnxruntime():
    check_against_ort(CONV_THEN_SLICE, [{"n": 1, "l": 4}, {"n": 0, "l": 5}, {"n": 2, "l": 9}])
