"""Slice with starts/ends computed from shapes whose sign cannot be proven.

``Slice(alibi, 64 - T, INT64_MAX)`` (MPT, TorchScript export) and ends computed with
truncating ``Div`` and ``Min`` (SEW's feature extractor): the index ``v`` of unknown
sign is read as ``v + d*[v < 0]`` with an exact 0/1 indicator, so the length is exact
for every value, checked here against the spec's own index arithmetic and against
onnxruntime.
"""

from __future__ import annotations

import itertools

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.ops import slicing
from onnx_symdims.ops.slicing import _onnx_slice_range, slice_length
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.shapes import FactScope
from tests.ops._ort_oracle import check_against_ort, model_text

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

n, k = expr.sym("n"), expr.sym("k")

#: Indices in the symbols n (the axis) and k whose sign the scope cannot prove.
_UNSIGNED = {
    "k-3": expr.sub(k, 3),
    "3-k": expr.sub(3, k),
    "n-k": expr.sub(n, k),
    "k-n-1": expr.sub(expr.sub(k, n), 1),
    "-k": expr.neg(k),
    "2*k-n": expr.sub(expr.mul(2, k), n),
}
_OTHERS = {"0": 0, "-1": -1, "2": 2, "k": k, "+inf": INT64_MAX, "-inf": INT64_MIN}


def _value(index: expr.Dim, binding: dict[str, int]) -> int:
    return index if isinstance(index, int) else expr.evaluate(index, binding)


@pytest.mark.parametrize("step", [-3, -2, -1, 1, 2, 3])
def test_unsigned_indices_match_the_spec_exhaustively(step):
    """Every pair with an index of unknown sign, n in 0..7, k in 0..12: the spec's length.

    ``_onnx_slice_range`` is the spec's clamping on plain ints. A backward slice ending
    exactly at INT64_MAX is read differently by the spec and onnxruntime: ``None``.
    """
    scope = FactScope()
    pairs = [
        (a, b)
        for a, b in itertools.product({**_UNSIGNED, **_OTHERS}.items(), repeat=2)
        if a[0] in _UNSIGNED or b[0] in _UNSIGNED
    ]
    for (start_name, start), (end_name, end) in pairs:
        length = slice_length(n, start, end, step, scope)
        if step < 0 and end == INT64_MAX:
            assert length is None
            continue
        assert length is not None, (start_name, end_name)
        for size, kv in itertools.product(range(8), range(13)):
            binding = {"n": size, "k": kv}
            expected = len(
                _onnx_slice_range(size, _value(start, binding), _value(end, binding), step)
            )
            got = expr.evaluate(length, binding)
            assert got == expected, (start_name, end_name, step, binding, str(length))


def test_mpt_alibi_window_is_exact_and_not_min_t_64():
    """``alibi[..., 64 - T:]`` is T up to 64, then T - 64 (start -1 is 63), then 64."""
    text = model_text(
        17,
        "float[B, H, T, 8] present, float[1, 4, 1, 64] alibi",
        """
        sh = Shape(present)
        t = Gather<axis=0>(sh, i2)
        tu = Unsqueeze(t, ax0)
        st = Sub(c64, tu)
        y = Slice(alibi, st, big, ax3)
        """,
        constants=(
            "int64[1] c64 = {64}, int64[1] big = {9223372036854775807}, "
            "int64[1] ax3 = {3}, int64 i2 = {2}, int64[1] ax0 = {0}"
        ),
    )
    inferred = check_against_ort(
        text,
        [{"B": 1, "H": 2, "T": t} for t in (0, 1, 5, 63, 64, 65, 100, 127, 128, 129, 300)],
    )
    (length,) = inferred.shape("y")[3:]
    assert length == "min(T-64*min(1,max(T-64,0)),64)"
    dim = expr.parse_expr(length)
    assert [expr.evaluate(dim, {"T": t}) for t in (0, 64, 65, 100, 128, 200)] == [
        0, 64, 1, 36, 64, 64,
    ]  # fmt: skip


def test_mpt_alibi_window_folds_with_a_range():
    """With ``T <= 64`` known, the indicator is 0 and the window is ``T``."""
    text = model_text(
        17,
        "float[T, 8] present, float[1, 64] alibi",
        """
        sh = Shape(present)
        t = Gather<axis=0>(sh, i0)
        tu = Unsqueeze(t, ax0)
        st = Sub(c64, tu)
        y = Slice(alibi, st, big, ax1)
        """,
        constants=(
            "int64[1] c64 = {64}, int64[1] big = {9223372036854775807}, "
            "int64[1] ax1 = {1}, int64 i0 = {0}, int64[1] ax0 = {0}"
        ),
    )
    model = ir.from_onnx_text(text)
    result = SymbolicShapeInferencePass(symbol_ranges={"T": (0, 64)})(model)
    assert result.context.shape_of("y") == (1, expr.sym("T"))


_SEW_CONSTANTS = (
    "int64 c20 = {20}, int64 c2 = {2}, int64 m1 = {-1}, int64 m3 = {-3}, int64 p1 = {1}, "
    "int64[1] zero = {0}, int64[1] neg1 = {-1}, int64[1] ax = {2}, int64[1] one = {1}"
)


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        # trunc((L//20 - 1)/2) >= 0: the end is provably nonnegative, plain min
        (
            "a = Div(a0, c2)",
            "min(max(L+20,80)//40-max(3-L//20,0)//2-1,max(L+20,40)//40-1,N)",
        ),
        # L//20 - 1 may be -1 (an end of -1 is "all but the last"): exact indicator
        ("a = Identity(a0)", None),
    ],
)
def test_sew_end_from_truncating_div_and_min(first, expected):
    """``h[:, :, :min(trunc((L//20-1)/2), trunc((L//20-3)/2)+1)]`` (SEW's conv lengths)."""
    text = model_text(
        20,
        "float[B, L] x, float[B, 4, N] h",
        f"""
        sh = Shape<start=1, end=2>(x)
        l = Squeeze(sh)
        f = Div(l, c20)
        a0 = Add(m1, f)
        {first}
        b0 = Add(m3, f)
        b1 = Div(b0, c2)
        b = Add(p1, b1)
        m = Min(a, b)
        e = Reshape(m, neg1)
        y = Slice(h, zero, e, ax, one)
        """,
        constants=_SEW_CONSTANTS,
    )
    bindings = [
        {"B": 1, "L": size, "N": depth}
        for size in (0, 1, 19, 20, 39, 40, 59, 60, 80, 99, 100, 200, 400)
        for depth in (0, 1, 2, 5, 9)
    ]
    inferred = check_against_ort(text, bindings)
    length = inferred.shape("y")[2]
    assert isinstance(length, str)
    assert not inferred.context.is_generated(length)  # an expression, not a fresh symbol
    if expected is not None:
        assert length == expected


def test_backward_slice_with_unsigned_start_matches_onnxruntime():
    """``x[m-n::-1]`` and ``x[m-n:-(n+1):-2]`` on an axis of length M."""
    text = model_text(
        13,
        "float[N, M] x",
        """
        sh = Shape(x)
        n = Gather(sh, i0)
        m = Gather(sh, i1)
        d = Sub(m, n)
        np1 = Add(n, i1)
        e = Neg(np1)
        y = Slice(x, d, small, i1, m1)
        z = Slice(x, d, e, i1, m2)
        """,
        constants=(
            "int64[1] i0 = {0}, int64[1] i1 = {1}, int64[1] m1 = {-1}, int64[1] m2 = {-2}, "
            "int64[1] small = {-9223372036854775808}"
        ),
    )
    inferred = check_against_ort(text, [{"N": a, "M": b} for a in range(6) for b in range(5)])
    for name in ("y", "z"):
        dims = inferred.dims(name)
        assert dims is not None and not (
            isinstance(dims[1], expr.DimExpr) and dims[1].is_symbol
        ), (name, inferred.shape(name))


def test_huge_piecewise_length_becomes_a_fresh_symbol():
    """Indices computed from earlier piecewise lengths grow each round; past the size cap
    the length is ``None`` (the hook then writes a fresh symbol bounded by the dim)."""
    scope = FactScope()
    start: expr.Dim = expr.sub(k, n)
    sizes = []
    for _ in range(12):
        length = slice_length(n, start, INT64_MAX, 1, scope)
        if length is None:
            break
        sizes.append(length.size)
        start = expr.sub(length, k)
    else:
        pytest.fail(f"no cap reached: sizes {sizes}")
    assert len(sizes) >= 2 and max(sizes) <= slicing._MAX_PIECEWISE_SIZE
