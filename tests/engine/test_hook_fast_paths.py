"""The short paths of the common hooks give what their general paths give.

Binary ops and ``MatMul`` unpack their two inputs, ``Concat`` sums int lengths itself,
``Reshape`` keeps its dims with :meth:`ShapesContext.shape_under_facts`, ``Transpose``
picks dims with a getter kept per ``perm``: each is checked here against the answer
(or the failure) of the path it shortcuts.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.shapes import NodeContext, ShapesContext
from tests.engine._engine_testing import dims, errors, infer


def test_binary_op_with_a_missing_or_an_extra_input():
    m, result = infer(
        """
        g (float[N, 4] x) => (y) {
            y = Add(x)
        }
        """
    )
    assert errors(result) == ["required input 1 is missing"]
    m, result = infer(
        """
        g (float[N, 4] x, float[4] b, float[4] c) => (y) {
            y = Add(x, b, c)
        }
        """
    )
    assert dims(m, "y") == ["N", 4]  # the extra input is not read, as before


def test_matmul_with_a_missing_input_fails_the_node():
    _, result = infer(
        """
        g (float[N, 4] x) => (y) {
            y = MatMul(x)
        }
        """
    )
    assert errors(result) == ["required input 1 is missing"]


def test_concat_of_shape_vectors_sums_their_lengths_and_keeps_the_elements():
    m, result = infer(
        """
        g (float[N, 4] x, float[B, T, 8] z) => (s) {
            a = Shape(x)
            b = Shape(z)
            c = Constant<value = int64[1] {-1}>()
            s = Concat<axis = 0>(a, b, c)
        }
        """
    )
    assert dims(m, "s") == [6]
    assert not errors(result)


def test_concatenated_int_lengths_past_int64_are_what_expr_add_says():
    from onnx_symdims.ops.shape_ops import _concatenated_dim

    big = 2**62
    total = _concatenated_dim([(big,), (big,), (1,)], 3, 0)
    expected = expr.add(expr.add(big, big), 1)
    assert isinstance(total, expr.DimExpr) and total.is_unknown
    assert isinstance(expected, expr.DimExpr) and expected.is_unknown
    assert _concatenated_dim([(big,), (big - 1,)], 2, 0) == 2**63 - 1  # the largest int64
    past = _concatenated_dim([(big,), (big - 1,), (1,)], 3, 0)
    assert isinstance(past, expr.DimExpr) and past.is_unknown
    assert _concatenated_dim([(3,), (4,)], 2, 0) == 7
    n = expr.sym("n")
    assert _concatenated_dim([(3,), (n,), (4,)], 3, 0) == expr.add(expr.add(3, n), 4)
    assert _concatenated_dim([(3,)], 2, 0) is None  # an input of unknown rank


def test_shape_under_facts_is_dims_under_facts_as_a_tuple():
    ctx = ShapesContext()
    n = expr.sym("N")
    calls = []

    def compute(a, b):
        calls.append((a, b))
        return [a, b]

    first = ctx.shape_under_facts(("t",), compute, n, 4)
    assert first == (n, 4) and isinstance(first, tuple)
    assert ctx.shape_under_facts(("t",), compute, n, 5) is first  # kept: not recomputed
    assert calls == [(n, 4)]
    # The same entries as dims_under_facts (as a list there).
    assert ctx.dims_under_facts(("t",), lambda: [0]) == [n, 4]
    assert ctx.shape_under_facts(("l",), compute, 1, 2) == (1, 2)
    assert ctx.dims_under_facts(("l",), lambda: [0]) == [1, 2]
    ctx.dims_under_facts(("d",), lambda: [n, 7])
    assert ctx.shape_under_facts(("d",), compute, 0, 0) == (n, 7)


def test_shape_under_facts_keeps_no_unknown_and_nothing_that_added_a_fact():
    ctx = ShapesContext()
    n = expr.sym("N")
    unknown = expr.unknown("test")
    assert ctx.shape_under_facts(("u",), lambda: [unknown]) == (unknown,)
    assert ctx.shape_under_facts(("u",), lambda: [n]) == (n,)

    def noting():
        ctx.note_ge(n, 2)
        return [n]

    assert ctx.shape_under_facts(("f",), noting) == (n,)
    assert ctx.shape_under_facts(("f",), lambda: [4]) == (4,)


@pytest.mark.parametrize(
    ("perm", "expected"),
    [
        ("<perm = [0, 2, 1]>", ["B", 8, "T"]),
        ("<perm = [2, 0, 1]>", [8, "B", "T"]),
        ("", [8, "T", "B"]),  # default: reversed
    ],
)
def test_transpose_permutes_dims(perm, expected):
    body = f"""
        g (float[B, T, 8] x) => (y) {{
            y = Transpose{perm}(x)
        }}
    """
    for _ in range(2):  # the second run finds the perm's getter kept
        m, result = infer(body)
        assert dims(m, "y") == expected
        assert not errors(result)


def test_transpose_of_a_vector_and_bad_perms():
    m, _ = infer(
        """
        g (float[N] x) => (y) {
            y = Transpose<perm = [0]>(x)
        }
        """
    )
    assert dims(m, "y") == ["N"]
    for _ in range(2):  # a bad perm is never kept: it fails every time
        _, result = infer(
            """
            g (float[B, T, 8] x) => (y) {
                y = Transpose<perm = [0, 0, 1]>(x)
            }
            """
        )
        assert errors(result) == ["perm [0, 0, 1] is not a permutation"]
    _, result = infer(
        """
        g (float[B, T] x) => (y) {
            y = Transpose<perm = [1, 0, 2]>(x)
        }
        """
    )
    assert errors(result) == ["perm [1, 0, 2] has length 3 but the input has rank 2"]


def test_transpose_permutes_a_known_table():
    m, result = infer(
        """
        g (float[N, 4] x) => (y) {
            s = Shape(x)
            c = Concat<axis = 0>(s, s)
            t = Reshape(c, r)
            u = Transpose<perm = [1, 0]>(t)
            f = Reshape(u, m1)
            y = Expand(x, f)
        }
        """.replace(
            "{",
            "<int64[2] r = {2, 2}, int64[1] m1 = {-1}> {",
            1,
        )
    )
    assert not errors(result)
    # [[N, 4], [N, 4]] transposed is [[N, N], [4, 4]]: the elements follow the dims.
    assert dims(m, "y") == ["N", "N", 4, 4]


def test_concat_of_one_vector_twice_counts_it_twice():
    m, result = infer(
        """
        g (float[N, 4] x, float[M, 4] z) => (s, t) {
            a = Shape(x)
            b = Shape(z)
            s = Concat<axis = 0>(a, a, b)
            t = Concat<axis = -1>(a, b)
        }
        """
    )
    assert dims(m, "s") == [6]
    assert dims(m, "t") == [4]
    assert not errors(result)


def test_concat_of_vectors_with_a_bad_rank_or_axis_fails():
    _, result = infer(
        """
        g (float[N, 4] x, float[M, 4] z) => (s) {
            a = Shape(x)
            s = Concat<axis = 0>(a, z)
        }
        """
    )
    assert errors(result) == ["inputs have different ranks [1, 2]"]
    _, result = infer(
        """
        g (float[N, 4] x) => (s) {
            a = Shape(x)
            s = Concat<axis = 1>(a, a)
        }
        """
    )
    assert errors(result) == ["axis 1 is out of range for rank 1"]


def _node_view(outputs: int = 1) -> tuple[NodeContext, ir.Node]:
    x = ir.Value(name="x")
    node = ir.Node("", "Identity", [x], num_outputs=outputs)
    view = NodeContext(ShapesContext())
    view.reset(node, 21)
    return view, node


def test_set_output_past_the_outputs_is_ignored_and_a_checked_tuple_is_stored():
    view, node = _node_view()
    n = expr.sym("N")
    view.set_output(1, (n, 4), ir.DataType.FLOAT)  # no such output: nothing stored
    view.set_output_value(1, (n,))
    assert view.ctx.known_values() == []
    shape = (n, 4)
    for _ in range(2):  # the second one is found checked
        view.set_output(0, shape, ir.DataType.FLOAT)
        assert view.ctx.peek_shape(node.outputs[0]) is shape
        assert view.ctx.peek_dtype(node.outputs[0]) is ir.DataType.FLOAT
    view.set_output(0, (n, 4))  # no dtype: the one known stays
    assert view.ctx.peek_dtype(node.outputs[0]) is ir.DataType.FLOAT
    view.set_output(0, [n, None])  # an unknown dim becomes a fresh symbol
    (first, fresh) = view.ctx.peek_shape(node.outputs[0])
    assert first is n and view.ctx.is_generated(fresh.name)
    with pytest.raises(Exception, match="negative dim -2"):
        view.set_output(0, (n, -2))


def test_set_output_value_reuses_checked_int64_elements_only_for_int64():
    view, node = _node_view()
    out = node.outputs[0]
    n = expr.sym("N")
    elements = (n, 4)
    view.set_output(0, (2,), ir.DataType.INT64)
    for _ in range(2):
        view.set_output_value(0, elements)
        assert view.ctx.value_of(out) is elements
    # int8 elements are checked against their range whatever int64 saw: N is unknown.
    view.set_output(0, (2,), ir.DataType.INT8)
    view.set_output_value(0, elements)
    stored = view.ctx.value_of(out)
    assert stored[1] == 4 and stored[0].is_unknown
    view.set_output_value(0, None)
    assert view.ctx.value_of(out) is None


def test_dtype_of_reads_a_values_declared_type_or_its_constant_once():
    ctx = ShapesContext()
    typed = ir.Value(name="t", type=ir.TensorType(ir.DataType.FLOAT16))
    constant = ir.Value(name="c", const_value=ir.tensor([1, 2], dtype=ir.DataType.INT32))
    bare = ir.Value(name="b")
    assert ctx.dtype_of(typed) is ir.DataType.FLOAT16
    assert ctx.dtype_of(constant) is ir.DataType.INT32
    assert ctx.dtype_of(bare) is None
    typed.type = ir.TensorType(ir.DataType.DOUBLE)
    assert ctx.dtype_of(typed) is ir.DataType.FLOAT16  # read once, kept
    ctx.forget(typed)
    assert ctx.dtype_of(typed) is ir.DataType.DOUBLE
    ctx.set_dtype(bare, ir.DataType.INT64)
    assert ctx.dtype_of(bare) is ir.DataType.INT64  # the inferred one wins
    assert ctx.dtype_of("b") is ir.DataType.INT64  # by name, from the tables
    assert ctx.dtype_of("nowhere") is None


@pytest.mark.parametrize(("op", "rank"), [("Gather", 2), ("Reshape", 2)])
def test_two_input_ops_with_a_missing_or_an_extra_input(op, rank):
    _, result = infer(
        f"""
        g (float[N, 4] x) => (y) {{
            y = {op}(x)
        }}
        """
    )
    assert errors(result) == ["required input 1 is missing"]
    m, result = infer(
        f"""
        g (float[N, 4] x, int64[2] i) => (y) {{
            y = {op}(x, i, i)
        }}
        """
    )
    assert not errors(result)  # the extra input is not read, as before
    assert len(dims(m, "y")) == rank
