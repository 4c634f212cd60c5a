"""Merging an inferred shape with the shape a value already declares in the model.

A declared intermediate shape (``value_info``) is a claim no runtime checks: it may be
stale (a model re-exported with a dynamic batch keeps ``batch = 1`` there). The inferred
shape holds in every run, so a declared dim is only kept where it agrees with it or
adds what inference does not know. The rules (per dim, same rank; ``anchor`` values
are subgraph outputs, whose declared text is never changed):

* an empty declared dim (or, on a non-anchor, a name another tool minted for an unknown
  size: ONNX's ``unk__N``, onnxruntime's ``Flatten_35_o0__d0``; or a negative
  ``dim_value`` or text such as ``-1``) declares nothing: the inferred dim is written;
* equal dims: the canonical (inferred) spelling is written (the declared one on
  anchors): ``((batch*total_seq_len)//batch)`` becomes ``total_seq_len``;
* two different ints: a conflict; the inferred int is used downstream and written;
* a declared int against an inferred symbolic dim: the int wins only when the inferred
  dim is a bare symbol the engine minted and knows nothing about (no recorded bound or
  range: an op without a hook, a hook that could not tell) or is proven equal; else
  the declared int is not implied: a conflict, the inferred dim is used and written. A
  minted symbol with a bound or range is a *data-dependent* size (``NonZero``'s count
  ``<= N``, ``TopK`` with a runtime ``k``, an ``If`` whose branches differ): it changes
  from run to run and a traced ``value_info`` (``[1, 3]``, ``[N]``) holds in the traced
  run only;
* a declared symbolic dim against an inferred int: the int is used downstream and
  written (except on anchors);
* on anchors, a declared symbolic dim against an inferred symbolic one stays as text,
  except over a data-dependent size (minted symbols, all with a bound or range), where
  the inferred dim is written (an ``If`` branch declaring ``[1, N]`` on a ``NonZero``
  count gets the count; the anchor pass renames it where the graph outputs name it);
* two different symbolic dims: written canonically when proven equal; a conflict (the
  inferred dim is written) when proven different (``N`` declared, ``N+1`` inferred);
  else the declared text stays only where the inferred dim holds a symbol the engine
  minted and knows nothing about (it may know less than the author): an inferred dim
  over the author's names and data-dependent sizes alone holds in every run, the
  declared text is not implied (a conflict, the inferred dim is written: stale ``batch``
  where ``batch*seq_len`` is inferred, ``N`` on a ``NonZero`` count); downstream sees
  the inferred dim, unless it is a bare symbol the engine minted and knows nothing
  about, which knows less than the declared one;
* a rank mismatch: a conflict; the inferred shape is used and written.

Conflict messages name both shapes; the engine records them as ``warning``s (raising in
strict mode). No equality is recorded here: these values are not anchors (main-graph
outputs and, by option, value_info go through :mod:`onnx_symdims.shapes._anchors`).

Policies: ``refine`` follows these rules, ``skip`` computes the same downstream dims but
writes nothing over a declared shape (anchors included), ``override`` writes the
inferred shape (anchors excepted).
"""

from __future__ import annotations

__all__ = ["MergeResult", "merge_declared_shape"]

import dataclasses
import logging
from typing import TYPE_CHECKING

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes._context import is_anonymous_dim_text, is_tool_minted_dim_text

if TYPE_CHECKING:
    from onnx_symdims.shapes._context import ShapesContext
    from onnx_symdims.shapes._convert import IRDimWriter

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]


# The methods a plain ``@dataclasses.dataclass`` would generate are written out (same
# signature, repr and equality): generating them costs every process's first call (the
# cold start). It stays a dataclass (``dataclasses.fields`` works).
@dataclasses.dataclass(init=False, repr=False, eq=False)
class MergeResult:
    """Outcome of a merge.

    Attributes:
        dims: What downstream hooks see (``None``: rank unknown).
        written: The IR dims to write on the value, or ``None`` to leave it as is.
        conflicts: Human-readable conflicts between declared and inferred information.
    """

    dims: Shape | None
    written: list[int | ir.SymbolicDim] | None
    conflicts: list[str]

    def __init__(
        self,
        dims: Shape | None,
        written: list[int | ir.SymbolicDim] | None,
        conflicts: list[str],
    ) -> None:
        self.dims = dims
        self.written = written
        self.conflicts = conflicts

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.dims, self.written, self.conflicts) == (
            other.dims,  # type: ignore[attr-defined]
            other.written,  # type: ignore[attr-defined]
            other.conflicts,  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as a plain dataclass

    def __repr__(self) -> str:
        return (
            f"{type(self).__qualname__}(dims={self.dims!r}, written={self.written!r}, "
            f"conflicts={self.conflicts!r})"
        )


def _declares_nothing(d: ir.SymbolicDim, anchor: bool) -> bool:
    text = d.value
    return (
        not text
        or is_anonymous_dim_text(text)
        or (not anchor and is_tool_minted_dim_text(text))
    )


def _bounded(ctx: ShapesContext, name: str) -> bool:
    """Whether the scope holds a bound or a range for the symbol ``name``.

    For a symbol the engine minted: a *data-dependent* size. A hook that mints a size it
    cannot compute from the input shapes and records a bound or a range for it
    (``NonZero``'s count ``<= numel``, ``TopK`` with a runtime ``k``, an ``If`` whose
    branches differ, ``Slice`` of unknown sizes, a ``Loop``'s trip count ``>= 1``) has
    found a size that changes from run to run: a traced export's ``value_info``
    (``[1, 3]``, ``[N]``) holds for the traced run only.
    """
    scope = ctx.scope
    if scope.upper_bounds(name):
        return True
    lower, upper = scope.bounds(expr.sym(name))
    return upper is not None or (lower is not None and lower > 0)


def _knows_nothing(ctx: ShapesContext, inf: expr.DimExpr) -> bool:
    """Whether ``inf`` is a bare minted symbol inference knows nothing about.

    Only there does a declared intermediate dim say more than inference (an op without
    a hook, a hook that could not tell); a data-dependent size (:func:`_bounded`)
    is no such dim, on a ``value_info`` or on a subgraph output (``If`` branches declared
    ``[1, N]`` on a ``NonZero`` count gave the ``If`` output ``N``).
    """
    return (
        inf.is_symbol
        and ctx.is_generated(inf.name)  # type: ignore[arg-type]
        and not _bounded(ctx, inf.name)  # type: ignore[arg-type]
    )


def _data_dependent(ctx: ShapesContext, inf: expr.DimExpr) -> bool:
    """Whether ``inf`` has minted symbols, all data-dependent (:func:`_bounded`)."""
    minted = [name for name in inf.symbols() if ctx.is_generated(name)]
    return bool(minted) and all(_bounded(ctx, name) for name in minted)


def _printed(dims) -> str:
    """``[N, 4]`` for dims (``?`` for an empty declared dim)."""
    parts = []
    for d in dims:
        if isinstance(d, int):
            parts.append(str(d))
        elif isinstance(d, ir.SymbolicDim):
            parts.append(d.value or "?")
        elif d is None:
            parts.append("?")
        else:
            parts.append(expr.to_onnx(d))
    return "[" + ", ".join(parts) + "]"


def _both(declared: ir.Shape, inferred: Shape) -> str:
    """Both shapes, for a conflict message (printed only when there is a conflict)."""
    return f"declared {_printed(declared.dims)}, inferred {_printed(inferred)}"


def merge_declared_shape(
    ctx: ShapesContext,
    writer: IRDimWriter,
    inferred: Shape | None,
    declared: ir.Shape | None,
    *,
    policy: str,
    anchor: bool,
    hint: str,
) -> MergeResult:
    """Merges ``inferred`` into ``declared`` (see the module docstring for the rules).

    Nothing is recorded: a declared intermediate shape is the author's claim, not an
    anchor (anchors go through :func:`onnx_symdims.shapes._anchors.merge_with_anchor`).
    A conflict message names both shapes; the caller says which value it is about.
    """
    if declared is None:
        written = None if inferred is None else writer.dims(inferred)
        return MergeResult(inferred, written, [])
    if policy == "override" and not anchor and inferred is not None:
        return MergeResult(inferred, writer.dims(inferred), [])
    # Counted unless every dim ends as the inferred one and is written as such (see
    # ShapesContext.declarations_used); the rule for each case is with it below.
    ctx.declarations_used += 1
    if inferred is None:
        return MergeResult(ctx.dims_from_ir(declared, hint), None, [])
    if len(declared) != len(inferred):
        conflict = (
            f"declared rank {len(declared)} conflicts with inferred rank {len(inferred)} "
            f"({_both(declared, inferred)})"
        )
        # A declared intermediate shape is not checked by any runtime: a false one is
        # replaced (a subgraph output, an anchor of its graph, keeps its text).
        written = writer.dims(inferred) if policy != "skip" and not anchor else None
        return MergeResult(inferred, written, [conflict])

    dims: list[Dim] = []
    out: list[int | ir.SymbolicDim] = []
    problems: list[str] = []
    # Whether the declaration changed nothing so far: the inferred dim used downstream
    # and, where it is an int, written as that int (skip writes nothing).
    inert = policy != "skip"
    for axis, (decl, inf) in enumerate(zip(declared.dims, inferred)):
        if not isinstance(decl, int) and _declares_nothing(decl, anchor):
            dims.append(inf)
            out.append(writer.dim(inf))
            continue
        declared_dim = decl if isinstance(decl, int) else ctx.read_dim_text(decl.value)
        if isinstance(declared_dim, int) and declared_dim < 0:
            # dim_value -1 or text "-1": some producers' "unknown", never a size.
            dims.append(inf)
            out.append(writer.dim(inf) if policy != "skip" else decl)
            continue
        if isinstance(declared_dim, expr.DimExpr) and declared_dim.is_unknown:
            inert = False
            dims.append(inf)
            out.append(decl)
            continue
        if declared_dim is inf or (isinstance(inf, int) and declared_dim == inf):
            dims.append(inf)
            # Exporter text equal to the canonical dim is written canonically: one dim,
            # one spelling (onnxscript matches dims by text).
            out.append(decl if anchor else writer.dim(inf))
            if anchor and isinstance(inf, int) and not isinstance(decl, int):
                inert = False  # the text "4" stays where 4 is inferred
            continue
        inert = False
        if isinstance(declared_dim, int) and isinstance(inf, int):
            problems.append(f"axis {axis}: declared {declared_dim} but inferred {inf}")
            dims.append(inf)
            out.append(decl if anchor else inf)
        elif isinstance(declared_dim, int):
            minted = _knows_nothing(ctx, inf)
            # A subgraph output (an anchor of its graph) takes the int where the size is
            # one the engine could not name, as a graph output does (shapes._anchors):
            # an expression of declared names only (``min(3, L)``) may be another size
            # in a run onnxruntime accepts (it only warns about a subgraph's outputs).
            # Not a data-dependent size: the declared int holds in the traced run only.
            minted = minted or (
                anchor
                and any(
                    ctx.is_generated(name) and not _bounded(ctx, name)
                    for name in inf.symbols()  # type: ignore[union-attr]
                )
            )
            if minted or ctx.scope.prove_eq(inf, declared_dim):
                # A minted symbol knows nothing: the declared int is the only fact.
                dims.append(declared_dim)
                out.append(decl)
            else:
                # The inferred dim holds in every run; the declared int is a claim no
                # runtime checks (stale value_info: batch declared 1): not implied.
                problems.append(
                    f"axis {axis}: declared {declared_dim} is not implied by inferred "
                    f"{expr.to_onnx(inf)}"
                )
                dims.append(inf)
                out.append(writer.dim(inf))
        elif isinstance(inf, int):
            dims.append(inf)
            out.append(decl if anchor else inf)
        else:
            minted = _knows_nothing(ctx, inf)
            if minted:
                dims.append(declared_dim)
                out.append(decl)
            elif anchor:
                dims.append(inf)
                # A declared text on a data-dependent size (``If`` branches declaring
                # ``[1, N]`` on a ``NonZero`` count) holds in some runs only: the
                # inferred dim is written, without a warning (where the main graph's
                # anchors name the count ``N``, the anchor pass renames it to ``N``).
                out.append(writer.dim(inf) if _data_dependent(ctx, inf) else decl)
            else:
                relation = ctx.scope.compare(inf, declared_dim)
                if relation in ("Greater", "Smaller"):
                    # Provably another size (stale ``N`` where ``N+1`` is inferred).
                    problems.append(
                        f"axis {axis}: declared {decl.value} but inferred {expr.to_onnx(inf)}"
                    )
                # Not proven either way: the declared text may say more than an inferred
                # dim holding a symbol the engine minted. Over the author's names alone
                # the inferred dim holds in every run and the declared text is a relation
                # nothing implies (stale value_info: ``batch`` on the Flatten of
                # ``[batch, seq_len]``, which is ``batch*seq_len``), as a declared int is.
                # A data-dependent size in it (:func:`_bounded`) is one the
                # declared text cannot know better: not kept for it.
                keep = relation == "Unknown" and any(
                    ctx.is_generated(name) and not _bounded(ctx, name)
                    for name in inf.symbols()  # type: ignore[union-attr]
                )
                if relation == "Unknown" and not keep:
                    problems.append(
                        f"axis {axis}: declared {decl.value} is not implied by inferred "
                        f"{expr.to_onnx(inf)}"
                    )
                dims.append(inf)
                # Equal: the canonical spelling; provably different: the inferred dim.
                out.append(decl if keep else writer.dim(inf))
    if inert:
        ctx.declarations_used -= 1
    conflicts = [f"{'; '.join(problems)} ({_both(declared, inferred)})"] if problems else []
    written = None if policy == "skip" else out
    return MergeResult(tuple(dims), written, conflicts)
