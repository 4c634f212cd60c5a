"""``optimize(symbol_ranges=...)``: sizes fixed in the graph's I/O, ranges in the dims written.

A range of one size fixes the symbol (onnxsim's ``--overwrite-input-shape``, by name);
other ranges reach the written dims and the fusion guard. Outputs are compared in
onnxruntime on sizes within the ranges.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import expr
from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import assert_equivalent, model, ops, proto

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def _dims(value: ir.Value) -> list:
    return [d if isinstance(d, int) else d.value for d in value.shape.dims]


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (["batch", "seq"], [1, "seq"]),
        (["2*batch", "seq"], [2, "seq"]),
        (["batch + seq", 4], [expr.to_onnx(expr.add(expr.sym("seq"), 1)), 4]),
        (["batch size", 4], ["batch size", 4]),  # not the symbol's name: left alone
        (["seq", 4], ["seq", 4]),
    ],
)
def test_a_fixed_size_is_written_into_the_graph_inputs_and_outputs(declared, expected):
    m = model("g (float[a, b] x) => (float[a, b] y) { y = Relu(x) }")
    shape = ir.Shape([d if isinstance(d, int) else ir.SymbolicDim(d) for d in declared])
    m.graph.inputs[0].shape = m.graph.outputs[0].shape = shape
    result = OptimizePass(symbol_ranges={"batch": (1, 1)})(m)
    assert [v.name for v in m.graph.inputs] == ["x"]
    assert _dims(m.graph.inputs[0]) == expected
    assert _dims(m.graph.outputs[0]) == expected
    assert result.modified == (expected != declared)


def test_a_fixed_size_folds_the_shapes_computed_from_it():
    body = """
        g (float[batch, 4] x) => (float[batch, 4] y) {
            s = Shape<start = 0, end = 1>(x)
            n = Cast<to = 1>(s)
            y = Mul(x, n)
        }
    """
    free = model(body)
    OptimizePass()(free)
    fixed = model(body)
    before = proto(fixed)
    OptimizePass(symbol_ranges={"batch": (1, 1)})(fixed)
    assert ops(free) == ["Shape", "Cast", "Mul"]
    assert ops(fixed) == ["Mul"]  # by a constant 1.0 (y stays a value of its own)
    assert_equivalent(before, fixed, [{"batch": 1}])


def test_a_range_on_the_text_of_an_expression_fixes_nothing():
    """``2*seq`` (torch.export's derived dim) is an expression, not a symbol.

    Found on index_ops_bounded_dynamo of the attack2 corpus with ``--symbol-range
    2*seq_len=8:8``: the CLI warned that no input uses ``2*seq_len``, yet ``y``'s dim was
    fixed to 8 while ``seq_len`` stayed free, and the optimized model refused
    ``seq_len = 5`` (``y`` of 10), which the original runs.
    """
    body = """
        g (float[batch, seq] x, float[batch, yseq] y) => (float[batch, seq] z) {
            zero = Constant<value = int64[1] {0}>()
            end = Constant<value = int64[1] {9223372036854775807}>()
            one = Constant<value = int64[1] {1}>()
            two = Constant<value = int64[1] {2}>()
            e = Slice(y, zero, end, one, two)
            z = Add(x, e)
        }
    """
    m = model(body)
    m.graph.inputs[1].shape = ir.Shape(["batch", "2*seq"])  # the text parser refuses it
    before = proto(m)
    OptimizePass(symbol_ranges={"2*seq": (8, 8)})(m)
    assert _dims(m.graph.inputs[1]) == ["batch", "2*seq"]
    bindings = [{"batch": b, "seq": s} for b, s in ((1, 0), (1, 1), (2, 4), (3, 5))]
    assert_equivalent(before, m, bindings)


def test_a_range_shapes_the_dims_written():
    """``x[1:]`` has ``max(seq - 1, 0)`` rows; with ``seq >= 1`` the dim reads ``seq - 1``."""
    body = """
        g (float[seq, 4] x) => (float[?, 4] y) {
            one = Constant<value = int64[1] {1}>()
            end = Constant<value = int64[1] {9223372036854775807}>()
            zero = Constant<value = int64[1] {0}>()
            y = Slice(x, one, end, zero)
        }
    """
    seq_minus_one = expr.sub(expr.sym("seq"), 1)
    ranged, free = model(body), model(body)
    before = proto(ranged)
    OptimizePass(symbol_ranges={"seq": (1, None)})(ranged)
    OptimizePass()(free)
    assert expr.parse_dim(_dims(ranged.graph.outputs[0])[0]) == seq_minus_one
    assert expr.parse_dim(_dims(free.graph.outputs[0])[0]) != seq_minus_one
    assert_equivalent(before, ranged, [{"seq": s} for s in (1, 2, 5)])


def test_a_real_model_with_its_batch_fixed_runs_as_the_original():
    """No more nodes than without the range, and the outputs bit for bit at batch 1."""
    original = onnx.load(str(DATA / "bert_dynamo.onnx"))
    free = onnx_symdims.optimize(original)
    fixed = onnx_symdims.optimize(original, symbol_ranges={"batch": (1, 1)})
    assert [i.name for i in fixed.graph.input] == [i.name for i in original.graph.input]
    assert len(fixed.graph.node) <= len(free.graph.node)
    assert "GatherND" not in {n.op_type for n in fixed.graph.node}
    sizes = [{"batch": 1, "seq_len": s} for s in (1, 2, 7)]
    token_types = {"token_type_ids": lambda z: np.zeros((1, z["seq_len"]), np.int64)}
    assert_equivalent(original, fixed, sizes, given=token_types)


@pytest.mark.parametrize(
    ("bounds", "ranges", "expected"),
    [
        ({"a": (1, None)}, {"a": (None, 8)}, {"a": (1, 8)}),
        ({"a": (2, 9)}, {"a": (1, 16)}, {"a": (2, 9)}),
        ({}, {"b": (0, None)}, {"b": (0, None)}),
        ({"a": (1, None)}, {}, {"a": (1, None)}),
    ],
)
def test_the_guard_gets_the_tighter_of_proven_bounds_and_ranges(bounds, ranges, expected):
    from onnx_symdims.rewrite._pipeline import _tighter

    assert _tighter(bounds, ranges) == expected


#: ``e`` is empty for every ``K`` within 0..2 (a backward slice from 2 to the end), ``k`` is
#: 1 for every ``N``: the then-branch (``TopK(e, k)``) never runs, and onnxruntime's load-time
#: inference refuses it once the written shapes say ``e: [0]`` and ``k`` is the constant 1.
_BRANCH_DECIDED_BY_RANGES = """
    g (float[K] x, float[N] w) => (float[?] y)
        <int64[1] one = {1}, int64[1] two = {2}, int64[1] big = {9223372036854775807},
         int64[1] back = {-1}> {
        e = Slice(x, two, big, back)
        ws = Shape(w)
        z = Sub(ws, ws)
        k = Add(z, one)
        se = Shape(e)
        c = LessOrEqual(k, se)
        zero = Constant<value = int64 {0}>()
        cond = Gather(c, zero)
        y = If(cond) <
            then_branch = then () => (float[?] t) { t, ti = TopK<axis = 0>(e, k) },
            else_branch = else () => (float[?] f) { f = Identity(e) }
        >
    }
"""


def test_an_if_the_ranges_decide_becomes_its_branch():
    """Found by the rewrite fuzz (``--ranges``, seed 851168): the optimized model did not load."""
    m = model(_BRANCH_DECIDED_BY_RANGES)
    before = proto(m)
    result = OptimizePass(symbol_ranges={"K": (0, 2)})(m)
    assert result.fired["DecideIfByRanges"] == 1
    assert "If" not in ops(m)
    assert not [v for v in m.graph.initializers.values() if not v.uses()]
    bindings = [{"K": k, "N": n} for k in (0, 1, 2) for n in (0, 1, 3)]
    assert_equivalent(before, m, bindings)


def test_an_if_the_ranges_do_not_decide_stays():
    m = model(_BRANCH_DECIDED_BY_RANGES)
    before = proto(m)
    result = OptimizePass(symbol_ranges={"K": (0, 5)})(m)
    assert result.fired["DecideIfByRanges"] == 0
    assert "If" in ops(m)
    bindings = [{"K": k, "N": n} for k in (0, 1, 2, 3, 5) for n in (0, 1, 3)]
    assert_equivalent(before, m, bindings)
