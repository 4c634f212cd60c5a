"""Reproducers of wrong dims found hunting in the declared-shape policy (stop 44).

Finding (``xfail(strict=True)``, the fix is outside shapes/_merge.py): a ``Loop`` mints
its data-dependent sizes without a bound or a range, so the merge of a declared
intermediate shape (shapes/_merge.py ``_knows_nothing``) takes them for sizes "the
engine knows nothing about" and lets a traced ``value_info`` replace them. The declared
dim is then written on the value and on every value downstream (graph outputs
included) and is false in other runs. Three ways in:

* the iteration count of a ``Loop`` whose trip count is a runtime value
  (ops/control_flow.py ``_iteration_count``: ``fresh_at_most(ctx, "iterations", None)``,
  a range only when it is proven ``>= 1``): a scan output declared ``[3, N]``;
* a carried value whose size changes between iterations (the widened symbol
  ``Loop_y_d0``): declared ``[N]`` (its initial size) or ``[4]`` (a traced run);
* a ``NonZero`` count (bounded: ``nnz <= N``, data-dependent, protected by the policy)
  carried through a ``Loop`` that changes it: widened, the bound is dropped and the
  declared ``[1, 3]`` wins again (0 elements at ``N = 0``).

Suggested fix (ops/control_flow.py and shapes/_context.py, not owned here): record the
iteration count and the widened dims as data-dependent (a marker ``_bounded`` reads,
or a bound where one is known), so the inferred symbol is written, as for ``NonZero``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.fuzz import oracle
from tests.ops._ort_oracle import check_against_ort, run_ort

HEADER = '<ir_version: 8, opset_import: ["" : 18]>\n'
LOOP_BINDINGS = [{"N": n} for n in (0, 1, 2, 3)]
TRIPS = {"t": np.array(2, dtype=np.int64)}

RUNTIME_TRIP_LOOPS = {
    # Each iteration scans out x: [t, N]; the traced value_info says 3 iterations.
    "scan_output_count": """
        g (float[N] x, int64 t) => (float[?, ?] w) <float[3, N] y> {
          cond = Constant <value: tensor = bool {1}> ()
          y = Loop (t, cond) <body: graph = body (int64 i, bool c) => (bool co, float[?] so) {
              co = Identity (c)
              so = Identity (x)
          }>
          w = Identity (y)
        }""",
    # The carried x doubles each iteration: N * 2**t, declared as its initial size N.
    "carried_initial_name": """
        g (float[N] x, int64 t) => (float[?] w) <float[N] y> {
          cond = Constant <value: tensor = bool {1}> ()
          y = Loop (t, cond, x) <body: graph = body (int64 i, bool c, float[?] a) => (bool co, float[?] ao) {
              co = Identity (c)
              ao = Concat <axis: int = 0> (a, a)
          }>
          w = Identity (y)
        }""",
    # The same declared as a traced run's int.
    "carried_traced_int": """
        g (float[N] x, int64 t) => (float[?] w) <float[4] y> {
          cond = Constant <value: tensor = bool {1}> ()
          y = Loop (t, cond, x) <body: graph = body (int64 i, bool c, float[?] a) => (bool co, float[?] ao) {
              co = Identity (c)
              ao = Concat <axis: int = 0> (a, a)
          }>
          w = Identity (y)
        }""",
}


@pytest.mark.xfail(
    strict=True,
    reason="ops/control_flow.py mints a Loop's data-dependent sizes without a bound: "
    "a traced value_info replaces them (shapes/_merge.py _knows_nothing)",
)
@pytest.mark.parametrize("name", sorted(RUNTIME_TRIP_LOOPS))
def test_stale_value_info_on_loop_sizes(name: str) -> None:
    check_against_ort(HEADER + RUNTIME_TRIP_LOOPS[name], LOOP_BINDINGS, feeds=TRIPS)


# A NonZero count carried through a Loop that doubles it: Loop_y_d1 (widened, no bound)
# takes the declared 3; onnxruntime gives 0 elements at N = 0 and 2*N where x has no zero.
NONZERO_CARRIED = """
    g (float[N] x) => (int64[?, ?] w) <int64[1, 3] y> {
      z = NonZero (x)
      t = Constant <value: tensor = int64 {1}> ()
      cond = Constant <value: tensor = bool {1}> ()
      y = Loop (t, cond, z) <body: graph = body (int64 i, bool c, int64[1, ?] a) => (bool co, int64[1, ?] ao) {
          co = Identity (c)
          ao = Concat <axis: int = 1> (a, a)
      }>
      w = Identity (y)
    }"""


@pytest.mark.xfail(
    strict=True,
    reason="a Loop's widened carried dim drops the NonZero count's bound: the declared "
    "[1, 3] replaces it (ops/control_flow.py)",
)
def test_stale_value_info_on_nonzero_count_carried_through_loop() -> None:
    bindings = [{"N": n} for n in (0, 1, 2, 3, 5)]
    case = oracle.case_from_text(HEADER + NONZERO_CARRIED, bindings)
    outcome = oracle.check_case_quietly(case)
    assert outcome.runs, f"no binding ran in onnxruntime: {outcome}"
    found = [oracle.report(case, f) for f in outcome.findings]
    assert not found, "\n\n".join(found)


def test_nonzero_count_through_loop_passing_it_on_keeps_the_count() -> None:
    """Control: a Loop that passes the count on unchanged keeps the bounded count."""
    text = NONZERO_CARRIED.replace("ao = Concat <axis: int = 1> (a, a)", "ao = Identity (a)")
    inferred = check_against_ort(HEADER + text, [{"N": n} for n in (0, 1, 3)])
    assert [str(d) for d in inferred.dims("w")] == ["1", "NonZero_z_nnz"]


# A NonZero count read back as a size through ops whose values inference does not follow
# (Cast to float and back, CumSum, Gather from a constant table, ArgMax): ConstantOfShape
# mints a symbol with no bound ("a hook that could not tell", docs/engine.md §8), so the
# traced value_info's 3 is trusted and written on r and w; onnxruntime gives 0 at N = 0.
# Within the documented policy, but a wrong dim: the size is the data-dependent count.
# A fix belongs to the ops layer (follow these values, or record a size read from
# runtime values as data-dependent so shapes/_merge.py ``_bounded`` sees it).
COUNT_THROUGH_OPAQUE_VALUES = """
    g (float[N] x) => (float[?] w) <float[3] r> {
      z = NonZero (x)
      s = Shape (z)
      one = Constant <value: tensor = int64[1] {1}> ()
      two = Constant <value: tensor = int64[1] {2}> ()
      c = Slice (s, one, two)
      f = Cast <to: int = 1> (c)
      k = Cast <to: int = 7> (f)
      r = ConstantOfShape (k)
      w = Identity (r)
    }"""


@pytest.mark.xfail(
    strict=True,
    reason="a NonZero count through Cast(float)/Cast(int64) is a size inference knows "
    "nothing about: the traced value_info's 3 replaces it (ops layer value tracking)",
)
def test_stale_value_info_on_count_through_untracked_values() -> None:
    bindings = [{"N": n} for n in (0, 1, 2, 3, 5)]
    case = oracle.case_from_text(HEADER + COUNT_THROUGH_OPAQUE_VALUES, bindings)
    outcome = oracle.check_case_quietly(case)
    assert outcome.runs, f"no binding ran in onnxruntime: {outcome}"
    found = [oracle.report(case, f) for f in outcome.findings]
    assert not found, "\n\n".join(found)


# Inside a Loop body the carried input's dims are widened symbols with no bound either,
# so a body value_info on the carried value (a trace's [4]) is trusted there: b is
# written [4] and the body output ao [8], while each iteration has another size (x
# doubles). The body also scans out Shape(b): onnxruntime's per-iteration shapes of b.
BODY_VALUE_INFO_ON_CARRIED = """
    g (float[N] x, int64 t) => (float[?] w, int64[?, 1] sizes) {
      cond = Constant <value: tensor = bool {1}> ()
      w, sizes = Loop (t, cond, x) <body: graph = body (int64 i, bool c, float[?] a)
          => (bool co, float[?] ao, int64[1] sb) <float[4] b> {
          co = Identity (c)
          b = Identity (a)
          ao = Concat <axis: int = 0> (b, b)
          sb = Shape (b)
      }>
    }"""


@pytest.mark.xfail(
    strict=True,
    reason="a Loop body's widened carried dims have no bound: a body value_info's int "
    "replaces them (ops/control_flow.py)",
)
def test_stale_body_value_info_on_carried_value() -> None:
    inferred = check_against_ort(HEADER + BODY_VALUE_INFO_ON_CARRIED, [{"N": 2}], feeds=TRIPS)
    body = inferred.model.graph.node(1).attributes["body"].as_graph()
    (written,) = next(v for v in body if v.outputs[0].name == "b").outputs[0].shape.dims
    actual = run_ort(inferred, {"N": 2}, TRIPS)["sizes"][:, 0]  # [2, 4] at N = 2, t = 2
    assert all(written == size for size in actual) or not isinstance(written, int), (
        f"b written [{written}], onnxruntime's sizes per iteration {list(actual)}"
    )
