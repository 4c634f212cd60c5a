"""Inference, then the anchor pass, on the seed's examples; onnxruntime is the oracle.

Each case is inferred, copied, and the copy is rewritten by the pass. Both models are
checked against onnxruntime runs on random inputs consistent with the anchors: every dim
written on either model must evaluate to the runtime size, so renaming never changes a
dim's value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from onnx_symdims import ShapeInferenceError, expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.passes._anchors import AnchorConstraintPropagationPass
from tests.constraints._util import (
    all_values,
    build,
    check_against_runtime,
    copy_model,
    dims_text,
    make_feeds,
    runtime_shapes,
    shapes_text,
)

d = expr.parse_dim


def model_symbols(model) -> set[str]:
    names: set[str] = set()
    for value in all_values(model).values():
        for dim in dims_text(value) or []:
            if isinstance(dim, str):
                parsed = d(dim)
                if isinstance(parsed, expr.DimExpr):
                    names |= parsed.symbols()
    return names


def model_texts(model) -> set[str]:
    return {
        dim
        for value in all_values(model).values()
        for dim in dims_text(value) or []
        if isinstance(dim, str)
    }


@dataclasses.dataclass
class Case:
    id: str
    text: str
    draw: Callable[[np.random.Generator], dict[str, int]]
    check: Callable  # (model_after, ctx, result) -> None
    shapes: dict | None = None
    data: Callable | None = None  # (rng, bindings) -> {input: array}


def _ranges(sums: dict[str, tuple[str, str]] | None = None, **ranges):
    """Draws each symbol in its range; ``sums`` adds ``name = a + b`` (anchor-consistent)."""

    def draw(rng):
        bindings = {k: int(rng.integers(lo, hi + 1)) for k, (lo, hi) in ranges.items()}
        for name, (a, b) in (sums or {}).items():
            bindings[name] = bindings[a] + bindings[b]
        return bindings

    return draw


# ------------------------------------------------------------------------------------------
NONZERO_TRANSPOSE = """
g (float[A, B, C, D] X) => (int64[N, 4] Y) {
  nz = NonZero(X)
  Y = Transpose(nz)
}"""


def check_nonzero_transpose(model, ctx, result):
    assert dims_text(all_values(model)["nz"]) == [4, "N"]
    assert list(result.renames.values()) == ["N"]
    (generated,) = result.renames
    assert ctx.is_generated(generated)
    assert generated not in model_symbols(model)
    assert ctx.has_less_equal_constraint("N", d("A*B*C*D"))
    assert ctx.scope.prove_ge(d("A*B*C*D"), d("N"))


NONZERO_RESHAPE = """
g (float[A, B] X) => (int64[ZZ] Z) {
  nz = NonZero(X)
  m = Constant <value_ints = [-1]> ()
  Z = Reshape(nz, m)
}"""


def check_nonzero_reshape(model, ctx, result):
    assert dims_text(all_values(model)["nz"]) == [2, "dnz"]
    assert dims_text(model.graph.outputs[0]) == ["2*dnz"]
    assert "dnz" in result.renames.values()


ATTENTION = """
g (float[batch, 8, seq, 64] q, float[batch, 8, seq, 64] k, float[batch, 8, past_seq, 64] past_key,
   float[batch, 1, 1, total_seq] mask)
  => (float[batch, 8, total_seq, 64] present_key, float[batch, 8, seq, 64] out) {
  present_key = Concat <axis = 2> (past_key, k)
  kt = Transpose <perm = [0, 1, 3, 2]> (present_key)
  s = MatMul(q, kt)
  masked = Add(s, mask)
  p = Softmax <axis = -1> (masked)
  out = MatMul(p, present_key)
}"""


def check_attention_input(model, ctx, result):
    values = all_values(model)
    assert dims_text(values["kt"]) == ["batch", 8, 64, "total_seq"]
    assert dims_text(values["s"]) == ["batch", 8, "seq", "total_seq"]
    assert dims_text(values["masked"]) == ["batch", 8, "seq", "total_seq"]
    assert not any("past_seq+seq" in t or "broadcast" in t for t in model_texts(model))
    assert result.renames["past_seq+seq"] == "total_seq"


ATTENTION_LABEL = """
g (float[batch, 8, seq, 64] q, float[batch, 8, seq, 64] k, float[batch, 8, past_seq, 64] past_key)
  => (float[batch, 8, total_seq, 64] present_key, float[batch, 8, seq, 64] out) {
  present_key = Concat <axis = 2> (past_key, k)
  kt = Transpose <perm = [0, 1, 3, 2]> (present_key)
  s = MatMul(q, kt)
  p = Softmax <axis = -1> (s)
  out = MatMul(p, present_key)
}"""


def check_attention_label(model, ctx, result):
    assert dims_text(all_values(model)["s"]) == ["batch", 8, "seq", "past_seq+seq"]
    assert dims_text(model.graph.outputs[0]) == ["batch", 8, "total_seq", 64]
    assert ctx.has_constraint("past_seq+seq", "total_seq")
    assert "past_seq+seq" not in result.renames


B_PLUS_C = """
g (float[b] X, float[c] Y, float[e] E) => (float[e] Z, float[f] F) {
  W = Concat <axis = 0> (X, Y)
  Z = Add(W, E)
  V = Concat <axis = 0> (Y, X)
  F = Relu(V)
}"""


def check_b_plus_c(model, ctx, result):
    values = all_values(model)
    # Z: [e] over broadcast(b+c, e): b+c may be 1, so W keeps b+c
    assert dims_text(values["W"]) == ["b+c"]
    # f is an output-only label: the computed expression stays
    assert dims_text(values["V"]) == ["b+c"]
    assert not result.modified


B_PLUS_C_INPUT = """
g (float[b] X, float[c] Y, float[e] E) => (float[e] Z, float[e] F) {
  W = Concat <axis = 0> (X, Y)
  Z = Add(W, E)
  F = Relu(W)
}"""


def check_b_plus_c_input(model, ctx, result):
    # F: [e] proves b+c == e, and e is a graph-input symbol: b+c becomes e
    assert dims_text(all_values(model)["W"]) == ["e"]


DYN = """
g (float[A, B] X) => (int64[DYN0, 2] Y) {
  nz = NonZero(X)
  Y = Transpose(nz)
}"""


def check_dyn(model, ctx, result):
    (nnz,) = [s for s in model_symbols(model) if ctx.is_generated(s)]
    assert dims_text(all_values(model)["nz"]) == [2, nnz]
    assert not result.modified


DYN_AND_NAME = """
g (float[A, B] X) => (int64[DYN0, 2] Y, int64[batch, 2] Y2) {
  nz = NonZero(X)
  Y = Transpose(nz)
  Y2 = Transpose(nz)
}"""


def check_dyn_and_name(model, ctx, result):
    assert dims_text(all_values(model)["nz"]) == [2, "batch"]
    assert dims_text(model.graph.outputs[0]) == ["DYN0", 2]
    assert "DYN0 == batch" in result.implied_equalities


LOOKS_GENERATED = """
g (float[s0, _d0] X) => (int64[NonZero_nz_nnz, 2] Y) {
  nz = NonZero(X)
  Y = Transpose(nz)
}"""


def check_looks_generated(model, ctx, result):
    assert dims_text(model.graph.inputs[0]) == ["s0", "_d0"]
    assert dims_text(all_values(model)["nz"]) == [2, "NonZero_nz_nnz"]
    assert not ctx.is_generated("NonZero_nz_nnz")
    assert all(ctx.is_generated(key) for key in result.renames)


X_PLUS_1 = """
g (float[A, B] X) => (int64[y, 2] C) {
  nz = NonZero(X)
  t = Transpose(nz)
  one = Constant <value = int64[1, 2] {7, 7}> ()
  C = Concat <axis = 0> (t, one)
}"""


def check_x_plus_1(model, ctx, result):
    # x + 1 == y gives x == y - 1, never x == y
    assert dims_text(all_values(model)["t"]) == ["y-1", 2]


TWO_X = """
g (float[A, B] X) => (int64[YY, 2] C) {
  nz = NonZero(X)
  t = Transpose(nz)
  C = Concat <axis = 0> (t, t)
}"""


def check_two_x(model, ctx, result):
    # 2*x == 2*y + 2 does not give x == y: t keeps the engine's symbol
    (dim, _) = dims_text(all_values(model)["t"])
    assert ctx.is_generated(dim)
    assert not ctx.has_constraint(dim, "y")


IF_LOOP = """
g (bool cond, float[A, B] X, int64 trip) => (int64[N, 2] Y, int64[N, 2] Z, int64[3] W) {
  nz = NonZero(X)
  Y = Transpose(nz)
  Z = If(cond) <
    then_branch = t () => (int64[N, 2] t_out) { t_out = Transpose(nz) },
    else_branch = e () => (int64[N, 2] e_out) {
      e_t = Transpose(nz)
      e_out = Neg(e_t)
    }
  >
  W = Loop(trip, cond, W0) <
    body = b (int64 i, bool c_in, int64[3] acc) => (bool c_out, int64[3] acc_out) {
      c_out = Identity(c_in)
      inner = Transpose(nz)
      n = Shape <start = 0, end = 1> (inner)
      acc_out = Add(acc, n)
    }
  >
  W0 = Constant <value = int64[3] {0, 0, 0}> ()
}"""


def check_if_loop(model, ctx, result):
    values = all_values(model)
    generated_on_model = {s for s in model_symbols(model) if ctx.is_generated(s)}
    assert not generated_on_model & set(result.renames)
    assert dims_text(values["nz"]) == [2, "N"]
    assert dims_text(values["e_t"]) == ["N", 2]
    assert dims_text(values["inner"]) == ["N", 2]


def _if_loop_data(rng, bindings):
    return {"trip": np.array(2, dtype=np.int64), "cond": np.array(True)}


CASES = [
    Case("nonzero-transpose", NONZERO_TRANSPOSE, _ranges(A=(0, 3), B=(1, 3), C=(1, 2), D=(1, 3)), check_nonzero_transpose),
    Case("nonzero-reshape", NONZERO_RESHAPE, _ranges(A=(0, 4), B=(1, 4)), check_nonzero_reshape, {"Z": ["2*dnz"]}),
    Case(
        "attention-total_seq-input",
        ATTENTION,
        _ranges({"total_seq": ("past_seq", "seq")}, batch=(1, 2), seq=(1, 3), past_seq=(0, 3)),
        check_attention_input,
    ),
    Case("attention-total_seq-label", ATTENTION_LABEL, _ranges(batch=(1, 2), seq=(1, 3), past_seq=(0, 3)), check_attention_label),
    Case(
        "b+c-kept",
        B_PLUS_C,
        _ranges({"e": ("b", "c")}, b=(0, 3), c=(0, 3)),
        check_b_plus_c,
    ),
    Case(
        "b+c-input-symbol",
        B_PLUS_C_INPUT,
        _ranges({"e": ("b", "c")}, b=(0, 3), c=(0, 3)),
        check_b_plus_c_input,
    ),
    Case("DYN0-never-a-target", DYN, _ranges(A=(0, 3), B=(1, 3)), check_dyn),
    Case("DYN0-filtered", DYN_AND_NAME, _ranges(A=(0, 3), B=(1, 3)), check_dyn_and_name),
    Case("user-name-looks-generated", LOOKS_GENERATED, _ranges(s0=(0, 3), _d0=(1, 3)), check_looks_generated),
    Case("x+1==y", X_PLUS_1, _ranges(A=(0, 3), B=(1, 3)), check_x_plus_1),
    Case("2x==2y+2", TWO_X, _ranges(A=(0, 3), B=(1, 3)), check_two_x, {"C": ["2*y+2", 2]}),
    Case("if-loop-bodies", IF_LOOP, _ranges(A=(0, 3), B=(1, 3)), check_if_loop, None, _if_loop_data),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_seed_examples_against_onnxruntime(case: Case):
    model = build(case.text, case.shapes)
    inferred = SymbolicShapeInferencePass()(model)
    before = copy_model(model)
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    case.check(model, inferred.context, result)
    rng = np.random.default_rng(0)
    for _ in range(4):
        bindings = case.draw(rng)
        data = case.data(rng, bindings) if case.data else None
        feeds = make_feeds(before, bindings, rng, data)
        actual = runtime_shapes(before, feeds)
        check_against_runtime(before, actual)
        check_against_runtime(model, actual)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rederive_mode_agrees_with_context_mode(case: Case):
    # Without a context, equalities are re-derived from the shapes on the inferred model.
    model = build(case.text, case.shapes)
    SymbolicShapeInferencePass()(model)
    with_context = build(case.text, case.shapes)
    inferred_ctx = SymbolicShapeInferencePass()(with_context).context
    AnchorConstraintPropagationPass(inferred_ctx)(with_context)
    AnchorConstraintPropagationPass()(model)
    assert shapes_text(model) == shapes_text(with_context)
    rng = np.random.default_rng(1)
    bindings = case.draw(rng)
    data = case.data(rng, bindings) if case.data else None
    actual = runtime_shapes(model, make_feeds(model, bindings, rng, data))
    check_against_runtime(model, actual)


def test_pass_is_idempotent():
    model = build(ATTENTION)
    inferred = SymbolicShapeInferencePass()(model)
    assert AnchorConstraintPropagationPass(inferred.context)(model).modified
    assert not AnchorConstraintPropagationPass(inferred.context)(model).modified


# TorchScript names output dims itself and may reuse one name across outputs of different
# sizes (a TopK's dim names on an upsampled tensor): the declared outputs then claim
# a.dim1 == b.dim1, false in every run with L >= 1.
REUSED_LABEL = """
g (float[B, L] x) => (float[B, K] a, float[B, K] b, float[B, K] c, float[B, M] d, float[B, M] e) {
  a = Identity(x)
  b = Concat <axis = 1> (x, x)
  c = Relu(b)
  two = Constant <value_ints = [2]> ()
  three = Constant <value_ints = [3]> ()
  zero = Constant <value_ints = [0]> ()
  one = Constant <value_ints = [1]> ()
  d = Slice(x, zero, two, one)
  e = Slice(x, zero, three, one)
}"""


def test_an_output_label_naming_sizes_that_differ_is_not_used():
    model = build(REUSED_LABEL)
    inferred = SymbolicShapeInferencePass()(model)
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    assert [dims_text(v) for v in model.graph.outputs] == [
        ["B", "L"], ["B", "2*L"], ["B", "2*L"], ["B", "min(2,L)"], ["B", "min(3,L)"]
    ]  # fmt: skip
    warnings = [g.message for g in result.diagnostics if g.severity == "warning"]
    assert any("'K' names sizes that differ: 2*L, L" in w for w in warnings), warnings
    assert any("'M' names sizes that differ" in w for w in warnings), warnings
    assert not any("K" in text or "M" in text for text in model_texts(model))
    rng = np.random.default_rng(0)
    for length in (0, 1, 5):
        bindings = {"B": 2, "L": length}
        actual = runtime_shapes(model, make_feeds(model, bindings, rng))
        check_against_runtime(model, actual, bindings)
    rederived = build(REUSED_LABEL)  # without a context: the same
    SymbolicShapeInferencePass()(rederived)
    AnchorConstraintPropagationPass()(rederived)
    assert shapes_text(rederived) == shapes_text(model)
    with pytest.raises(ShapeInferenceError, match="names sizes that differ"):
        strict = build(REUSED_LABEL)
        AnchorConstraintPropagationPass(
            SymbolicShapeInferencePass()(strict).context, strict=True
        )(strict)


def test_an_output_label_naming_one_size_stays():
    text = REUSED_LABEL.replace("b = Concat <axis = 1> (x, x)", "b = Neg(x)")
    model = build(text)
    inferred = SymbolicShapeInferencePass()(model)
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    assert [dims_text(v) for v in model.graph.outputs][:3] == [["B", "K"]] * 3
    assert not any("'K'" in g.message for g in result.diagnostics)


# TorchScript names an output dim it cannot compute after the op and reuses the name:
# ``Uniqueout_dim_0`` on a unique count (data-dependent) and on the batch.
LABEL_ON_A_COUNT = """
g (float[B, L] x) => (float[K] u, float[K, L] y) {
  u = Unique(x)
  y = Relu(x)
}"""


def test_an_output_label_naming_a_count_and_a_size_is_not_used():
    model = build(LABEL_ON_A_COUNT)
    inferred = SymbolicShapeInferencePass()(model)
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    u, y = (dims_text(v) for v in model.graph.outputs)
    assert y == ["B", "L"] and u != ["B"] and u != ["K"], (u, y)
    warnings = [g.message for g in result.diagnostics if g.severity == "warning"]
    assert any("'K' names sizes that differ" in w for w in warnings), warnings
    rng = np.random.default_rng(0)
    for batch, length in ((3, 2), (4, 1), (3, 5)):  # 0/1 inputs: at most 2 unique values
        bindings = {"B": batch, "L": length}
        actual = runtime_shapes(model, make_feeds(model, bindings, rng))
        assert actual["u"][0] < batch  # the declared K == B is false here
        check_against_runtime(model, actual, bindings)


def test_an_output_label_naming_only_a_count_names_it():
    model = build(LABEL_ON_A_COUNT.replace("float[K, L] y", "float[B, L] y"))
    inferred = SymbolicShapeInferencePass()(model)
    AnchorConstraintPropagationPass(inferred.context)(model)
    assert [dims_text(v) for v in model.graph.outputs] == [["K"], ["B", "L"]]


# The same reused label on intermediates (value_info, a declaration no runtime checks) and
# on a composite text: those dims name the differing sizes just as well.
REUSED_LABEL_ON_VALUE_INFO = """
g (float[B, L] x) => (float[B, K] a, float[B, K] b, float[B, K] c) <float[B, K] t1, float[B, K] t2> {
  t1 = Identity(x)
  t2 = Concat <axis = 1> (x, x)
  a = Relu(t1)
  b = Relu(t2)
  c = Concat <axis = 1> (x, x, x)
}"""


@pytest.mark.parametrize("value_info_anchors", [False, True])
def test_an_ambiguous_output_label_leaves_no_value_declaring_it(value_info_anchors):
    model = build(REUSED_LABEL_ON_VALUE_INFO, {"c": ["B", "K+1"]})
    inferred = SymbolicShapeInferencePass(value_info_anchors=value_info_anchors)(model)
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    assert any("'K' names sizes that differ" in g.message for g in result.diagnostics)
    assert not any("K" in text for text in model_texts(model)), shapes_text(model)
    rng = np.random.default_rng(0)
    for length in (0, 1, 3):
        bindings = {"B": 2, "L": length}
        actual = runtime_shapes(model, make_feeds(model, bindings, rng))
        check_against_runtime(model, actual, bindings)


# A subgraph output declares an int where its branch computes min(3, L) (x[:, -3:]):
# onnxruntime runs L < 3 (it only warns about the declared shape), so the int must not
# reach the If's output nor anything computed from it.
IF_BRANCH_INT = """
g (float[B, L] x, bool c) => (float[B, M] z) {
  y = If (c) <
    then_branch = t () => (float[B, 3] ty) {
      s = Constant <value_ints = [-3]> ()
      e = Constant <value_ints = [100]> ()
      one = Constant <value_ints = [1]> ()
      ty = Slice(x, s, e, one)
    },
    else_branch = f () => (float[B, 3] fy) {
      s2 = Constant <value_ints = [-3]> ()
      e2 = Constant <value_ints = [100]> ()
      one2 = Constant <value_ints = [1]> ()
      fy = Slice(x, s2, e2, one2)
    }>
  z = Concat <axis = 1> (y, y)
}"""


def test_an_int_declared_on_a_branch_output_that_may_differ_is_not_taken():
    model = build(IF_BRANCH_INT)
    inferred = SymbolicShapeInferencePass()(model)
    AnchorConstraintPropagationPass(inferred.context)(model)
    values = all_values(model)
    assert 3 not in dims_text(values["y"]) and 3 not in dims_text(values["ty"])
    assert any("not implied" in g.message for g in inferred.context.diagnostics)
    rng = np.random.default_rng(0)
    for length in (0, 1, 2, 5):
        bindings = {"B": 2, "L": length}
        feeds = make_feeds(model, bindings, rng, {"c": np.array(True)})
        check_against_runtime(model, runtime_shapes(model, feeds), bindings)


# An input's size name on an output of another size: `b` is declared [B, L] but holds
# 2*L columns, and a cache output is declared `seq` where it holds past+seq rows. The
# declared shapes then claim L == 2*L and seq == past+seq, true only where L or past
# is 0; onnxruntime runs the others (it does not check declared output shapes).
INPUT_NAME_ELSEWHERE = """
g (float[B, L] x, float[B, past, 4] cache, float[B, seq, 4] new)
  => (float[B, L] a, float[B, L] b, float[B, seq, 4] present, float[B, seq, 4] doubled) {
  a = Identity(x)
  b = Concat <axis = 1> (x, x)
  present = Concat <axis = 1> (cache, new)
  doubled = Add(present, present)
}"""


def test_an_input_size_name_declared_for_another_size_is_not_used():
    model = build(INPUT_NAME_ELSEWHERE)
    inferred = SymbolicShapeInferencePass()(model)
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    assert [dims_text(v) for v in model.graph.outputs] == [
        ["B", "L"], ["B", "2*L"], ["B", "past+seq", 4], ["B", "past+seq", 4]
    ]  # fmt: skip
    # L of 2*L restates the same size otherwise: a conflict at the merge (L = 5 shows it);
    # seq of past+seq relates sizes, found false by the anchor pass (true only at past 0).
    merged = [g.message for g in inferred.context.diagnostics if g.severity == "warning"]
    assert any("declared L but inferred 2*L, which differs at L=5" in w for w in merged), (
        merged
    )
    warnings = [g.message for g in result.diagnostics if g.severity == "warning"]
    assert any("imply past+seq == seq" in w for w in warnings), warnings
    rng = np.random.default_rng(0)
    for sizes in (
        {"B": 2, "L": 3, "past": 2, "seq": 1},
        {"B": 1, "L": 0, "past": 0, "seq": 3},
    ):
        actual = runtime_shapes(model, make_feeds(model, sizes, rng))
        check_against_runtime(model, actual, sizes)
    with pytest.raises(ShapeInferenceError, match="holds only where a size is 0"):
        strict = build(INPUT_NAME_ELSEWHERE)
        AnchorConstraintPropagationPass(
            SymbolicShapeInferencePass()(strict).context, strict=True
        )(strict)


# TorchScript's own names, exactly as its exporter spells them: ``{op}{output}_dim_{axis}``
# of the first output its inference met the size on, reused where it equates sizes.
EXPORTER_NAMES = """
g (float[B, L] x) => (float[Uniqueu_dim_0] u, float[B, Subd_dim_1] d, float[B, Subd_dim_1] y) {
  u = Unique(x)
  one = Constant<value = int64[1] {1}>()
  big = Constant<value = int64[1] {9223372036854775807}>()
  ax = Constant<value = int64[1] {1}>()
  s = Slice(x, one, big, ax)
  zero = Constant<value = int64[1] {0}>()
  m = Constant<value = int64[1] {-1}>()
  t = Slice(x, zero, m, ax)
  d = Sub(s, t)
  y = Concat <axis = 1> (x, x)
}"""


def test_the_exporters_invented_output_names_declare_nothing():
    model = build(EXPORTER_NAMES)
    inferred = SymbolicShapeInferencePass()(model)
    assert inferred.modified
    result = AnchorConstraintPropagationPass(inferred.context)(model)
    u, d, y = (dims_text(v) for v in model.graph.outputs)
    # The computed dims, not the exporter's claim that d and y have the same size.
    assert d == ["B", "max(L-1,0)"] and y == ["B", "2*L"], (d, y)
    assert u[0] != "Uniqueu_dim_0" and inferred.context.is_generated(u[0]), u
    assert not any("names sizes that differ" in g.message for g in result.diagnostics)
    rng = np.random.default_rng(0)
    for batch, length in ((3, 2), (1, 1), (2, 0), (3, 5)):
        bindings = {"B": batch, "L": length}
        actual = runtime_shapes(model, make_feeds(model, bindings, rng))
        check_against_runtime(model, actual, bindings)


# The exporter reuses its names on subgraph outputs (attack5 ``if_shape_legacy``: both
# branches of an If declared ``[Ifout0_dim_1, 8]``, the name of a dim of another output).
EXPORTER_NAMES_IN_BRANCHES = """
g (float[B, L] x, bool c) => (float[B, Ifout0_dim_1] out0, float[Ifout0_dim_1] out1) {
  out0 = Concat <axis = 1> (x, x)
  zero = Constant<value = int64[1] {0}>()
  out1 = If(c) <
    then_branch = t () => (float[Ifout0_dim_1] a) { a = ReduceSum <keepdims = 0> (x, zero) },
    else_branch = e () => (float[Ifout0_dim_1] b) { b = ReduceMax <keepdims = 0> (x, zero) }
  >
}"""


def test_the_exporters_names_on_subgraph_outputs_declare_nothing():
    model = build(EXPORTER_NAMES_IN_BRANCHES)
    inferred = SymbolicShapeInferencePass()(model)
    AnchorConstraintPropagationPass(inferred.context)(model)
    out0, out1 = (dims_text(v) for v in model.graph.outputs)
    assert out0 == ["B", "2*L"] and out1 == ["L"], (out0, out1)
    branches = model.graph.node(-1).attributes
    written = [dims_text(branches[b].value.outputs[0]) for b in ("then_branch", "else_branch")]
    assert written == [["L"], ["L"]], written  # not the name of out0's 2*L
    rng = np.random.default_rng(0)
    for batch, length in ((3, 2), (1, 1), (2, 0)):
        bindings = {"B": batch, "L": length}
        feeds = make_feeds(model, bindings, rng, {"c": np.array(batch > 1)})
        check_against_runtime(model, runtime_shapes(model, feeds), bindings)


@pytest.mark.parametrize(
    "text",
    ["seq_dim_1", "Subseq_dim_1", "Fooy_dim_0", "Subd_dim_x", "Subd_dims_1", "Subd"],
)
def test_names_the_exporter_would_not_write_stay(text):
    # Op type + a graph output + _dim_k only: no Sub node makes "Subseq" an op prefix of
    # an output named "seq", no output is "y" after "Foo" (an op the graph lacks) ...
    model = build(f"""
    g (float[B, L] x) => (float[B, {text}] d) {{
      d = Sub(x, x)
    }}""")
    SymbolicShapeInferencePass()(model)
    (d,) = (dims_text(v) for v in model.graph.outputs)
    assert d[1] == text, d


# torch.export declares a ceil_mode pooling's output with the floor formula (attack5
# ``pool_ops_dynamo``, torch 2.13): ``H//3`` where the size is ``(H-1)//3 + 1``, 1 at H = 5
# where onnxruntime gives 2; also through a Flatten of two pooled dims. The declared text
# restates the same size otherwise, falsely: the inferred dims are written.
CEIL_POOL = """
g (float[N, 2, H, W] x) => (float[N, 2, "H//3", W] y, float[N, "2*(H//3)*(W//2)"] z) {
  y = MaxPool <kernel_shape = [2, 1], strides = [3, 1], ceil_mode = 1> (x)
  p = MaxPool <kernel_shape = [2, 2], strides = [3, 2], ceil_mode = 1> (x)
  z = Flatten <axis = 1> (p)
}"""


def test_a_declared_formula_of_the_same_sizes_that_differs_is_not_written():
    model = build(CEIL_POOL)
    inferred = SymbolicShapeInferencePass()(model)
    AnchorConstraintPropagationPass(inferred.context)(model)
    y, z = model.graph.outputs
    assert "H//3" not in dims_text(y) and "2*(H//3)*(W//2)" not in dims_text(z)
    merged = [g.message for g in inferred.context.diagnostics if g.severity == "warning"]
    assert any("declared H//3 but inferred" in w and "differs at H=5" in w for w in merged)
    rng = np.random.default_rng(0)
    for sizes in (
        {"N": 1, "H": 5, "W": 3},
        {"N": 2, "H": 7, "W": 5},
        {"N": 1, "H": 6, "W": 4},
    ):
        actual = runtime_shapes(model, make_feeds(model, sizes, rng))
        check_against_runtime(model, actual, sizes)


def test_a_declared_formula_equal_everywhere_stays_the_authors():
    # (H-1)//3 + 1 is the inferred size, spelled otherwise: no point separates them.
    model = build("""
g (float[N, 2, H, W] x) => (float[N, 2, "(H-1)//3+1", W] y) {
  y = MaxPool <kernel_shape = [2, 1], strides = [3, 1], ceil_mode = 1> (x)
}""")
    inferred = SymbolicShapeInferencePass()(model)
    assert dims_text(model.graph.outputs[0])[2] == "(H-1)//3+1"
    assert not [g for g in inferred.context.diagnostics if g.severity == "warning"]


# torch.export declares `x[:, :-1]` as ``W - 1`` (attack5 ``sample_ops_dynamo``, torch
# 2.13): it assumes every size is at least 2. The size is ``max(W-1, 0)``, and onnxruntime
# runs the model at W = 0, where ``W - 1`` would be -1: the declared formula is no fact,
# and the inferred dim is written.
SHIFTED = """
g (float[N, W] x) => (float[N, "W - 1"] y) {
  s = Constant <value_ints = [0]> ()
  e = Constant <value_ints = [-1]> ()
  a = Constant <value_ints = [1]> ()
  y = Slice(x, s, e, a)
}"""


def test_a_declared_formula_false_at_size_zero_is_not_written():
    model = build(SHIFTED)
    inferred = SymbolicShapeInferencePass()(model)
    AnchorConstraintPropagationPass(inferred.context)(model)
    assert dims_text(model.graph.outputs[0]) == ["N", "max(W-1,0)"]
    # An edge, not a conflict: no warning, and strict mode accepts the model.
    notes = {g.severity: g.message for g in inferred.context.diagnostics}
    assert "warning" not in notes, notes
    assert "declared W-1 but inferred max(W-1,0), which differs at W=0" in notes["info"]
    SymbolicShapeInferencePass(strict=True)(build(SHIFTED))
    rng = np.random.default_rng(0)
    for width in (0, 1, 2, 5):
        bindings = {"N": 2, "W": width}
        actual = runtime_shapes(model, make_feeds(model, bindings, rng))
        check_against_runtime(model, actual, bindings)


# torch.export declares a ResNet stem's output (strided convolution, then a padded
# pooling) as ``((H - 1)//4) + 1``. Without more facts the engine's size has a clamp at
# H = 0, where the pooling of an empty axis would give 1 (onnxruntime truncates), and the
# declared formula would be false there; but onnxruntime refuses a convolution whose window
# does not fit (its output size is at least 1), so H >= 1 in every run, the two agree, and
# the author's spelling stays.
RESNET_STEM = """
g (float[N, 1, H, 8] x, float[4, 1, 3, 3] w) => (float[N, 4, "((H - 1)//4) + 1", 2] z) {
  y = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)
  z = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (y)
}"""


def test_a_convolution_output_of_at_least_one_keeps_the_authors_formula():
    model = build(RESNET_STEM)
    inferred = SymbolicShapeInferencePass()(model)
    AnchorConstraintPropagationPass(inferred.context)(model)
    assert dims_text(model.graph.outputs[0]) == ["N", 4, "((H - 1)//4) + 1", 2]
    assert dims_text(all_values(model)["y"]) == ["N", 4, "(H+1)//2", 4]
    assert not [g for g in inferred.context.diagnostics if g.severity == "warning"]
    rng = np.random.default_rng(0)
    for height in (1, 2, 3, 5, 8):
        bindings = {"N": 1, "H": height}
        actual = runtime_shapes(model, make_feeds(model, bindings, rng))
        check_against_runtime(model, actual, bindings)
