"""The cheaper paths of loop transactions and of a context's lazily made tables do what the long way did."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.shapes import FactScope, ShapesContext


def _values(n: int) -> list[ir.Value]:
    return [ir.Value(name=f"v{i}") for i in range(n)]


def _filled(values: list[ir.Value]) -> ShapesContext:
    ctx = ShapesContext()
    for i, value in enumerate(values):
        ctx.set_shape(value, (i,))
        ctx.set_dtype(value, ir.DataType.FLOAT)
        ctx.set_value(value, (i,))
    ctx.set_non_tensor_type(values[0], ir.SequenceType(ir.TensorType(ir.DataType.FLOAT)))
    return ctx


def test_forget_many_forgets_as_forget_of_each():
    values = _values(5)
    one_by_one, at_once = _filled(values), _filled(values)
    for value in values[:3]:
        one_by_one.forget(value)
    before = at_once.mutations
    at_once.forget_many(values[:3])
    assert at_once.mutations == before + 1  # moved (only "moved" is compared)
    for value in values:
        assert one_by_one.facts_of(value) == at_once.facts_of(value)
        assert one_by_one.non_tensor_type_of(value) == at_once.non_tensor_type_of(value)
    at_once.forget_many([])
    assert at_once.mutations == before + 1  # nothing forgotten: no move


def test_roll_back_to_drops_what_was_recorded_since_the_marks():
    ctx = ShapesContext()
    marks = ctx.marks()  # both constraint stores not made yet
    ctx.add_constraint("a", "b")
    ctx.add_less_equal_constraint("c", "d")
    ctx.add_diagnostic(None, "warning", "first")
    kept = ctx.marks()
    ctx.add_constraint("e", "f")
    ctx.add_less_equal_constraint("g", "h")
    ctx.add_diagnostic(None, "warning", "second")
    ctx.roll_back_to(kept)
    assert ctx.constraints() == [("a", "b")]
    assert ctx.less_equal_constraints() == [("c", "d")]
    assert [d.message for d in ctx.diagnostics] == ["first"]
    ctx.roll_back_to(marks)
    assert ctx.constraints() == ctx.less_equal_constraints() == ctx.diagnostics == []


def test_lazily_made_tables_are_never_shared_between_contexts():
    value = ir.Value(name="x")
    used = ShapesContext()
    used.add_constraint("a", "b")
    used.add_less_equal_constraint("c", "d")
    used.note_filled(value, [0])
    used.set_non_tensor_type(value, ir.SequenceType(ir.TensorType(ir.DataType.FLOAT)))
    used.reserve_names(["N"])
    assert used.new_symbol("N").name == "N_1"
    used.enter_subgraph()
    inner = used.new_symbol("s")
    assert used.add_less_equal_constraint(inner, "c")  # minted here: recorded
    used.exit_subgraph()
    assert used.read_dim_text("batch size").name == "batch_size"
    used.set_shape(value, (1,))
    assert used.shape_of("x") == (1,)  # the name index
    fresh = ShapesContext()
    assert fresh.constraints() == fresh.less_equal_constraints() == []
    assert fresh.filled_axes(value) == frozenset()
    assert fresh.non_tensor_type_of(value) is None
    assert fresh.generated_symbols == frozenset()
    assert fresh.new_symbol("N").name == "N"
    assert fresh.opaque_dim_names == {}
    assert fresh.shape_of("x") is None
    fresh.clear()
    used.clear()
    assert used.constraints() == []
    assert used.add_constraint("a", "b")  # a store emptied by clear takes entries again


def test_opaque_texts_are_named_per_context_and_parsed_texts_are_shared():
    taken = ShapesContext()
    taken.reserve_names(["batch_size"])
    free = ShapesContext()
    assert taken.read_dim_text("batch size").name == "batch_size_1"
    assert free.read_dim_text("batch size").name == "batch_size"
    assert taken.read_dim_text("2*N + 1") is free.read_dim_text("2*N + 1")
    assert taken.read_dim_text("2*N + 1") is expr.parse_dim("2*N + 1")


def test_fact_scopes_do_not_share_their_facts():
    n = expr.sym("n")
    d = expr.sub(n, expr.sym("m"))  # neither sign provable: a nonzero fact
    one, other = FactScope(), FactScope()
    assert one.assume_nonzero(d)
    assert one.assume_divides(expr.sym("k"), n)
    assert one.has_facts() and not other.has_facts()
    assert one.known_divides(expr.sym("k"), n) and not other.known_divides(expr.sym("k"), n)
    copied = one.copy()
    assert copied.known_nonzero(d)


def test_writing_to_an_unmade_table_fails_loudly():
    from onnx_symdims.shapes._context import _NO_ENTRIES

    with pytest.raises(TypeError):
        _NO_ENTRIES["x"] = 1
    with pytest.raises(TypeError):
        _NO_ENTRIES.setdefault("x", 1)
    assert not _NO_ENTRIES
