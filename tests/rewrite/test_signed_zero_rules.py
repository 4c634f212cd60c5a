"""Float ``x + 0.0`` keeps every output under ``exact_floats`` (stop 44, helper-85).

``-0.0 + 0.0`` is ``+0.0``: dropping ``x + 0.0`` hands ``-0.0`` to the ops after it, and
``1 / x`` then gives ``-inf`` where the original gave ``+inf``. ``x + (-0.0)``, ``x -
0.0``, ``x * 1`` and ``x / 1`` are ``x`` bit for bit and always go; ``x + 0.0`` (``x -
(-0.0)``) goes only where no output sees the sign of a zero of the sum
(:func:`onnx_symdims.rewrite._uniform.zero_sign_unseen`). Each case runs in onnxruntime
before and after on ``±0.0``, NaN and ``±inf`` inputs and compares the outputs bit for
bit where the proof says no output sees a sign (``==`` for graph outputs).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import DropExpandBeforeBroadcastPass, OptimizePass, analyze
from onnx_symdims.rewrite._rules import ShapeRulesPass
from onnx_symdims.rewrite._uniform import _ZERO_SIGN_BLIND
from tests.rewrite._rewrite_testing import (
    RULE_DRIVERS,
    apply_rules,
    cleanup,
    model,
    ops,
    proto,
    run,
)

#: Every float an output could tell apart from another: both zeros, NaN, both infs.
SPECIAL = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.5, -2.0, 1e-30], np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    """Bit patterns, with every NaN one pattern (a NaN's payload is not a value)."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return a
    return np.where(np.isnan(a), np.float32(np.nan), a).view(f"u{a.dtype.itemsize}")


def _assert_same(before, after, feeds, bit_for_bit: bool = True) -> None:
    expected, actual = run(before, feeds), run(after, feeds)
    for e, a in zip(expected, actual):
        np.testing.assert_array_equal(a, e)  # == (NaN where NaN)
        if bit_for_bit:
            np.testing.assert_array_equal(_bits(a), _bits(e))


def _optimize(text: str, **options):
    m = model(text)
    before = proto(m)
    result = OptimizePass(**options)(m)
    return before, m, result


def _feeds(m, n: int = len(SPECIAL)) -> dict[str, np.ndarray]:
    return {v.name: SPECIAL[:n].copy() for v in m.graph.inputs}


# ------------------------------------------------------------------------------------
# The ops the proof calls blind to the sign of a zero: onnxruntime agrees
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", sorted(_ZERO_SIGN_BLIND))
def test_a_sign_blind_op_gives_the_same_output_for_both_zeros(op):
    comparison = op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
    out = "bool[N]" if comparison or op in ("IsNaN", "IsInf") else "float[N]"
    out = {"Shape": "int64[1]", "Size": "int64"}.get(op, out)
    call = f"{op}(x, o)" if comparison else f"{op}(x)"
    m = model(f"""
        g (float[N] x) => ({out} y) <float o = {{0.0}}> {{
            y = {call}
        }}
    """)
    rows = [
        [-0.0],
        [-0.0, -0.0],
        [-0.0, 0.0],
        [-0.0, -100.0],
        [-0.0, np.inf],
        [-0.0, np.nan],
        [-0.0, 3.0, -0.0],
    ]
    for row in rows:
        negative = np.array(row, np.float32)
        positive = np.where(negative == 0, np.float32(0.0), negative).astype(np.float32)
        (a,) = run(m, {"x": negative})
        (b,) = run(m, {"x": positive})
        np.testing.assert_array_equal(_bits(a), _bits(b), err_msg=f"{op} of {row}")


@pytest.mark.parametrize("to", ["int64", "int32", "bool", "uint8"])
def test_a_cast_to_an_integer_or_bool_forgets_the_sign_of_zero(to):
    code = {"int64": 7, "int32": 6, "bool": 9, "uint8": 2}[to]
    m = model(f"""
        g (float[N] x) => ({to}[N] y) {{
            y = Cast<to = {code}>(x)
        }}
    """)
    (a,) = run(m, {"x": np.array([-0.0, -0.0], np.float32)})
    (b,) = run(m, {"x": np.array([0.0, 0.0], np.float32)})
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "call",
    [
        "Add(a, x)",
        "Add(x, a)",
        "Sub(a, x)",
        "Sub(x, a)",
        "Neg(x)",
        "Relu(x)",
        "Mul(a, x)",
        "Mul(x, a)",
        "Div(x, a)",
        "Tanh(x)",
        "Erf(x)",
        "Gelu(x)",
        'Gelu<approximate = "tanh">(x)',
        "Where(c, x, a)",
        "Where(c, a, x)",
    ],
)
def test_a_carrier_changes_at_most_the_sign_of_a_zero(call):
    """``a ± x``, ``-x``, ``relu(x)``, ``x * a``, ``x / a``: a ``±0`` in ``x`` changes only
    a zero's sign of the output (NaN stays NaN: ``0 * inf``, ``0 / 0``)."""
    m = model(
        f"""
        g (float[N] x, float[N] a, bool[N] c) => (float[N] y) {{
            y = {call}
        }}
    """,
        opset=20,
    )  # Gelu
    a = np.repeat(SPECIAL, 2)
    negative = np.full(a.shape, -0.0, np.float32)
    c = np.arange(a.size) % 2 == 0
    (p,) = run(m, {"x": negative, "a": a, "c": c})
    (q,) = run(m, {"x": -negative, "a": a, "c": c})
    np.testing.assert_array_equal(p, q)  # == (NaN where NaN): a zero's sign at most
    assert np.array_equal(p == 0, q == 0)


@pytest.mark.parametrize(
    "call",
    [
        "MatMul(x, w)",
        "MatMul(w, x)",
        "Gemm(x, w, b)",
        "Gemm(w, x, b)",
        "LayerNormalization(x, w1, b)",
        "LayerNormalization(w, x1, b)",
        "ReduceSum<keepdims = 0>(x, one)",
        "ReduceMean<keepdims = 0>(x, one)",
        "Conv<pads = [1, 1, 1, 1]>(x4, w4, b1)",
    ],
)
def test_a_sum_of_products_changes_at_most_the_sign_of_a_zero(call):
    m = model(f"""
        g (float[3, 3] x, float[3, 3] w, float[3] b) => (float[?] y)
        <int64 zero = {{0}}, int64[1] one = {{1}}, int64[1] flat = {{-1}},
         int64[4] s4 = {{1, 1, 3, 3}}, int64[4] sw = {{3, 1, 3, 3}}> {{
            x1 = Gather<axis = 0>(x, zero)
            w1 = Identity(b)
            x4 = Reshape(x, s4)
            w4 = Expand(w, sw)
            b1 = Identity(b)
            r = {call}
            y = Reshape(r, flat)
        }}
    """)
    rng = np.random.default_rng(0)
    for w in (
        np.zeros([3, 3], np.float32),
        -np.zeros([3, 3], np.float32),
        np.resize(SPECIAL, [3, 3]).astype(np.float32),
        rng.standard_normal([3, 3]).astype(np.float32),
    ):
        for b in (np.zeros(3, np.float32), -np.zeros(3, np.float32), SPECIAL[:3]):
            negative = np.full([3, 3], -0.0, np.float32)
            negative[0, 0] = 1.0  # one nonzero term: the other sums are of zeros only
            positive = np.where(negative == 0, np.float32(0.0), negative)
            (p,) = run(m, {"x": negative, "w": w, "b": b})
            (q,) = run(m, {"x": positive, "w": w, "b": b})
            np.testing.assert_array_equal(p, q)
            assert np.array_equal(p == 0, q == 0)


# ------------------------------------------------------------------------------------
# NeutralElement under exact_floats
# ------------------------------------------------------------------------------------
def _graph(op: str, zero: str, use: str, out: str = "float[N] y") -> str:
    return f"""
        g (float[N] x) => ({out}) <float z = {{{zero}}}, float one = {{1.0}},
                                   float two = {{2.0}}, int64[1] flat = {{-1}}> {{
            a = {op}
            {use}
        }}
    """


DIVIDE = "y = Div(one, a)"
#: (the node, its constant, the use, fires under exact_floats)
CASES = {
    # a later Div tells -0.0 from +0.0: only the sign-exact forms go
    "add_pos_zero_div": ("Add(x, z)", "0.0", DIVIDE, False),
    "add_pos_zero_first_div": ("Add(z, x)", "0.0", DIVIDE, False),
    "add_neg_zero_div": ("Add(x, z)", "-0.0", DIVIDE, True),
    "sub_pos_zero_div": ("Sub(x, z)", "0.0", DIVIDE, True),
    "sub_neg_zero_div": ("Sub(x, z)", "-0.0", DIVIDE, False),
    "mul_one_div": ("Mul(x, one)", "0.0", DIVIDE, True),
    "div_one_div": ("Div(x, one)", "0.0", DIVIDE, True),
    # uses that never see the sign of a zero
    "add_softmax": ("Add(x, z)", "0.0", "y = Softmax<axis = 0>(a)", True),
    "add_logsoftmax": ("Add(x, z)", "0.0", "y = LogSoftmax<axis = 0>(a)", True),
    "add_exp": ("Add(x, z)", "0.0", "y = Exp(a)", True),
    "add_abs": ("Add(x, z)", "0.0", "y = Abs(a)", True),
    "add_sigmoid": ("Add(x, z)", "0.0", "y = Sigmoid(a)", True),
    "sub_neg_zero_cos": ("Sub(x, z)", "-0.0", "y = Cos(a)", True),
    "add_then_add_two": ("Add(x, z)", "0.0", "b = Add(a, two)\n y = Div(one, b)", True),
    "add_reshape_exp": (
        "Add(x, z)",
        "0.0",
        "r = Reshape(a, flat)\n t = Transpose(r)\n y = Exp(t)",
        True,
    ),
    "add_cast_int_div": (
        "Add(x, z)",
        "0.0",
        "i = Cast<to = 7>(a)\n d = Cast<to = 1>(i)\n y = Div(one, d)",
        True,
    ),
    # uses that do see it, directly or after carriers
    "add_reshape_div": ("Add(x, z)", "0.0", "r = Reshape(a, flat)\n y = Div(one, r)", False),
    "add_neg_div": ("Add(x, z)", "0.0", "n = Neg(a)\n y = Div(one, n)", False),
    "add_cast_half_div": (
        "Add(x, z)",
        "0.0",
        "h = Cast<to = 10>(a)\n f = Cast<to = 1>(h)\n y = Div(one, f)",
        False,
    ),
    "add_mul": ("Add(x, z)", "0.0", "y = Mul(a, two)", True),
    "add_mul_div": ("Add(x, z)", "0.0", "m = Mul(a, two)\n y = Div(one, m)", False),
    "add_div_numerator": ("Add(x, z)", "0.0", "y = Div(a, two)", True),
    "add_reciprocal": ("Add(x, z)", "0.0", "y = Reciprocal(a)", False),
    "add_tanh_div": ("Add(x, z)", "0.0", "e = Tanh(a)\n y = Div(one, e)", False),
    "add_tanh": ("Add(x, z)", "0.0", "e = Tanh(a)\n y = Exp(e)", True),
    "add_shape": ("Add(x, z)", "0.0", "y = Shape(a)", True),
}


#: Cases whose graph output may now show another zero's sign (equal under ``==``).
EQUAL_ONLY = {"add_mul", "add_div_numerator"}
#: Cases with another output type.
OUTPUT = {"add_shape": "int64[1] y"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_neutral_element_fires_only_where_no_output_sees_the_sign(case):
    node, zero, use, fires = CASES[case]
    op = node.split("(")[0]
    text = _graph(node, zero, use, OUTPUT.get(case, "float[N] y"))
    before, after, result = _optimize(text)
    kept = ops(model(text)).count(op) - ops(after).count(op)
    assert kept == (1 if fires else 0), (ops(after), dict(result.declined))
    _assert_same(before, after, _feeds(after), bit_for_bit=case not in EQUAL_ONLY)
    if not fires and op in ("Add", "Sub"):
        assert any("+0.0 at x = -0.0" in reason for reason in result.declined)


@pytest.mark.parametrize("zero", ["0.0", "-0.0"], ids=["positive", "negative"])
def test_a_graph_output_is_compared_under_equality(zero):
    text = _graph("Add(x, z)", zero, "y = Identity(a)")
    before, after, _ = _optimize(text)
    assert "Add" not in ops(after)
    # -0.0 + 0.0 was +0.0 and is now -0.0: equal under ==, not bit for bit
    _assert_same(before, after, _feeds(after), bit_for_bit=zero == "-0.0")


def test_a_graph_output_and_a_division_decline():
    text = _graph(
        "Add(x, z)", "0.0", "y = Identity(a)\n w = Div(one, a)", "float[N] y, float[N] w"
    )
    before, after, _ = _optimize(text)
    assert "Add" in ops(after)
    _assert_same(before, after, _feeds(after), bit_for_bit=False)


def test_a_mix_of_signed_zeros_declines():
    text = """
        g (float[2] x) => (float[2] y) <float[2] z = {0.0, -0.0}, float one = {1.0}> {
            a = Add(x, z)
            y = Div(one, a)
        }
    """
    before, after, _ = _optimize(text)
    assert "Add" in ops(after)
    _assert_same(before, after, {"x": np.array([-0.0, -0.0], np.float32)})


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integers_have_no_signed_zero(dtype):
    text = f"""
        g ({dtype}[N] x) => ({dtype}[N] y) <{dtype} z = {{0}}, {dtype} one = {{7}}> {{
            a = Add(x, z)
            y = Div(one, a)
        }}
    """
    before, after, _ = _optimize(text)
    assert "Add" not in ops(after)
    np_type = np.int64 if dtype == "int64" else np.int32
    _assert_same(before, after, {"x": np.array([1, -3, 7], np_type)})


def test_a_branch_output_declines():
    """A subgraph's output is no graph output: the If's output may reach a Div."""
    text = """
        g (float[N] x, bool c) => (float[N] y) <float one = {1.0}> {
            b = If(c) <
                then_branch = t () => (float[N] tb) {
                    z = Constant<value = float {0.0}>()
                    tb = Add(x, z)
                },
                else_branch = e () => (float[N] eb) {
                    eb = Identity(x)
                }
            >
            y = Div(one, b)
        }
    """
    m = model(text)
    before = proto(m)
    facts = analyze(m)
    rules = ShapeRulesPass(facts)
    rules(m)
    (add,) = [r for r in rules.rules if r.name == "AddByZero"]
    assert add.fired == 0 and add.declined
    feeds = {"x": SPECIAL.copy(), "c": np.array(True)}
    _assert_same(before, m, feeds)


@pytest.mark.parametrize("driver", RULE_DRIVERS)
def test_both_rule_drivers_decline_before_a_division(driver):
    m = model(_graph("Add(x, z)", "0.0", DIVIDE))
    rules = apply_rules(m, driver=driver)
    assert rules["AddByZero"].fired == 0
    assert "Add" in ops(m)


@pytest.mark.parametrize("driver", RULE_DRIVERS)
def test_both_rule_drivers_fire_before_a_softmax(driver):
    m = model(_graph("Add(x, z)", "0.0", "y = Softmax<axis = 0>(a)"))
    before = proto(m)
    rules = apply_rules(m, driver=driver)
    assert rules["AddByZero"].fired == 1
    _assert_same(before, m, _feeds(m))


def test_inexact_floats_keeps_the_old_rewrite():
    """``exact_floats=False``: ``x + 0.0`` goes before a ``Div`` (equal up to a zero's sign)."""
    m = model(_graph("Add(x, z)", "0.0", DIVIDE))
    rules = ShapeRulesPass(analyze(m), exact_floats=False)
    rules(m)
    cleanup(m)
    assert "Add" not in ops(m)


# ------------------------------------------------------------------------------------
# DropExpandBeforeBroadcast's neutral path
# ------------------------------------------------------------------------------------
_EXPANDING_ZERO = """
    g (float[1, 3] x, float[4, 3] s) => ({out} y)
    <float[4, 3] z = {{0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}}> {{
        e = Add(x, z)
        y = {use}
    }}
"""


@pytest.mark.parametrize(
    ("use", "out", "exact", "fires"),
    [
        ("Div(s, e)", "float[4, 3]", True, False),
        ("Div(s, e)", "float[4, 3]", False, True),
        ("Less(s, e)", "bool[4, 3]", True, True),
        ("Add(s, e)", "float[4, 3]", True, True),
    ],
)
def test_an_expanding_add_of_zero_keeps_the_sign_a_division_sees(use, out, exact, fires):
    m = model(_EXPANDING_ZERO.format(use=use, out=out))
    before = proto(m)
    drop = DropExpandBeforeBroadcastPass(analyze(m), exact_floats=exact)
    drop(m)
    cleanup(m)
    assert drop.fired["drop_expand_before_broadcast"] == (1 if fires else 0)
    feeds = {
        "x": np.full([1, 3], -0.0, np.float32),
        "s": np.resize(SPECIAL, [4, 3]).astype(np.float32),
    }
    if exact:  # (exact_floats=False: an output may differ in a zero's sign or an inf's)
        _assert_same(before, m, feeds, bit_for_bit=False)
    if not fires:
        assert any("+0.0 at x = -0.0" in r for r in drop.declined)


@pytest.mark.parametrize("driver", RULE_DRIVERS)
def test_both_rule_drivers_fire_on_a_graph_output(driver):
    """Both know the main graph (onnxscript's match context, the pass's model)."""
    m = model(_graph("Add(x, z)", "0.0", "y = Reshape(a, flat)"))
    before = proto(m)
    rules = apply_rules(m, driver=driver)
    assert rules["AddByZero"].fired == 1
    _assert_same(before, m, _feeds(m), bit_for_bit=False)


_ADD_ZERO_THEN_DIVIDE = """
    g (float[N] x) => (float[N] y) <float z = {0.0}, float o = {1.0}> {
        a = Add(x, z)
        y = Div(o, a)
    }
"""


@pytest.mark.parametrize(("exact", "kept"), [(False, ["Div"]), (True, ["Add", "Div"])])
def test_optimize_passes_exact_floats_to_the_rules(exact, kept):
    """``exact_floats=False`` reaches the rules through ``OptimizePass``: ``x + 0.0`` goes
    even where a ``Div`` would see the sign of a zero (the inexact convention)."""
    m = model(_ADD_ZERO_THEN_DIVIDE)
    OptimizePass(exact_floats=exact)(m)
    assert [n.op_type for n in m.graph] == kept
