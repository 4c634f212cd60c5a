"""Hunting for graphs where ``x + 0.0 -> x`` shows an output another value (stop 44, h87).

:func:`onnx_symdims.rewrite._uniform.zero_sign_unseen` lets float ``x + 0.0`` go where no
output sees the sign of a zero of the sum. test_signed_zero_rules.py checks each op of its
lists alone; here the proof meets whole graphs through ``OptimizePass``: chains of
several ``x + 0.0`` (the pass shares its answers between them), movers and sums of
products into sign-seeing ops (``Reciprocal``, ``Atan``, ``Sign``, ``Pow``, ``Div``), a
value read by a blind op and a division, uses inside an ``If``. Every output must stay
equal (``==``, NaN where NaN) on inputs of ``±0.0``, ``±inf`` and NaN.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import model, ops, proto, run

#: Every pair of the floats an output could tell apart: both zeros, both infs, NaN.
_VALUES = [-0.0, 0.0, -np.inf, np.inf, 1.5, -2.0, np.nan]
PAIRS = np.array(list(itertools.product(_VALUES, repeat=2)), np.float32)

_CONSTANTS = """<float[1] z = {0.0}, float[1] mz = {-0.0}, float[1] c2 = {2.0},
    int64[2] s12 = {1, 2}, int64[2] sm12 = {-1, 2}, int64[2] one2 = {1, 1},
    float[2, 2] w22 = {inf, 0.0, -0.0, 1.0}, float[2] sc2 = {1.0, -1.0},
    float[2] bi2 = {0.0, -0.0}, int64[2] i10 = {1, 0}, bool tru = {1},
    int64[1] ax1 = {1}>"""

#: One-operand steps keeping the shape ``[N, 2]``: sign-blind, carriers, sign-seeing.
_UNARY = [
    "Exp({a})", "Cos({a})", "Sigmoid({a})", "Abs({a})", "Neg({a})", "Relu({a})",
    "Tanh({a})", "Erf({a})", "Gelu({a})", "Softmax<axis = 1>({a})",
    "LogSoftmax<axis = 1>({a})", "Reciprocal({a})", "Sign({a})", "Atan({a})",
    "Sqrt({a})", "Log({a})", "Sin({a})", "Floor({a})", "Round({a})",
    "Expand({a}, s12)", "Reshape({a}, sm12)", "Tile({a}, one2)", "MatMul({a}, w22)",
    "Gemm({a}, w22, {a})", "LayerNormalization({a}, sc2, bi2)",
    "Gather<axis = 1>({a}, i10)", "Where(tru, {a}, c2)", "Transpose<perm = [1, 0]>({a})",
    "ReduceSum({a}, ax1)",
]  # fmt: skip
_BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"]


def _random_graph(rng: random.Random) -> str:
    """A small graph on ``x: float[N, 2]`` with ``+ 0.0`` steps among others."""
    lines: list[str] = []
    values = ["x"]
    for i in range(rng.randint(2, 7)):
        a, out, kind = rng.choice(values), f"v{i}", rng.random()
        if kind < 0.3:
            lines.append(
                f"{out} = Add({a}, z)" if rng.random() < 0.7 else f"{out} = Sub({a}, mz)"
            )
        elif kind < 0.65:
            lines.append(f"{out} = " + rng.choice(_UNARY).format(a=a))
        elif kind < 0.85:
            b = rng.choice([*values, "c2", "z", "mz"])
            if rng.random() < 0.5:
                a, b = b, a
            lines.append(f"{out} = {rng.choice(_BINARY)}({a}, {b})")
        else:
            b, c = rng.choice(values), rng.choice(values)
            lines.append(f"{out}b = Less({a}, {b})")
            lines.append(f"{out} = Where({out}b, {b}, {c})")
        values.append(out)
    outputs = rng.sample(values[1:], min(len(values) - 1, rng.randint(1, 2)))
    declared = ", ".join(f"float[?, ?] {o}" for o in outputs)
    body = "\n".join(lines)
    return f"g (float[N, 2] x) => ({declared}) {_CONSTANTS} {{\n{body}\n}}"


@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_keep_every_output(seed):
    """40 graphs a seed: outputs equal before and after ``OptimizePass`` (which fires)."""
    rng = random.Random(seed)
    removed = 0
    for _ in range(40):
        text = _random_graph(rng)
        m = model(text, opset=20)
        before = proto(m)
        try:
            expected = run(before, {"x": PAIRS})
        except Exception:  # a shape the generator got wrong: not a case
            continue
        adds = ops(m).count("Add") + ops(m).count("Sub")
        OptimizePass()(m)
        removed += adds - ops(m).count("Add") - ops(m).count("Sub")
        for e, a in zip(expected, run(m, {"x": PAIRS})):
            assert np.array_equal(e, a, equal_nan=True), text
    assert removed > 0  # the proof let some x + 0.0 go


@pytest.mark.parametrize("to", [10, 16, 17, 18, 19, 20])  # float16 .. float8 fnuz
def test_a_cast_to_a_narrow_float_keeps_outputs(to):
    """A float Cast carries the sign: FNUZ float8 types have no ``-0.0`` at all, and
    ``-0.0`` becomes ``0`` there (not their NaN ``0x80``)."""
    text = f"""
        g (float[N] x) => (float[N] y) <float[1] z = {{0.0}}> {{
            a = Add(x, z)
            h = Cast<to = {to}>(a)
            y = Cast<to = 1>(h)
        }}
    """
    m = model(text, opset=21)
    before = proto(m)
    OptimizePass()(m)
    assert "Add" not in ops(m)
    feeds = {"x": PAIRS.reshape(-1)}
    for e, a in zip(run(before, feeds), run(m, feeds)):
        np.testing.assert_array_equal(a, e)


def test_a_use_inside_a_branch_declines():
    """An outer ``x + 0.0`` copied out of a branch reaches a ``Reciprocal``."""
    text = """
        g (float[N] x, bool c) => (float[N] y) <float[1] z = {0.0}> {
            a = Add(x, z)
            b = If(c) <
                then_branch = t () => (float[N] tb) { tb = Identity(a) },
                else_branch = e () => (float[N] eb) { eb = Neg(a) }
            >
            y = Reciprocal(b)
        }
    """
    m = model(text)
    before = proto(m)
    OptimizePass()(m)
    assert "Add" in ops(m)
    for c in (True, False):
        feeds = {"x": PAIRS.reshape(-1), "c": np.array(c)}
        for e, a in zip(run(before, feeds), run(m, feeds)):
            np.testing.assert_array_equal(np.signbit(a), np.signbit(e))
