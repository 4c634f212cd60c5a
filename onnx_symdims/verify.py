"""Checking inferred shapes against onnxruntime: the user's proof that no dim is wrong.

:func:`verify_model` runs the model with onnxruntime under a few random assignments
of its input symbols (values in ``2..8``; never 1, which would hide broadcasting
mistakes), with every intermediate value of the main graph exposed as an output, and
compares every written dim with the real one:

* an ``int`` dim must equal the actual size;
* a symbolic dim is evaluated under the binding. Symbols that do not appear on the
  graph inputs (fresh symbols such as ``NonZero_nz_nnz``) are bound by their first
  occurrence, so the same symbol must have the same size everywhere in one run;
* a rank that differs from the actual rank is a mismatch.

It works on any model with shapes written in it (ours or another tool's), as long as
the ``dim_param`` texts are expressions ``parse_dim`` reads.
"""

from __future__ import annotations

__all__ = ["Mismatch", "VerifyReport", "verify_model"]

import dataclasses
import logging
import os
import random
from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)

Dim = expr.Dim

#: Symbols are bound to sizes in this range (inclusive).
LOW, HIGH = 2, 8


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


@dataclasses.dataclass
class VerifyReport:
    """What :func:`verify_model` found.

    Attributes:
        runs: Number of onnxruntime runs that succeeded.
        checked_dims: Number of (value, axis, run) dims compared.
        unchecked_dims: Dims that could not be evaluated (a symbol never bound).
        mismatches: Every disagreement.
        errors: Runs that failed (e.g. onnxruntime rejected the random inputs).
        bindings: The input-symbol assignment of each attempted run.
    """

    runs: int = 0
    checked_dims: int = 0
    unchecked_dims: int = 0
    mismatches: list[Mismatch] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    bindings: list[dict[str, int]] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when at least one run succeeded and nothing disagreed."""
        return self.runs > 0 and not self.mismatches


def _parse_shape(shape: ir.Shape | None) -> list[Dim | None] | None:
    if shape is None:
        return None
    dims: list[Dim | None] = []
    for d in shape.dims:
        if isinstance(d, int):
            dims.append(d if d >= 0 else None)
        elif not d.value:
            dims.append(None)
        else:
            dims.append(expr.parse_dim(d.value))
    return dims


def _draw_binding(
    rng: random.Random,
    inputs: Sequence[list[Dim | None] | None],
    size_range: tuple[int, int],
    equalities: Sequence[tuple[Dim, Dim]],
) -> dict[str, int] | None:
    """Random sizes for every symbol of the input dims, or None if none fits.

    An equality ``s == e`` between a bare input symbol and an expression of other input
    symbols (e.g. ``total_seq == past_seq + seq``) sets ``s`` from ``e``.
    """
    names = sorted(
        {
            s
            for dims in inputs
            if dims
            for d in dims
            if isinstance(d, expr.DimExpr)
            for s in d.symbols()
        }
    )
    derived = _derived_symbols(set(names), equalities)
    low, high = size_range
    for _ in range(50):
        binding = {name: rng.randint(low, high) for name in names if name not in derived}
        try:
            for name, definition in derived.items():
                binding[name] = expr.evaluate(definition, binding)
            sizes = [
                expr.evaluate(d, binding)
                for dims in inputs
                if dims
                for d in dims
                if d is not None
            ]
        except (ArithmeticError, ValueError, KeyError):
            continue
        if all(s >= 0 for s in sizes):
            return binding
    return None


def _derived_symbols(names: set[str], equalities: Sequence[tuple[Dim, Dim]]) -> dict[str, Dim]:
    """``{symbol: definition}`` from equalities between input symbols (no cycles)."""
    derived: dict[str, Dim] = {}
    for a, b in equalities:
        for target, definition in ((a, b), (b, a)):
            if not (isinstance(target, expr.DimExpr) and target.is_symbol):
                continue
            name = target.name
            uses = (
                definition.symbols() if isinstance(definition, expr.DimExpr) else frozenset()
            )
            if (
                name in names
                and name not in derived
                and uses
                and uses <= names
                and name not in uses
                and not uses & derived.keys()
                and not any(
                    name in d.symbols()
                    for d in derived.values()
                    if isinstance(d, expr.DimExpr)
                )
            ):
                derived[name] = definition  # type: ignore[assignment]
                break
    return derived


def _input_array(
    rng: np.random.Generator, value: ir.Value, dims: list[int], dtype: ir.DataType
) -> np.ndarray:
    np_dtype = dtype.numpy()
    name = (value.name or "").lower()
    if dtype == ir.DataType.BOOL or "mask" in name:
        return np.ones(dims, dtype=np_dtype)
    if dtype.is_floating_point():
        return rng.standard_normal(dims).astype(np_dtype)
    return np.zeros(dims, dtype=np_dtype)  # valid ids / indices for any vocabulary


def _session(model: ir.Model, checked: Sequence[ir.Value]):
    import onnxruntime as ort

    proto = ir.serde.serialize_model(model)
    graph = proto.graph
    # Run without our annotations: onnxruntime must not see (or trust) inferred shapes.
    del graph.value_info[:]
    existing = {o.name for o in graph.output}
    for value in checked:
        if value.name in existing:
            continue
        output = graph.output.add()
        output.name = value.name
        output.type.tensor_type.elem_type = int(value.dtype)  # type: ignore[arg-type]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    base_dir = _external_data_dir(model)
    if base_dir:
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", base_dir
        )
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _external_data_dir(model: ir.Model) -> str | None:
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if isinstance(tensor, ir.ExternalTensor):
            return os.path.abspath(tensor.base_dir or ".")
    return None


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


#: Size ranges tried in turn when onnxruntime rejects a run (convolution stacks
#: need larger images than 8).
SIZE_RANGES = ((LOW, HIGH), (8, 32), (32, 64))


def verify_model(
    model: ir.Model,
    *,
    runs: int = 3,
    seed: int = 0,
    bindings: Sequence[Mapping[str, int]] | None = None,
    equalities: Sequence[tuple[Dim, Dim]] = (),
) -> VerifyReport:
    """Runs ``model`` with onnxruntime and compares every written dim with the real one.

    Args:
        model: A model with inferred shapes (not modified).
        runs: Number of successful runs wanted, each under a random assignment of the
            input symbols (sizes 2..8; after a rejected run, larger ranges are tried).
        seed: Seed of the random assignments and input data.
        bindings: Explicit assignments of the input symbols to run instead.
        equalities: Known equalities between input symbols (e.g. from
            ``ShapesContext.constraint_dims()``), used to draw consistent assignments.

    Returns:
        The :class:`VerifyReport`.

    Raises:
        ImportError: onnxruntime is not installed.
    """
    report = VerifyReport()
    graph = model.graph
    input_dims = [_parse_shape(v.shape) for v in graph.inputs]
    checked = [
        value
        for node in graph
        for value in node.outputs
        if value.name
        and value.shape is not None
        and value.dtype not in (None, ir.DataType.UNDEFINED)
    ]
    session = _session(model, checked)
    output_names = [o.name for o in session.get_outputs()]
    rng = random.Random(seed)
    data_rng = np.random.default_rng(seed)
    explicit = list(bindings) if bindings is not None else None
    attempts = len(explicit) if explicit is not None else runs * 3
    failures = 0
    for attempt in range(attempts):
        if report.runs >= runs and explicit is None:
            break
        if explicit is not None:
            binding: dict[str, int] | None = dict(explicit[attempt])
        else:
            size_range = SIZE_RANGES[min(failures, len(SIZE_RANGES) - 1)]
            binding = _draw_binding(rng, input_dims, size_range, equalities)
        if binding is None:
            report.errors.append("no assignment of the input symbols gives valid input dims")
            break
        report.bindings.append(binding)
        if _run_once(
            report, session, output_names, graph, input_dims, checked, binding, rng, data_rng
        ):
            continue
        failures += 1
    return report


def _run_once(
    report: VerifyReport,
    session,
    output_names: list[str],
    graph: ir.Graph,
    input_dims: list[list[Dim | None] | None],
    checked: list[ir.Value],
    binding: dict[str, int],
    rng: random.Random,
    data_rng: np.random.Generator,
) -> bool:
    """One onnxruntime run under ``binding``; returns whether it ran."""
    feeds = {}
    for value, dims in zip(graph.inputs, input_dims):
        if value.name in graph.initializers:
            continue  # an initializer backs it: onnxruntime uses the default
        sizes = [
            expr.evaluate(d, binding) if d is not None else rng.randint(LOW, HIGH)
            for d in (dims or [])
        ]
        feeds[value.name] = _input_array(
            data_rng, value, sizes, value.dtype or ir.DataType.FLOAT
        )
    try:
        results = session.run(output_names, feeds)
    except Exception as e:  # onnxruntime rejects inputs it cannot run with
        report.errors.append(f"onnxruntime failed under {binding}: {e}")
        return False
    report.runs += 1
    actual = {name: np.shape(r) for name, r in zip(output_names, results)}
    observed = [
        (value.name, _parse_shape(value.shape), actual[value.name])
        for value in [*checked, *graph.outputs]
        if value.name in actual and value.shape is not None
    ]
    checker = _RunChecker(report, binding)
    checker.bind_free_symbols(observed)  # type: ignore[arg-type]
    seen: set[str] = set()
    for name, dims, shape in observed:
        if name not in seen:
            seen.add(name)
            checker.check(name, dims, shape)  # type: ignore[arg-type]
    return True
