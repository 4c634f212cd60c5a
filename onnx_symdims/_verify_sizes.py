"""Input sizes for onnxruntime runs: consistent with the model, edge sizes included.

A model with a KV cache only runs when its input sizes are related
(``total_seq_len == past_seq_len + seq_len``), a vision transformer when its image sizes
are multiples of the patch size; independent random sizes make onnxruntime reject every
run. A :class:`SizePlan` draws sizes that respect

* the equalities inference proved (``ShapesContext.constraint_dims()``) and the user's
  ``--verify-bind`` relations: a bare input symbol defined by the others;
* the ranges the written dims assume (``--symbol-range``, ``--assume-nonempty``);
* guessed relations (:class:`Guess`), adopted by :func:`find_sizes` when no run with
  independent sizes succeeds.

:func:`candidate_relations` lists the guesses, simplest and most plausible first:

1. equalities inference proves on the model (:func:`model_facts`);
2. equalities the model's nodes need, solved for one symbol as a sum or difference of
   the others (``total_seq_len = past_seq_len+seq_len``): the two sides of a
   ``broadcast``/``min``/``max`` term, the inputs of an elementwise op, of a
   ``MatMul``, of a ``Concat``;
3. input sizes the dims divide by a constant (``height//16``): multiples of it;
4. a range of one symbol where an equality of 1 or 2 holds whatever the others are (a
   sliding window of 8: ``past_seq_len <= 8``), alone then with each of the first other
   guesses (``past_seq_len <= 8, total_seq_len = past_seq_len+seq_len``); then a size the
   equalities of 2 fix (a fixed position embedding: ``height = width = 64``);
5. a rarely used input symbol equal to a sum of others the dims use; an input at least
   as long as every window the dims subtract (``(samples - 511)//384``: ``samples >=
   895``), when that is beyond the sizes drawn first (an audio encoder's convolutions);
6. the image sizes multiples of a common patch, stride or window size (2, 4, 8, 14, 16,
   32, 64);
7. two symbols equal;
8. last, products and quotients (``batch = (height//16)*(width//16)``,
   ``total_seq_len = batch*(past_seq_len+seq_len)``): relations between dims that
   rarely mean anything.

A guess is adopted only when :data:`VALIDATION_DRAWS` independent draws under it, with
different sizes, all run: a relation that fitted one draw by chance is not kept. Those
draws never collapse a size to 0 or 1 (an empty tensor runs anywhere, a 1 broadcasts
anywhere), and multiples are drawn as ``m, 2m, 3m`` (an odd multiple shows a divisor
that is too small). A guess only narrows which runs are tried: a run onnxruntime accepts
is a real run of the model whatever led to its sizes, so checking dims under it stays
sound. When nothing runs, :meth:`SizeSearch.summary` says which sizes were tried and
what onnxruntime said.

:meth:`SizePlan.edges` gives the sizes users deploy and random draws miss: all ones
(batch 1, decode ``seq_len = 1``), each symbol 0 (``past_seq_len = 0``: prefill with an
empty cache) and each symbol 1.
"""

from __future__ import annotations

__all__ = [
    "SIZE_RANGES",
    "Guess",
    "SizePlan",
    "SizeSearch",
    "candidate_relations",
    "find_sizes",
    "model_facts",
    "more_runs",
    "parse_shape",
    "run_sizes",
]

import collections
import dataclasses
import itertools
import logging
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes import is_anonymous_dim_text

logger = logging.getLogger(__name__)

Dim = expr.Dim
Range = tuple[int | None, int | None]

#: Size ranges tried in turn (inclusive): sizes 2..8 first (never 1, which would hide
#: broadcasting mistakes), larger ones for convolution stacks that need room.
SIZE_RANGES: tuple[tuple[int, int], ...] = ((2, 8), (8, 32), (32, 64))
#: How many guessed relations are tried at most.
MAX_GUESSES = 24
#: How many onnxruntime runs the guesses may cost in all.
MAX_GUESS_RUNS = 60
#: Successful draws with distinct sizes a guess needs to be adopted.
VALIDATION_DRAWS = 3
#: Patch, stride and window sizes tried for image sizes when the model names none.
COMMON_DIVISORS = (2, 4, 8, 14, 16, 32, 64)
#: Distinct equalities read from a model at most (each may cost a scan for a size).
MAX_EQUATIONS = 64
#: Largest size scanned for a fixed size (``height = width = 224``).
MAX_FIXED_SIZE = 1024
#: Largest size scanned for a symbol's range (``past_seq_len <= 8``).
MAX_BOUND_SIZE = 256
#: Sizes the other symbols take while a symbol's range is scanned (0 and 1 included:
#: the edge runs use them).
BOUND_SAMPLES = (0, 1, 2, 3, 5, 8, 13, 64)
#: Assignments of the other symbols tried at most per size of the scanned symbol.
MAX_BOUND_ASSIGNMENTS = 64
#: Other guesses a range is also tried with (the range alone rarely runs a decoder:
#: ``total_seq_len`` must follow too).
MAX_BOUND_PARTNERS = 6

_EVAL_ERRORS = (ArithmeticError, ValueError, KeyError, expr.ExprError)

#: Ops of the default domain whose inputs broadcast against each other.
_ELEMENTWISE = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual",
        "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "Max", "Min", "Sum",
        "Mean", "PRelu", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    }
)  # fmt: skip


def parse_shape(shape: ir.Shape | None) -> list[Dim | None] | None:
    """The dims of ``shape`` (``None`` for an unknown dim), or ``None`` without a shape."""
    if shape is None:
        return None
    dims: list[Dim | None] = []
    for d in shape.dims:
        if isinstance(d, int):
            dims.append(d if d >= 0 else None)
        elif not d.value or is_anonymous_dim_text(d.value):
            dims.append(None)
        else:
            # As inference reads it (ShapesContext.dims_from_ir): "-1" names no dim.
            parsed = expr.parse_dim(d.value)
            unknown = parsed < 0 if isinstance(parsed, int) else parsed.is_unknown
            dims.append(None if unknown else parsed)
    return dims


def _symbols(dims: Iterable[Dim | None]) -> set[str]:
    return {s for d in dims if isinstance(d, expr.DimExpr) for s in d.symbols()}


def _uses(d: Dim | None) -> frozenset[str]:
    return d.symbols() if isinstance(d, expr.DimExpr) else frozenset()


@dataclasses.dataclass(frozen=True)
class Guess:
    """A guessed relation between input sizes.

    Attributes:
        text: The relation (``total = past+seq``, ``height, width multiples of 16``).
        why: Where it comes from.
        defines: ``(symbol, definition)`` pairs: symbols set from the others (or to a
            constant).
        multiples: ``(symbol, m)`` pairs: symbols drawn as multiples of ``m``.
        rank: Sort key, simplest and most plausible first.
        ranges: ``(symbol, (lower, upper))`` pairs: symbols kept within the range
            (``None``: no bound on that side), on top of the plan's ranges.
    """

    text: str
    why: str
    defines: tuple[tuple[str, Dim], ...] = ()
    multiples: tuple[tuple[str, int], ...] = ()
    rank: tuple = ()
    ranges: tuple[tuple[str, Range], ...] = ()

    @property
    def key(self) -> tuple:
        """What the guess does (two guesses with one key draw the same sizes)."""
        return (
            frozenset((n, expr.to_onnx(d) if isinstance(d, expr.DimExpr) else d)
                      for n, d in self.defines),
            frozenset(self.multiples),
            frozenset(self.ranges),
        )  # fmt: skip

    def __str__(self) -> str:
        return f"{self.text} ({self.why})"


def _define(name: str, definition: Dim, why: str, rank: tuple) -> Guess:
    return Guess(f"{name} = {expr.to_onnx(definition)}", why, ((name, definition),), (), rank)


@dataclasses.dataclass
class SizePlan:
    """How input symbols get sizes.

    Attributes:
        inputs: Parsed dims of each graph input (``None``: no shape).
        symbols: The symbols of the input dims, sorted.
        derived: ``{symbol: definition}`` for symbols set from the others.
        ranges: ``{symbol: (lower, upper)}`` the sizes must respect.
        relations: Guessed relations adopted, as text (``total = past+seq (why)``).
        multiples: ``{symbol: m}``: free symbols drawn as multiples of ``m``.
    """

    inputs: list[list[Dim | None] | None]
    symbols: list[str]
    derived: dict[str, Dim] = dataclasses.field(default_factory=dict)
    ranges: dict[str, Range] = dataclasses.field(default_factory=dict)
    relations: list[str] = dataclasses.field(default_factory=list)
    multiples: dict[str, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(
        cls,
        graph: ir.Graph,
        equalities: Sequence[tuple[Dim, Dim]] = (),
        ranges: Mapping[str, Range] | None = None,
    ) -> SizePlan:
        inputs = [
            parse_shape(v.shape) for v in graph.inputs if v.name not in graph.initializers
        ]
        symbols = sorted(_symbols(d for dims in inputs if dims for d in dims))
        plan = cls(inputs, symbols, ranges=dict(ranges or {}))
        plan.derived = _derived_symbols(set(symbols), equalities)
        return plan

    @property
    def independent(self) -> list[str]:
        """Symbols drawn freely (not derived)."""
        return [s for s in self.symbols if s not in self.derived]

    def with_relation(self, name: str, definition: Dim, why: str) -> SizePlan | None:
        """A copy that also sets ``name`` from ``definition``; ``None`` if it is circular."""
        guess = _define(name, definition, why, ())
        return self.with_guess(guess)

    def with_guess(self, guess: Guess) -> SizePlan | None:
        """A copy that follows ``guess`` too; ``None`` when it cannot (circular, unknown)."""
        derived = dict(self.derived)
        multiples = dict(self.multiples)
        ranges = dict(self.ranges)
        names = set(self.symbols)
        for name, (lower, upper) in guess.ranges:
            if name not in names:
                return None
            old_lower, old_upper = ranges.get(name, (None, None))
            lower = _tighter(max, old_lower, lower)
            upper = _tighter(min, old_upper, upper)
            if upper is not None and upper < max(lower or 0, 0):
                return None  # no size left
            ranges[name] = (lower, upper)
        for name, definition in guess.defines:
            if name in derived or name not in names or name in multiples:
                return None
            if not isinstance(definition, (int, expr.DimExpr)):
                return None
            if isinstance(definition, int) and not _within(ranges, name, definition):
                return None
            uses = _uses(definition)
            if name in uses or uses & derived.keys() or not uses <= names:
                return None
            if any(name in _uses(d) for d in derived.values()):
                return None
            derived[name] = definition
        for name, m in guess.multiples:
            if name not in names or name in derived or m < 2:
                return None
            multiples[name] = math.lcm(multiples.get(name, 1), m)
        return dataclasses.replace(
            self,
            derived=derived,
            multiples=multiples,
            ranges=ranges,
            relations=[*self.relations, str(guess)],
        )

    def _allowed(self, name: str, value: int) -> bool:
        return _within(self.ranges, name, value)

    def _draw_one(
        self, rng: random.Random, name: str, low: int, high: int, variant: int | None
    ) -> int:
        lower, upper = self.ranges.get(name, (None, None))
        lo = max(low, lower if lower is not None else 0)
        hi = min(high, upper) if upper is not None else high
        if lo > hi:  # the range lies outside the wanted sizes: stay inside the range
            lo = hi = lo if upper is None or lo <= upper else upper
        m = self.multiples.get(name)
        if m:
            first = max(1, -(-lo // m))  # the smallest multiple >= lo
            last = max(first + VALIDATION_DRAWS - 1, hi // m)
            if upper is not None:
                last = max(first, min(last, upper // m))
            # Validation draws take consecutive multiples: m, 2m, 3m (an odd multiple
            # shows a divisor that is too small).
            k = first + variant if variant is not None else rng.randint(first, last)
            return m * k
        return rng.randint(lo, hi)

    def draw(
        self,
        rng: random.Random,
        size_range: tuple[int, int],
        fixed: Mapping[str, int] | None = None,
        tries: int = 50,
        *,
        variant: int | None = None,
        degenerate: bool = True,
    ) -> dict[str, int] | None:
        """Sizes for every input symbol, or ``None`` when no draw gives valid input dims.

        ``fixed`` sizes are kept; the other independent symbols are drawn in
        ``size_range`` (within their ranges; multiples as the plan says), derived ones
        computed. Without ``fixed``, a draw where a derived size is below 2 or an input
        dim is 0 is avoided (an empty tensor runs anywhere, a 1 broadcasts anywhere);
        ``degenerate=False`` refuses such draws instead of falling back to them.
        ``variant`` ``i`` draws the ``i``-th multiple above the range's start for every
        multiple (validation draws).
        """
        fixed = dict(fixed or {})
        low, high = size_range
        fallback: dict[str, int] | None = None
        # Sizes the ranges pin (``past_seq_len=0:0``: prefill only) are what the user
        # asked for, not a degenerate draw; nor is a dim or derived size made of them.
        pinned = {n for n, (lo, hi) in self.ranges.items() if lo is not None and lo == hi}
        free_dims = [
            not _uses(d) <= pinned
            for dims in self.inputs
            if dims
            for d in dims
            if d is not None
        ]
        free_derived = [n for n, d in self.derived.items() if not _uses(d) <= pinned]
        for _ in range(tries):
            binding = {
                name: fixed[name]
                if name in fixed
                else self._draw_one(rng, name, low, high, variant)
                for name in self.independent
            }
            try:
                for name, definition in self.derived.items():
                    binding[name] = (
                        fixed[name] if name in fixed else expr.evaluate(definition, binding)
                    )
                sizes = [
                    expr.evaluate(d, binding)
                    for dims in self.inputs
                    if dims
                    for d in dims
                    if d is not None
                ]
            except _EVAL_ERRORS:
                continue
            if not (
                all(s >= 0 for s in sizes)
                and all(self._allowed(n, v) for n, v in binding.items() if n not in fixed)
            ):
                continue
            if fixed or (
                all(s >= 1 for s, free in zip(sizes, free_dims) if free)
                and all(binding[n] >= 2 for n in free_derived if n not in fixed)
            ):
                return binding
            if fallback is None:
                fallback = binding
        return fallback if degenerate else None

    def edges(
        self, rng: random.Random, size_range: tuple[int, int]
    ) -> list[tuple[str, dict[str, int]]]:
        """Edge assignments ``(label, sizes)``: all ones, then each symbol 0, then 1."""
        free = self.independent
        if not free:
            return []
        wanted: list[tuple[str, dict[str, int]]] = [("all sizes 1", dict.fromkeys(free, 1))]
        wanted += [(f"{name}=0", {name: 0}) for name in free]
        if len(free) > 1:
            wanted += [(f"{name}=1", {name: 1}) for name in free]
        out: list[tuple[str, dict[str, int]]] = []
        seen: set[tuple[tuple[str, int], ...]] = set()
        for label, fixed in wanted:
            if not all(self._allowed(n, v) for n, v in fixed.items()):
                continue
            binding = self.draw(rng, size_range, fixed)
            if binding is None:
                continue
            key = tuple(sorted(binding.items()))
            if key not in seen:
                seen.add(key)
                out.append((label, binding))
        return out


def _tighter(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    """``pick(a, b)``, or the one that is not ``None``: two bounds of one side."""
    if a is None or b is None:
        return b if a is None else a
    return pick(a, b)


def _within(ranges: Mapping[str, Range], name: str, value: int) -> bool:
    lower, upper = ranges.get(name, (None, None))
    return value >= (0 if lower is None else lower) and (upper is None or value <= upper)


def _derived_symbols(names: set[str], equalities: Sequence[tuple[Dim, Dim]]) -> dict[str, Dim]:
    """``{symbol: definition}`` from equalities between input symbols (no cycles)."""
    derived: dict[str, Dim] = {}
    for a, b in equalities:
        for target, definition in ((a, b), (b, a)):
            if not (isinstance(target, expr.DimExpr) and target.is_symbol):
                continue
            name = target.name
            uses = _uses(definition)
            if (
                name in names
                and name not in derived
                and uses
                and uses <= names
                and name not in uses
                and not uses & derived.keys()
                and not any(name in _uses(d) for d in derived.values())
            ):
                derived[name] = definition  # type: ignore[assignment]
                break
    return derived


# ----------------------------------------------------------------------------------------
# What the model says about its sizes
# ----------------------------------------------------------------------------------------
def _copy(model: ir.Model) -> ir.Model:
    """A copy of ``model``, also of a graph whose nodes are not in topological order.

    ``Model.clone`` refuses a node that uses a value produced later (it reads it as an
    outer-scope value): onnxruntime's ``convert_float_to_float16(keep_io_types=True)``
    appends the casts of the graph inputs after their users. A serialized copy keeps the
    order; its external weights are read from the original's folder.
    """
    try:
        return model.clone()
    except Exception:  # an unsorted graph: the proto keeps any order
        copy = ir.serde.deserialize_model(ir.serde.serialize_model(model))
        for graph in (model.graph, *model.graph.subgraphs()):
            for value in graph.initializers.values():
                if isinstance(value.const_value, ir.ExternalTensor):
                    base = value.const_value.base_dir
                    ir.external_data.set_base_dir(copy.graph, base)
                    return copy
        return copy


def model_facts(model: ir.Model) -> list[tuple[Dim, Dim]]:
    """Equalities inference proves on ``model`` (a copy; ``model`` is not modified).

    The copy keeps the declared dims of the graph inputs and outputs and forgets the
    others, so the equalities come from the model itself, not from shapes written by
    an earlier run: ``past_seq_len+seq_len == total_seq_len`` when the present keys
    (a Concat of past and current keys) are declared ``total_seq_len`` long.
    """
    from onnx_symdims.passes import SymbolicShapeInferencePass
    from onnx_symdims.shapes import ShapesContext

    copy = _copy(model)
    outputs = set(copy.graph.outputs)
    for node in copy.graph:
        for value in node.outputs:
            if value not in outputs:
                value.shape = None
    context = ShapesContext()
    try:
        SymbolicShapeInferencePass(context=context)(copy)
    except Exception as e:  # a model inference refuses: no facts, guesses still work
        logger.info("verify: no inferred facts (%s)", e)
        return []
    facts = context.constraint_dims()
    # Inference names an opaque dim_param ("seq len") by a readable symbol (seq_len_1);
    # the sizes are drawn for the text (parse_dim), so the facts must speak of it too.
    texts = {name: expr.sym(text) for text, name in context.opaque_dim_names.items()}
    if texts:
        facts = [(expr.substitute(a, texts), expr.substitute(b, texts)) for a, b in facts]
    return facts


def _function_terms(d: Dim | None) -> Iterable[expr.DimExpr]:
    """Every function term of ``d``, nested ones included."""
    if not isinstance(d, expr.DimExpr):
        return
    for term in d.function_terms():
        yield term
        for arg in term.args:
            yield from _function_terms(arg)


def _is_linear(d: Dim) -> bool:
    """True for ``c1*a + c2*b + ... + k`` (bare symbols only)."""
    if isinstance(d, int):
        return True
    monomials, _ = d.coefficients()
    return all(m.is_symbol for m in monomials)


def _has_negative(d: Dim) -> bool:
    """True when a coefficient or the constant of ``d`` is negative."""
    monomials, constant = expr.coefficients(d)
    return constant < 0 or any(c < 0 for c in monomials.values())


def _value_dims(graph: ir.Graph) -> Iterable[list[Dim | None]]:
    for value in (*graph.inputs, *(o for node in graph for o in node.outputs)):
        dims = parse_shape(value.shape)
        if dims:
            yield dims


def _node_equations(graph: ir.Graph) -> Iterable[tuple[Dim, Dim, str]]:
    """``(a, b, op)``: dims a node's inputs need equal (written shapes, any symbols)."""
    for node in graph:
        if node.domain not in ("", "ai.onnx"):
            continue
        shapes = [parse_shape(v.shape) if v is not None else None for v in node.inputs]
        if node.op_type in _ELEMENTWISE:
            known = [s for s in shapes if s]
            rank = max((len(s) for s in known), default=0)
            for axis in range(1, rank + 1):
                dims = [s[-axis] for s in known if len(s) >= axis and s[-axis] is not None]
                dims = [d for d in dims if d != 1]
                for other in dims[1:]:
                    if other != dims[0]:
                        yield dims[0], other, node.op_type
        elif node.op_type == "MatMul" and len(shapes) == 2:
            a, b = shapes
            if (
                a and b and len(a) >= 2 and len(b) >= 2
                and a[-1] is not None and b[-2] is not None and a[-1] != b[-2]
            ):  # fmt: skip
                yield a[-1], b[-2], node.op_type
        elif node.op_type == "Concat":
            known = [s for s in shapes if s]
            if len(known) < 2 or len({len(s) for s in known}) != 1:
                continue
            axis = node.attributes.get_int("axis", 0)
            rank = len(known[0])
            axis = axis + rank if axis < 0 else axis
            for i in range(rank):
                if i == axis:
                    continue
                dims = [s[i] for s in known if s[i] is not None]
                for other in dims[1:]:
                    if other != dims[0]:
                        yield dims[0], other, node.op_type


def _spatial_symbols(graphs: Sequence[ir.Graph]) -> list[str]:
    """Input symbols at the image axes of an image-like input.

    A float input ``[N, C, H, W]`` (``[N, C, L]``, ``[N, C, D, H, W]``) with a constant
    channel count and every image axis symbolic, or ``[N, H, W, C]``. A KV cache
    ``[batch, 8, past_seq_len, 64]`` is none (its last axis is constant).
    """
    out: list[str] = []
    for graph in graphs[:1]:
        for value in graph.inputs:
            dims = parse_shape(value.shape)
            if not dims or len(dims) < 3 or value.dtype is None:
                continue
            if not value.dtype.is_floating_point():
                continue
            rank = len(dims)
            if isinstance(dims[1], int):  # NCHW, NCL, NCDHW
                axes = range(2, rank)
            elif isinstance(dims[-1], int) and rank >= 4:  # NHWC
                axes = range(1, rank - 1)
            else:
                continue
            image = [dims[axis] for axis in axes]
            if all(isinstance(d, expr.DimExpr) and d.is_symbol for d in image):
                out += [d.name for d in image if d.name not in out]  # type: ignore[union-attr]
    return out


class _Survey:
    """What the dims written in the models say about the input symbols."""

    def __init__(self, graphs: Sequence[ir.Graph], inputs: set[str]) -> None:
        self.inputs = inputs
        self.uses: collections.Counter[str] = collections.Counter()
        self.expressions: collections.Counter[Dim] = collections.Counter()
        #: Two dims the model needs equal, and why.
        self.equations: dict[tuple[Dim, Dim], str] = {}
        #: {symbol: divisors the dims divide it by}.
        self.divisors: dict[str, set[int]] = collections.defaultdict(set)
        #: {symbol: the least size giving every ``(symbol - c)//m`` term at least 1}.
        self.lower: dict[str, int] = {}
        seen: set[Dim] = set()
        for graph in graphs:
            for dims in _value_dims(graph):
                for d in dims:
                    if isinstance(d, expr.DimExpr) and not d.is_unknown:
                        self._dim(d, d not in seen)
                        seen.add(d)
            for a, b, op in _node_equations(graph):
                self._equation(a, b, f"{op} needs them equal")

    def _dim(self, d: expr.DimExpr, new: bool) -> None:
        symbols = d.symbols()
        self.uses.update(symbols & self.inputs)
        if not d.is_symbol and symbols and symbols <= self.inputs:
            self.expressions[d] += 1
        if not new:
            return
        for term in _function_terms(d):
            kind, args = term.function, term.args
            if kind in ("broadcast", "min", "max") and len(args) == 2:
                why = (
                    "a broadcast term needs them equal"
                    if kind == "broadcast"
                    else f"a {kind} term compares them"
                )
                self._equation(args[0], args[1], why)
            elif kind in ("floordiv", "exact_div", "mod") and len(args) == 2:
                numerator, divisor = args
                if (
                    isinstance(numerator, expr.DimExpr)
                    and numerator.is_symbol
                    and numerator.name in self.inputs
                    and isinstance(divisor, int)
                    and divisor >= 2
                ):
                    self.divisors[numerator.name].add(divisor)
        self._lower_bound(d)

    def _lower_bound(self, d: expr.DimExpr) -> None:
        """Notes the least ``x`` giving ``d = (x + r)//m + k`` at least 1.

        A window the dim subtracts (``(x - 511)//384``, kept as ``(x + 257)//384 - 2``: a
        stack of strided convolutions) that a shorter input cannot hold: an audio
        encoder needs hundreds of samples, more than the sizes drawn first.
        """
        monomials, k = expr.coefficients(d)
        if len(monomials) != 1 or not isinstance(k, int):
            return
        ((term, coefficient),) = monomials.items()
        if coefficient != 1 or getattr(term, "function", None) != "floordiv":
            return
        numerator, m = term.args
        if not isinstance(m, int) or m < 1 or not isinstance(numerator, expr.DimExpr):
            return
        inner, r = expr.coefficients(numerator)
        if len(inner) != 1 or not isinstance(r, int):
            return
        ((x, one),) = inner.items()
        if one == 1 and x.is_symbol and x.name in self.inputs:
            least = m * (1 - k) - r  # (x + r)//m >= 1 - k
            if least > self.lower.get(x.name, 0):
                self.lower[x.name] = least

    def _equation(self, a: Dim, b: Dim, why: str) -> None:
        if a == b or (isinstance(a, int) and a <= 1) or (isinstance(b, int) and b <= 1):
            return  # a size 1 broadcasts, min(1, n) needs nothing
        if not (_uses(a) | _uses(b)) or not (_uses(a) | _uses(b)) <= self.inputs:
            return
        key = (a, b) if str(a) <= str(b) else (b, a)
        if len(self.equations) < MAX_EQUATIONS or key in self.equations:
            self.equations.setdefault(key, why)


def _solve(a: Dim, b: Dim, why: str, uses: Mapping[str, int], proven: bool) -> list[Guess]:
    """Guesses that make ``a == b`` hold: a symbol defined by the others, a range, a size.

    Ranked: a proven equality first, then a symbol equal to a sum of others, then a
    range of one symbol (:func:`_bounds`), then a fixed size; a symbol equal to a product
    or a quotient of others (``batch = (height//16)*(width//16)``) comes after every
    other kind of guess.
    """
    diff = expr.sub(a, b)
    if isinstance(diff, int):
        return []
    monomials, constant = diff.coefficients()
    # ``2*total == 2*(past+seq)`` (dim_params such as ``seq*2``): divided by the common
    # factor of every term, ``total`` is the rest (not ``2*(past+seq)``).
    common = math.gcd(constant, *monomials.values())
    if common > 1:
        diff = expr.exact_div(diff, common)
        if isinstance(diff, int):
            return []
        monomials, _ = diff.coefficients()
    out: list[Guess] = []
    # Linear in one symbol with coefficient +-1: that symbol is the rest (the least used
    # symbol first: total_seq_len is defined by the others, not the other way around).
    solvable = [
        (m.name, c)
        for m, c in monomials.items()
        if m.is_symbol and c in (1, -1) and sum(m.name in n.symbols() for n in monomials) == 1
    ]
    definitions = []
    for name, c in solvable:
        rest = expr.sub(diff, expr.mul(c, expr.sym(name)))  # diff = c*name + rest
        definition = expr.neg(rest) if c == 1 else rest
        if not (isinstance(definition, int) and definition < 2):
            definitions.append((name, definition))
    # A sum before a difference (``total = past+seq``, not ``past = total-seq``: sizes
    # drawn for a sum are never negative, and ``past = 0`` stays an edge to run).
    definitions.sort(key=lambda nd: (_has_negative(nd[1]), uses.get(nd[0], 0), nd[0]))
    for name, definition in definitions[:1]:
        size = definition.size if isinstance(definition, expr.DimExpr) else 1
        if _is_linear(definition):
            rank: tuple = (0 if proven else 1, 0, size)
        else:
            rank = (0 if proven else 7, 1, size)
        out.append(_define(name, definition, why, rank))
    if out:
        return out
    # No symbol to solve for (``(h//16)*(w//16)+1 == 17``, ``h//4 == w//4``): nothing
    # when it holds for any sizes, else the sizes all equal when that makes it hold,
    # else a range of one symbol where it holds whatever the others are (a sliding
    # window: ``past_seq_len <= 8``), and the smallest size that makes it hold.
    names = sorted(diff.symbols())
    if not names or _zero_for_all(diff, _assignments(names)):
        return []

    def holds(x: int) -> bool:
        try:
            return expr.evaluate(diff, dict.fromkeys(names, x)) == 0
        except _EVAL_ERRORS:
            return False

    if len(names) > 1 and all(holds(x) for x in (2, 3, 5, 8, 13, 21, 64, 100)):
        first, *others = names
        defines = tuple((n, expr.sym(first)) for n in others)
        text = " = ".join(names)
        return [Guess(text, why, defines, (), (0 if proven else 1, 0, len(names)))]
    for name, (lower, upper) in _bounds(diff, names):
        text = f"{name} <= {upper}" if upper is not None else f"{name} >= {lower}"
        rank = (0 if proven else 1, 1, len(names))
        out.append(Guess(text, why, rank=rank, ranges=((name, (lower, upper)),)))
    for x in range(2, MAX_FIXED_SIZE + 1):
        if holds(x):
            defines = tuple((n, x) for n in names)
            text = " = ".join(names) + f" = {x}"
            out.append(Guess(text, why, defines, (), (0 if proven else 3, 2, x)))
            break
    return out


def _bounds(diff: expr.DimExpr, names: Sequence[str]) -> list[tuple[str, Range]]:
    """``(symbol, (lower, upper))``: a range of one symbol where ``diff == 0`` for any others.

    The other symbols take the sizes of :data:`BOUND_SAMPLES` (every combination, or
    :data:`MAX_BOUND_ASSIGNMENTS` of them), the symbol each size from 0 up to
    :data:`MAX_BOUND_SIZE`. An upper bound is the longest run ``0..upper`` where
    ``diff == 0`` for every assignment of the others (``upper >= 2``, and it fails at
    ``upper + 1``); a lower bound, when it fails at 0, the sizes from the first one where
    it holds for all of them up to the cap (``lower >= 3``: drawn sizes start at 2, so a
    lower one changes nothing but the edges). An equality that holds for every size
    scanned gives no range (nothing to keep the sizes from).
    """
    out: list[tuple[str, Range]] = []
    for name in names:
        others = _assignments([n for n in names if n != name])

        def holds(x: int, name: str = name, others: list = others) -> bool:
            return _zero_for_all(diff, [{**a, name: x} for a in others])

        sizes = range(MAX_BOUND_SIZE + 1)
        if holds(0):
            upper = next((x - 1 for x in sizes[1:] if not holds(x)), None)
            if upper is not None and upper >= 2:
                out.append((name, (None, upper)))
            continue
        lower = next((x for x in sizes[1:] if holds(x)), None)
        if lower is not None and lower >= 3 and all(holds(x) for x in sizes[lower + 1 :]):
            out.append((name, (lower, None)))
    return out


def _assignments(names: Sequence[str]) -> list[dict[str, int]]:
    """Sizes of :data:`BOUND_SAMPLES` for ``names``: each combination, or some of them.

    At most :data:`MAX_BOUND_ASSIGNMENTS`: the equal sizes, then a fixed sample.
    """
    if len(BOUND_SAMPLES) ** len(names) <= MAX_BOUND_ASSIGNMENTS:
        values = list(itertools.product(BOUND_SAMPLES, repeat=len(names)))
    else:
        rng = random.Random(0)
        values = [(v,) * len(names) for v in BOUND_SAMPLES]
        values += [
            tuple(rng.choice(BOUND_SAMPLES) for _ in names)
            for _ in range(MAX_BOUND_ASSIGNMENTS - len(values))
        ]
    return [dict(zip(names, v)) for v in values]


def _zero_for_all(diff: Dim, assignments: Iterable[Mapping[str, int]]) -> bool:
    """True when ``diff`` evaluates to 0 under every assignment."""
    for assignment in assignments:
        try:
            if expr.evaluate(diff, assignment) != 0:
                return False
        except _EVAL_ERRORS:
            return False
    return True


def _multiples(names: Sequence[str], m: int, why: str, rank: tuple) -> Guess:
    subject = ", ".join(names)
    noun = "a multiple" if len(names) == 1 else "multiples"
    return Guess(f"{subject} {noun} of {m}", why, (), tuple((n, m) for n in names), rank)


def candidate_relations(
    models: Sequence[ir.Model], plan: SizePlan, facts: Sequence[tuple[Dim, Dim]] = ()
) -> list[Guess]:
    """Guessed relations between the input symbols, simplest and most plausible first.

    Read from ``facts`` (equalities inference proved, see :func:`model_facts`) and the
    dims written in ``models`` (an inferred model carries them); the order is the
    module's (proven equalities, equalities nodes need, divisors the dims use, sums
    the dims use, common patch sizes, equal symbols, other expressions).
    """
    inputs = set(plan.independent)
    if not inputs:
        return []
    graphs = [g for m in models for g in (m.graph, *m.graph.subgraphs())]
    survey = _Survey(graphs, inputs)
    uses = survey.uses
    guesses: list[Guess] = []
    for a, b in facts:
        if (_uses(a) | _uses(b)) and (_uses(a) | _uses(b)) <= inputs:
            guesses += _solve(a, b, "proven by inference", uses, True)
    for (a, b), why in survey.equations.items():
        guesses += _solve(a, b, why, uses, False)
    # Divisors the dims use (``height//16``): those sizes multiples of the divisor.
    by_divisor: dict[int, list[str]] = collections.defaultdict(list)
    for name in sorted(survey.divisors):
        for m in survey.divisors[name]:
            by_divisor[m].append(name)
    for m in sorted(by_divisor):
        why = f"the inferred dims divide by {m}"
        guesses.append(_multiples(by_divisor[m], m, why, (2, m)))
    spatial = _spatial_symbols(graphs)
    spatial += [s for s in sorted(survey.divisors) if s not in spatial]
    spatial = [s for s in spatial if s in inputs]
    # A rarely used symbol equal to a sum of others the dims use.
    rare_first = sorted(inputs, key=lambda s: (uses[s], s))
    common = [e for e, _ in survey.expressions.most_common(16)]
    for name in rare_first:
        for e in common:
            if name in _uses(e):
                continue
            if _is_linear(e):
                rank = (4, _has_negative(e), e.size, uses[name], -survey.expressions[e])
            else:
                rank = (7, 2, e.size)
            guesses.append(_define(name, e, "an expression the inferred dims use", rank))
    # Inputs shorter than a window the dims subtract run nowhere (onnxruntime refuses a
    # Conv whose kernel exceeds its input): the least size every window fits in.
    for name in sorted(survey.lower):
        least = survey.lower[name]
        if name in inputs and least > SIZE_RANGES[0][1]:
            text = f"{name} >= {least}"
            why = "the inferred dims subtract windows"
            guesses.append(
                Guess(text, why, ranges=((name, (least, None)),), rank=(5, 0, least))
            )
    if spatial:
        why = "a common patch, stride or window size"
        guesses += [_multiples(spatial, m, why, (5, m)) for m in COMMON_DIVISORS]
    for i, name in enumerate(rare_first):
        for other in rare_first[i + 1 :]:
            both_spatial = name in spatial and other in spatial
            rank = (6, 0 if both_spatial else 1)
            guesses.append(_define(name, expr.sym(other), "equal dims", rank))
    unique: dict[tuple, Guess] = {}
    for guess in sorted(guesses, key=lambda g: g.rank):
        unique.setdefault(guess.key, guess)
    # A range alone, then with each of the first other guesses that fix no size (a
    # sliding-window decoder needs past_seq_len <= 8 and total_seq_len = past+seq).
    ordered = list(unique.values())
    partners = [
        g
        for g in ordered
        if not g.ranges and not any(isinstance(d, int) for _, d in g.defines)
    ][:MAX_BOUND_PARTNERS]
    out: list[Guess] = []
    for guess in ordered:
        out.append(guess)
        if guess.ranges and not guess.defines and not guess.multiples:
            out += [_bounded(guess, g, i) for i, g in enumerate(partners)]
    return out[:MAX_GUESSES]


def _bounded(bound: Guess, other: Guess, i: int) -> Guess:
    """``other`` with the range of ``bound`` too (``past_seq_len <= 8, total = ...``)."""
    why = bound.why if other.why == bound.why else f"{bound.why}; {other.why}"
    return Guess(
        f"{bound.text}, {other.text}",
        why,
        other.defines,
        other.multiples,
        (*bound.rank, i),
        bound.ranges + other.ranges,
    )


# ----------------------------------------------------------------------------------------
# The search
# ----------------------------------------------------------------------------------------
#: ``attempt(sizes, record)`` runs the model under ``sizes``; ``""`` or onnxruntime's
#: error. ``record`` is False for the runs of a guess (their failures are not errors of
#: the model).
Attempt = Callable[[dict[str, int], bool], str]


@dataclasses.dataclass
class SizeSearch:
    """What :func:`find_sizes` found.

    Attributes:
        plan: The plan to draw further sizes with (the given one when no guess ran).
        size_range: The size range that ran (the first one when nothing ran).
        found: Whether some run succeeded.
        adopted: The guess adopted, if any.
        tried: ``(what, sizes, error)`` of each run that failed: ``what`` is
            ``"independent sizes"`` or the guess.
        guesses: How many guesses were tried.
    """

    plan: SizePlan
    size_range: tuple[int, int]
    found: bool = False
    adopted: Guess | None = None
    tried: list[tuple[str, dict[str, int], str]] = dataclasses.field(default_factory=list)
    guesses: int = 0

    def failure(self) -> list[str]:
        """Why nothing ran, as lines for a report's ``errors``.

        :meth:`summary` first, then each failed run of a guess
        (``guess total = past+seq: onnxruntime failed under {...}: ...``).
        """
        if not self.tried:
            return ["no assignment of the input symbols gives valid input dims"]
        guesses = [f"guess {w}: {e}" for w, _, e in self.tried if w != _INDEPENDENT]
        return [self.summary(), *guesses]

    def summary(self, limit: int = 300) -> str:
        """Why nothing ran, on one line of at most ``limit`` characters.

        The sizes tried, what onnxruntime said (each distinct message once), and the
        option that gives sizes.
        """
        independent = [s for what, s, _ in self.tried if what == _INDEPENDENT]
        guessed = list(dict.fromkeys(w for w, _, _ in self.tried if w != _INDEPENDENT))
        tried = []
        if not self.plan.independent:
            # No dim to choose: "independent sizes  /  / " and "--verify-sizes " with
            # nothing after it said nothing.
            tried.append("the fixed sizes the inputs declare (they have no named dims)")
        elif independent:
            sizes = " / ".join(_sizes_text(s) for s in independent)
            tried.append(f"independent sizes {sizes}")
        if guessed:
            noun = "relation" if len(guessed) == 1 else "relations"
            tried.append(f"{len(guessed)} guessed {noun} ({'; '.join(guessed)})")
        # Each message once: the same check failing on other sizes is the same message.
        messages: dict[str, str] = {}
        for _, _, error in self.tried:
            message = _core(error)
            messages.setdefault(re.sub(r"\d+", "#", message), message)
        said = " | ".join(messages.values()) or "nothing"
        hint = (
            " Give sizes that run: --verify-sizes "
            + ",".join(f"{n}=..." for n in self.plan.independent)
            if self.plan.independent
            else ""
        )
        budget = max(80, limit - len(hint) - 1)
        text = _cut(
            "no size assignment ran: tried " + ("; ".join(tried) or "nothing"), budget // 2
        )
        return _cut(f"{text}. onnxruntime said: {said}", budget) + "." + hint


_INDEPENDENT = "independent sizes"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ",".join(f"{n}={v}" for n, v in sizes.items())


def _core(error: str) -> str:
    """The part of an attempt's error after the sizes (``... under {...}: why``)."""
    _, sep, rest = error.partition("}: ")
    return rest if sep else error


def find_sizes(
    plan: SizePlan,
    attempt: Attempt,
    rng: random.Random,
    candidates: Callable[[SizePlan], Sequence[Guess]],
    *,
    guess: bool = True,
    ranges: Sequence[tuple[int, int]] = SIZE_RANGES,
) -> SizeSearch:
    """Finds sizes onnxruntime runs: independent ones, else under a guessed relation.

    Independent sizes are drawn once in each of ``ranges``; the first run that
    succeeds ends the search. Otherwise each guess of ``candidates(plan)`` (called only
    then) is tried in order: a first draw in each range until one runs, then
    :data:`VALIDATION_DRAWS` - 1 more draws with other sizes in that range, which must
    all run. The first guess that passes is adopted; runs that succeeded on the way are
    real runs (``attempt`` checked them).
    """
    search = SizeSearch(plan, tuple(ranges[0]))
    for size_range in ranges:
        binding = plan.draw(rng, size_range)
        if binding is None:
            continue
        error = attempt(binding, True)
        if not error:
            search.size_range, search.found = tuple(size_range), True
            return search
        search.tried.append((_INDEPENDENT, binding, error))
    if not guess:
        return search
    budget = MAX_GUESS_RUNS
    for candidate in candidates(plan):
        if budget <= 0:
            break
        guessed = plan.with_guess(candidate)
        if guessed is None:
            continue
        search.guesses += 1
        size_range, runs = _validate(guessed, candidate, attempt, rng, ranges, search)
        budget -= runs
        if size_range is not None:
            logger.info("verify: sizes follow %s", candidate)
            search.plan, search.size_range = guessed, size_range
            search.found, search.adopted = True, candidate
            return search
    return search


def _validate(
    plan: SizePlan,
    guess: Guess,
    attempt: Attempt,
    rng: random.Random,
    ranges: Sequence[tuple[int, int]],
    search: SizeSearch,
) -> tuple[tuple[int, int] | None, int]:
    """``(the range where the guess ran every draw, or None; runs made)``."""
    runs = 0
    label = guess.text
    for size_range in ranges:
        first = plan.draw(rng, size_range, variant=0, degenerate=False)
        if first is None:
            continue
        runs += 1
        error = attempt(first, False)
        if error:
            search.tried.append((label, first, error))
            continue
        seen = {tuple(sorted(first.items()))}
        for i in range(1, VALIDATION_DRAWS):
            other = None
            for _ in range(20):
                binding = plan.draw(rng, size_range, variant=i, degenerate=False)
                if binding is not None and tuple(sorted(binding.items())) not in seen:
                    other = binding
                    break
            if other is None:
                break  # the guess leaves no other sizes in this range
            seen.add(tuple(sorted(other.items())))
            runs += 1
            error = attempt(other, False)
            if error:
                search.tried.append((label, other, error))
                return None, runs
        return tuple(size_range), runs
    return None, runs


def more_runs(
    plan: SizePlan,
    attempt: Callable[..., str],
    rng: random.Random,
    size_range: tuple[int, int],
    wanted: Callable[[], bool],
    draws: int,
) -> None:
    """Draws and runs (``attempt(sizes)``) while ``wanted()``, at most ``draws`` times.

    A refused draw moves to the next larger range of :data:`SIZE_RANGES`.
    """
    index = SIZE_RANGES.index(size_range) if size_range in SIZE_RANGES else 0
    for _ in range(draws):
        if not wanted():
            return
        binding = plan.draw(rng, SIZE_RANGES[index])
        if binding is None:
            return
        if attempt(binding, True):
            index = min(index + 1, len(SIZE_RANGES) - 1)


def run_sizes(
    plan: SizePlan,
    attempt: Attempt,
    rng: random.Random,
    candidates: Callable[[SizePlan], Sequence[Guess]],
    *,
    runs: int,
    wanted: Callable[[], bool],
    explicit: Iterable[Mapping[str, int]],
    errors: list[str],
    guess: bool = True,
) -> tuple[SizePlan, tuple[int, int]]:
    """Runs random sizes (:func:`find_sizes`, then :func:`more_runs`), then ``explicit``.

    What ``verify_model`` and ``compare_models`` share. With ``runs`` > 0 the search
    runs first; when nothing runs, its summary goes first in ``errors`` (in place) and
    the guesses' failures last. Each explicit assignment is completed by a draw under
    the plan (an assignment giving a negative input dim is an error, not a run).

    Returns:
        The plan the sizes follow (with an adopted relation) and the size range used.
    """
    size_range = SIZE_RANGES[0]
    if runs > 0:
        search = find_sizes(plan, attempt, rng, candidates, guess=guess)
        plan, size_range = search.plan, search.size_range
        if search.found:
            more_runs(plan, attempt, rng, size_range, wanted, runs * 3)
        else:
            summary, *guesses = search.failure()
            errors[:] = [summary, *errors, *guesses]
    for sizes in explicit:
        binding = plan.draw(rng, size_range, dict(sizes))
        if binding is None:
            errors.append(f"the sizes {dict(sizes)} give a negative input dim")
        else:
            attempt(binding, True)
    return plan, size_range
