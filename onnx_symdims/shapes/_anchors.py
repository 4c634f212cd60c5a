"""Merging an inferred shape with an *anchor*: a shape the model author declared.

Graph outputs are always anchors; declared ``value_info`` can be, by option. The author
names dims (``Y: [N, 4]``), the engine names what it computes (``NonZero_nz_nnz``); the
merge relates the two by recording equalities in the :class:`ShapesContext`, which the
anchor-constraint propagation pass later turns into renames.

Rules, per dim (the ranks must agree, or the anchor conflicts):

=========================== ====================== =========================================
inferred                    declared (anchor)      result
=========================== ====================== =========================================
anything                    empty (``None``)       inferred: an empty dim declares nothing
unknown (``None``)          anything               declared
``d``                       ``d`` (same)           ``d``
int ``n``                   int ``m != n``         conflict
int ``n``                   symbolic ``e``         ``n``; records ``e == n``
symbolic ``e``              int ``n``              ``n``; records ``e == n``; but conflict
                                                   when ``e`` is over declared names only
                                                   and not provably ``n`` (below)
symbolic ``e``              symbolic ``f != e``    ``f``; records ``e == f`` with leaf derivation;
                                                   but conflict when ``e`` and ``f`` are over
                                                   the same declared names and a point
                                                   separates them (below)
=========================== ====================== =========================================

Every equality goes through
:meth:`ShapesContext.add_symbolic_constraint_with_leaf_derivation`, which derives
``x == y`` only from ``c*x == c*y`` with no constant left over (so ``2*nnz == 2*dnz``
gives ``nnz == dnz`` but ``x + 1 == y`` gives nothing).

A broadcast never proves ``d == 64`` when ``d`` may be 1: the algebra folds
``broadcast(d, 64)`` to ``64`` and records nothing, and an inferred
``broadcast(d, e)`` merged with an anchor ``64`` records ``broadcast(d, e) == 64`` —
an equality about the whole term, from which no leaf equality can be derived (the
term is not a bare symbol), so neither ``d`` nor ``e`` is ever renamed to ``64``.

A conflict makes the whole anchor be skipped (nothing is recorded from it, so a half
applied anchor never leaves misleading equalities) with a ``warning`` diagnostic naming
both shapes (the engine then writes the inferred shape over the false declared one), or,
in strict mode, an ``error`` diagnostic and :class:`ShapeInferenceError`.

An int declared where inference computes an expression of the inputs' declared names
that it cannot prove equal to it (``Y: [B, 3]`` of ``x[:, -3:]``, which is
``min(3, L)``) is false in every run where they differ, and onnxruntime runs them (it
does not check declared output shapes): a conflict, so the inferred dim is written. An
expression with a symbol the engine minted and knows nothing about (an op without a
hook) says nothing against the declared int, which stays the fact it is. A
*data-dependent* size (a minted symbol with a recorded bound or range: a ``NonZero``
count, ``TopK`` with a runtime ``k``; ``shapes._merge._bounded``) is no such symbol: it
changes from run to run, and a declared int (a trace's ``int64[1, 3]``) is a conflict
unless proven, as against an expression of declared names. A declared name of a graph
input (``N``, the input's length, on a count would say ``nnz == N``) or an expression on
a data-dependent size records nothing and keeps its text (the output's), while
downstream sees the inferred dim. Only the author's own name for the size
(:func:`_on_data_dependent`) is recorded (the anchor pass renames the symbol, its bound
kept, and replaces a name reused on sizes that differ).

The same for a declared expression over exactly the names of an inferred one that holds
in every run: torch.export declares a ``ceil_mode`` pooling's output ``H//3`` where it is
``(H+1)//3`` (attack5 ``pool_ops_dynamo``). The declared text then restates, as another
formula of the same sizes, a size the inferred dim already gives, falsely at ``H = 5``: a
conflict, and the inferred dim is written. Only a point within the symbols' bounds, with
every size at least 2, where both are defined and differ makes it one
(:func:`_separating_point`): two spellings the scope cannot prove equal stay the author's.
Exporters write formulas without the clamps at sizes 0 and 1 (torch.export assumes every
dynamic size is at least 2): ``W - 1`` for ``x[:, :-1]``, which is ``max(W-1, 0)`` and
runs at ``W = 0``. A point within the bounds with a size below 2 where both differ is an
*edge*: the model may fail there (a convolution whose window does not fit, which is why
the engine records such facts), so it is no conflict (an ``info`` diagnostic, never an
error in strict mode), but the declared formula is no fact either: the inferred dim is
kept and no equality recorded. So is a point found only beyond that grid (sizes from 2
up to about 100), around the expressions' integer constants (``c - 1``, ``c``, ``c + 1``,
``2*c``) or at large sizes (``2**7`` to ``2**20``): ``N`` declared for ``x[:128]``, which
is ``min(128, N)``, differs at ``N = 129`` only. A model may fail there too (a window of
128 positions: attack5 ``gptneo_kv1_dynamo`` declares a formula that parts from the
inferred one only where its attention mask no longer broadcasts), so such a point is an
edge, not a conflict. A declared expression over other names, or
over fewer (``total`` of ``past + seq``, ``e`` of ``broadcast(b+c, e)``), relates sizes:
a relation the author states, recorded as before.

The same rules apply to value-as-shape (the elements of a small integer tensor), where
elements are integers that may be negative (there only the int rule).
"""

from __future__ import annotations

__all__ = ["declared_dims", "merge_value_with_anchor", "merge_with_anchor"]

import itertools
import logging
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes._context import _memo_under_facts, is_anonymous_dim_text
from onnx_symdims.shapes._diagnostics import ShapeInferenceError
from onnx_symdims.shapes._merge import _bounded, _data_dependent

if TYPE_CHECKING:
    from onnx_symdims.shapes._context import ShapesContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
_MISSING = object()
MaybeDims = tuple["Dim | None", ...]


def declared_dims(
    shape: ir.Shape | None, ctx: ShapesContext | None = None
) -> MaybeDims | None:
    """Converts a declared ``ir.Shape`` to anchor dims (``None``: the dim declares nothing).

    ``dim_param`` text is read with ``ctx.read_dim_text`` (``parse_dim`` without a
    context); neither fails: a name that is not an expression, such as ``batch size``,
    becomes one opaque symbol (with ``ctx``, one with a readable name). An empty dim, an
    anonymous one (``?``, ``*``), a negative ``dim_value`` (some exporters write ``-1`` for "unknown") and text that parses
    to a negative constant or an unknown expression declare nothing.

    Returns:
        The dims, or ``None`` when no shape (not even the rank) is declared.
    """
    if shape is None:
        return None
    dims: list[Dim | None] = []
    for d in shape.dims:
        if isinstance(d, int):
            dims.append(d if d >= 0 else None)
            continue
        text = d.value
        if not text or is_anonymous_dim_text(text):
            dims.append(None)  # "?" says "unknown": it declares nothing
            continue
        parsed = expr.parse_dim(text) if ctx is None else ctx.read_dim_text(text)
        dims.append(_declared_value(parsed))
    return tuple(dims)


def _declared_value(d: Dim | None) -> Dim | None:
    """``d`` unless it cannot be a dim (a negative constant, an unknown expression)."""
    if isinstance(d, int):
        return d if d >= 0 else None
    return _usable(d)


def _usable(d: Dim | None) -> Dim | None:
    """``d`` unless it carries no information (``None`` or an unknown expression)."""
    if isinstance(d, expr.DimExpr) and d.is_unknown:
        return None
    return d


def _printed(dims: Sequence[Dim | None]) -> str:
    """``[N, 4]`` (``?`` for a dim neither side knows)."""
    parts = [
        str(d) if isinstance(d, int) else "?" if d is None or d.is_unknown else expr.to_onnx(d)
        for d in dims
    ]
    return "[" + ", ".join(parts) + "]"


def _same(a: Dim, b: Dim) -> bool:
    # DimExpr is hash-consed (== is identity); an int never equals a DimExpr.
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a is b


def _plan(
    inferred: Sequence[Dim | None],
    declared: Sequence[Dim | None],
    what: str,
    differs: Callable[[expr.DimExpr, int], bool] | None = None,
    separated: Callable[[expr.DimExpr, expr.DimExpr], tuple[str, str] | None] | None = None,
) -> tuple[
    list[Dim | None], list[tuple[Dim, Dim]], list[str], tuple[list[str], list[int], list[str]]
]:
    """Per-dim merge without side effects: (result, equalities, conflicts, edges).

    ``edges``: the messages and the axes of the edges (a point with a size below 2, or
    one found only beyond the grid of sizes first tried: see the module docstring), and
    the messages of declared dims on a data-dependent size that record nothing
    (``separated`` gave the kind ``"data-dependent"`` and, in place of a point, why;
    the kind ``"named"``: recorded, the inferred dim kept downstream).

    ``differs(e, n)``: whether an inferred expression ``e`` may differ from a declared
    int ``n`` in a run (a conflict then). ``separated(e, f)``: a point (printed) where
    an inferred ``e`` that holds in every run differs from a declared ``f`` over its
    names, and whether it is an edge (a size below 2: the inferred dim is kept and no
    equality recorded, but no conflict), or ``None``.
    """
    result: list[Dim | None] = []
    equalities: list[tuple[Dim, Dim]] = []
    conflicts: list[str] = []
    edges: list[str] = []
    edge_axes: list[int] = []
    unrelated: list[str] = []
    for axis, (inf, decl) in enumerate(zip(inferred, declared)):
        inf, decl = _usable(inf), _usable(decl)
        if decl is None:
            result.append(inf)
        elif inf is None or _same(inf, decl):
            result.append(decl)
        elif isinstance(inf, int) and isinstance(decl, int):
            conflicts.append(f"{what} {axis}: declared {decl} but inferred {inf}")
            result.append(inf)
        elif isinstance(inf, int):
            # The inferred int is a proof; the anchor only names it.
            equalities.append((decl, inf))
            result.append(inf)
        elif isinstance(decl, int):
            if differs is not None and differs(inf, decl):
                conflicts.append(
                    f"{what} {axis}: declared {decl} but inferred {expr.to_onnx(inf)}, "
                    "which is not always that"
                )
                result.append(inf)
                continue
            equalities.append((inf, decl))
            result.append(decl)
        else:
            found = separated(inf, decl) if separated is not None else None
            if found is not None and found[1] == "named":
                # The author's name for a data-dependent size: recorded (the anchor pass
                # renames the symbol), while downstream keeps the symbol and its bound.
                equalities.append((inf, decl))
                result.append(inf)
                continue
            if found is not None and found[1] == "data-dependent":
                # Not recorded (the declared text holds in some runs only); the anchor
                # keeps its text, downstream the inferred dim (see the module docstring).
                unrelated.append(
                    f"{what} {axis}: declared {expr.to_onnx(decl)} on inferred "
                    f"{expr.to_onnx(inf)}, {found[0]}"
                )
                result.append(inf)
                continue
            if found is not None:
                point, kind = found
                at_edge = kind != "conflict"
                (edges if at_edge else conflicts).append(
                    f"{what} {axis}: declared {expr.to_onnx(decl)} but inferred "
                    f"{expr.to_onnx(inf)}, which differs at {point}"
                    + (" (only beyond the sizes first tried)" if kind == "far" else "")
                )
                if at_edge:
                    edge_axes.append(axis)
                result.append(inf)
                continue
            equalities.append((inf, decl))
            result.append(decl)
    return result, equalities, conflicts, (edges, edge_axes, unrelated)


#: Values tried per symbol above its lower bound, itself at least 2 (all combinations up
#: to three symbols).
_OFFSETS = (3, 5, 1, 4, 0, 2, 6, 10, 29, 98)
#: The smallest size of a conflict: torch.export assumes a dynamic size is at least 2 when
#: it writes its formulas, and a model may fail at 0 or 1 (``(h-1)//8 + 1`` is 0 at
#: ``h = 0``, where a runtime would clamp); a difference only below it is an edge.
_SMALLEST_SIZE_OF_A_CONFLICT = 2
#: Values tried per symbol in the search for an edge: 0 and 1 where the bounds allow,
#: beside a few sizes from 2 up for the other symbols (formulas written for sizes >= 2
#: part from the clamped ones right at 0 or 1).
_EDGE_SIZES = (0, 1, 2, 3, 5, 8)
#: Points tried for more symbols (a fixed walk: the diagnostic is the same every run).
_MANY_SYMBOL_POINTS = 400
#: Large sizes tried after the grid of :data:`_OFFSETS` (a clamp ``min(128, N)``, a
#: division ``(N+127)//128`` or a remainder ``N % 101`` parts from ``N`` only there):
#: ``2**7`` to ``2**20``.
_LARGE_SIZES = tuple(2**k for k in range(7, 21))
#: At most this many of an expression's integer constants are probed around (the largest).
_MAX_CONSTANTS = 12


def _separated(
    scope: expr.Scope, names: Sequence[str], e: expr.DimExpr, f: expr.DimExpr
) -> tuple[str, str] | None:
    """A point where ``e`` and ``f`` differ and its kind, or None.

    The kind: ``"conflict"`` (the grid of sizes from 2 up, :data:`_OFFSETS`), ``"edge"``
    (some size below 2) or ``"far"`` (only around the constants or at large sizes).
    """
    if scope.prove_eq(e, f):
        return None
    for kind in ("conflict", "edge", "far"):
        point = _separating_point(
            scope, names, e, f, at_edge=kind == "edge", far=kind == "far"
        )
        if point is not None:
            return point, kind
    return None


def _separating_point(
    scope: expr.Scope,
    names: Sequence[str],
    e: expr.DimExpr,
    f: expr.DimExpr,
    *,
    at_edge: bool = False,
    far: bool = False,
) -> str | None:
    """``"H=5"``: a point within the symbols' bounds where ``e`` and ``f`` differ, or None.

    Every size is at least :data:`_SMALLEST_SIZE_OF_A_CONFLICT`, or with ``at_edge``, at
    least 0 with some size below it (:data:`_EDGE_SIZES`). With ``far``, only points
    beyond the grid of :data:`_OFFSETS` (:func:`_far_points`). Points where either is
    undefined (an exact division that does not divide, a broadcast that fails) are
    skipped: only a value both give can show them apart.
    """
    ranges = []
    for name in names:
        lower, upper = scope.bounds(expr.sym(name))
        if at_edge:
            low = lower or 0
            ranges.append(
                [v for v in _EDGE_SIZES if v >= low and (upper is None or v <= upper)]
            )
            continue
        low = max(lower or 0, _SMALLEST_SIZE_OF_A_CONFLICT)
        ranges.append(
            [low + k for k in _OFFSETS if upper is None or low + k <= upper] or [low]
        )
    if at_edge and (
        not all(ranges) or all(r[0] >= _SMALLEST_SIZE_OF_A_CONFLICT for r in ranges)
    ):
        return None  # the bounds leave no size below 2 (or none at all) to try
    names = tuple(names)
    if far:
        points = _far_points(scope, names, ranges, e, f)
    elif len(names) <= 3:
        points = itertools.product(*ranges)
    else:
        walk = random.Random(len(names))
        points = (tuple(walk.choice(r) for r in ranges) for _ in range(_MANY_SYMBOL_POINTS))
    # Compiled: up to a thousand points, each evaluating two nested min/max expressions.
    at_e, at_f = expr.evaluator(e, names), expr.evaluator(f, names)
    return _differing_point(names, points, at_e, at_f, at_edge)


def _differing_point(
    names: tuple[str, ...],
    points: Iterable[tuple[int, ...]],
    at_e: Callable[..., int],
    at_f: Callable[..., int],
    at_edge: bool = False,
) -> str | None:
    """The first of ``points`` where both evaluators give a value and differ, printed."""
    for point in points:
        if at_edge and min(point) >= _SMALLEST_SIZE_OF_A_CONFLICT:
            continue
        try:
            if at_e(*point) != at_f(*point):
                return ", ".join(f"{n}={v}" for n, v in zip(names, point))
        except (ArithmeticError, expr.ExprError):
            continue
    return None


def _far_points(
    scope: expr.Scope,
    names: tuple[str, ...],
    ranges: list[list[int]],
    e: expr.DimExpr,
    f: expr.DimExpr,
) -> Iterator[tuple[int, ...]]:
    """Points beyond the grid of :data:`_OFFSETS`, within the symbols' bounds.

    The sizes: ``c - 1``, ``c``, ``c + 1`` and ``2*c`` for each integer constant ``c``
    of ``e`` and ``f`` (a clamp at 128, a remainder by 101 part there), then
    :data:`_LARGE_SIZES`. Each symbol takes each size with the others at their first
    grid value, then every symbol takes it at once: a few dozen points per symbol, not
    the product (the grid's product holds the small sizes already).
    """
    constants: set[int] = set()
    _constants(e, constants)
    _constants(f, constants)
    sizes: dict[int, None] = {}
    for c in sorted(constants, reverse=True)[:_MAX_CONSTANTS]:
        for v in (c - 1, c, c + 1, 2 * c):
            sizes[v] = None
    for v in _LARGE_SIZES:
        sizes[v] = None
    bounds = [scope.bounds(expr.sym(name)) for name in names]
    base = [r[0] for r in ranges]
    low = [max(lower or 0, _SMALLEST_SIZE_OF_A_CONFLICT) for lower, _ in bounds]
    allowed = [
        [v for v in sizes if v >= lo and (upper is None or v <= upper)]
        for lo, (_, upper) in zip(low, bounds)
    ]
    for i, values in enumerate(allowed):
        for v in values:
            point = list(base)
            point[i] = v
            yield tuple(point)
    if len(names) > 1:
        for v in sizes:
            if all(v in values for values in allowed):
                yield (v,) * len(names)


def _constants(d: expr.DimExpr, found: set[int]) -> None:
    """Adds the absolute values (>= 2) of the integers in ``d`` to ``found``."""
    for v in (d.const, *(c for _, c in d.terms)):
        if abs(v) >= 2:
            found.add(abs(v))
    for mono, _ in d.terms:
        for atom in mono:
            for arg in atom.args:
                if isinstance(arg, int):
                    if abs(arg) >= 2:
                        found.add(abs(arg))
                elif not arg.is_unknown:
                    _constants(arg, found)


def _merge(
    ctx: ShapesContext,
    inferred: Sequence[Dim | None] | None,
    declared: Sequence[Dim | None] | None,
    *,
    strict: bool,
    where: str,
    node: ir.Node | None,
    what: str,
    found: list[str] | None = None,
    edge_axes: list[int] | None = None,
) -> MaybeDims | None:
    if declared is None:
        return None if inferred is None else tuple(inferred)
    if inferred is None:
        return tuple(declared)
    if len(inferred) != len(declared):
        size = "rank" if what == "axis" else "length"
        conflicts = [f"declared {size} {len(declared)} but inferred {size} {len(inferred)}"]
        result: Sequence[Dim | None] = inferred
        equalities: list[tuple[Dim, Dim]] = []
        edges: list[str] = []
        unrelated: list[str] = []
    else:
        differs = separated = None
        if what == "axis":
            generated, scope = ctx.is_generated, ctx.scope

            def differs(e: expr.DimExpr, n: int) -> bool:
                if any(generated(name) and not _bounded(ctx, name) for name in e.symbols()):
                    return False  # a size the engine could not name: the int tells it
                # Declared names only, or data-dependent sizes (a NonZero count): an int
                # holds in the runs that give it only (a trace's ``3``).
                return not scope.prove_eq(e, n)

            def separated(e: expr.DimExpr, f: expr.DimExpr) -> tuple[str, str] | None:
                names = e.symbols()
                if _data_dependent(ctx, e):
                    return _on_data_dependent(ctx, node, e, f)
                if f.symbols() != names or any(generated(name) for name in names):
                    # A relation to other sizes (f names fewer or other sizes: e of
                    # broadcast(b+c, e) says b+c is e), or a size the engine minted.
                    return None
                # A pure function of e, f and the scope's facts and bounds: kept with
                # them, the next inference (and the next layer) asks the same.
                key = ("separated", e, f)
                found = scope._scoped_memo.get(key, _MISSING)
                if found is _MISSING:
                    found = _separated(scope, sorted(names), e, f)
                    _memo_under_facts(scope, key, found)
                return found  # type: ignore[return-value]

        result, equalities, conflicts, (edges, axes, unrelated) = _plan(
            inferred, declared, what, differs, separated
        )
        if edge_axes is not None:
            edge_axes.extend(axes)
    if conflicts:
        kind = "shape" if what == "axis" else "value"
        message = (
            f"{where}: declared {kind} {_printed(declared)} is false, inferred "
            f"{_printed(inferred)}: " + "; ".join(conflicts)
        )
        if found is not None:
            found.append(message)
        if strict:
            raise ShapeInferenceError(ctx.add_diagnostic(node, "error", message))
        written = "; the inferred shape is written" if found is not None else ""
        ctx.add_diagnostic(node, "warning", message + f" (anchor skipped{written})")
        return tuple(inferred)
    if edges:
        # Not a conflict (the model may fail there, as the exporter assumed), but the
        # declared formula is no fact: the inferred dim holds in every run and is kept.
        ctx.add_diagnostic(
            node,
            "info",
            f"{where}: declared {_printed(declared)} holds at some sizes only (the model "
            f"may fail at the others: sizes below {_SMALLEST_SIZE_OF_A_CONFLICT}, or beyond "
            f"its limits), inferred {_printed(inferred)} is kept: " + "; ".join(edges),
        )
    if unrelated:
        ctx.add_diagnostic(
            node,
            "info",
            f"{where}: declared {_printed(declared)} keeps its text, but a data-dependent "
            f"size holds it in some runs only: nothing is recorded, inferred "
            f"{_printed(inferred)} is used: " + "; ".join(unrelated),
        )
    for inf, decl in equalities:
        ctx.add_symbolic_constraint_with_leaf_derivation(inf, decl)
    return tuple(result)


def _on_data_dependent(
    ctx: ShapesContext, node: ir.Node | None, e: expr.DimExpr, f: expr.DimExpr
) -> tuple[str, str] | None:
    """Whether a declared ``f`` on data-dependent ``e`` is recorded: ``(why not, kind)``.

    The kind: ``"named"`` (``e == f`` is recorded; downstream keeps ``e``, with its
    bound, until the anchor pass renames it) or ``"data-dependent"`` (nothing recorded).

    ``f`` names the size when its names are the author's for it: none is a graph
    input's (``N``, the input's length, on a ``NonZero`` count would say ``nnz == N``),
    and ``f`` is a bare name or one name that ``e`` gives back when put in its place
    (``2*dnz`` on ``2*nnz``; not ``2*k`` on ``nnz``, which would make the count even). A
    name the author reuses on sizes that differ (two counts, a count and a batch) is
    found by the anchor pass (``ambiguous_labels``), which writes the inferred dims.
    """
    graph = node.graph if node is not None else None
    if graph is None:
        return "no graph to read", "data-dependent"
    names = f.symbols()
    if _input_symbols(ctx, graph) & names:
        return "a name of a graph input", "data-dependent"
    if f.is_symbol:
        return "", "named"
    minted = [name for name in e.symbols() if ctx.is_generated(name)]
    if len(names) == 1 and len(minted) == 1:
        (name,) = names
        if expr.substitute(f, {name: expr.sym(minted[0])}) is e:
            return "", "named"
    return "an expression", "data-dependent"


def _input_symbols(ctx: ShapesContext, graph: ir.Graph) -> frozenset[str]:
    """The symbols of ``graph``'s inputs' dim texts (read for data-dependent sizes only)."""
    found: set[str] = set()
    for value in graph.inputs:
        if value.shape is not None:
            for d in value.shape.dims:
                if not isinstance(d, int) and d.value:
                    found |= ctx.text_symbols(d.value)
    return frozenset(found)


def merge_with_anchor(
    ctx: ShapesContext,
    inferred: Sequence[Dim | None] | None,
    declared: Sequence[Dim | None] | None,
    *,
    strict: bool,
    where: str,
    node: ir.Node | None = None,
    conflicts: list[str] | None = None,
    edge_axes: list[int] | None = None,
) -> MaybeDims | None:
    """Merges an inferred shape with an anchor and records the equalities it implies.

    See the module docstring for the per-dim rules.

    Args:
        ctx: Receives the equalities and the diagnostics.
        inferred: The inferred dims (``None``: rank unknown; a ``None`` dim: unknown).
        declared: The anchor (``None``: declares nothing; a ``None`` dim: empty dim),
            e.g. from :func:`declared_dims`.
        strict: Raise on a conflict instead of skipping the anchor.
        where: Names the anchored value in diagnostics, e.g. ``"graph output 'Y'"``.
        node: The producer of the value, for the diagnostic (optional).
        conflicts: Receives the conflict message, if any (the caller may then write
            the inferred shape over the false declared one).
        edge_axes: Receives the axes whose declared formula differs from the inferred
            dim only at sizes below 2 (the caller may write the inferred dim there).

    Returns:
        The merged dims (``None`` when neither side knows the rank). A dim is ``None``
        only when neither side knows it. On a lenient conflict, ``inferred`` unchanged.

    Raises:
        ShapeInferenceError: ``strict`` and the anchor conflicts (different ints, or a
            rank mismatch).
    """
    return _merge(
        ctx,
        inferred,
        declared,
        strict=strict,
        where=where,
        node=node,
        what="axis",
        found=conflicts,
        edge_axes=edge_axes,
    )


def merge_value_with_anchor(
    ctx: ShapesContext,
    inferred: Sequence[Dim | None] | None,
    declared: Sequence[Dim | None] | None,
    *,
    strict: bool,
    where: str,
    node: ir.Node | None = None,
) -> MaybeDims | None:
    """Like :func:`merge_with_anchor`, for value-as-shape (flattened integer elements).

    Elements may be negative ints; a length mismatch is a conflict.
    """
    return _merge(
        ctx, inferred, declared, strict=strict, where=where, node=node, what="element"
    )
