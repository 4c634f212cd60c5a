"""The policy for declared intermediate dims on data-dependent sizes (stop 44).

A declared ``value_info`` dim is trusted downstream only where inference knows nothing
about the size (a bare minted symbol with no bound or range). A data-dependent size (a
minted symbol with a recorded bound: ``NonZero``, ``TopK`` with a runtime ``k``, an
``If`` whose branches differ ...) keeps the inferred symbol, which is written on the
value with a warning naming it and both shapes; strict mode raises. docs/engine.md §8.
The findings themselves (checked against onnxruntime) are in test_anchor_hunt.py.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.passes._exporter_names import clear_exporter_output_names
from onnx_symdims.shapes import ShapeInferenceError
from onnx_symdims.shapes._anchors import _separated, _separating_point
from tests.engine._engine_testing import dims, model, value
from tests.ops._ort_oracle import check_against_ort

HEADER = '<ir_version: 8, opset_import: ["" : 18]>\n'

NONZERO = """g (float[N] x) => (w) {
    z = NonZero(x)
    w = Identity(z)
}"""


def _declare(text: str, name: str, shape: list, dtype=ir.DataType.INT64) -> ir.Model:
    m = model(text)
    v = value(m, name)
    v.shape = ir.Shape(shape)
    v.dtype = dtype
    return m


def _warnings(result) -> list[str]:
    return [d.message for d in result.diagnostics if d.severity == "warning"]


@pytest.mark.parametrize(
    ("declared", "text"),
    [
        (3, "declared [1, 3], inferred [1, NonZero_z_nnz]"),  # a trace's int
        ("N", "declared [1, N], inferred [1, NonZero_z_nnz]"),  # the input's name
        ("2*N", "declared [1, 2*N], inferred [1, NonZero_z_nnz]"),  # an expression
        ("nnz", "declared [1, nnz], inferred [1, NonZero_z_nnz]"),  # a name of its own
    ],
)
def test_declared_dim_on_a_data_dependent_count_is_not_used(declared, text):
    m = _declare(NONZERO, "z", [1, declared])
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "z") == [1, "NonZero_z_nnz"]
    assert dims(m, "w") == [1, "NonZero_z_nnz"]  # downstream keeps the count and its bound
    assert result.context.has_less_equal_constraint("NonZero_z_nnz", "N")
    assert any("output 'z'" in w and text in w for w in _warnings(result)), _warnings(result)
    for options in ({"strict": True}, {"policy": "strict"}):
        with pytest.raises(ShapeInferenceError, match="output 'z'"):
            SymbolicShapeInferencePass(**options)(_declare(NONZERO, "z", [1, declared]))


def test_declared_dim_where_inference_knows_nothing_is_still_used():
    """A runtime shape: the minted symbols have no bound, the declared dims say more."""
    text = """g (int64[2] s) => (w) {
        y = ConstantOfShape(s)
        w = Identity(y)
    }"""
    m = _declare(text, "y", ["n", 4], ir.DataType.FLOAT)
    result = SymbolicShapeInferencePass()(m)
    assert dims(m, "w") == ["n", 4]
    assert not _warnings(result)


# Data-dependent sizes of other ops, each declared with the input's name, which
# onnxruntime contradicts (k = 1, end = 1; two NonZero counts).
STALE = {
    "topk_runtime_k": """
        g (float[N] x, int64[1] k) => (float[?] w) <float[N] v> {
          v, i = TopK (x, k)
          w = Identity (v)
        }""",
    "slice_runtime_end": """
        g (float[N] x, int64[1] k) => (float[?] w) <float[N] y> {
          st = Constant <value: tensor = int64[1] {0}> ()
          y = Slice (x, st, k)
          w = Identity (y)
        }""",
    "nonzero_compound_downstream": """
        g (float[N] x, int64[1] k) => (int64[1, ?] w) <int64[1, N] c> {
          z = NonZero (x)
          c = Concat <axis: int = 1> (z, z)
          w = Identity (c)
        }""",
}


@pytest.mark.parametrize("name", sorted(STALE))
def test_stale_value_info_on_other_data_dependent_sizes(name: str) -> None:
    inferred = check_against_ort(
        HEADER + STALE[name],
        [{"N": n} for n in (2, 3, 5)],
        feeds={
            "k": np.array([1], dtype=np.int64),
            "x": lambda b: np.arange(b["N"], dtype=np.float32),  # one zero
        },
    )
    # What is written is what was checked (a stale declared text kept on the value, as
    # N on the Concat of two counts, would be a wrong dim on the model).
    for node in inferred.model.graph:
        for out in node.outputs:
            written = [d if isinstance(d, int) else d.value for d in out.shape.dims]
            assert written == inferred.shape(out.name), out.name


def test_exporter_name_cleared_on_value_info_too():
    """Where inference knows nothing, an exporter's name would otherwise be trusted."""
    m = ir.from_onnx_text(
        HEADER
        + """
        g (float[N] x, int64[1] s) => (float[Uniquey_dim_0] y, float[Uniquey_dim_0] w)
            <float[Uniquey_dim_0] u, float[Uniquey_dim_0] c> {
          u = Unique (x)
          y = Identity (u)
          c = ConstantOfShape (s)
          w = Identity (c)
        }"""
    )
    assert clear_exporter_output_names(m) == 4
    for name in ("u", "c", "y", "w"):
        assert dims(m, name) == [None], name
    SymbolicShapeInferencePass()(m)
    assert dims(m, "y") != dims(m, "w")  # two sizes, two names


def test_exporter_names_stay_on_value_info_when_no_output_has_them():
    m = ir.from_onnx_text(
        HEADER
        + """
        g (float[N] x) => (float[?] y) <float[Uniquey_dim_0] u> {
          u = Unique (x)
          y = Identity (u)
        }"""
    )
    assert clear_exporter_output_names(m) == 0
    assert dims(m, "u") == ["Uniquey_dim_0"]


@pytest.mark.parametrize(
    ("inferred", "declared", "point"),
    [
        ("min(128, N)", "N", "N=129"),
        ("N % 101", "N", "N=101"),
        ("N // 128", "N // 256", "N=255"),
        ("min(N, 5000)", "N", "N=5001"),
        ("min(N, 2000000)", "N", "N=2000001"),  # beyond 2**20: around the constant
        ("min(128, N) * M", "N * M", "M=5, N=129"),
    ],
)
def test_separating_point_beyond_the_grid(inferred, declared, point):
    e, f = expr.parse_dim(inferred), expr.parse_dim(declared)
    scope = expr.Scope(nonnegative=True)
    names = sorted(e.symbols() | f.symbols())
    assert _separating_point(scope, names, e, f) is None  # not on the grid
    assert _separating_point(scope, names, e, f, far=True) == point
    assert _separated(scope, names, e, f) == (point, "far")


def test_separating_point_stays_within_the_bounds():
    e, f = expr.parse_dim("min(128, N)"), expr.parse_dim("N")
    scope = expr.Scope(nonnegative=True)
    scope.set_range("N", upper=128)
    assert _separated(scope, ["N"], e, f) is None
    scope = expr.Scope(nonnegative=True)
    scope.set_range("N", lower=1000)
    assert _separated(scope, ["N"], e, f) == ("N=1003", "conflict")  # the grid, from 1000


def test_a_declared_output_false_beyond_the_grid_is_replaced_without_a_warning():
    """Only beyond the grid: an edge (the model may fail there), the inferred dim kept."""
    m = ir.from_onnx_text(
        HEADER
        + """
        g (float[N] x) => (float[N] y) {
          st = Constant <value: tensor = int64[1] {0}> ()
          en = Constant <value: tensor = int64[1] {128}> ()
          y = Slice (x, st, en)
        }"""
    )
    result = SymbolicShapeInferencePass(strict=True)(m)
    assert dims(m, "y") == ["min(128,N)"]
    assert not result.context.has_constraint("min(128,N)", "N")
    infos = [d.message for d in result.diagnostics if d.severity == "info"]
    assert any("differs at N=129 (only beyond the sizes first tried)" in i for i in infos)


def test_subgraph_output_declared_on_a_data_dependent_count():
    """Branch outputs declared [1, N] on NonZero counts: the If output is no N."""
    inferred = check_against_ort(
        HEADER
        + """
        g (float[N] x, bool c) => (int64[1, ?] w) {
          y = If (c) <
            then_branch: graph = tb () => (int64[1, N] a) { a = NonZero (x) },
            else_branch: graph = eb () => (int64[1, N] b) { b = NonZero (x) }
          >
          w = Identity (y)
        }""",
        [{"N": n} for n in (2, 3, 5)],
        feeds={"c": np.array(True), "x": lambda b: np.arange(b["N"], dtype=np.float32)},
    )
    assert inferred.shape("w") != [1, "N"]
