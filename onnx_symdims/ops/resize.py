"""Resampling ops: ``Resize`` (opsets 10, 11 and 18) and ``Upsample`` (opsets 7 and 9).

Every output dim is what onnxruntime computes, checked against it (the tests keep a
sample):

* With scales, onnxruntime computes ``int(float32(scale) * float32(d))``; for a
  symbolic ``d`` that is ``(p*d) // q`` when the float32 scale is ``p/q`` with small
  ``p`` and power-of-two ``q`` (exact while ``p*d < 2**24``), and a fresh symbol for
  any other scale (``0.1``, ``1/3``, ...).
* With sizes, the dims are the sizes; the ``not_larger``/``not_smaller`` aspect
  policies scale every resized axis by one float32 ratio, computed for integer dims.

Known float32 limit of onnxruntime itself: ``Resize`` rounds through float32, so for
sizes beyond ``2**24`` the runtime result can differ from the exact integer formula
written here (integer dims are emulated bit-exactly).
"""

from __future__ import annotations

__all__: list[str] = []

import logging
import math
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import constant_array, static_length
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]

#: Largest numerator/denominator of a float32 scale written as ``(p*d) // q``.
_MAX_SCALE_TERM = 1024


# ----------------------------------------------------------------------------------------
# Reading scales, sizes and axes
# ----------------------------------------------------------------------------------------
def _constant_floats(ctx: NodeContext, i: int) -> np.ndarray | None:
    """The float32 elements of constant input ``i`` (initializer or ``Constant``), or ``None``."""
    # An initializer that is also a graph input is read too, as ShapesContext reads
    # integer constants.
    array = constant_array(ctx.input(i))
    if array is None or array.dtype.kind not in "biuf":
        return None
    return np.asarray(array, dtype=np.float32).reshape(-1)


def _input_length(ctx: NodeContext, i: int) -> int | None:
    """Number of elements of optional 1-D input ``i``: 0 when absent, ``None`` if unknown."""
    if not ctx.has_input(i):
        return 0
    length = static_length(ctx, i)
    if length is not None:
        return length
    floats = _constant_floats(ctx, i)
    return None if floats is None else floats.size


def _resize_axes(ctx: NodeContext, rank: int) -> list[int]:
    axes = ctx.attr_ints("axes") if ctx.opset >= 18 else None
    if axes is None:
        return list(range(rank))
    return ctx.normalize_axes(axes, rank)


# ----------------------------------------------------------------------------------------
# Output dims
# ----------------------------------------------------------------------------------------
#: (d, scale) -> scaled_dim's result for a valid scale: a pure function of the two, and
#: numpy's float32 scalar arithmetic costs more than the rest of a Resize node.
_SCALED: dict[tuple[Dim, float], Dim | None] = {}
_MAX_SCALED = 4096
_MISSING = object()


def scaled_dim(ctx: NodeContext, d: Dim, scale: float) -> Dim | None:
    """``int(float32(scale) * float32(d))`` as onnxruntime computes it (``None``: unknown).

    For a symbolic ``d`` the result is written only when the float32 scale is exactly
    ``p/q`` with ``p, q <= 1024`` and ``q`` a power of two: then the float32 product is
    exact (while ``p*d < 2**24``) and equals ``(p*d) // q``.
    """
    key = (d, scale)
    found = _SCALED.get(key, _MISSING)
    if found is _MISSING:
        found = _scaled_dim(ctx, d, scale)  # fails the node on an invalid scale: not kept
        if not (isinstance(found, expr.DimExpr) and found.is_unknown):
            if len(_SCALED) >= _MAX_SCALED:
                _SCALED.clear()
            _SCALED[key] = found
    return found  # type: ignore[return-value]


def _scaled_dim(ctx: NodeContext, d: Dim, scale: float) -> Dim | None:
    scale32 = np.float32(scale)
    if not scale32 > 0 or not math.isfinite(scale32):
        ctx.fail(f"scale must be a positive finite number, got {scale}")
    if isinstance(d, int):
        product = np.float32(d) * scale32
        return int(product) if np.isfinite(product) else None
    p, q = float(scale32).as_integer_ratio()  # in lowest terms, as a Fraction's
    if p > _MAX_SCALE_TERM or q > _MAX_SCALE_TERM:  # float32 scales: q is a power of two
        return None
    return expr.floordiv(expr.mul(p, d), q)


def _keep_aspect_ratio(
    x: Shape, axes: Sequence[int], sizes: Sequence[Dim], policy: str
) -> list[Dim | None]:
    """Output dims of the ``axes`` for ``not_larger``/``not_smaller`` (float32 like onnxruntime)."""
    ins = [x[a] for a in axes]
    if not all(isinstance(v, int) and v > 0 for v in (*ins, *sizes)):
        return [None] * len(axes)
    ratios = [np.float32(s) / np.float32(d) for s, d in zip(sizes, ins)]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    # std::round: half away from zero (values are positive here).
    return [math.floor(float(np.float32(scale * np.float32(d))) + 0.5) for d in ins]


def _resize_from_sizes(
    ctx: NodeContext, x: Shape, axes: Sequence[int], index: int
) -> list[Dim | None]:
    sizes = ctx.input_value(index)
    if sizes is None:
        return [None] * len(axes)
    if len(sizes) != len(axes):
        ctx.fail(f"sizes has {len(sizes)} values, expected {len(axes)}")
    if any(isinstance(s, int) and s < 0 for s in sizes):
        ctx.fail(f"sizes must be >= 0, got {list(sizes)}")
    policy = (
        ctx.attr_str("keep_aspect_ratio_policy", "stretch") if ctx.opset >= 18 else "stretch"
    )
    if policy == "stretch":
        return list(sizes)
    if policy not in ("not_larger", "not_smaller"):
        ctx.fail(f"unknown keep_aspect_ratio_policy {policy!r}")
    return _keep_aspect_ratio(x, axes, sizes, policy)


def _resize_from_scales(
    ctx: NodeContext, x: Shape, axes: Sequence[int], scales: np.ndarray | None
) -> list[Dim | None]:
    if scales is None:
        return [None] * len(axes)
    if scales.size != len(axes):
        ctx.fail(f"scales has {scales.size} values, expected {len(axes)}")
    return [scaled_dim(ctx, x[a], float(s)) for a, s in zip(axes, scales)]


def _set_resized(
    ctx: NodeContext, x: Shape, axes: Sequence[int], new_dims: Sequence[Dim | None]
) -> None:
    out: list[Dim | None] = list(x)
    for axis, dim in zip(axes, new_dims):
        out[axis] = dim
    ctx.set_output(0, out, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Resize
# ----------------------------------------------------------------------------------------
@register("", "Resize", since=10)
def infer_resize_10(ctx: NodeContext, node: ir.Node) -> None:
    """Each dim scaled by the constant ``scales`` (input 1); fresh dims otherwise."""
    ctx.require_input(0)
    ctx.require_input(1)
    x = ctx.input_shape(0)
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    axes = list(range(len(x)))
    _set_resized(ctx, x, axes, _resize_from_scales(ctx, x, axes, _constant_floats(ctx, 1)))


@register("", "Resize", since=11)
def infer_resize(ctx: NodeContext, node: ir.Node) -> None:
    """Dims from ``sizes`` (input 3) or ``scales`` (input 2); 18+: ``axes`` and aspect policy."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is None:
        # Without axes, known sizes are the whole output shape.
        sizes = ctx.input_value(3) if ctx.has_input(3) and not ctx.has_attr("axes") else None
        plain = sizes and ctx.attr_str("keep_aspect_ratio_policy", "stretch") == "stretch"
        ctx.set_output(0, sizes if plain else None, ctx.input_dtype(0))
        return
    axes = _resize_axes(ctx, len(x))
    scales_length = _input_length(ctx, 2)
    sizes_length = _input_length(ctx, 3)
    if scales_length and sizes_length:
        ctx.fail("only one of scales and sizes may be given")
    if scales_length == 0 and sizes_length == 0:
        ctx.fail("one of scales and sizes must be given")
    if sizes_length or (sizes_length is None and scales_length == 0):
        new_dims = _resize_from_sizes(ctx, x, axes, 3)
    elif scales_length or (scales_length is None and sizes_length == 0):
        new_dims = _resize_from_scales(ctx, x, axes, _constant_floats(ctx, 2))
    else:  # both of unknown length: either may be the one used
        new_dims = [None] * len(axes)
    _set_resized(ctx, x, axes, new_dims)


# ----------------------------------------------------------------------------------------
# Upsample
# ----------------------------------------------------------------------------------------
def _infer_upsample(ctx: NodeContext, scales: np.ndarray | None) -> None:
    x = ctx.input_shape(0)
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    if scales is not None and np.any(scales < 1):
        ctx.fail(f"Upsample scales must be >= 1, got {scales.tolist()}")
    axes = list(range(len(x)))
    _set_resized(ctx, x, axes, _resize_from_scales(ctx, x, axes, scales))


@register("", "Upsample", since=7)
def infer_upsample_7(ctx: NodeContext, node: ir.Node) -> None:
    """Each dim scaled by the ``scales`` attribute."""
    ctx.require_input(0)
    scales = ctx.attr_floats("scales")
    if scales is None:
        ctx.fail("attribute 'scales' is required")
    _infer_upsample(ctx, np.asarray(scales, dtype=np.float32))


@register("", "Upsample", since=9)
def infer_upsample_9(ctx: NodeContext, node: ir.Node) -> None:
    """Each dim scaled by the constant ``scales`` input (fresh dims otherwise)."""
    ctx.require_input(0)
    ctx.require_input(1)
    _infer_upsample(ctx, _constant_floats(ctx, 1))
