"""Merging an inferred shape with the shape a value already declares in the model.

The rules (per dim, same rank; ``anchor`` values are graph outputs whose declared text
is never changed):

* an empty declared dim (or ONNX's anonymous ``unk__N`` on a non-anchor) declares
  nothing: the inferred dim is written;
* equal dims: kept;
* two different ints: a conflict (diagnostic); the declared dim stays on the value and
  the inferred one is used downstream;
* a declared int against an inferred symbolic dim: the int wins everywhere;
* a declared symbolic dim against an inferred int: the int is used downstream and
  written (except on anchors);
* two different symbolic dims: the declared text stays; downstream sees the inferred
  dim, unless it is a bare symbol the engine minted, which knows less than the
  declared one.

No equality is recorded here: these values are not anchors (main-graph outputs and,
by option, value_info go through :mod:`onnx_symdims.shapes._anchors`).

Policies: ``refine`` and ``strict`` follow these rules (``strict`` raises on conflicts,
which the caller does), ``skip`` computes the same downstream dims but writes nothing
over a declared shape (anchors included), ``override`` writes the inferred shape (anchors excepted).
"""

from __future__ import annotations

__all__ = ["MergeResult", "merge_declared_shape"]

import dataclasses
import logging
from typing import TYPE_CHECKING

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes._context import is_anonymous_dim_text

if TYPE_CHECKING:
    from onnx_symdims.shapes._context import ShapesContext
    from onnx_symdims.shapes._convert import IRDimWriter

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]


@dataclasses.dataclass
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


def _declares_nothing(d: ir.SymbolicDim, anchor: bool) -> bool:
    text = d.value
    return (
        not text
        or is_anonymous_dim_text(text)
        or (not anchor and text.startswith("unk__"))
    )


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
    """
    if declared is None:
        written = None if inferred is None else writer.dims(inferred)
        return MergeResult(inferred, written, [])
    if inferred is None:
        return MergeResult(ctx.dims_from_ir(declared, hint), None, [])
    if policy == "override" and not anchor:
        return MergeResult(inferred, writer.dims(inferred), [])
    if len(declared) != len(inferred):
        conflict = (
            f"declared rank {len(declared)} conflicts with inferred rank {len(inferred)}"
        )
        written = writer.dims(inferred) if policy == "override" else None
        return MergeResult(inferred, written, [conflict])

    dims: list[Dim] = []
    out: list[int | ir.SymbolicDim] = []
    conflicts: list[str] = []
    for axis, (decl, inf) in enumerate(zip(declared.dims, inferred)):
        if not isinstance(decl, int) and _declares_nothing(decl, anchor):
            dims.append(inf)
            out.append(writer.dim(inf))
            continue
        declared_dim = decl if isinstance(decl, int) else expr.parse_dim(decl.value)
        if isinstance(declared_dim, expr.DimExpr) and declared_dim.is_unknown:
            dims.append(inf)
            out.append(decl)
            continue
        if declared_dim is inf or (isinstance(inf, int) and declared_dim == inf):
            dims.append(inf)
            out.append(decl)
        elif isinstance(declared_dim, int) and isinstance(inf, int):
            conflicts.append(f"axis {axis}: declared {declared_dim} but inferred {inf}")
            dims.append(inf)
            out.append(decl)
        elif isinstance(declared_dim, int):
            dims.append(declared_dim)
            out.append(decl)
        elif isinstance(inf, int):
            dims.append(inf)
            out.append(decl if anchor else inf)
        else:
            minted = inf.is_symbol and ctx.is_generated(inf.name)  # type: ignore[arg-type]
            dims.append(declared_dim if minted else inf)
            out.append(decl)
    written = None if policy == "skip" else out
    return MergeResult(tuple(dims), written, conflicts)
