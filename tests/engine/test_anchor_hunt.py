"""Reproducers of wrong dims found hunting in the renaming of engine symbols (stop 43).

Each test states the finding; each was ``xfail(strict=True)`` until the engine was
fixed (stop 44: a data-dependent size no longer takes a declared intermediate dim, see
docs/engine.md §8; exporter names are cleared on ``value_info`` too; the conflict search
probes around the expressions' constants and at large sizes).

Finding 1 (below: 2, an exporter name back from value_info; 3, a declared output
false only at sizes the conflict search does not try): a declared intermediate shape
(``value_info``) is trusted where the inferred dim is a bare minted symbol, also for
data-dependent sizes the engine has a bound for (``NonZero``, ``Compress``, ``Unique``
counts) and for an ``If`` whose branches differ.
The policy ``refine`` documents this ("the declared one only where the inferred is a
bare minted symbol"), but docs/engine.md §8 and §10 promise that a declared
intermediate shape "never overrides what inference proves" and that "declared
intermediate shapes are not trusted beyond what inference proves": a stale
``value_info`` (``int64[1, N] z`` on ``z = NonZero(x)``, or ``[1, 3]`` from a traced
export) is written on the value and on every value downstream, graph outputs included,
and it is false whenever ``x`` has a zero (at ``N = 0`` the declared ``3`` even
contradicts the recorded bound ``nnz <= N``). Without ``value_info_anchors`` nothing
asked the engine to trust these declarations.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.fuzz import oracle
from tests.ops._ort_oracle import check_against_ort

HEADER = '<ir_version: 8, opset_import: ["" : 18]>\n'
BINDINGS = [{"N": n} for n in (0, 1, 2, 3, 5)]

STALE_VALUE_INFO = {
    # NonZero's count declared as the input length: false when x has a zero.
    "nonzero_input_name": """
        g (float[N] x) => (int64[1, ?] w) <int64[1, N] z> {
          z = NonZero (x)
          w = Identity (z)
        }""",
    # A traced export's int: false for every other count (0 at N = 0, below the bound).
    "nonzero_int": """
        g (float[N] x) => (int64[1, ?] w) <int64[1, 3] z> {
          z = NonZero (x)
          w = Identity (z)
        }""",
    "compress_input_name": """
        g (float[N] x) => (float[?] w) <float[N] y> {
          half = Constant <value: tensor = float {0.5}> ()
          m = Greater (x, half)
          y = Compress <axis: int = 0> (x, m)
          w = Identity (y)
        }""",
    "unique_input_name": """
        g (float[N] x) => (float[?] w) <float[N] y> {
          y = Unique (x)
          w = Identity (y)
        }""",
}


@pytest.mark.parametrize("name", sorted(STALE_VALUE_INFO))
def test_stale_value_info_on_data_dependent_count(name: str) -> None:
    case = oracle.case_from_text(HEADER + STALE_VALUE_INFO[name], BINDINGS)
    outcome = oracle.check_case_quietly(case)
    assert outcome.runs, f"{name}: no binding ran in onnxruntime: {outcome}"
    found = [oracle.report(case, f) for f in outcome.findings]
    assert not found, "\n\n".join(found)


# The If's branches give N and M elements: the engine mints If_y_d0 and then takes the
# stale value_info's N for y and for w, the graph output; the run with c = true has M.
IF_BRANCHES = (
    HEADER
    + """
    g (float[N] x, float[M] q, bool c) => (float[?] w) <float[N] y> {
      y = If (c) <then_branch: graph = tb () => (float[?] a) {
          a = Identity (q)
      }, else_branch: graph = eb () => (float[?] b) {
          b = Identity (x)
      }>
      w = Identity (y)
    }"""
)


def test_stale_value_info_on_if_of_differing_branches() -> None:
    check_against_ort(
        IF_BRANCHES,
        [{"N": 2, "M": 3}, {"N": 3, "M": 0}],
        feeds={"c": np.array(True)},
    )


# TorchScript's exporter names an output dim ``{op}{output}_dim_{axis}`` and reuses the
# text on value_info wherever its own inference met the symbol, also for sizes that
# differ (here the Unique count and the NonZero count). clear_exporter_output_names
# empties it on the graph output only: the value_info keeps it, inference takes it for
# the minted counts of u and z (finding above), and the cleared output y is filled in
# with it again. y and w then carry one name for two sizes (2 and 1 at N = 2).
EXPORTER_NAME_ON_VALUE_INFO = """
    g (float[N] x) => (float[Uniquey_dim_0] y, int64[1, ?] w)
        <float[Uniquey_dim_0] u, int64[1, Uniquey_dim_0] z> {
      u = Unique (x)
      y = Identity (u)
      z = NonZero (x)
      w = Identity (z)
    }"""


def test_exporter_output_name_reused_on_value_info() -> None:
    case = oracle.case_from_text(HEADER + EXPORTER_NAME_ON_VALUE_INFO, BINDINGS)
    outcome = oracle.check_case_quietly(case)
    assert outcome.runs, f"no binding ran in onnxruntime: {outcome}"
    found = [oracle.report(case, f) for f in outcome.findings]
    assert not found, "\n\n".join(found)


# A graph output declared [N] on x[:128], which is min(128, N): the declared dim differs
# from the inferred one for every N > 128, a conflict by docs/constraints.md §3 ("over
# exactly the same names, differing at a point with sizes >= 2"). The search for that
# point (shapes/_anchors.py _separating_point) tries sizes 2 + _OFFSETS, up to 100, and
# misses it: N == min(128, N) is recorded, and the anchor pass (rule 4: a compound of
# declared names whose target is an input's symbol) rewrites min(128, N) to N on every
# value, the undeclared w included. onnxruntime gives 128 elements at N = 200.
SLICE_END_BEYOND_PROBES = """
    g (float[N] x) => (float[N] y, float[?] w) {
      st = Constant <value: tensor = int64[1] {0}> ()
      en = Constant <value: tensor = int64[1] {128}> ()
      y = Slice (x, st, en)
      w = Slice (x, st, en)
    }"""
# The same with N % 101 (declared N), which differs first at N = 101.
MOD_BEYOND_PROBES = """
    g (float[N] x) => (float[N] y, float[?] w) {
      s = Shape (x)
      big = Constant <value: tensor = int64[1] {101}> ()
      m = Mod (s, big)
      y = ConstantOfShape (m)
      w = ConstantOfShape (m)
    }"""


@pytest.mark.parametrize("graph", [SLICE_END_BEYOND_PROBES, MOD_BEYOND_PROBES])
def test_declared_output_false_only_for_large_sizes(graph: str) -> None:
    bindings = [{"N": n} for n in (0, 1, 2, 3, 200)]
    case = oracle.case_from_text(HEADER + graph, bindings)
    outcome = oracle.check_case_quietly(case)
    assert outcome.runs, f"no binding ran in onnxruntime: {outcome}"
    found = [oracle.report(case, f) for f in outcome.findings if f.value == "w"]
    assert not found, "\n\n".join(found)
