"""Input sizes for onnxruntime runs: consistent with the model, edge sizes included.

A model with a KV cache only runs when its input sizes are related
(``total_seq_len == past_seq_len + seq_len``); independent random sizes make
onnxruntime reject every run. A :class:`SizePlan` draws sizes that respect

* the equalities inference proved (``ShapesContext.constraint_dims()``) and the user's
  ``--verify-bind`` relations: a bare input symbol defined by the others;
* the ranges the written dims assume (``--symbol-range``, ``--assume-nonempty``);
* guessed relations, tried one at a time when no run succeeds
  (:func:`candidate_relations`): the two sides of a ``broadcast(s, e)`` term, then a
  rarely used input symbol equal to an expression of the others that the inferred
  dims use often (``total_seq_len = past_seq_len+seq_len``), then two symbols equal.

A guess only narrows which runs are tried: a run onnxruntime accepts is a real run of
the model whatever led to its sizes, so checking dims under it stays sound.

:meth:`SizePlan.edges` gives the sizes users deploy and random draws miss: all ones
(batch 1, decode ``seq_len = 1``), each symbol 0 (``past_seq_len = 0``: prefill with an
empty cache) and each symbol 1.
"""

from __future__ import annotations

__all__ = ["SizePlan", "candidate_relations", "parse_shape"]

import collections
import dataclasses
import logging
import random
from collections.abc import Iterable, Mapping, Sequence

import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)

Dim = expr.Dim
Range = tuple[int | None, int | None]

#: How many guessed relations are tried before giving up.
MAX_GUESSES = 12

_EVAL_ERRORS = (ArithmeticError, ValueError, KeyError, expr.ExprError)


def parse_shape(shape: ir.Shape | None) -> list[Dim | None] | None:
    """The dims of ``shape`` (``None`` for an unknown dim), or ``None`` without a shape."""
    if shape is None:
        return None
    dims: list[Dim | None] = []
    for d in shape.dims:
        if isinstance(d, int):
            dims.append(d if d >= 0 else None)
        elif not d.value:
            dims.append(None)
        else:
            parsed = expr.parse_dim(d.value)
            dims.append(None if isinstance(parsed, expr.DimExpr) and parsed.is_unknown else parsed)
    return dims


def _symbols(dims: Iterable[Dim | None]) -> set[str]:
    return {s for d in dims if isinstance(d, expr.DimExpr) for s in d.symbols()}


@dataclasses.dataclass
class SizePlan:
    """How input symbols get sizes.

    Attributes:
        inputs: Parsed dims of each graph input (``None``: no shape).
        symbols: The symbols of the input dims, sorted.
        derived: ``{symbol: definition}`` for symbols set from the others.
        ranges: ``{symbol: (lower, upper)}`` the sizes must respect.
        relations: Guessed relations adopted, as text (``total = past+seq``).
    """

    inputs: list[list[Dim | None] | None]
    symbols: list[str]
    derived: dict[str, Dim] = dataclasses.field(default_factory=dict)
    ranges: dict[str, Range] = dataclasses.field(default_factory=dict)
    relations: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def of(
        cls,
        graph: ir.Graph,
        equalities: Sequence[tuple[Dim, Dim]] = (),
        ranges: Mapping[str, Range] | None = None,
    ) -> SizePlan:
        inputs = [parse_shape(v.shape) for v in graph.inputs if v.name not in graph.initializers]
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
        if name in self.derived or not isinstance(definition, (int, expr.DimExpr)):
            return None
        uses = definition.symbols() if isinstance(definition, expr.DimExpr) else frozenset()
        if name in uses or uses & self.derived.keys() or not uses <= set(self.symbols):
            return None
        if any(name in d.symbols() for d in self.derived.values() if isinstance(d, expr.DimExpr)):
            return None
        text = f"{name} = {expr.to_onnx(definition)} ({why})"
        return dataclasses.replace(
            self,
            derived={**self.derived, name: definition},
            relations=[*self.relations, text],
        )

    def _allowed(self, name: str, value: int) -> bool:
        lower, upper = self.ranges.get(name, (None, None))
        return value >= (0 if lower is None else lower) and (upper is None or value <= upper)

    def _draw_one(self, rng: random.Random, name: str, low: int, high: int) -> int:
        lower, upper = self.ranges.get(name, (None, None))
        lo = max(low, lower if lower is not None else 0)
        hi = min(high, upper) if upper is not None else high
        if lo > hi:  # the range lies outside the wanted sizes: stay inside the range
            lo = hi = lo if upper is None or lo <= upper else upper
        return rng.randint(lo, hi)

    def draw(
        self,
        rng: random.Random,
        size_range: tuple[int, int],
        fixed: Mapping[str, int] | None = None,
        tries: int = 50,
    ) -> dict[str, int] | None:
        """Sizes for every input symbol, or ``None`` when no draw gives valid input dims.

        ``fixed`` sizes are kept; the other independent symbols are drawn in
        ``size_range`` (within their ranges), derived ones computed.
        """
        fixed = dict(fixed or {})
        low, high = size_range
        for _ in range(tries):
            binding = {
                name: fixed[name] if name in fixed else self._draw_one(rng, name, low, high)
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
            if all(s >= 0 for s in sizes) and all(
                self._allowed(n, v) for n, v in binding.items() if n not in fixed
            ):
                return binding
        return None

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


def _value_dims(graphs: Iterable[ir.Graph]) -> Iterable[Dim]:
    cache: dict[str, Dim | None] = {}
    for graph in graphs:
        for node in graph:
            for value in node.outputs:
                if value.shape is None:
                    continue
                for d in value.shape.dims:
                    if isinstance(d, int) or not d.value:
                        continue
                    if d.value not in cache:
                        parsed = expr.parse_dim(d.value)
                        ok = isinstance(parsed, expr.DimExpr) and not parsed.is_unknown
                        cache[d.value] = parsed if ok else None
                    parsed = cache[d.value]
                    if parsed is not None:
                        yield parsed


def _broadcast_pairs(d: expr.DimExpr) -> Iterable[tuple[Dim, Dim]]:
    for mono, _ in d.terms:
        for atom in mono:
            if atom.kind == "b" and len(atom.args) == 2:
                yield atom.args[0], atom.args[1]


def candidate_relations(
    models: Sequence[ir.Model], plan: SizePlan
) -> list[tuple[str, Dim, str]]:
    """Guessed relations ``(symbol, definition, why)`` between input symbols, best first.

    Read from the dims written in ``models`` (an inferred model carries them): sides of
    ``broadcast`` terms, then expressions the dims use often for the input symbols the
    dims use least, then pairs of symbols.
    """
    inputs = set(plan.independent)
    if len(inputs) < 2:
        return []
    graphs = [g for m in models for g in (m.graph, *m.graph.subgraphs())]
    broadcast: list[tuple[str, Dim, str]] = []
    expressions: collections.Counter[Dim] = collections.Counter()
    uses: collections.Counter[str] = collections.Counter()
    for d in _value_dims(graphs):
        symbols = d.symbols()
        uses.update(symbols & inputs)
        if not d.is_symbol and symbols and symbols <= inputs:
            expressions[d] += 1
        for a, b in _broadcast_pairs(d):
            for s, other in ((a, b), (b, a)):
                if isinstance(s, expr.DimExpr) and s.is_symbol and s.name in inputs:
                    broadcast.append((s.name, other, "a broadcast term needs them equal"))
    out = list(dict.fromkeys(broadcast))
    rare_first = sorted(inputs, key=lambda s: (uses[s], s))
    common = [e for e, _ in expressions.most_common(8)]
    out += [
        (name, e, "an expression the inferred dims use")
        for name in rare_first
        for e in common
        if name not in e.symbols()
    ]
    out += [
        (name, expr.sym(other), "equal dims")
        for i, name in enumerate(rare_first)
        for other in rare_first[i + 1 :]
    ]
    seen: set[tuple[str, str]] = set()
    unique = []
    for name, definition, why in out:
        key = (name, expr.to_onnx(definition))
        if key not in seen:
            seen.add(key)
            unique.append((name, definition, why))
    return unique[:MAX_GUESSES]
