"""A soundness hunt of the rotary fusion (``rewrite/_rotary.py``): near misses and edges.

Each graph is ``x * cos + rotate_half(x) * sin`` with one part changed. A near miss (a
Sub, Neg on the first half, halves of unequal size, a cos of two halves, a cos broadcast
over the sequence, another layout or element type) must be declined; an edge that is
still a rope (cos and sin of different tensors, operands swapped, a cos of ``[S, D]``,
a cos shared by ropes of different heads, a rope of a rope, a rope read by an ``If``,
sizes 0 and 1) fuses. Either way onnxruntime gives the original's outputs, with the
fusion check on and off (off, only the shape guard protects: the match must be right).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims.rewrite import OptimizePass, _guard
from tests.rewrite._rewrite_testing import model, proto, session

_CONSTANTS = (
    "int64[1] one = {1}, int64[1] zero = {0}, int64[1] two = {2}, int64[1] three = {3},"
    " int64[1] four = {4}, int64[1] big = {9223372036854775807}, int64[1] mfour = {-4}"
)
_SLICES = "x1 = Slice(X, zero, four, three, one)\n x2 = Slice(X, four, big, three, one)"
_ROT = "nx2 = Neg(x2)\n rot = Concat<axis=-1>(nx2, x1)"
_UNSQUEEZED = "c4 = Unsqueeze(c, one)\n s4 = Unsqueeze(s, one)"
_BESIDE = "c4 = Identity(c)\n s4 = Identity(s)"
_SUM = "a = Mul(X, c4)\n b = Mul(rot, s4)\n r = Add(a, b)"


def _rope(
    x="q", f="f", g="f", cat=None, cos=_UNSQUEEZED, halves=_SLICES, rot=_ROT, total=_SUM
):
    """The rope of ``x`` with ``cos = Cos(Concat(f, f))``, ``sin = Sin(Concat(g, g))``."""
    cat = cat or f"emb = Concat<axis=-1>({f}, {f})\n emb2 = Concat<axis=-1>({g}, {g})"
    body = f"{cat}\n c = Cos(emb)\n s = Sin(emb2)\n {cos}\n {halves}\n {rot}\n {total}"
    return body.replace("X", x)


def _graph(inputs: str, outputs: str, body: str, extra: str = "") -> str:
    return f"g ({inputs}) => ({outputs}) <{_CONSTANTS}{extra}> {{ {body} }}"


_Q = "float[B, 2, S, 8] q"
_R = "float[B, 2, S, 8] r"
_F = "float[B, S, 4] f"
_G = "float[B, S, 4] g"

#: name: (graph, ropes fused). Inputs are fed by their declared shapes.
CASES = {
    # still ropes: fused
    "cos_and_sin_of_different_tensors": (_graph(f"{_Q}, {_F}, {_G}", _R, _rope(g="g")), 1),
    "operands_swapped": (
        _graph(
            f"{_Q}, {_F}", _R, _rope(total="a = Mul(c4, q)\n b = Mul(s4, rot)\n r = Add(b, a)")
        ),
        1,
    ),
    "halves_of_one_split": (
        _graph(f"{_Q}, {_F}", _R, _rope(halves="x1, x2 = Split<axis=-1, num_outputs=2>(q)")),
        1,
    ),
    "halves_of_negative_slices": (
        _graph(
            f"{_Q}, {_F}",
            _R,
            _rope(
                halves="x1 = Slice(q, zero, mfour, three)\n x2 = Slice(q, mfour, big, three)"
            ),
        ),
        1,
    ),
    "cos_of_S_by_D": (_graph(f"{_Q}, float[S, 4] f", _R, _rope(cos=_BESIDE)), 1),
    "cos_of_1_by_S_by_D": (_graph(f"{_Q}, float[1, S, 4] f", _R, _rope(cos=_BESIDE)), 1),
    "head_size_2": (
        _graph(
            "float[B, 2, S, 2] q, float[B, S, 1] f",
            "float[B, 2, S, 2] r",
            _rope(halves="x1 = Slice(q, zero, one, three)\n x2 = Slice(q, one, big, three)"),
        ),
        1,
    ),
    "no_heads": (_graph(f"float[B, 0, S, 8] q, {_F}", "float[B, 0, S, 8] r", _rope()), 1),
    "intermediates_are_outputs": (
        _graph(f"{_Q}, {_F}", f"{_R}, float[B, 2, S, 8] a, float[B, 2, S, 8] rot", _rope()),
        1,
    ),
    # near misses: declined
    "cos_of_two_halves": (
        _graph(
            f"{_Q}, {_F}, {_G}",
            _R,
            _rope(cat="emb = Concat<axis=-1>(f, g)\n emb2 = Concat<axis=-1>(f, f)"),
        ),
        0,
    ),
    "neg_of_the_first_half": (
        _graph(f"{_Q}, {_F}", _R, _rope(rot="nx1 = Neg(x1)\n rot = Concat<axis=-1>(x2, nx1)")),
        0,
    ),
    "neg_first_half_leading": (
        _graph(f"{_Q}, {_F}", _R, _rope(rot="nx1 = Neg(x1)\n rot = Concat<axis=-1>(nx1, x2)")),
        0,
    ),
    "a_sub": (
        _graph(
            f"{_Q}, {_F}", _R, _rope(total="a = Mul(q, c4)\n b = Mul(rot, s4)\n r = Sub(a, b)")
        ),
        0,
    ),
    "cos_and_sin_swapped": (
        _graph(
            f"{_Q}, {_F}", _R, _rope(total="a = Mul(q, s4)\n b = Mul(rot, c4)\n r = Add(a, b)")
        ),
        0,
    ),
    "halves_of_unequal_size": (
        _graph(
            f"{_Q}, {_F}",
            _R,
            _rope(
                halves="x1 = Slice(q, zero, three, three)\n x2 = Slice(q, three, big, three)"
            ),
        ),
        0,
    ),
    "cos_broadcast_over_the_sequence": (_graph(f"{_Q}, float[B, 1, 4] f", _R, _rope()), 0),
    "cos_of_the_batch_without_unsqueeze": (_graph(f"{_Q}, {_F}", _R, _rope(cos=_BESIDE)), 0),
    "cos_over_the_heads": (_graph(f"{_Q}, float[2, S, 4] f", _R, _rope(cos=_BESIDE)), 0),
    "sequence_before_heads": (
        _graph(
            f"float[B, S, 2, 8] q, {_F}",
            "float[B, S, 2, 8] r",
            _rope(cos="c4 = Unsqueeze(c, two)\n s4 = Unsqueeze(s, two)"),
        ),
        0,
    ),
    "x_of_rank_3": (
        _graph(
            f"float[B, S, 8] q, {_F}",
            "float[B, S, 8] r",
            _rope(
                cos=_BESIDE,
                halves="x1 = Slice(q, zero, four, two)\n x2 = Slice(q, four, big, two)",
            ),
        ),
        0,
    ),
    "float16": (
        _graph("float16[B, 2, S, 8] q, float16[B, S, 4] f", "float16[B, 2, S, 8] r", _rope()),
        0,
    ),
    "double": (
        _graph("double[B, 2, S, 8] q, double[B, S, 4] f", "double[B, 2, S, 8] r", _rope()),
        0,
    ),
    "cos_sequence_unproven": (_graph(f"{_Q}, float[B, T, 4] f", _R, _rope()), 0),
}


def _gqa_ropes() -> str:
    """Query of 4 heads and key of 2 (GQA's kv heads) rotated by one cos and sin."""
    key = (
        "kx1 = Slice(k, zero, four, three, one)\n kx2 = Slice(k, four, big, three, one)\n"
        " knx2 = Neg(kx2)\n krot = Concat<axis=-1>(knx2, kx1)\n"
        " ka = Mul(k, c4)\n kb = Mul(krot, s4)\n kr = Add(ka, kb)"
    )
    return _graph(
        f"float[B, 4, S, 8] q, float[B, 2, S, 8] k, {_F}",
        "float[B, 4, S, 8] r, float[B, 2, S, 8] kr",
        _rope() + "\n" + key,
    )


def _rope_of_a_rope() -> str:
    second = (
        _rope(x="r", g="g")
        .replace("emb = Concat<axis=-1>(f, f)", "emb = Concat<axis=-1>(g, g)")
        .replace(" r = Add(a, b)", " r2 = Add(a, b)")
    )
    renamed = second
    for old in ("emb2", "emb", "c4", "s4", "nx2", "x1", "x2", "rot", "a", "b", "c", "s"):
        renamed = renamed.replace(f"{old} ", f"{old}_ ").replace(f"{old})", f"{old}_)")
        renamed = renamed.replace(f"({old},", f"({old}_,").replace(f" {old}_ =", f" {old}_ =")
    return _graph(f"{_Q}, {_F}, {_G}", "float[B, 2, S, 8] r2", _rope() + "\n" + renamed)


_READ_BY_IF = _rope() + (
    "\n o = If(cc) <then_branch = t () => (float[B, 2, S, 8] to) { to = Identity(r) },"
    " else_branch = e () => (float[B, 2, S, 8] eo) { eo = Neg(r) }>"
)
CASES.update(
    {
        "cos_shared_by_query_and_kv_heads": (_gqa_ropes(), 2),
        "rope_of_a_rope": (_rope_of_a_rope(), 2),
        "rope_read_by_an_if": (
            _graph(f"{_Q}, {_F}, bool cc", "float[B, 2, S, 8] o", _READ_BY_IF),
            1,
        ),
    }
)

SIZES = ((2, 3), (1, 1), (0, 3), (2, 0), (1, 5), (0, 1), (3, 2))


def _feeds(before, rng, b, s):
    sizes = {"B": b, "S": s, "T": 1}
    feeds = {}
    for value in before.graph.input:
        dims = [
            d.dim_value if d.HasField("dim_value") else sizes[d.dim_param]
            for d in value.type.tensor_type.shape.dim
        ]
        elem = value.type.tensor_type.elem_type
        if elem == 9:  # bool
            feeds[value.name] = np.array(rng.random() < 0.5)
            continue
        dtype = {1: np.float32, 10: np.float16, 11: np.float64}[elem]
        feeds[value.name] = rng.standard_normal(dims).astype(dtype)
    return feeds


def _assert_fused_and_equal(text: str, fused: int, verify: bool, opset: int = 18) -> None:
    m = model(text, opset=opset)
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=verify)(m)
    assert result.fired["fusion.rotary_embedding"] == fused, result.diagnostics
    original, after = session(before), session(m)
    rng = np.random.default_rng(0)
    ran = 0
    for b, s in SIZES:
        feeds = _feeds(before, rng, b, s)
        try:
            expected = original.run(None, feeds)
        except Exception:  # sizes the original refuses (a broadcast of B over heads)
            continue
        ran += 1
        actual = after.run(None, feeds)
        for a, e in zip(actual, expected, strict=True):
            assert a.shape == e.shape, (b, s)
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=f"B={b} S={s}")
    assert ran


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("name", sorted(CASES))
def test_ropes_and_near_misses_keep_their_outputs(name, verify):
    text, fused = CASES[name]
    _assert_fused_and_equal(text, fused, verify)


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("opset, fused", [(13, 0), (14, 0), (15, 1), (18, 1)])
def test_opsets_of_a_cache_per_batch_row(opset, fused, verify):
    _assert_fused_and_equal(_graph(f"{_Q}, {_F}", _R, _rope()), fused, verify, opset)


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("opset", [13, 14, 15, 18])
def test_opsets_of_a_cache_shared_by_the_batch(opset, verify):
    text = _graph(f"{_Q}, float[1, S, 4] f", _R, _rope(cos=_BESIDE))
    _assert_fused_and_equal(text, 1, verify, opset)


def test_gqa_does_not_read_the_rows_of_our_caches_as_positions(monkeypatch):
    """The bundled decoder with the shape guard's comparison off, as for a model whose
    present shapes GQA happens to keep: onnxscript's ``gqa`` takes our two ropes'
    shared ``ids`` for positions (``total_sequence_length`` 6 at past 4 and sequence 3,
    batch 2) and onnxruntime refuses or misreads the attention. With the fusion check
    off nothing else stands in the way; our ids must never reach a GQA (the ``gqa`` step
    is left out, rewrite/_guard.py)."""
    monkeypatch.setattr(_guard._Guard, "_changed", lambda self, facts: [])
    m = ir.load(onnx_symdims.data_path("tiny_decoder.onnx"))
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert result.fired["fusion.rotary_embedding"] == 4
    assert "GroupQueryAttention" not in [n.op_type for n in m.graph]
