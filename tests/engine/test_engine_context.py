"""ShapesContext: symbol minting, constraint stores, diagnostics, side tables."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext, sanitize_symbol_name

N, M, X, Y, Z = (expr.sym(n) for n in ("N", "M", "x", "y", "z"))


# ----------------------------------------------------------------------------------------
# Symbols
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("hint", "name"),
    [
        ("NonZero_nz_nnz", "NonZero_nz_nnz"),
        ("/model/layers.0/Reshape_3", "model_layers_0_Reshape_3"),
        ("a--b", "a_b"),
        ("2d", "d2d"),
        ("", "d"),
        ("???", "d"),
        ("input:0_dim_0", "input_0_dim_0"),
    ],
)
def test_sanitize_symbol_name(hint, name):
    assert sanitize_symbol_name(hint) == name


def test_new_symbol_is_deterministic_and_unique():
    names = [ShapesContext().new_symbol("Reshape_o0_d0").name for _ in range(2)]
    assert names[0] == names[1] == "Reshape_o0_d0"  # same calls, same names
    ctx = ShapesContext()
    minted = [ctx.new_symbol("d").name for _ in range(4)]
    assert minted == ["d", "d_1", "d_2", "d_3"]
    assert ctx.generated_symbols == frozenset(minted)
    assert ctx.is_generated("d_2")
    assert not ctx.is_generated("N")


def test_new_symbol_avoids_model_names_and_function_words():
    ctx = ShapesContext()
    ctx.reserve_names(["x", "x_1", "batch size"])
    assert ctx.new_symbol("x").name == "x_2"
    assert ctx.new_symbol("max").name == "max_1"  # "max(...)" would re-parse as a call
    assert ctx.new_symbol("floor").name == "floor_1"
    # A minted name then parses back to the same symbol.
    s = ctx.new_symbol("batch size")
    assert expr.parse_dim(expr.to_onnx(s)) is s


# ----------------------------------------------------------------------------------------
# Equalities
# ----------------------------------------------------------------------------------------
def test_add_constraint_is_canonical_and_deduplicated():
    ctx = ShapesContext()
    assert ctx.add_constraint("b", "a")
    assert not ctx.add_constraint("a", "b")  # same unordered pair
    assert not ctx.add_constraint("a", "a")  # trivial
    assert not ctx.add_constraint("", "a")  # empty operand
    assert ctx.constraints() == [("a", "b")]
    assert ctx.constraints_size() == 1
    assert ctx.has_constraint("b", "a")
    assert ctx.has_constraint("a", "a")
    assert not ctx.has_constraint("a", "c")


def test_add_constraint_accepts_dims_and_text_interchangeably():
    ctx = ShapesContext()
    assert ctx.add_constraint(N + 1, "M")
    assert not ctx.add_constraint("M", "N+1")
    assert ctx.has_constraint("N+1", M)
    assert ctx.constraint_dims() == [(M, N + 1)]


def test_byte_order_puts_uppercase_first():
    ctx = ShapesContext()
    ctx.add_constraint("nnz", "N")
    assert ctx.constraints() == [("N", "nnz")]  # b"N" < b"n"


def test_unknown_dims_are_never_constrained():
    ctx = ShapesContext()
    unknown = expr.unknown("overflow")
    assert not ctx.add_constraint(unknown, N)
    assert not ctx.add_less_equal_constraint(unknown, N)
    assert ctx.constraints_size() == 0


@pytest.mark.parametrize(
    ("a", "b", "leaf"),
    [
        (2 * expr.sym("dnz"), 2 * expr.sym("nnz"), ("dnz", "nnz")),
        (X + Z, Y + Z, ("x", "y")),
        (3 * X + N, 3 * Y + N, ("x", "y")),
    ],
)
def test_leaf_derivation_when_exact(a, b, leaf):
    ctx = ShapesContext()
    assert ctx.add_symbolic_constraint_with_leaf_derivation(a, b)
    assert ctx.has_constraint(*leaf)
    assert ctx.has_constraint(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (X + 1, Y),  # x = 1, y = 2
        (2 * X, 2 * Y + 2),  # a constant is left over
        (X // 2, Y // 2),  # x = 2, y = 3
        (2 * (X // 2), 2 * (Y // 2)),
        (X, 2 * Y),  # different coefficients
        (X * N, Y * N),  # N may be 0
        (expr.dmax(X, 1), expr.dmax(Y, 1)),  # x = 0, y = 1
        (X % 4, Y % 4),
    ],
)
def test_leaf_derivation_never_unsound(a, b):
    ctx = ShapesContext()
    ctx.add_symbolic_constraint_with_leaf_derivation(a, b)
    assert ctx.has_constraint(a, b)
    assert not ctx.has_constraint("x", "y")
    assert ctx.constraints_size() == 1


# ----------------------------------------------------------------------------------------
# Upper bounds
# ----------------------------------------------------------------------------------------
def test_less_equal_constraints_are_ordered():
    ctx = ShapesContext()
    nnz = expr.sym("nnz")
    assert ctx.add_less_equal_constraint(nnz, N * M)
    assert not ctx.add_less_equal_constraint("nnz", "M*N")  # same text
    assert not ctx.add_less_equal_constraint(nnz, nnz)
    assert not ctx.add_less_equal_constraint("", "N")
    assert ctx.has_less_equal_constraint("nnz", N * M)
    assert not ctx.has_less_equal_constraint(N * M, "nnz")
    assert ctx.less_equal_constraints() == [("nnz", "M*N")]
    assert ctx.less_equal_constraints_size() == 1


def test_bound_on_a_symbol_reaches_the_scope():
    ctx = ShapesContext()
    nnz = expr.sym("nnz")
    ctx.add_less_equal_constraint(nnz, 12)
    assert ctx.scope.prove_le(nnz, 12)
    assert ctx.scope.prove_ge(20, nnz)
    assert not ShapesContext().scope.prove_le(nnz, 12)


def test_clear_empties_both_stores():
    ctx = ShapesContext()
    ctx.add_constraint("a", "b")
    ctx.add_less_equal_constraint("a", "c")
    ctx.clear()
    assert ctx.constraints_size() == 0
    assert ctx.less_equal_constraints_size() == 0


# ----------------------------------------------------------------------------------------
# Diagnostics
# ----------------------------------------------------------------------------------------
def test_diagnostics_are_recorded_and_raise_in_strict_mode():
    node = ir.node("Relu", [], name="my_relu", num_outputs=1)
    ctx = ShapesContext()
    ctx.add_diagnostic(node, "error", "bad")
    assert ctx.diagnostics[0].node_name == "my_relu"
    assert "my_relu" in str(ctx.diagnostics[0])
    ctx.strict = True
    ctx.add_diagnostic(node, "warning", "only a warning")  # warnings never raise
    with pytest.raises(ShapeInferenceError, match="my_relu"):
        ctx.add_diagnostic(node, "error", "bad again")


# ----------------------------------------------------------------------------------------
# Side tables
# ----------------------------------------------------------------------------------------
def _initializer(name: str, array: np.ndarray) -> ir.Value:
    return ir.Value(name=name, const_value=ir.tensor(array, name=name))


def test_small_integer_constants_are_read_lazily_by_value_and_name():
    ctx = ShapesContext()
    v = _initializer("target", np.array([[2, -1]], dtype=np.int64))
    assert ctx.shape_of(v) == (1, 2)
    assert ctx.value_of(v) == (2, -1)
    assert ctx.value_as_shape("target") == (2, -1)  # name index
    assert ctx.value_of(_initializer("f", np.ones(3, dtype=np.float32))) is None


def test_large_or_unreadable_tensors_are_never_loaded(tmp_path):
    ctx = ShapesContext()
    missing = str(tmp_path / "nowhere.bin")
    big = ir.ExternalTensor(
        missing, 0, 8 * 4096, ir.DataType.INT64, shape=ir.Shape([4096]), name="big"
    )
    small = ir.ExternalTensor(
        missing, 0, 16, ir.DataType.INT64, shape=ir.Shape([2]), name="small"
    )
    big_value = ir.Value(name="big", const_value=big)
    small_value = ir.Value(name="small", const_value=small)
    assert ctx.shape_of(big_value) == (4096,)
    assert ctx.value_of(big_value) is None  # never read: too large
    assert ctx.value_of(small_value) is None  # the read fails: unknown, no crash


def test_declared_shapes_are_read_once_with_fresh_symbols_for_empty_dims():
    ctx = ShapesContext()
    v = ir.Value(name="x", shape=ir.Shape(["batch size", None, 3, "N + 1", -1]))
    shape = ctx.shape_of(v)
    # Not an expression: one symbol with a name the grammar reads back (not minted).
    assert shape[0] is expr.sym("batch_size")
    assert not ctx.is_generated("batch_size")
    assert ctx.opaque_dim_names == {"batch size": "batch_size"}
    assert ctx.is_generated(shape[1].name)
    assert shape[2] == 3
    assert shape[3] is N + 1
    assert ctx.is_generated(shape[4].name)  # dim_value -1 is not a size
    assert ctx.shape_of(v) is shape  # cached
    assert ctx.shape_of(ir.Value(name="no_shape")) is None


# ----------------------------------------------------------------------------------------
# Dims computed once per state of the facts
# ----------------------------------------------------------------------------------------
def test_dims_under_facts_are_reused_until_a_fact_is_added():
    ctx = ShapesContext()
    calls = []

    def compute():
        calls.append(1)
        return [N, 4]

    assert ctx.dims_under_facts(("reused",), compute) == [N, 4]
    assert ctx.dims_under_facts(("reused",), compute) == [N, 4]
    assert len(calls) == 1
    ctx.note_ge(X, 2)  # a new fact: what was computed before may not hold as it is
    assert ctx.dims_under_facts(("reused",), compute) == [N, 4]
    assert len(calls) == 2


def test_dims_under_facts_that_add_a_fact_or_an_unknown_are_not_kept():
    ctx = ShapesContext()
    calls = []

    def noting():
        calls.append(1)
        ctx.note_ge(Y, len(calls))  # a fact each time: the second call adds another
        return [Y]

    ctx.dims_under_facts(("noting",), noting)
    ctx.dims_under_facts(("noting",), noting)
    assert len(calls) == 2
    unknown = expr.unknown("value")
    assert ctx.dims_under_facts(("u",), lambda: [unknown])[0] is unknown
    assert ctx.dims_under_facts(("u",), lambda: [M]) == [M]


def test_dims_under_facts_inside_a_subgraph_are_kept_apart():
    ctx = ShapesContext()
    # Keys of this test only: contexts holding the same facts share what they computed.
    assert ctx.dims_under_facts(("apart",), lambda: [N]) == [N]
    ctx.conditional_depth = 1
    assert ctx.dims_under_facts(("apart",), lambda: [M]) == [M]
    ctx.conditional_depth = 0
    assert ctx.dims_under_facts(("apart",), lambda: [Z]) == [N]


def test_dims_under_facts_are_shared_by_contexts_holding_the_same_facts():
    # The next inference of a model adds the same facts in the same order: it finds
    # what the previous one computed. Another fact on the way: computed again.
    first, second, other = ShapesContext(), ShapesContext(), ShapesContext()
    for ctx in (first, second):
        ctx.note_ge(X, 3)
    other.note_ge(X, 4)
    assert first.dims_under_facts(("shared",), lambda: [N]) == [N]
    assert second.dims_under_facts(("shared",), lambda: [M]) == [N]
    assert other.dims_under_facts(("shared",), lambda: [M]) == [M]
    assert first.refine_dims((X,)) is second.refine_dims((X,))
