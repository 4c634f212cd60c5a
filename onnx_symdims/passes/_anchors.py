"""``AnchorConstraintPropagationPass``: rewrite the engine's dim names into the author's.

The model author names dims on graph inputs and outputs (``Y: [N, 4]``); the engine
names what it computes (``NonZero_nz_nnz``, ``past_seq+seq``). Inference records how the
two relate (equalities, see :mod:`onnx_symdims.shapes._anchors`); this pass, run after
inference, turns them into renames and rewrites the model:

1. No equality: nothing changes (``modified=False``).
2. Only symbols the engine minted (``ShapesContext.generated_symbols``) and expressions
   built from them are renamed. Every other name is the model's: never renamed away,
   however generated it looks (``_d0``, ``s0``, ``NonZero_nz_nnz``). The preferred
   names (rename targets) are those declared on the main graph's values.
3. Equalities are closed with union-find; each class gets one deterministic target
   (byte-order smallest preferred name, never one starting with ``DYN``, which
   torch.export uses for automatic names; else an int; else a declared expression).
4. A compound of declared names (``b+c``) is kept, except when the target is a symbol
   declared on a graph **input**: ``past_seq+seq == total_seq`` rewrites
   ``past_seq+seq`` to ``total_seq`` everywhere (``broadcast(past_seq+seq, total_seq)``
   then collapses to ``total_seq``); with ``total_seq`` only an output label the
   computed expression stays.
5. Every value's shape in the main graph, its subgraphs and the model's functions is
   rewritten, matching sub-expressions modulo canonical form, to a fixed point; the
   context's shapes, values-as-shape and upper bounds too. Dims declared on the main
   graph's inputs and outputs are left as the author wrote them unless they contain a
   minted symbol or the engine wrote them (an empty declared dim it filled in, a
   provably false declared shape it replaced). Equalities between two declared names
   (``N == M``) are reported as ``info`` diagnostics; neither is rewritten.

Without a context the pass re-derives the equalities: the producer of each graph output is
inferred again from the shapes already on the model and merged with the declared output
(so it works after any engine). Then the renamable symbols are the ones the model carries
only on intermediate values, plus those minted while re-inferring.
"""

from __future__ import annotations

__all__ = ["AnchorConstraintPropagationPass", "AnchorPropagationResult"]

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, filterfalse
from operator import attrgetter
from typing import TYPE_CHECKING

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.passes._gc import without_gc
from onnx_symdims.passes._model_dims import ModelSnapshot, dim_symbols, model_values
from onnx_symdims.shapes import (
    Diagnostic,
    IRDimWriter,
    ShapeInferenceError,
    ShapesContext,
    graph_values,
)

if TYPE_CHECKING:
    from onnx_symdims.passes._anchor_renames import RenamePlan

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]


_DEFAULT: object = object()  # "not given" for the result's optional fields


# The methods a plain ``@dataclasses.dataclass`` would generate are written out (same
# signature, repr and equality): generating them costs about 0.5 ms of every process's
# first call (the cold start). It stays a dataclass (``dataclasses.fields`` works).
@dataclasses.dataclass(init=False, repr=False, eq=False)
class AnchorPropagationResult(ir.passes.PassResult):
    """The pass result.

    Attributes:
        context: The context whose constraints were used (the given one, or the one
            built while re-deriving), with its tables and bounds rewritten.
        renames: ``{key: target}`` as ``dim_param`` text, e.g. ``{"NonZero_o0_d1": "N"}``.
        implied_equalities: Equalities between declared names or ints the anchors imply,
            e.g. ``"M == N"`` (reported, never applied).
        diagnostics: Diagnostics recorded by this run.
    """

    context: ShapesContext = dataclasses.field(default_factory=ShapesContext)
    renames: dict[str, str] = dataclasses.field(default_factory=dict)
    implied_equalities: list[str] = dataclasses.field(default_factory=list)
    diagnostics: list[Diagnostic] = dataclasses.field(default_factory=list)

    def __init__(
        self,
        model: ir.Model,
        modified: bool,
        context: ShapesContext = _DEFAULT,  # type: ignore[assignment]
        renames: dict[str, str] = _DEFAULT,  # type: ignore[assignment]
        implied_equalities: list[str] = _DEFAULT,  # type: ignore[assignment]
        diagnostics: list[Diagnostic] = _DEFAULT,  # type: ignore[assignment]
    ) -> None:
        self.model = model
        self.modified = modified
        self.context = ShapesContext() if context is _DEFAULT else context
        self.renames = {} if renames is _DEFAULT else renames
        self.implied_equalities = [] if implied_equalities is _DEFAULT else implied_equalities
        self.diagnostics = [] if diagnostics is _DEFAULT else diagnostics

    def _fields(self) -> tuple:
        return (
            self.model,
            self.modified,
            self.context,
            self.renames,
            self.implied_equalities,
            self.diagnostics,
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, as a plain dataclass

    def __repr__(self) -> str:
        names = [f.name for f in dataclasses.fields(self)]
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({fields})"

    def summary_lines(self) -> list[str]:
        """Human-readable lines: constraints, upper bounds, renames, implied equalities."""
        ctx = self.context
        lines = [f"constraints ({ctx.constraints_size()}):"]
        lines += [f"  {a} == {b}" for a, b in ctx.constraints()]
        lines.append(f"upper bounds ({ctx.less_equal_constraints_size()}):")
        lines += [f"  {a} <= {b}" for a, b in ctx.less_equal_constraints()]
        lines.append(f"renames ({len(self.renames)}):")
        lines += [f"  {k} -> {v}" for k, v in self.renames.items()]
        if self.implied_equalities:
            lines.append(f"implied equalities ({len(self.implied_equalities)}):")
            lines += [f"  {e}" for e in self.implied_equalities]
        return lines


# ----------------------------------------------------------------------------------------
# Rewriting
# ----------------------------------------------------------------------------------------
_MISS = object()  # not cached yet (a cached rewrite may be None)
#: Frozen shapes a rewriter keeps (alive) before a new one replaces it: it is reused by
#: later runs (see _rewriter), whose models' declared shapes are new objects each time.
_MAX_FROZEN = 10_000
_SHAPE_SLOT = attrgetter("_shape")  # value.shape's slot (see _require_ir_slots)


class _Rewriter:
    """Applies a rename map to dims, once per distinct expression."""

    def __init__(self, mapping: dict[expr.DimExpr, Dim], renamable: frozenset[str]) -> None:
        self._mapping = mapping
        self._replacer = expr.SubexpressionReplacer(mapping)
        self._renamable = renamable
        # A key occurs in an expression only with all its symbols (the replacer's own
        # test uses their union): a text without every symbol of some key stays as it
        # is, found without replacing anything (dims are interned: an unchanged result
        # is the parsed dim itself, which is what the replacer would return).
        self._key_symbols = [key.symbols() for key in mapping]
        self._cache: dict[expr.DimExpr, Dim] = {}
        self._ir_dims: dict[expr.DimExpr, ir.SymbolicDim] = {}
        # dim text -> its rewritten IR dim, or None when unchanged: for dims rewritten
        # freely (plain) and for protected ones (see _rewrite_text).
        self.plain_texts: dict[str, int | ir.SymbolicDim | None] = {}
        self._protected_texts: dict[str, int | ir.SymbolicDim | None] = {}
        # Many values share one dims tuple (and one frozen shape): rewrite each once.
        self._tuples: dict[tuple[Dim, ...], tuple[Dim, ...] | None] = {}
        # Frozen shapes are shared by many values: rewrite each one once.
        self._frozen: dict[tuple[int, bool], tuple[ir.Shape, ir.Shape | None]] = {}
        # The same for the shapes of values that are not main-graph inputs or outputs,
        # as two tables so that a run finds the new and the renamed ones by set
        # operations on ids: id -> every such shape rewritten (kept, so that its id
        # stays unique), id -> the new shape of those that change.
        self.seen: dict[int, ir.Shape] = {}
        self.renamed: dict[int, ir.Shape] = {}

    def keeps_too_many_shapes(self) -> bool:
        """Whether the frozen shapes kept (alive) reach :data:`_MAX_FROZEN`."""
        return len(self._frozen) + len(self.seen) >= _MAX_FROZEN

    def dim(self, d: Dim) -> Dim:
        if isinstance(d, int) or d.is_unknown:
            return d
        result = self._cache.get(d)
        if result is None:
            result = self._cache[d] = self._replacer.replace(d)
        return result

    def dims(self, dims: Sequence[Dim] | None) -> tuple[Dim, ...] | None:
        """The rewritten dims, or ``None`` when nothing changes."""
        # Called for every entry of the context's tables: one lookup on a hit.
        try:
            return self._tuples[dims]  # type: ignore[index]
        except (KeyError, TypeError):  # not seen yet, or not a tuple (or None)
            pass
        if dims is None:
            return None
        key = dims if type(dims) is tuple else tuple(dims)
        if key in self._tuples:
            return self._tuples[key]
        new: tuple[Dim, ...] | None = tuple(self.dim(d) for d in key)
        if all(a is b for a, b in zip(new, key)):  # type: ignore[arg-type]
            new = None
        self._tuples[key] = new
        return new

    def ir_shape(self, shape: ir.Shape, protected: bool) -> ir.Shape | None:
        """The rewritten ``ir.Shape``, or ``None`` when nothing changes.

        ``protected`` dims (main-graph inputs and outputs) are rewritten only when they
        contain a renamable symbol, i.e. when the engine wrote them.
        """
        if shape._frozen:  # slots, not properties: every shape of the model
            key = (id(shape), protected)
            hit = self._frozen.get(key)
            if hit is None:
                # The shape is kept in the entry so that its id stays unique.
                hit = self._frozen[key] = (shape, self._rewrite_shape(shape, protected, True))
            return hit[1]
        return self._rewrite_shape(shape, protected, False)

    def _rewrite_shape(
        self,
        shape: ir.Shape,
        protected: bool,
        frozen: bool,
        filled: frozenset[int] = frozenset(),
    ) -> ir.Shape | None:
        """``filled``: axes of a protected shape whose dims the engine wrote."""
        # Most shapes keep every dim: one cached lookup per named dim, and a list is
        # built only from the first dim that changes.
        plain, guarded_texts = self.plain_texts, self._protected_texts
        dims = shape._dims  # slots, not properties: every distinct shape of the model
        new_dims: list[int | ir.SymbolicDim] | None = None
        for axis, d in enumerate(dims):
            if d.__class__ is int or isinstance(d, int):
                continue
            text = d._value
            if not text:
                continue
            guarded = protected and axis not in filled
            texts = guarded_texts if guarded else plain
            new_ir = texts.get(text, _MISS)
            if new_ir is _MISS:
                new_ir = texts[text] = self._rewrite_text(text, guarded)
            if new_ir is not None:
                if new_dims is None:
                    new_dims = list(dims)
                new_dims[axis] = new_ir
        if new_dims is None:
            return None
        denotations = [shape.get_denotation(i) for i in range(len(new_dims))]
        return ir.Shape(new_dims, denotations=denotations, frozen=frozen)

    def _rewrite_text(self, text: str, protected: bool) -> int | ir.SymbolicDim | None:
        """The rewritten IR dim for ``dim_param`` text, or ``None`` when it stays."""
        # The parser takes each symbol's name as it is written in the text (a name token,
        # or the whole text for an opaque one): a text in which the names of no key all
        # occur holds no key, and is not parsed (a text the engine wrote is parsed by the
        # first run of a process that reads it, at a cost of thousands of steps).
        for keys in self._key_symbols:
            for name in keys:
                if name not in text:
                    break
            else:
                break  # every name of this key occurs
        else:
            return None
        parsed = expr.parse_dim(text)
        if isinstance(parsed, int) or parsed.is_unknown:
            return None
        symbols = parsed.symbols()
        if protected and symbols.isdisjoint(self._renamable):
            return None
        for keys in self._key_symbols:
            if keys <= symbols:
                break
        else:
            return None
        new = self.dim(parsed)
        if new is parsed:
            return None
        if isinstance(new, int):
            return new
        ir_dim = self._ir_dims.get(new)
        if ir_dim is None:
            ir_dim = self._ir_dims[new] = ir.SymbolicDim(expr.to_onnx(new))
        return ir_dim


#: Rewriters of recent runs by (mapping items, renamable names): what a rewriter computes
#: is a function of those alone, and the engine shares frozen shapes between runs, so a
#: run over a model seen before rewrites each of its shapes with one lookup.
_REWRITERS: dict[tuple, _Rewriter] = {}
_MAX_REWRITERS = 4


def _rewriter(mapping: dict[expr.DimExpr, Dim], renamable: frozenset[str]) -> _Rewriter:
    """The :class:`_Rewriter` for ``mapping`` and ``renamable``, reused when seen recently."""
    key = (tuple(mapping.items()), renamable)  # dims are interned: hashed by identity
    rewriter = _REWRITERS.pop(key, None)
    # One that keeps too many shapes is replaced, never emptied: another thread may be
    # using it.
    if rewriter is None or rewriter.keeps_too_many_shapes():
        rewriter = _Rewriter(dict(mapping), renamable)
        if len(_REWRITERS) >= _MAX_REWRITERS:
            _REWRITERS.pop(next(iter(_REWRITERS), None), None)  # the least recently used
    _REWRITERS[key] = rewriter
    return rewriter


def _rewrite_model(snapshot: ModelSnapshot, rewriter: _Rewriter, ctx: ShapesContext) -> bool:
    modified = False
    values = snapshot.values
    anchors = snapshot.anchors
    # ModelSnapshot.of lists the main graph's inputs and outputs first: the other values
    # then need no membership test (checked, not assumed).
    count = len(anchors)
    if anchors.issuperset(values[:count]):
        protected, others = values[:count], values[count:]
    else:
        protected = [value for value in values if value in anchors]
        others = [value for value in values if value not in anchors]
    for value in protected:
        shape = value._shape  # slots, not properties: every value of the model
        if shape is None:
            continue
        filled = ctx.filled_axes(value)
        if filled:  # dims the engine wrote on a declared anchor: its own, rewritten
            new = rewriter._rewrite_shape(shape, True, shape._frozen, filled)
        else:
            new = rewriter.ir_shape(shape, True)
        if new is not None:
            value._shape = new  # what the setter stores (new is an ir.Shape)
            modified = True
    # The engine writes one shared frozen shape per distinct dims: each distinct shape is
    # rewritten once, and the values are read and picked by C loops (map, compress) and
    # set operations: most models have many values and few shapes, few shapes change,
    # and a model seen before (its rewriter reused) has few shapes not rewritten yet.
    shapes = list(map(_SHAPE_SLOT, others))
    distinct = dict(zip(map(id, shapes), shapes))  # the shapes list keeps the ids unique
    distinct.pop(id(None), None)
    seen, renamed = rewriter.seen, rewriter.renamed
    texts, rewrite_text = rewriter.plain_texts, rewriter._rewrite_text
    changed_plain: set[int] = set()  # shapes that are not frozen: rewritten every run
    # A C loop over the new shapes (a set difference of the views would iterate over all
    # of seen, which grows run after run).
    for key in filterfalse(seen.__contains__, distinct):
        shape = distinct[key]
        frozen = shape._frozen
        # Most shapes keep every dim: their texts' cached rewrites say so without a call.
        new = None
        for d in shape._dims:
            if d.__class__ is int or isinstance(d, int):
                continue
            text = d._value
            if text:
                new_ir = texts.get(text, _MISS)
                if new_ir is _MISS:
                    new_ir = texts[text] = rewrite_text(text, False)
                if new_ir is not None:
                    new = rewriter._rewrite_shape(shape, False, frozen)
                    break
        if frozen:
            seen[key] = shape
            if new is not None:
                renamed[key] = new
        elif new is not None:
            changed_plain.add(key)
    changed = (distinct.keys() & renamed.keys()) | changed_plain
    if not changed:
        return modified
    for value in compress(others, map(changed.__contains__, map(id, shapes))):
        shape = value._shape
        # A shape that is not frozen may be edited in place: each value gets its own.
        value._shape = (
            renamed[id(shape)]
            if shape._frozen
            else rewriter._rewrite_shape(shape, False, False)
        )
    return True


def _write_inferred_where(
    model: ir.Model,
    ctx: ShapesContext,
    wrong: Callable[[int | ir.SymbolicDim, Dim | None], bool],
    labels: frozenset[str] = frozenset(),
) -> bool:
    """Writes the inferred dim on every declared axis ``wrong(declared, inferred)`` picks.

    Every value but graph inputs and initializers: graph outputs, intermediates
    (``value_info``), subgraph and function values. Where inference has no dim (or one
    over ``labels``, names that are being dropped) the dim becomes empty. The axes written
    are the engine's (``note_filled``): the renaming that follows treats them as it treats
    any dim the engine wrote. Returns whether a shape changed.
    """
    changed = False
    for value, _ in model_values(model):
        shape = value.shape
        if shape is None or value.is_graph_input() or value.is_initializer():
            continue
        dims = list(shape.dims)
        inferred = ctx.peek_shape(value) if ctx.has_shape(value) else None
        if inferred is not None and len(inferred) != len(dims):
            inferred = None
        axes = [
            axis
            for axis, d in enumerate(dims)
            if wrong(d, None if inferred is None else inferred[axis])
        ]
        if not axes:
            continue
        for axis in axes:
            new = None if inferred is None else inferred[axis]
            if isinstance(new, int):
                dims[axis] = new
            elif new is None or new.is_unknown or new.symbols() & labels:
                dims[axis] = ir.SymbolicDim(None)
            else:
                dims[axis] = ir.SymbolicDim(expr.to_onnx(new))
        denotations = [shape.get_denotation(i) for i in range(len(dims))]
        value.shape = ir.Shape(dims, denotations=denotations)
        ctx.note_filled(value, axes)
        changed = True
    return changed


def _write_inferred_dims(model: ir.Model, ctx: ShapesContext, labels: frozenset[str]) -> bool:
    """Replaces every dim that names one of ``labels`` with the inferred one.

    Bare, opaque text or inside an expression such as ``K+1``: such a dim claims the sizes
    the label was equated to are one.
    """
    opaque = ctx.opaque_dim_names

    def names_label(d: int | ir.SymbolicDim, _: Dim | None) -> bool:
        return (
            not isinstance(d, int) and bool(d.value) and _names_label(d.value, opaque, labels)
        )

    return _write_inferred_where(model, ctx, names_label, labels)


def _write_differing_dims(
    model: ir.Model, ctx: ShapesContext, members: frozenset[Dim]
) -> bool:
    """Writes the inferred dim where a declared one is a member of ``members`` but differs.

    An axis whose inferred dim is the declared one keeps its text.
    """
    opaque = ctx.opaque_dim_names

    def differs(d: int | ir.SymbolicDim, new: Dim | None) -> bool:
        declared = _declared_member(d, opaque, members)
        return (
            declared is not None
            and new is not None
            and new is not declared
            and new != declared
        )

    return _write_inferred_where(model, ctx, differs)


def _declared_member(
    d: int | ir.SymbolicDim, opaque: dict[str, str], members: frozenset[Dim]
) -> Dim | None:
    """``d`` as the member of ``members`` it declares, or ``None``."""
    if isinstance(d, int):
        return d if d in members else None
    if not d.value:
        return None
    try:
        parsed = expr.parse_dim(opaque.get(d.value, d.value))
    except (ValueError, ArithmeticError):
        return None
    return parsed if parsed in members else None


def _names_label(text: str, opaque: dict[str, str], labels: frozenset[str]) -> bool:
    if opaque.get(text, text) in labels:
        return True
    try:
        parsed = expr.parse_dim(text)
    except (ValueError, ArithmeticError):
        return False
    return (
        isinstance(parsed, expr.DimExpr)
        and not parsed.is_unknown
        and bool(parsed.symbols() & labels)
    )


def _rewrite_context(ctx: ShapesContext, rewriter: _Rewriter) -> None:
    # Values the tables do not hold yet are read from the (rewritten) model on demand.
    ctx.rewrite_tables(rewriter.dims)
    bounds = ctx.less_equal_constraint_dims()
    renamed = [(rewriter.dim(lhs), rewriter.dim(rhs)) for lhs, rhs in bounds]
    if all(a is b and c is d for (a, c), (b, d) in zip(bounds, renamed)):
        return
    # The context has no in-place update of bounds: empty the stores and refill them
    # (equalities unchanged, they are the history of what was proven).
    equalities = ctx.constraint_dims()
    ctx.clear()
    for a, b in equalities:
        ctx.add_constraint(a, b)
    for lhs, rhs in renamed:
        ctx.add_less_equal_constraint(lhs, rhs)


def _shape_symbols(
    values: Iterable[ir.Value], ctx: ShapesContext, wanted: frozenset[str] | None = None
) -> set[str]:
    """The symbols in the dims of ``values`` (each distinct shape object read once).

    An opaque text (``batch size``) counts as the readable symbol the context reads it
    as, the one its equalities use. ``wanted``: only membership of these names matters
    to the caller; the scan stops once all of them are found (the result then holds
    them, maybe not every other symbol).
    """
    opaque = ctx.opaque_dim_names
    names: set[str] = set()
    read: set[int] = set()
    for value in values:
        shape = value._shape  # the slot (see _require_ir_slots): every main-graph value
        if shape is None or id(shape) in read:
            continue
        read.add(id(shape))  # the shapes are alive (held by values): ids are unique
        found = dim_symbols(shape)
        if not found:
            continue
        if opaque:
            found = {opaque.get(name, name) for name in found}
        names |= found
        if wanted is not None and wanted <= names:
            break
    return names


def _plans_nothing(equalities: Iterable[tuple[Dim, Dim]], renamable: frozenset[str]) -> bool:
    """True when :func:`plan_renames` would plan nothing (no rename, nothing to report).

    So when every dim of the equalities is a compound of declared names: no int and no
    bare name (a class has no target a member may be renamed to, and no two names or
    ints to report as implied or contradictory), no minted symbol (nothing is a key or
    solved for). E.g. ``(H+3)//4 == max(H-1,0)//4+1``, recorded by many conv nets. The
    planner drops unknown dims.
    """
    for pair in equalities:
        for d in pair:
            if isinstance(d, int):
                return False
            if d.is_unknown:
                continue
            if d.is_symbol or not renamable.isdisjoint(d.symbols()):
                return False
    return True


def _equality_symbols(equalities: Iterable[tuple[Dim, Dim]]) -> frozenset[str]:
    """Every symbol of the equalities' dims.

    The planner asks whether a name is declared only for names of the equalities (and
    of what it solves from them, made of the same names).
    """
    names: set[str] = set()
    for pair in equalities:
        for d in pair:
            if not isinstance(d, int):
                names |= d.symbols()
    return frozenset(names)


def _keys_unwritten(mapping: dict[expr.DimExpr, Dim], renamable: frozenset[str]) -> bool:
    """True when every key holds a renamable (minted) symbol no writer ever wrote.

    A dim holds a key only with all its symbols (what the rewriter tests).
    """
    never_wrote = IRDimWriter.never_wrote
    return all(any(map(never_wrote, key.symbols() & renamable)) for key in mapping)


def _text(d: Dim) -> str:
    return str(d) if isinstance(d, int) else expr.to_onnx(d)


# ----------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------
class AnchorConstraintPropagationPass(ir.passes.InPlacePass):
    """Renames the engine's symbols to the names the model author declared.

    Args:
        context: The :class:`ShapesContext` the inference pass produced (its
            equalities, generated symbols and tables). ``None``: re-derive the
            equalities from the shapes already on the model.
        strict: Raise :class:`ShapeInferenceError` on a conflicting anchor (re-derive
            mode) or on anchors implying two different ints for one dim.
        ban_prefix: Names starting with it are never rename targets (torch.export's
            automatic ``DYN0``...); ``None`` bans nothing.
        preserve: Extra names never renamed (e.g. a user's names on intermediate
            ``value_info`` in re-derive mode, where they cannot be told apart).
        snapshot: The :class:`ModelSnapshot` the inference pass took of the same model
            (``SymbolicShapeInferenceResult.snapshot``): saves walking the model. Ignored
            when it was taken of another model.
        rewrite_context: Also rename the symbols in the context's tables and upper
            bounds (the result's ``context`` then describes the rewritten model).
            ``False`` when the caller drops the context: the model is rewritten the
            same, one pass over every stored fact is saved.
        fresh_context: ``context`` is new, made by inferring this model (the inference
            pass without a ``context`` of the caller's): the symbols it minted then
            name no dim the model declares, and a rename of an expression holding one
            that no :class:`~onnx_symdims.shapes.IRDimWriter` ever wrote changes no
            dim. When every rename is such, the model's dims are not read (same
            result).
    """

    def __init__(
        self,
        context: ShapesContext | None = None,
        *,
        strict: bool = False,
        ban_prefix: str | None = "DYN",
        preserve: Iterable[str] = (),
        snapshot: ModelSnapshot | None = None,
        rewrite_context: bool = True,
        fresh_context: bool = False,
    ) -> None:
        super().__init__()
        self.fresh_context = fresh_context
        self.snapshot = snapshot
        self.rewrite_context = rewrite_context
        self.context = context
        self.strict = strict
        self.ban_prefix = ban_prefix
        self.preserve = frozenset(preserve)

    def call(self, model: ir.Model) -> AnchorPropagationResult:
        with without_gc():
            return self._call(model)

    def call_without_gc(self, model: ir.Model) -> AnchorPropagationResult:
        """:meth:`call` for a caller that has disabled the cyclic collector already."""
        return self._call(model)

    def _call(self, model: ir.Model) -> AnchorPropagationResult:
        if self.context is not None:
            ctx = self.context
            first_diagnostic = len(ctx.diagnostics)
            if not ctx.constraints_size():  # no equality: nothing to rename or report
                return AnchorPropagationResult(model, False, ctx, diagnostics=[])
            renamable = ctx.generated_symbols
        else:
            # Imported on use (as is the planner below): most runs come with a context,
            # and many models record no equality; the cold start does not load either.
            from onnx_symdims.passes._anchor_rederive import rederive, rederived_renamable

            ctx = rederive(model, strict=self.strict)
            first_diagnostic = 0
            renamable = rederived_renamable(model, ctx)
        renamable = renamable - self.preserve
        result = AnchorPropagationResult(model, False, ctx)
        equalities = ctx.constraint_dims()
        input_symbols: set[str] = set()
        if equalities:
            input_symbols = _shape_symbols(graph_values(model.graph.inputs), ctx)
            equalities = self._drop_ambiguous_labels(
                model, ctx, equalities, renamable, input_symbols, result
            )
            equalities = self._drop_degenerate_classes(
                model, ctx, equalities, renamable, result
            )
        if equalities and not _plans_nothing(equalities, renamable):
            from onnx_symdims.passes._anchor_renames import plan_renames

            snapshot = self.snapshot
            if snapshot is None or snapshot.model is not model:
                snapshot = ModelSnapshot.of(model)
            wanted = _equality_symbols(equalities) - renamable
            preferred = _shape_symbols(snapshot.main_values, ctx, wanted) & wanted
            plan = plan_renames(
                equalities,
                renamable=renamable,
                input_symbols=input_symbols - renamable,
                preferred=preferred - renamable,
                ban_prefix=self.ban_prefix,
            )
            self._report(ctx, plan, result)
            if plan.mapping:
                # Written nowhere: no dim holds a key (each key holds a minted symbol);
                # dims written above (result.modified) are not the writers'.
                unwritten = (
                    self.fresh_context
                    and self.context is not None
                    and not result.modified
                    and _keys_unwritten(plan.mapping, renamable)
                )
                if not unwritten or self.rewrite_context:
                    rewriter = _rewriter(plan.mapping, renamable)
                    if not unwritten:
                        result.modified = _rewrite_model(snapshot, rewriter, ctx)
                    if self.rewrite_context:
                        _rewrite_context(ctx, rewriter)
                result.renames = plan.text_mapping()
        result.diagnostics = ctx.diagnostics[first_diagnostic:]
        return result

    def _drop_ambiguous_labels(
        self,
        model: ir.Model,
        ctx: ShapesContext,
        equalities: list[tuple[Dim, Dim]],
        renamable: frozenset[str],
        input_symbols: set[str],
        result: AnchorPropagationResult,
    ) -> list[tuple[Dim, Dim]]:
        """The equalities without those of output-only names that name differing sizes.

        Every value that declares such a name (graph outputs, ``value_info``, subgraph and
        function values) gets its inferred dims there (the declared text would be a wrong
        dim in every run where the sizes differ), with a warning (an error under
        ``strict``). See
        :func:`~onnx_symdims.passes._anchor_renames.ambiguous_labels`.
        """
        from onnx_symdims.passes._anchor_renames import ambiguous_labels

        ambiguous = ambiguous_labels(
            equalities,
            renamable=renamable,
            input_symbols=input_symbols - renamable,
            unverified=_labels_declared_where_unknown(model, ctx),  # read if needed
        )
        if not ambiguous:
            return equalities
        for name in sorted(ambiguous):
            sizes = ", ".join(_text(d) for d in ambiguous[name])
            what = (
                f"sizes that differ: {sizes}"
                if len(ambiguous[name]) >= 2
                else f"{sizes} and a size inference cannot compute"
            )
            message = (
                f"declared output dim {name!r} names {what} (not used; those outputs get "
                "the inferred dims)"
            )
            if self.strict:
                raise ShapeInferenceError(ctx.add_diagnostic(None, "error", message))
            ctx.add_diagnostic(None, "warning", message)
        if _write_inferred_dims(model, ctx, frozenset(ambiguous)):
            result.modified = True
        return [
            (a, b)
            for a, b in equalities
            if not any(
                isinstance(d, expr.DimExpr) and d.is_symbol and d.name in ambiguous
                for d in (a, b)
            )
        ]

    def _drop_degenerate_classes(
        self,
        model: ir.Model,
        ctx: ShapesContext,
        equalities: list[tuple[Dim, Dim]],
        renamable: frozenset[str],
        result: AnchorPropagationResult,
    ) -> list[tuple[Dim, Dim]]:
        """The equalities without the classes whose declared sizes force a size to 0.

        The values that declare a member of such a class where inference computed
        another get the inferred dim there, with a warning (an error under ``strict``).
        See :func:`~onnx_symdims.passes._anchor_renames.degenerate_classes`.
        """
        from onnx_symdims.passes._anchor_renames import degenerate_classes

        classes = degenerate_classes(equalities, renamable=renamable)
        if not classes:
            return equalities
        members: frozenset[Dim] = frozenset().union(*classes)
        for found in classes:
            named = sorted(
                (m for m in found if isinstance(m, int) or not (m.symbols() & renamable)),
                key=_text,
            )
            message = (
                "declared shapes imply "
                + " == ".join(_text(m) for m in named)
                + ", which holds only where a size is 0 (not used; the inferred dims "
                "are written)"
            )
            if self.strict:
                raise ShapeInferenceError(ctx.add_diagnostic(None, "error", message))
            ctx.add_diagnostic(None, "warning", message)
        if _write_differing_dims(model, ctx, members):
            result.modified = True
        return [(a, b) for a, b in equalities if a not in members and b not in members]

    def _report(
        self, ctx: ShapesContext, plan: RenamePlan, result: AnchorPropagationResult
    ) -> None:
        for members in plan.implied:
            text = " == ".join(_text(m) for m in members)
            result.implied_equalities.append(text)
            ctx.add_diagnostic(None, "info", f"the declared shapes imply {text}")
        for members in plan.contradictions:
            message = (
                "declared shapes contradict each other: "
                + " == ".join(_text(m) for m in members)
                + " (not used for renaming)"
            )
            if self.strict:
                raise ShapeInferenceError(ctx.add_diagnostic(None, "error", message))
            ctx.add_diagnostic(None, "warning", message)


def _labels_declared_where_unknown(model: ir.Model, ctx: ShapesContext) -> Iterator[str]:
    """Names a graph output declares where inference computed no dim (maybe repeated).

    There the rank or the dim is unknown, or the dim is the declared name itself (where
    inference has no shape, the declared one is read as the value's facts: an
    ``Unique``'s count in a sequence concatenated to unknown rank). A generator: most
    models have no label to check, and the outputs are then not read.
    """
    for value in graph_values(model.graph.outputs):
        shape = value._shape  # slots, not properties (see _require_ir_slots)
        if shape is None:
            continue
        inferred = ctx.peek_shape(value)
        if inferred is None:
            continue  # a context that never saw the value (built by hand): no claim
        dims = shape._dims
        for axis, dim in enumerate(dims):
            # An ir.Shape dim is an int or an ir.SymbolicDim (whose isinstance check is
            # a Protocol's, run in Python).
            if dim.__class__ is int or isinstance(dim, int):
                continue
            text = dim._value
            if not text:
                continue
            if len(inferred) != len(dims):
                yield text
                continue
            d = inferred[axis]
            if d is None or (isinstance(d, expr.DimExpr) and (d.is_unknown or d.name == text)):
                yield text
