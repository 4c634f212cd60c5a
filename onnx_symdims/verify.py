"""Checking inferred shapes against onnxruntime: the user's proof that no dim is wrong.

:func:`verify_model` runs the model with onnxruntime under a few assignments of its
input symbols, with every intermediate value of the main graph exposed as an output,
and compares every written dim with the real one:

* an ``int`` dim must equal the actual size;
* a symbolic dim is evaluated under the binding. Symbols that do not appear on the
  graph inputs (fresh symbols such as ``NonZero_nz_nnz``) are bound by their first
  occurrence, so the same symbol must have the same size everywhere in one run;
* a rank that differs from the actual rank is a mismatch.

Sizes are random in ``2..8`` (never 1, which would hide broadcasting mistakes; larger
after rejected runs) and respect the relations the model implies (see
:mod:`onnx_symdims._verify_sizes`): proven equalities, the user's, and when no run
with independent sizes succeeds, a relation between the input sizes (the equalities
inference proves, then guesses read from the written dims, simplest first), adopted
only when several independent draws under it run. ``edges=True`` adds the sizes users
deploy: batch 1, ``seq_len = 1`` (decode), ``past_seq_len = 0`` (prefill).

It works on any model with shapes written in it (ours or another tool's), as long as
the ``dim_param`` texts are expressions ``parse_dim`` reads.

:func:`compare_models` (from :mod:`onnx_symdims._verify_compare`) runs an original
and a rewritten model on the same inputs and reports any output difference.
"""

from __future__ import annotations

__all__ = [
    "CompareReport",
    "EdgeRun",
    "Mismatch",
    "OutputDifference",
    "VerifyError",
    "VerifyReport",
    "compare_models",
    "verify_model",
]

import dataclasses
import logging
import random
from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims._verify_compare import CompareReport, OutputDifference, compare_models
from onnx_symdims._verify_ort import VerifyError, feeds_for, make_session, run, short_error
from onnx_symdims._verify_sizes import (
    SIZE_RANGES,
    SizePlan,
    candidate_relations,
    model_facts,
    parse_shape,
    run_sizes,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim

#: Symbols are bound to sizes in this range (inclusive) first; ``SIZE_RANGES`` lists
#: the larger ones tried when onnxruntime rejects a run (convolution stacks need larger
#: images than 8).
LOW, HIGH = SIZE_RANGES[0]


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One inferred dim (or rank) that disagrees with onnxruntime.

    Attributes:
        value: Name of the value.
        axis: The axis, or ``None`` for a rank mismatch.
        inferred: The inferred dim (or shape) as written in the model.
        actual: The actual size (or shape).
        binding: The assignment of input symbols of the run.
        message: Explanation.
    """

    value: str
    axis: int | None
    inferred: str
    actual: str
    binding: Mapping[str, int]
    message: str

    def __str__(self) -> str:
        where = self.value if self.axis is None else f"{self.value}[{self.axis}]"
        return f"{where}: inferred {self.inferred}, actual {self.actual} ({self.message}) under {dict(self.binding)}"


@dataclasses.dataclass(frozen=True)
class EdgeRun:
    """One edge-size run (``past_seq_len=0``, ``all sizes 1``, ...).

    Attributes:
        label: Which edge.
        binding: The sizes.
        error: onnxruntime's refusal, or ``""`` when it ran (and its dims were checked).
        departure: Why the run does not judge the dims (onnxruntime ran what the spec
            calls invalid, see :attr:`VerifyReport.departures`), or ``""``.
    """

    label: str
    binding: Mapping[str, int]
    error: str = ""
    departure: str = ""


@dataclasses.dataclass
class VerifyReport:
    """What :func:`verify_model` found.

    Attributes:
        runs: Number of onnxruntime runs that succeeded (edge runs included).
        checked_dims: Number of (value, axis, run) dims compared.
        unchecked_dims: Dims that could not be evaluated (a symbol never bound).
        mismatches: Every disagreement.
        errors: Runs that failed (e.g. onnxruntime rejected the random inputs); when
            none ran, the first one sums up the search (sizes tried, what onnxruntime
            said) and the failed runs of each guess follow the others.
        bindings: The input-symbol assignment of each attempted run.
        relations: Guessed relations between input symbols the sizes followed.
        edges: The edge-size runs (with ``edges=True``).
        departures: Runs onnxruntime completed although the spec calls them invalid (a
            ``Reshape`` with ``allowzero=1`` whose shape holds a 0 beside a -1): the
            written dims describe the runs the spec allows, so such a run's dims are
            not compared (nor counted in :attr:`runs`).
    """

    runs: int = 0
    checked_dims: int = 0
    unchecked_dims: int = 0
    mismatches: list[Mismatch] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    bindings: list[dict[str, int]] = dataclasses.field(default_factory=list)
    relations: list[str] = dataclasses.field(default_factory=list)
    edges: list[EdgeRun] = dataclasses.field(default_factory=list)
    departures: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when at least one run succeeded and nothing disagreed."""
        return self.runs > 0 and not self.mismatches


_parse_shape = parse_shape


class _RunChecker:
    """Compares one run's actual shapes with the written ones."""

    def __init__(self, report: VerifyReport, binding: dict[str, int]) -> None:
        self.report = report
        self.input_binding = binding
        self.binding = dict(binding)

    def bind_free_symbols(
        self, observed: Sequence[tuple[str, list[Dim | None], tuple[int, ...]]]
    ) -> None:
        """Binds the symbols the inputs do not fix.

        A bare symbol takes its first observed size, then ``c*x + k`` with one unbound
        ``x`` is solved, until nothing changes.
        """
        changed = True
        while changed:
            changed = False
            for _, dims, actual in observed:
                if len(dims) != len(actual):
                    continue
                for d, size in zip(dims, actual):
                    if not isinstance(d, expr.DimExpr):
                        continue
                    free = [s for s in d.symbols() if s not in self.binding]
                    if len(free) != 1:
                        continue
                    solved = _solve_linear(d, free[0], size, self.binding)
                    if solved is not None:
                        self.binding[free[0]] = solved
                        changed = True

    def check(self, name: str, dims: list[Dim | None], actual: tuple[int, ...]) -> None:
        report = self.report
        if len(dims) != len(actual):
            report.mismatches.append(
                Mismatch(
                    name, None, _render(dims), str(list(actual)), self.input_binding, "rank"
                )
            )
            return
        for axis, (d, size) in enumerate(zip(dims, actual)):
            if d is None:
                continue
            try:
                expected = expr.evaluate(d, self.binding)
            except KeyError:
                report.unchecked_dims += 1
                continue
            except (ArithmeticError, ValueError) as e:
                report.mismatches.append(
                    Mismatch(
                        name,
                        axis,
                        expr.to_onnx(d),
                        str(size),
                        self.input_binding,
                        f"undefined: {e}",
                    )
                )
                continue
            report.checked_dims += 1
            if expected != size:
                report.mismatches.append(
                    Mismatch(
                        name,
                        axis,
                        _render_dim(d),
                        str(size),
                        self.input_binding,
                        f"evaluates to {expected}",
                    )
                )


def _render_dim(d: Dim | None) -> str:
    return "?" if d is None else expr.to_onnx(d)


def _render(dims: Sequence[Dim | None]) -> str:
    return "[" + ", ".join(_render_dim(d) for d in dims) + "]"


def _solve_linear(
    d: expr.DimExpr, name: str, size: int, binding: Mapping[str, int]
) -> int | None:
    """Solves ``d == size`` for ``name`` when ``d`` is ``c*name + rest`` (rest bound)."""
    x = expr.sym(name)
    monomials, constant = d.coefficients()
    coefficient = monomials.get(x)
    if coefficient is None:
        return None
    rest: Dim = constant
    for monomial, c in monomials.items():
        if monomial is x:
            continue
        if name in monomial.symbols():
            return None  # nonlinear in the unknown
        rest = expr.add(rest, expr.mul(c, monomial))
    try:
        rest_value = expr.evaluate(rest, binding)
    except (KeyError, ArithmeticError, ValueError):
        return None
    numerator = size - rest_value
    if numerator % coefficient:
        return None
    return numerator // coefficient


#: Element types onnxruntime's Python API cannot return as a numpy array.
_NO_NUMPY = frozenset(
    getattr(ir.DataType, name)
    for name in (
        "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
        "FLOAT8E8M0", "INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2",
    )
    if hasattr(ir.DataType, name)
)  # fmt: skip


class _Runner:
    """One session of the model; runs it under a binding and checks the dims."""

    def __init__(self, model: ir.Model, report: VerifyReport, seed: int) -> None:
        graph = model.graph
        self.graph = graph
        self.report = report
        self.input_dims = [parse_shape(v.shape) for v in graph.inputs]
        self.checked = [
            value
            for node in graph
            for value in node.outputs
            if value.name
            and value.shape is not None
            and value.dtype not in (None, ir.DataType.UNDEFINED, *_NO_NUMPY)
            # A sequence's shape is its elements' one: only tensors are exposed and checked.
            and (value.type is None or isinstance(value.type, ir.TensorType))
        ]
        self.session = make_session(model, self.checked)
        # onnxruntime's Python API returns no bfloat16 (float8, int4) array: asking for
        # one fails every run, so such graph outputs go unchecked.
        skipped = {o.name for o in graph.outputs if o.dtype in _NO_NUMPY}
        self.output_names = [
            o.name for o in self.session.get_outputs() if o.name not in skipped
        ]
        self.data_rng = np.random.default_rng(seed)
        self.reshapes_allowing_zero = [
            node
            for node in graph
            if node.op_type == "Reshape"
            and node.domain in ("", "ai.onnx")
            and len(node.inputs) > 1
            and node.inputs[1] is not None
            and node.attributes.get_int("allowzero", 0)
        ]
        self.departure = ""

    def _spec_departure(self, values: Mapping[str, np.ndarray]) -> str:
        """Why the spec calls this run invalid although onnxruntime completed it, or ``""``.

        ``Reshape`` with ``allowzero=1``: "it is invalid for the specified shape to
        contain both a zero value and -1"; onnxruntime then takes the -1 as the product
        of the nonzero input dims over that of the nonzero shape elements.
        """
        for node in self.reshapes_allowing_zero:
            target = node.inputs[1]
            const = target.const_value
            shape = const.numpy() if const is not None else values.get(target.name)
            if shape is None:
                continue  # not exposed (no shape written): nothing to read
            shape = np.asarray(shape).ravel()
            if (shape == -1).any() and (shape == 0).any():
                return (
                    f"Reshape {node.name or node.outputs[0].name!r} (allowzero=1) got "
                    f"{shape.tolist()}, a 0 beside a -1, which the spec calls invalid"
                )
        return ""

    def attempt(self, binding: dict[str, int], *, record: bool = True) -> str:
        """Runs under ``binding`` and checks every dim; returns ``""`` or the error.

        A run the spec calls invalid is not checked: :attr:`departure` says why.
        """
        report = self.report
        try:
            feeds = feeds_for(self.graph, self.input_dims, binding, self.data_rng)
            results = run(self.session, self.output_names, feeds)
        except Exception as e:  # onnxruntime rejects inputs it cannot run with
            error = f"onnxruntime failed under {binding}: {short_error(e)}"
            if record:
                report.errors.append(error)
            return error
        values = dict(zip(self.output_names, results))
        self.departure = self._spec_departure(values) if self.reshapes_allowing_zero else ""
        if self.departure:
            report.departures.append(f"{binding}: {self.departure}")
            return ""
        report.runs += 1
        actual = {name: np.shape(r) for name, r in values.items()}
        observed = [
            (value.name, parse_shape(value.shape), actual[value.name])
            for value in [*self.checked, *self.graph.outputs]
            if value.name in actual
            and value.shape is not None
            # A sequence output's shape is its elements' one, not the list's (as for
            # self.checked): [2, N] against [N] was a false mismatch.
            and (value.type is None or isinstance(value.type, ir.TensorType))
        ]
        checker = _RunChecker(report, binding)
        checker.bind_free_symbols(observed)  # type: ignore[arg-type]
        seen: set[str] = set()
        for name, dims, shape in observed:
            if name not in seen:
                seen.add(name)
                checker.check(name, dims, shape)  # type: ignore[arg-type]
        return ""


def verify_model(
    model: ir.Model,
    *,
    runs: int = 3,
    seed: int = 0,
    bindings: Sequence[Mapping[str, int]] | None = None,
    equalities: Sequence[tuple[Dim, Dim]] = (),
    symbol_ranges: Mapping[str, tuple[int | None, int | None]] | None = None,
    edges: bool = False,
    guess_relations: bool = True,
) -> VerifyReport:
    """Runs ``model`` with onnxruntime and compares every written dim with the real one.

    Args:
        model: A model with inferred shapes (not modified).
        runs: Number of successful random runs wanted (sizes 2..8; larger ranges when
            those are rejected); 0 runs only ``bindings``.
        seed: Seed of the random assignments and input data.
        bindings: Explicit assignments, run after the random ones; symbols they leave
            out are drawn (following the relations found by then).
        equalities: Known equalities between input symbols (e.g. from
            ``ShapesContext.constraint_dims()``), used to draw consistent assignments.
        symbol_ranges: ``{symbol: (lower, upper)}`` the written dims assume (as given to
            inference); sizes outside are never drawn.
        edges: Also run the edge sizes (all ones; each symbol 0; each symbol 1). An
            edge onnxruntime refuses is recorded in ``edges``, not as an error.
        guess_relations: When no run with independent sizes succeeds, try relations
            between input symbols: the equalities inference proves on the model, then
            guesses read from its dims (see ``candidate_relations``), each adopted only
            when several independent draws under it run.

    Returns:
        The :class:`VerifyReport`.

    Raises:
        ImportError: onnxruntime is not installed.
        VerifyError: onnxruntime refuses to create a session for the model.
    """
    report = VerifyReport()
    runner = _Runner(model, report, seed)
    plan = SizePlan.of(model.graph, equalities, symbol_ranges)
    rng = random.Random(seed)

    def attempt(binding: dict[str, int], record: bool) -> str:
        if record:
            report.bindings.append(binding)
        error = runner.attempt(binding, record=record)
        if not error and not record:
            report.bindings.append(binding)  # a guess's run that succeeded
        return error

    plan, size_range = run_sizes(
        plan,
        attempt,
        rng,
        lambda p: candidate_relations([model], p, model_facts(model)),
        runs=runs,
        wanted=lambda: report.runs < runs,
        explicit=bindings or (),
        errors=report.errors,
        guess=guess_relations,
    )
    if runs > 0:
        report.relations = list(plan.relations)
    if edges and report.runs:
        for label, binding in plan.edges(rng, size_range):
            report.bindings.append(binding)
            error = runner.attempt(binding, record=False)
            report.edges.append(EdgeRun(label, binding, error, runner.departure))
    return report
