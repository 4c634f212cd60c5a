"""Compares a fused model's outputs with the unfused model's in onnxruntime.

The fusion guard (:mod:`~onnx_symdims.rewrite._guard`) proves shapes; a fusion that
keeps every shape but computes something else passes it (onnxscript's cross-attention
rule read a sequence-first key as heads first when its length equalled the heads: logits
off by 2 % of their scale). This module runs the model before the fusions and after
them in onnxruntime (graph optimizations off) on the same random inputs, at a few size
bindings, and says which output differs by more than the fused kernels round.

**Sizes.** The inputs' symbolic dims get small sizes (2..5, all 1, then 32 and 64 beside
a batch of 2 and 1: a convolution stack needs room), within the
bounds the original model proved (``assume``), and the symbols that the original's
analysis proves equal to an expression of the others (or that an elementwise node puts
beside one: ``total_seq_len`` added to a mask of ``past_seq_len + seq_len`` columns), and a
rarely used symbol as a sum of others the dims use (a mask of ``total_seq_len`` columns
reshaped to the keys' length), are tried defined so. A binding is used when the *unfused* model runs at it: whatever led to
the sizes, such a run is a real run of the model. At most :data:`MAX_TRIES` bindings are
tried and :data:`MAX_BINDINGS` used.

**Values.** Floats are standard normal; integers are 0 or 1 (an index into any
embedding, a valid mask), the first element of each last-axis row 1 (a mask hides no
whole row: where every score is masked the original's fill value and onnxruntime's fused
kernels' ``-10000`` legitimately give different rows); when the model refuses them, one
integer input at a time is tried all zeros (a token-type embedding of one row). Booleans
are random.

**Tolerance.** An output matches when ``max |fused - unfused| <= ATOL + rtol *
max |unfused|`` (``rtol``: :data:`RTOL`, or :data:`RTOL_LOW_PRECISION` when the model
computes in float16 anywhere): the bound scales with the output, as the rounding of a
fused kernel does. Positions where the unfused output is not
finite are not compared (the original computes no number there); integer and boolean
outputs must be equal.
"""

from __future__ import annotations

__all__ = [
    "Mismatch",
    "Reference",
    "SizePlan",
    "compare",
    "onnxruntime_or_none",
    "reference_runs",
    "size_plan",
]

import collections
import dataclasses
import itertools
import logging
import os
from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)

#: Bindings run at most (each costs one run of each model compared).
MAX_BINDINGS = 3
#: Bindings tried at most on the unfused model (a failed try costs one run).
MAX_TRIES = 10
#: Relative tolerance, of ``max |unfused|``, of a model computing in float32 (or
#: double) alone: fused kernels rounded at most 4.7e-7 of it over the corpora (96 models),
#: the Perceiver misfire was 2e-2.
RTOL = 1e-4
#: Relative tolerance of a model with float16 or bfloat16 values anywhere (its outputs
#: may be float32): 1.2e-3 measured (a BERT in float16 cast to float32 at the end).
RTOL_LOW_PRECISION = 5e-3
#: Absolute tolerance, for outputs whose values are all near 0.
ATOL = 1e-5
#: Elementwise ops whose inputs broadcast against each other (a size relation guessed
#: from two of their dims: ``total_seq_len`` beside ``past_seq_len + seq_len``).
_ELEMENTWISE = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Where",
        "Equal",
        "Less",
        "Greater",
        "And",
        "Or",
        "Max",
        "Min",
    }
)
#: Sizes of the free symbols, by binding tried (the i-th symbol in order of first use
#: takes ``pattern[min(i, len - 1)]``): small ones, then room for a convolution stack
#: or a patch embedding (the first symbol, usually the batch, kept small).
_SIZE_PATTERNS = ((2, 3, 4, 5), (5, 4, 3, 2), (3,), (1,), (2, 32), (1, 64))


def onnxruntime_or_none():
    """The onnxruntime module (telemetry off), or ``None`` when it cannot be imported."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # read at the first import only
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    return ort


def _session(ort, model: ir.Model):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    proto = ir.serde.serialize_model(model)
    del proto.graph.value_info[:]  # onnxruntime neither sees nor trusts our shapes
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


@dataclasses.dataclass
class Reference:
    """The unfused model's outputs at the bindings it ran at.

    Attributes:
        runs: ``(binding, feeds, outputs)`` per binding.
        output_names: The graph outputs' names.
        rtol: The relative tolerance of the outputs (:data:`RTOL`, or
            :data:`RTOL_LOW_PRECISION` for a model computing in float16 or bfloat16).
    """

    runs: list[tuple[dict[str, int], dict[str, np.ndarray], list[np.ndarray]]]
    output_names: list[str]
    rtol: float = RTOL


@dataclasses.dataclass
class Mismatch:
    """An output of the fused model that differs from the unfused one's.

    Attributes:
        output: The graph output's name.
        binding: The sizes it differs at.
        difference: ``max |fused - unfused|`` (``inf``: other shape, not finite, or the
            fused model failed; for integers the number of elements that differ).
        scale: ``max |unfused|`` over its finite elements.
        error: The fused model's error when it failed to run.
    """

    output: str
    binding: dict[str, int]
    difference: float
    scale: float
    error: str = ""

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.binding.items()) or "static shapes"
        if self.error:
            return f"the fused model fails at {sizes}: {self.error}"
        return (
            f"output {self.output!r} differs from the unfused model's by "
            f"{self.difference:.3g} (max |output| {self.scale:.3g}) at {sizes}"
        )


@dataclasses.dataclass
class SizePlan:
    """How the unfused model's inputs are made (read before the fusions change it).

    Attributes:
        inputs: ``(name, dims, element type)`` of each graph input, dims as proven.
        symbols: The symbols of the input dims, in order of first use.
        guesses: ``(symbol, definition)`` relations tried (see :func:`size_plan`).
        low_precision: Whether the model has float16 or bfloat16 values.
    """

    inputs: list[tuple[str, tuple, ir.DataType]]
    symbols: list[str]
    guesses: list[tuple[str, expr.Dim]]
    low_precision: bool = False


_LOW_PRECISION = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})
#: Ops whose outputs are not a function of their inputs: two runs differ anyway.
_NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
     "Bernoulli", "Multinomial"}
)  # fmt: skip


def size_plan(
    model: ir.Model, facts, declared_outputs: Mapping[str, ir.Shape | None] | None = None
) -> SizePlan | str:
    """The plan of ``model``'s inputs, or why they cannot be made (for a diagnostic).

    Args:
        model: The model before the fusions.
        facts: Its :class:`~onnx_symdims.rewrite.ShapeFacts`.
        declared_outputs: The graph outputs' shapes as the model declared them (a KV
            cache's ``total_seq_len`` where its keys are proven ``past_seq_len +
            seq_len`` long): guessed relations.
    """
    inputs = []
    for value in model.graph.inputs:
        dims = facts.shape(value)
        dtype = value.dtype
        if dims is None or dtype is None or not _feedable(dtype):
            return f"input {value.name!r} has no shape or an element type numpy lacks"
        inputs.append((value.name, tuple(dims), dtype))
    low_precision = any(
        v.dtype in _LOW_PRECISION
        for v in (*model.graph.inputs, *model.graph.initializers.values())
    )
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type in _NONDETERMINISTIC:
            return f"the model has a random op ({node.op_type})"
        low_precision = low_precision or any(v.dtype in _LOW_PRECISION for v in node.outputs)
    symbols = list(dict.fromkeys(s for _, dims, _ in inputs for s in _symbols_of(dims)))
    guesses = _guesses(symbols, model, facts, declared_outputs or {})
    return SizePlan(inputs, symbols, guesses, low_precision)


def reference_runs(
    ort, model: ir.Model, plan: SizePlan, assume: Mapping[str, tuple[int | None, int | None]]
) -> Reference | str:
    """Runs the unfused ``model`` at up to :data:`MAX_BINDINGS` bindings.

    Args:
        ort: The onnxruntime module.
        model: The model before the fusions (not modified).
        plan: Its inputs (:func:`size_plan`).
        assume: Proven bounds of its inputs' symbols.

    Returns:
        The runs, or why none could be made (a sentence for a diagnostic).
    """
    inputs, symbols, guesses = plan.inputs, plan.symbols, plan.guesses
    try:
        session = _session(ort, model)
    except Exception as e:  # a model onnxruntime does not load: nothing to compare with
        return f"onnxruntime cannot load the unfused model ({_short(e)})"
    runs: list = []
    tried: set[tuple] = set()
    last_error = ""
    relations = [(), *((g,) for g in guesses), tuple(guesses)] if guesses else [()]
    # an integer input all zeros: in range of an embedding of one row (token types)
    zeroed = [frozenset(), *(frozenset({n}) for n, _, t in inputs if _is_int(t))]
    # the simplest choices first: fewer relations, fewer inputs zeroed
    choices = sorted(itertools.product(range(len(relations)), range(len(zeroed))), key=sum)
    choices = [(relations[r], zeroed[z]) for r, z in choices]
    for pattern in _SIZE_PATTERNS:
        for choice in choices:
            definitions, zeros = choice
            binding = _binding(symbols, pattern, definitions, assume)
            if binding is None or len(tried) >= MAX_TRIES:
                continue
            key = (tuple(sorted(binding.items())), zeros)
            if key in tried:
                continue
            tried.add(key)
            try:
                feeds = _feeds(inputs, binding, zeros, seed=len(tried))
                outputs = session.run(None, feeds)
            except Exception as e:  # sizes or values the model forbids: try others
                last_error = _short(e)
                continue
            runs.append((binding, feeds, outputs))
            # what ran is tried first at the next sizes
            choices = [choice] + [c for c in choices if c is not choice]
            break
        if len(runs) >= MAX_BINDINGS or not symbols or len(tried) >= MAX_TRIES:
            break
    if not runs:
        return (
            f"the unfused model runs at none of the {len(tried)} bindings tried ({last_error})"
        )
    rtol = RTOL_LOW_PRECISION if plan.low_precision else RTOL
    return Reference(runs, [v.name for v in model.graph.outputs], rtol)


def compare(ort, model: ir.Model, reference: Reference) -> Mismatch | None:
    """The first output of ``model`` that differs from the reference's, or ``None``."""
    try:
        session = _session(ort, model)
    except Exception as e:
        binding = reference.runs[0][0]
        return Mismatch("", binding, float("inf"), 0.0, _short(e))
    for binding, feeds, expected in reference.runs:
        try:
            actual = session.run(None, feeds)
        except Exception as e:
            return Mismatch("", binding, float("inf"), 0.0, _short(e))
        for name, a, e in zip(reference.output_names, actual, expected):
            difference, scale, bound = _difference(
                np.asarray(a), np.asarray(e), reference.rtol
            )
            if not difference <= bound:
                return Mismatch(name, binding, difference, scale)
    return None


def _difference(
    actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL
) -> tuple[float, float, float]:
    """``(max difference, max |expected|, allowed difference)`` of one output."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return float("inf"), 0.0, 0.0
    if expected.size == 0:
        return 0.0, 0.0, 0.0
    if not np.issubdtype(expected.dtype, np.floating):
        if expected.dtype.kind not in "biu":
            return 0.0, 0.0, 0.0  # strings: not what a fusion computes
        return float(np.count_nonzero(actual != expected)), 0.0, 0.0
    finite = np.isfinite(expected)
    if not finite.any():
        return 0.0, 0.0, 0.0
    e = expected[finite].astype(np.float64)
    a = actual[finite].astype(np.float64)
    scale = float(np.max(np.abs(e)))
    difference = float(np.max(np.abs(a - e))) if np.isfinite(a).all() else float("inf")
    return difference, scale, ATOL + rtol * scale


def _short(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _feedable(dtype: ir.DataType) -> bool:
    try:
        numpy_type = dtype.numpy()
    except Exception:
        return False
    return np.dtype(numpy_type).kind in "biuf"


def _symbols_of(dims) -> list[str]:
    names = []
    for d in dims:
        if isinstance(d, expr.DimExpr):
            names.extend(sorted(d.symbols()))
    return names


def _binding(symbols, pattern, definitions, assume) -> dict[str, int] | None:
    """The free symbols sized by ``pattern`` within their ranges, the others defined."""
    binding = {}
    for i, name in enumerate(symbols):
        size = pattern[min(i, len(pattern) - 1)]
        lower, upper = assume.get(name, (None, None))
        if lower is not None and size < lower:
            size = lower
        if upper is not None and size > upper:
            size = upper
        binding[name] = size
    binding = _defined(binding, definitions)
    if any(size < 0 for size in binding.values()):
        return None
    return binding


def _defined(binding: dict[str, int], definitions: list[tuple[str, expr.Dim]]) -> dict:
    for name, definition in definitions:
        try:
            binding[name] = int(expr.evaluate(definition, binding))
        except Exception:  # a definition that does not evaluate is dropped
            continue
    return binding


def _guesses(
    symbols: list[str], model: ir.Model, facts, declared_outputs
) -> list[tuple[str, expr.Dim]]:
    """``(symbol, definition)``: an input symbol proven or seen beside an expression of others.

    From the analysis' recorded equalities, the graph outputs' declared dims beside
    their proven ones, two inputs of an elementwise node whose aligned dims are a bare
    input symbol and an expression of other input symbols, and the two sides of a
    ``broadcast``, ``min`` or ``max`` term of a proven dim.
    """
    known = set(symbols)
    pairs = list(facts.context.constraint_dims())
    uses: collections.Counter[str] = collections.Counter()
    sums: collections.Counter[expr.DimExpr] = collections.Counter()
    for value in model.graph.outputs:
        declared, proven = declared_outputs.get(value.name), facts.shape(value)
        if declared is not None and proven is not None and len(declared) == len(proven):
            pairs.extend(zip(_parsed(declared), proven))
    terms: set = set()
    for node in model.graph:
        for value in node.outputs:
            for d in facts.shape(value) or ():
                if not isinstance(d, expr.DimExpr) or d.is_unknown:
                    continue
                terms.update(d.function_terms())
                used = d.symbols() & known
                uses.update(used)
                if not d.is_symbol and used and used == d.symbols() and _is_sum(d):
                    sums[d] += 1
        if node.domain not in ("", "ai.onnx") or node.op_type not in _ELEMENTWISE:
            continue
        shapes = [facts.shape(v) for v in node.inputs if v is not None]
        for a, b in itertools.combinations([s for s in shapes if s], 2):
            pairs.extend(zip(reversed(a), reversed(b)))
    # a mask sliced to the keys' length: min(total_seq_len, past_seq_len + seq_len)
    pairs.extend(
        tuple(t.args)
        for t in terms
        if t.function in ("broadcast", "min", "max") and len(t.args) == 2
    )
    found: dict[str, expr.Dim] = {}
    for a, b in pairs:
        for name, other in ((a, b), (b, a)):
            if (
                isinstance(name, expr.DimExpr)
                and name.is_symbol
                and name.name in known
                and name.name not in found
                and isinstance(other, expr.DimExpr)
                and not other.is_symbol
                and other.symbols() <= known - {name.name}
            ):
                found[name.name] = other
    # A rarely used input symbol equal to a sum of others the dims use: a decoder's mask
    # of total_seq_len columns that no node puts beside its keys of past_seq_len + seq_len
    # (Mistral's sliding-window mask is built from Range and compared elementwise).
    common = [d for d, _ in sums.most_common(4)]
    for name in sorted(known - set(found), key=lambda s: (uses[s], s)):
        for d in common:
            if name not in d.symbols():
                found[name] = d
                break
    return list(found.items())[:4]


def _is_sum(d: expr.DimExpr) -> bool:
    """True for ``a + b + ... + k`` of bare symbols with positive coefficients."""
    monomials, constant = expr.coefficients(d)
    return constant >= 0 and all(m.is_symbol and c > 0 for m, c in monomials.items())


def _is_int(dtype: ir.DataType) -> bool:
    return np.dtype(dtype.numpy()).kind in "iu"


def _parsed(shape: ir.Shape) -> list[expr.Dim | None]:
    dims: list[expr.Dim | None] = []
    for d in shape.dims:
        try:
            dims.append(
                d if isinstance(d, int) else expr.parse_dim(d.value) if d.value else None
            )
        except Exception:  # a dim_param that is no expression ("seq len"): no relation
            dims.append(None)
    return dims


def _feeds(inputs, binding: Mapping[str, int], zeros, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dims, dtype in inputs:
        shape = tuple(
            d if isinstance(d, int) else int(expr.evaluate(d, binding)) for d in dims
        )
        numpy_type = np.dtype(dtype.numpy())
        if numpy_type.kind == "f":
            array = rng.standard_normal(shape).astype(numpy_type)
        elif numpy_type.kind == "b":
            # an array for a scalar too: onnxruntime refuses a numpy.bool feed, and the
            # check was skipped ("runs at none of the bindings") for a bool flag input
            array = np.asarray(rng.random(shape) < 0.5)
        elif name in zeros:
            array = np.zeros(shape, numpy_type)
        else:
            array = (rng.random(shape) < 0.75).astype(numpy_type)
            if array.ndim:
                array[..., :1] = 1  # no mask row hides every position
            else:
                array = np.asarray(1, numpy_type)
        feeds[name] = array
    return feeds
