"""Graph and subgraph outputs declared on a data-dependent size (stop 44, helper 84).

A ``NonZero`` count changes from run to run: an output declared ``int64[1, 3]`` (a
trace's count) or ``int64[1, N]`` (the input's length) holds in the traced run only.
Nothing is recorded from such a declared dim, so the anchor pass writes no ``3`` and no
``N`` on intermediate values; a declared int is replaced with a warning (docs/engine.md
§10: a declared int nothing implies), a graph input's name or an expression keeps its
text on the output. The author's own name for the count renames the minted symbol, its
bound kept (the anchor pass replaces one name reused on two counts). Each case is
checked against onnxruntime (sizes 0 and 1 included) with the fuzz oracle, which checks
the dims after both passes.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext
from tests.fuzz import oracle
from tests.ops._ort_oracle import check_against_ort

HEADER = '<ir_version: 8, opset_import: ["" : 18]>\n'
BINDINGS = [{"N": n} for n in (0, 1, 2, 3, 5)]

CASES = {
    # a trace's count, on the only output
    "int": "g (float[N] x) => (int64[1, 3] w) { z = NonZero (x)  w = Identity (z) }",
    # on the NonZero itself, an intermediate Identity downstream
    "int_on_producer": """g (float[N] x) => (int64[1, 3] z, int64[1, ?] w) {
        z = NonZero (x)
        w = Identity (z)
    }""",
    # the input's name: nnz == N is no fact
    "input_name": """g (float[N] x) => (int64[1, N] z, int64[1, ?] w) {
        z = NonZero (x)
        w = Identity (z)
    }""",
    # one name on two counts: they are not equal
    "name_on_two_counts": """g (float[N] x, float[N] q) => (int64[1, k] a, int64[1, k] b,
                                                           int64[1, ?] w) {
        a = NonZero (x)
        b = NonZero (q)
        w = Concat <axis: int = 1> (a, b)
    }""",
    # the author's own name, used nowhere else: a rename
    "own_name": """g (float[N] x) => (int64[1, nnz] z, int64[1, ?] w) {
        z = NonZero (x)
        w = Identity (z)
    }""",
}
# If branches declared with the input's name (the branch values keep no stale N); the
# fuzz oracle's rebuild does not keep subgraphs: checked with check_against_ort.
IF_BRANCHES = """g (float[N] x, bool c) => (int64[1, ?] w) {
    y = If (c) <
      then_branch: graph = tb () => (int64[1, N] a) { a = NonZero (x) },
      else_branch: graph = eb () => (int64[1, N] b) { b = NonZero (x) }
    >
    w = Identity (y)
}"""


def _model(text: str, declared: dict[str, list] | None = None) -> ir.Model:
    """The model, with graph outputs re-declared (the text syntax has no ``2*k`` dim)."""
    m = ir.from_onnx_text(HEADER + text)
    for v in m.graph.outputs:
        if declared and v.name in declared:
            v.shape = ir.Shape(declared[v.name])
    return m


def _inferred(text: str, declared: dict[str, list] | None = None):
    m = _model(text, declared)
    ctx = ShapesContext()
    onnx_symdims.infer_symbolic_shapes(m, context=ctx)
    return m, ctx


def _written(m: ir.Model) -> dict[str, list[int | str]]:
    """Every value's written dims, subgraph values included."""
    found = {}
    for node in ir.traversal.RecursiveGraphIterator(m.graph):
        for v in node.outputs:
            if v.shape is not None:
                found[v.name] = [d if isinstance(d, int) else d.value for d in v.shape.dims]
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_onnxruntime(name: str) -> None:
    case = oracle.case_from_text(HEADER + CASES[name], BINDINGS)
    outcome = oracle.check_case_quietly(case)
    assert outcome.runs, f"{name}: no binding ran in onnxruntime: {outcome}"
    found = [oracle.report(case, f) for f in outcome.findings]
    assert not found, "\n\n".join(found)


@pytest.mark.parametrize("name", ["int", "int_on_producer"])
def test_a_declared_int_is_replaced_with_a_warning(name: str) -> None:
    m, ctx = _inferred(CASES[name])
    written = _written(m)
    assert written["z"] == [1, "NonZero_z_nnz"]
    assert written["w"] == [1, "NonZero_z_nnz"]
    assert not ctx.constraints()
    assert ctx.has_less_equal_constraint("NonZero_z_nnz", "N")
    warnings = [d.message for d in ctx.diagnostics if d.severity == "warning"]
    assert any("declared shape [1, 3] is false" in w for w in warnings), warnings
    with pytest.raises(ShapeInferenceError):
        onnx_symdims.infer_symbolic_shapes(
            ir.from_onnx_text(HEADER + CASES[name]), strict=True
        )


@pytest.mark.parametrize("text", ["N", "2*k"])  # the input's name, an expression
def test_a_declared_name_keeps_its_text_and_records_nothing(text: str) -> None:
    declared = {"z": [1, text]}
    m, ctx = _inferred(CASES["input_name"], declared)
    written = _written(m)
    assert written["z"] == [1, text]  # the output's declared text (the model's interface)
    assert written["w"] == [1, "NonZero_z_nnz"]  # no stale name downstream
    assert not ctx.constraints()
    assert ctx.has_less_equal_constraint("NonZero_z_nnz", "N")
    infos = [d.message for d in ctx.diagnostics if d.severity == "info"]
    assert any("data-dependent size" in i and "output 'z'" in i for i in infos), infos
    # Not a conflict: strict mode runs.
    onnx_symdims.infer_symbolic_shapes(_model(CASES["input_name"], declared), strict=True)


def test_one_name_on_two_counts_is_not_used() -> None:
    """The anchor pass finds the label reused on two counts and writes the counts."""
    m, ctx = _inferred(CASES["name_on_two_counts"])
    written = _written(m)
    assert written["a"] == [1, "NonZero_a_nnz"]
    assert written["b"] == [1, "NonZero_b_nnz"]
    assert written["w"] == [1, "NonZero_a_nnz+NonZero_b_nnz"]
    warnings = [d.message for d in ctx.diagnostics if d.severity == "warning"]
    assert any("'k' names sizes that differ" in w for w in warnings), warnings


def test_the_authors_own_name_renames_the_count_and_keeps_its_bound() -> None:
    m, ctx = _inferred(CASES["own_name"])
    written = _written(m)
    assert written["z"] == written["w"] == [1, "nnz"]
    assert ctx.has_less_equal_constraint("nnz", "N")


def test_if_branch_values_get_the_inferred_dim() -> None:
    inferred = check_against_ort(
        HEADER + IF_BRANCHES,
        [{"N": n} for n in (0, 1, 2, 3, 5)],
        feeds={"c": np.array(True), "x": lambda b: np.arange(b["N"], dtype=np.float32)},
    )
    assert inferred.shape("w") != [1, "N"]
    m, _ = _inferred(IF_BRANCHES)
    written = _written(m)
    assert written["a"] == [1, "NonZero_a_nnz"]
    assert written["b"] == [1, "NonZero_b_nnz"]
    assert written["w"] != [1, "N"]
