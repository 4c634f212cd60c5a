"""Anchor merge rules (``merge_with_anchor``): per-dim table, conflicts, broadcasts."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext
from onnx_symdims.shapes._anchors import (
    declared_dims,
    merge_value_with_anchor,
    merge_with_anchor,
)

d = expr.parse_dim


def _dims(*texts):
    return tuple(None if t is None else d(t) if isinstance(t, str) else t for t in texts)


# inferred, declared, merged, equalities recorded (as canonical text pairs)
MERGE_CASES = [
    # an empty declared dim declares nothing
    ((d("nnz"), 4), (None, 4), ("nnz", 4), []),
    # equal: kept, nothing recorded
    ((d("N"), 4), (d("N"), 4), ("N", 4), []),
    # modulo canonical form
    ((d("seq+past_seq"),), (d("past_seq+seq"),), ("past_seq+seq",), []),
    # inferred int beats a symbolic anchor; anchor == int recorded
    ((64,), (d("d_model"),), (64,), [("64", "d_model")]),
    # two symbolic: the declared text, equality with leaf derivation
    ((d("nnz"), 4), (d("N"), 4), ("N", 4), [("N", "nnz")]),
    ((d("2*nnz"),), (d("2*dnz"),), ("2*dnz",), [("2*dnz", "2*nnz"), ("dnz", "nnz")]),
    # an unknown inferred dim: the anchor is taken, nothing recorded
    ((None, 4), (d("N"), 4), ("N", 4), []),
    ((expr.unknown("x"),), (d("N"),), ("N",), []),
    # neither known
    ((None,), (None,), (None,), []),
]


@pytest.mark.parametrize(("inferred", "declared", "merged", "recorded"), MERGE_CASES)
def test_merge_rules(inferred, declared, merged, recorded):
    ctx = ShapesContext()
    result = merge_with_anchor(ctx, inferred, declared, strict=False, where="output 'Y'")
    assert result == _dims(*merged)
    assert sorted(ctx.constraints()) == sorted(recorded)
    assert not ctx.diagnostics


def test_merge_without_declared_shape_keeps_inferred():
    ctx = ShapesContext()
    inferred = (d("a"), 3)
    assert merge_with_anchor(ctx, inferred, None, strict=False, where="y") == inferred
    assert merge_with_anchor(ctx, None, (d("N"),), strict=False, where="y") == (d("N"),)
    assert merge_with_anchor(ctx, None, None, strict=False, where="y") is None
    assert ctx.constraints_size() == 0


CONFLICTS = [
    ((d("nnz"), 3), (d("N"), 4)),  # int vs different int; the first dim must not be recorded
    ((d("nnz"), 4), (d("N"), 4, 1)),  # rank mismatch
]


@pytest.mark.parametrize(("inferred", "declared"), CONFLICTS)
def test_lenient_conflict_skips_the_whole_anchor(inferred, declared):
    ctx = ShapesContext()
    result = merge_with_anchor(ctx, inferred, declared, strict=False, where="graph output 'Y'")
    assert result == inferred
    assert ctx.constraints_size() == 0  # nothing from a half-applied anchor
    (diagnostic,) = ctx.diagnostics
    assert diagnostic.severity == "warning"
    assert "graph output 'Y'" in diagnostic.message


@pytest.mark.parametrize(("inferred", "declared"), CONFLICTS)
def test_strict_conflict_raises(inferred, declared):
    ctx = ShapesContext()
    with pytest.raises(ShapeInferenceError, match="graph output 'Y'"):
        merge_with_anchor(ctx, inferred, declared, strict=True, where="graph output 'Y'")
    assert ctx.constraints_size() == 0
    assert ctx.diagnostics[-1].severity == "error"


def test_a_minted_size_against_an_int_anchor_takes_the_int():
    ctx = ShapesContext()
    nnz = ctx.new_symbol("nnz")  # a size the engine could not name (a NonZero count)
    assert merge_with_anchor(ctx, (nnz,), (5,), strict=False, where="y") == (5,)
    assert ctx.constraints() == [("5", expr.to_onnx(nnz))]
    assert not ctx.diagnostics


@pytest.mark.parametrize(
    ("inferred", "why"),
    [
        ("N", "a declared input size"),
        ("min(3,L)", "x[:, -3:]: L where L < 3"),
        ("broadcast(d,e)", "7 when d = e = 7"),
    ],
)
def test_an_int_anchor_an_expression_of_declared_names_may_differ_from_conflicts(
    inferred, why
):
    # onnxruntime does not check declared output shapes: a run where they differ
    # succeeds, and the declared int would be a wrong dim there.
    ctx = ShapesContext()
    conflicts: list[str] = []
    dims = (d(inferred), 4)
    merged = merge_with_anchor(ctx, dims, (5, 4), strict=False, where="y", conflicts=conflicts)
    assert merged == dims, why
    assert ctx.constraints_size() == 0
    assert conflicts and "declared 5 but inferred" in conflicts[0]
    assert [g.severity for g in ctx.diagnostics] == ["warning"]
    with pytest.raises(ShapeInferenceError):
        merge_with_anchor(ShapesContext(), dims, (5, 4), strict=True, where="y")


def test_an_int_anchor_provably_equal_to_the_expression_records_it():
    ctx = ShapesContext()
    ctx.scope.set_range("L", lower=3)
    assert merge_with_anchor(ctx, (d("min(3,L)"),), (3,), strict=False, where="y") == (3,)
    assert not ctx.diagnostics


def test_broadcast_never_proves_a_leaf_equal_to_the_anchor():
    # broadcast(d, e) is 64 when the anchor says so, but d (or e) may be 1.
    ctx = ShapesContext()
    inferred = (expr.broadcast(d("d"), ctx.new_symbol("e")),)
    assert merge_with_anchor(ctx, inferred, (64,), strict=False, where="y") == (64,)
    ((lhs, rhs),) = ctx.constraints()
    assert lhs == "64" and rhs.startswith("broadcast(d,")
    for name in ("d", "e"):
        assert not ctx.has_constraint(name, "64")
    # an anchor naming one operand does not make the other equal to it either
    ctx = ShapesContext()
    merge_with_anchor(ctx, inferred, (d("e"),), strict=False, where="y")
    assert not ctx.has_constraint("d", "e")
    # and the algebra folds broadcast(d, 64) to 64 without recording anything
    ctx = ShapesContext()
    assert expr.broadcast(d("d"), 64) == 64
    assert merge_with_anchor(
        ctx, (expr.broadcast(d("d"), 64),), (64,), strict=False, where="y"
    )
    assert ctx.constraints_size() == 0


VALUE_CASES = [
    # elements may be negative: -1 is a valid element (a Reshape target)
    ((d("batch"), -1), (d("batch"), -1), ("batch", -1), []),
    ((d("g"), -1), (d("N"), -1), ("N", -1), [("N", "g")]),
    ((3, -1), (d("k"), None), (3, -1), [("3", "k")]),
]


@pytest.mark.parametrize(("inferred", "declared", "merged", "recorded"), VALUE_CASES)
def test_value_as_shape_merge(inferred, declared, merged, recorded):
    ctx = ShapesContext()
    result = merge_value_with_anchor(ctx, inferred, declared, strict=False, where="v")
    assert result == _dims(*merged)
    assert sorted(ctx.constraints()) == sorted(recorded)


def test_value_as_shape_conflicts():
    ctx = ShapesContext()
    assert merge_value_with_anchor(ctx, (2, -1), (2, 3), strict=False, where="v") == (2, -1)
    assert merge_value_with_anchor(ctx, (2,), (2, 3), strict=False, where="v") == (2,)
    assert [x.severity for x in ctx.diagnostics] == ["warning", "warning"]
    with pytest.raises(ShapeInferenceError, match="length"):
        merge_value_with_anchor(ctx, (2,), (2, 3), strict=True, where="v")


def test_declared_dims_from_ir():
    shape = ir.Shape([3, "N", None, "", "2*dnz", "batch size", -1])
    assert declared_dims(shape) == (
        3,
        d("N"),
        None,
        None,
        2 * d("dnz"),
        expr.sym("batch size"),
        None,
    )
    assert declared_dims(None) is None
