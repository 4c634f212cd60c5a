"""Running an original and a rewritten model on the same inputs: do the outputs agree?

:func:`compare_models` is the check behind a rewrite (``optimize --verify`` and the
tests of rewrite rules): both models get the same drawn input sizes and the same input
data, and every graph output of the original must come out of the rewritten model with
the same dtype, the same shape and the same values (exact for integers and booleans, a
tight tolerance for floats).
"""

from __future__ import annotations

__all__ = ["CompareReport", "OutputDifference", "compare_models"]

import dataclasses
import logging
import random
from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims._verify_ort import feeds_for, make_session, run, short_error
from onnx_symdims._verify_sizes import (
    SizePlan,
    candidate_relations,
    model_facts,
    parse_shape,
    run_sizes,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim


@dataclasses.dataclass(frozen=True)
class OutputDifference:
    """One output on which the rewritten model departs from the original.

    Attributes:
        output: The graph output's name.
        kind: ``"missing"`` (no such output), ``"failed"`` (the rewritten model did
            not run where the original did), ``"dtype"``, ``"shape"`` or ``"values"``.
        detail: Explanation (shapes, dtypes, worst element).
        binding: The input sizes of the run.
        max_abs: Largest absolute difference (``"values"`` on floats), else ``None``.
    """

    output: str
    kind: str
    detail: str
    binding: Mapping[str, int]
    max_abs: float | None = None

    def __str__(self) -> str:
        return f"{self.output}: {self.kind}: {self.detail} under {dict(self.binding)}"


@dataclasses.dataclass
class CompareReport:
    """What :func:`compare_models` found.

    Attributes:
        runs: Runs in which both models ran and their outputs were compared.
        compared_outputs: Number of (output, run) pairs compared.
        differences: Every difference found.
        errors: Runs the original model did not run (those sizes are not valid inputs);
            when none ran, the first one sums up the search (sizes tried, what
            onnxruntime said) and the failed runs of each guess follow the others.
        bindings: The input sizes of each compared run.
        relations: Guessed relations between input symbols the sizes followed.
    """

    runs: int = 0
    compared_outputs: int = 0
    differences: list[OutputDifference] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    bindings: list[dict[str, int]] = dataclasses.field(default_factory=list)
    relations: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when at least one run was compared and no output differed."""
        return self.runs > 0 and not self.differences


#: Rounding steps of a narrow float type that a tolerant comparison allows at least.
_NARROW_FLOAT_ULPS = 4


def _tolerance_for(dtype: np.dtype, rtol: float, atol: float) -> tuple[float, float]:
    """A nonzero tolerance widened to four rounding steps of a type narrower than ``float``.

    ``rtol=1e-4`` is below one step of ``float16`` (9.8e-4); an exact comparison stays exact.
    ``--inexact-floats`` folds a ``float16`` node in onnxruntime alone, which rounds its
    result to ``float16``; in the whole model onnxruntime's CPU provider computes such
    chains in ``float``, so an output can move by a step or two.
    """
    if (rtol == 0 and atol == 0) or dtype.itemsize >= 4:
        return rtol, atol
    try:
        eps = float(np.finfo(dtype).eps)
    except (TypeError, ValueError):  # a float type numpy has no limits for
        return rtol, atol
    floor = _NARROW_FLOAT_ULPS * eps
    return max(rtol, floor), max(atol, floor)


def _narrowest_float(graph: ir.Graph) -> np.dtype | None:
    """The narrowest float type among the values of ``graph`` (its subgraphs included).

    A ``float16`` model converted with ``keep_io_types`` has ``float`` outputs computed in
    ``float16``: a fused kernel that rounds otherwise moves them by ``float16`` steps.
    """
    types = [v.dtype for v in graph.initializers.values()]
    for node in ir.traversal.RecursiveGraphIterator(graph):
        types += [v.dtype for v in node.outputs]
        if node.op_type == "Cast" and node.domain == "":  # types may not be inferred yet
            types.append(ir.DataType(node.attributes.get_int("to", 0)))
    narrowest = None
    for dtype in types:
        try:
            dtype = np.dtype(dtype.numpy()) if dtype is not None else None
        except (TypeError, ValueError, AttributeError):  # no numpy type (e.g. float8)
            continue
        if (
            dtype is None
            or dtype.itemsize >= 4
            or not (dtype.kind == "f" or dtype.name == "bfloat16")
        ):
            continue
        if narrowest is None or dtype.itemsize < narrowest.itemsize:
            narrowest = dtype
    return narrowest


def _compare_arrays(
    name: str,
    a: np.ndarray,
    b: np.ndarray,
    binding: Mapping[str, int],
    rtol: float,
    atol: float,
    computed_in: np.dtype | None = None,
) -> OutputDifference | None:
    """Compares one output; ``computed_in`` is a narrower float type the graph computes in."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        return OutputDifference(name, "dtype", f"{a.dtype} became {b.dtype}", binding)
    if a.shape != b.shape:
        return OutputDifference(
            name, "shape", f"{list(a.shape)} became {list(b.shape)}", binding
        )
    if a.dtype.kind not in "fc":  # ints, bools, strings: exact
        if np.array_equal(a, b):
            return None
        where = tuple(int(i) for i in np.argwhere(a != b)[0])
        return OutputDifference(
            name, "values", f"at {list(where)}: {a[where]!r} became {b[where]!r}", binding
        )
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return OutputDifference(name, "values", "NaN positions differ", binding)
    a64, b64 = (
        np.where(nan_a, 0, a).astype(np.float64),
        np.where(nan_b, 0, b).astype(np.float64),
    )
    # a float output computed in float16 rounds like one (its tolerance widened alike)
    steps_of = computed_in if computed_in is not None and a.dtype.itemsize >= 4 else a.dtype
    rtol, atol = _tolerance_for(steps_of, rtol, atol)
    if np.allclose(a64, b64, rtol=rtol, atol=atol):
        return None
    diff = np.abs(a64 - b64)
    where = np.unravel_index(int(np.argmax(diff)), diff.shape)
    detail = (
        f"max |difference| {float(diff[where]):.3g} at {[int(i) for i in where]}: "
        f"{float(a64[where]):.6g} became {float(b64[where]):.6g} (rtol={rtol}, atol={atol})"
    )
    narrow = _tolerance_for(steps_of, 1e-30, 1e-30)
    if rtol == 0 and atol == 0 and narrow[0] > 1e-30 and np.allclose(a64, b64, *narrow):
        detail += (
            f"; within {_NARROW_FLOAT_ULPS} {steps_of} rounding steps: onnxruntime's CPU "
            f"provider computes {steps_of} ops in float and where it rounds depends on the "
            "graph (removing an Identity can move it), see docs/optimize.md"
        )
    return OutputDifference(name, "values", detail, binding, float(diff[where]))


def compare_models(
    original: ir.Model,
    rewritten: ir.Model,
    *,
    runs: int = 3,
    seed: int = 0,
    sizes: Sequence[Mapping[str, int]] = (),
    equalities: Sequence[tuple[Dim, Dim]] = (),
    symbol_ranges: Mapping[str, tuple[int | None, int | None]] | None = None,
    edges: bool = True,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> CompareReport:
    """Runs both models with onnxruntime on the same inputs and compares their outputs.

    The input sizes are drawn from the original's input dims like :func:`verify_model`
    draws them (proven ``equalities``, ``symbol_ranges``; when no run with independent
    sizes succeeds, the equalities inference proves on the original, then relations
    guessed from the dims written in either model, each adopted only when several
    independent draws under it run), plus the edge sizes (all ones, each symbol 0 and
    1) with ``edges``. Input data is random with ``seed``: floats
    standard normal, integer inputs in ``0..m-1`` for ``m`` the smallest positive input
    dim (zeros if that run fails), masks and booleans ones. Sizes the original refuses
    are skipped (recorded in ``errors``); the rewritten model failing where the
    original ran is a difference.

    Args:
        original: The reference model (not modified).
        rewritten: The model to check (not modified); it must have the original's
            inputs, or a subset of them, and every one of its outputs.
        runs: Random size assignments to compare (on top of ``sizes`` and edges).
        seed: Seed of sizes and data.
        sizes: Explicit size assignments (missing symbols are drawn).
        equalities: Known equalities between input symbols.
        symbol_ranges: ``{symbol: (lower, upper)}`` sizes must stay in.
        edges: Also compare at the edge sizes.
        rtol: Relative tolerance for floating-point outputs (``0`` with ``atol=0``: bit
            for bit); a nonzero one is at least four rounding steps of a type narrower
            than ``float``: the output's, or the narrowest float type the original
            computes in (a ``float16`` model with ``float`` inputs and outputs).
        atol: Absolute tolerance for floating-point outputs (widened the same way).

    Returns:
        The :class:`CompareReport`.

    Raises:
        ImportError: onnxruntime is not installed.
        VerifyError: onnxruntime refuses to create a session for either model.
    """
    report = CompareReport()
    graph = original.graph
    input_dims = [parse_shape(v.shape) for v in graph.inputs]
    reference = make_session(original, keep_value_info=True)
    candidate = make_session(rewritten, keep_value_info=True)
    names = [o.name for o in reference.get_outputs()]
    available = {o.name for o in candidate.get_outputs()}
    wanted = [n for n in names if n in available]
    candidate_inputs = {i.name for i in candidate.get_inputs()}
    report.differences.extend(
        OutputDifference(n, "missing", "the rewritten model has no such output", {})
        for n in names
        if n not in available
    )
    plan = SizePlan.of(graph, equalities, symbol_ranges)
    rng = random.Random(seed)
    data_rng = np.random.default_rng(seed)
    computed_in = _narrowest_float(graph)

    def attempt(binding: dict[str, int], record: bool = True) -> str:
        """Compares one run; returns ``""`` when the original ran, else why not."""
        expected = feeds = None
        error = ""
        for random_ints in (True, False):
            try:
                feeds = feeds_for(
                    graph, input_dims, binding, data_rng, random_ints=random_ints
                )
                expected = run(reference, names, feeds)
                break
            except Exception as e:  # sizes or data the original cannot run with
                error = f"the original failed under {binding}: {short_error(e)}"
        if expected is None or feeds is None:
            if record:
                report.errors.append(error)
            return error
        report.runs += 1
        report.bindings.append(binding)
        try:
            actual = run(
                candidate, wanted, {k: v for k, v in feeds.items() if k in candidate_inputs}
            )
        except Exception as e:  # the rewrite broke a run the original makes
            report.differences.append(OutputDifference("<run>", "failed", str(e), binding))
            return ""
        by_name = dict(zip(names, expected))
        for name, value in zip(wanted, actual):
            report.compared_outputs += 1
            difference = _compare_arrays(
                name, by_name[name], value, binding, rtol, atol, computed_in
            )
            if difference is not None:
                report.differences.append(difference)
        return ""

    models = [original, rewritten]
    plan, size_range = run_sizes(
        plan,
        attempt,
        rng,
        lambda p: candidate_relations(models, p, model_facts(original)),
        runs=runs,
        wanted=lambda: report.runs < runs,
        explicit=sizes,
        errors=report.errors,
    )
    if runs > 0:
        report.relations = list(plan.relations)
    if edges and report.runs:
        for _, binding in plan.edges(rng, size_range):
            attempt(binding, record=False)  # an edge the original refuses is no input
    return report
