"""``Einsum`` and ``Det``.

``Einsum``: equation parsing with ellipsis and implicit output; dims sharing a letter
combine with the broadcast rule.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    NodeContext,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64

# ----------------------------------------------------------------------------------------
# Einsum
# ----------------------------------------------------------------------------------------
ELLIPSIS = "..."


#: A term's text -> its labels, or the message its node fails with: a pure function of
#: the text, and the character checks cost more than the rest of a small Einsum.
_TERM_LABELS: dict[str, tuple[str, ...] | str] = {}
_MAX_TERM_LABELS = 1024


def _einsum_term(ctx: NodeContext, term: str) -> tuple[str, ...]:
    """The labels of one term: letters and at most one ``"..."``."""
    labels = _TERM_LABELS.get(term)
    if labels is None:
        if len(_TERM_LABELS) >= _MAX_TERM_LABELS:
            _TERM_LABELS.clear()
        labels = _TERM_LABELS[term] = _term_labels(term)
    if labels.__class__ is str:
        ctx.fail(labels)  # type: ignore[arg-type]
    return labels  # type: ignore[return-value]


def _term_labels(term: str) -> tuple[str, ...] | str:
    """:func:`_einsum_term`'s labels, or the message of the check that fails."""
    if term.count(ELLIPSIS) > 1:
        return f"einsum term {term!r} has more than one ellipsis"
    before, found, after = term.partition(ELLIPSIS)
    for part in (before, after):
        if not all(c.isascii() and c.isalpha() for c in part):
            return f"einsum term {term!r} has a character that is not a letter"
    return (*before, *([ELLIPSIS] if found else []), *after)


def _combine_label(ctx: NodeContext, dims: list[Dim], unknown_shape: bool) -> Dim | None:
    """The size of a label shared by several dims; ``None`` when unknowable.

    numpy and onnxruntime broadcast a 1 against the other size. An operand of unknown
    shape could still change the size unless it is a known int other than 1.
    """
    try:
        size = expr.broadcast(*dims) if dims else None
    except expr.BroadcastError:
        ctx.fail(f"einsum dims {dims} of one label cannot be broadcast")
    if unknown_shape and not (isinstance(size, int) and size != 1):
        return None
    return size


@register("", "Einsum", since=12)
def infer_einsum(ctx: NodeContext, node: ir.Node) -> None:
    """Parses the equation; output dims are the labels' dims, ellipsis dims broadcast."""
    equation = ctx.attr_str("equation")
    if equation is None:
        ctx.fail("attribute 'equation' is required")
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    if "->" in rhs:
        ctx.fail(f"einsum equation {equation!r} has more than one '->'")
    terms = [_einsum_term(ctx, t) for t in lhs.split(",")]
    if len(terms) != ctx.num_inputs:
        ctx.fail(f"einsum equation has {len(terms)} terms for {ctx.num_inputs} inputs")
    label_dims: dict[str, list[Dim]] = {}
    label_unknown: dict[str, bool] = {}
    ellipses: list[Shape | None] = []
    for i, labels in enumerate(terms):
        ctx.require_input(i)
        shape = ctx.input_shape(i)
        letters = [c for c in labels if c != ELLIPSIS]
        if shape is None:
            for c in letters:
                label_unknown[c] = True
            if ELLIPSIS in labels:
                ellipses.append(None)
            continue
        if ELLIPSIS in labels:
            extra = len(shape) - len(letters)
            if extra < 0:
                ctx.fail(f"input {i} has rank {len(shape)} < {len(letters)} labels")
            start = labels.index(ELLIPSIS)
            ellipses.append(shape[start : start + extra])
            shape = shape[:start] + shape[start + extra :]
        elif len(shape) != len(letters):
            ctx.fail(f"input {i} has rank {len(shape)} but {len(letters)} labels")
        for c, d in zip(letters, shape):
            label_dims.setdefault(c, []).append(d)
    if arrow:
        output: Sequence[str] = _einsum_term(ctx, rhs)
        letters = [c for c in output if c != ELLIPSIS]
        if len(set(letters)) != len(letters):
            ctx.fail(f"einsum output {rhs!r} repeats a label")
        for c in letters:
            if c not in label_dims and c not in label_unknown:
                ctx.fail(f"einsum output label {c!r} is not in any input")
    else:
        counts: dict[str, int] = {}
        for labels in terms:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        singles = sorted(c for c, n in counts.items() if n == 1 and c != ELLIPSIS)
        output = ([ELLIPSIS] if ellipses else []) + singles
    dims: list[Dim | None] = []
    for c in output:
        if c != ELLIPSIS:
            dims.append(
                _combine_label(ctx, label_dims.get(c, []), label_unknown.get(c, False))
            )
            continue
        if any(s is None for s in ellipses):
            ctx.set_output(0, None, ctx.input_dtype(0))  # unknown ellipsis rank
            return
        broadcast = ctx.broadcast_shapes(*ellipses) if ellipses else ()
        dims.extend(broadcast)  # type: ignore[arg-type]
    ctx.set_output(0, dims, ctx.input_dtype(0))


@register("", "Det", since=11)
def infer_det(ctx: NodeContext, node: ir.Node) -> None:
    """``[*, M, M] -> [*]``."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None:
        if len(x) < 2:
            ctx.fail(f"Det needs an input of rank >= 2, got {len(x)}")
        rows, cols = x[-2], x[-1]
        if isinstance(rows, int) and isinstance(cols, int) and rows != cols:
            ctx.fail(f"Det needs square matrices, got {rows}x{cols}")
        x = x[:-2]
    ctx.set_output(0, x, ctx.input_dtype(0))
