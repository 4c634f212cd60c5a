"""The audio front end of ``ai.onnx``: DFT, STFT, the window generators, MelWeightMatrix.

ONNX's own inference loses the signal length whenever it is symbolic (STFT gives no
shape at all, DFT a fresh dim); these hooks keep it:

* ``DFT``: the transformed axis has ``dft_length`` (default: the signal length) bins,
  ``n // 2 + 1`` of them when ``onesided``; the last axis becomes 2 (complex), or 1 for
  the real result of an inverse onesided transform (irfft), whose default length is
  ``2 * (n - 1)``; with a runtime axis, the dims a transform keeps stay known;
* ``STFT``: ``(B, frames, bins, 2)`` with ``frames = (L - frame_length) // step + 1``;
* windows: ``(size,)``, MelWeightMatrix: ``(dft_length // 2 + 1, num_mel_bins)``, with the
  sizes read from the inputs' values (shape quantities computed in the graph included).
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import dtype_attr, same_dim, single_element
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
MaybeDim = Dim | None


def _length(ctx: NodeContext, i: int, what: str) -> MaybeDim:
    """Scalar input ``i`` as a non-negative length (``None``: absent or unknown)."""
    if not ctx.has_input(i):
        return None
    value = single_element(ctx.input_value(i))
    if isinstance(value, int) and value < 0:
        ctx.fail(f"{what} must be >= 0, got {value}")
    return value


def _bins(n: MaybeDim, onesided: bool) -> MaybeDim:
    """The number of frequency bins of an ``n``-point transform."""
    if n is None or not onesided:
        return n
    return expr.add(expr.floordiv(n, 2), 1)


def _infer_dft(ctx: NodeContext, axis: int | None) -> None:
    """Output of DFT along ``axis`` (``None``: an axis known only at run time)."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if x is None:
        ctx.set_output(0, None, dtype)
        return
    if len(x) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(x)}")
    if isinstance(x[-1], int) and x[-1] not in (1, 2):
        ctx.fail(f"the last dim must be 1 (real) or 2 (complex), got {x[-1]}")
    onesided = bool(ctx.attr_int("onesided", 0))
    inverse = bool(ctx.attr_int("inverse", 0))
    length = _length(ctx, 1, "dft_length") if ctx.has_input(1) else None
    if ctx.has_input(1) and length is None:
        length = _UNKNOWN
    last = 1 if onesided and inverse else 2
    if axis is None:
        # Any axis but the last may be transformed (axis 0 included): a dim is known
        # only where transforming it gives the same size (a full-length transform).
        out: list[MaybeDim] = []
        for d in x[:-1]:
            n = _transformed(d, length, onesided, inverse)
            out.append(d if n is not None and same_dim(n, d) else None)
        ctx.set_output(0, (*out, last), dtype)
        return
    rank = len(x)
    # The last axis holds the real/imaginary parts and is never transformed.
    axis = ctx.normalize_axis(axis, rank)
    if axis == rank - 1:
        ctx.fail("axis must not be the last (complex) axis")
    out = [*x[:-1], last]
    out[axis] = _transformed(x[axis], length, onesided, inverse)
    ctx.set_output(0, out, dtype)


#: A ``dft_length`` input whose value is unknown.
_UNKNOWN = object()


def _transformed(d: Dim, length: object, onesided: bool, inverse: bool) -> MaybeDim:
    """The size of a transformed axis of size ``d`` (``None``: unknown).

    ``length`` is the ``dft_length`` (``None``: absent, ``_UNKNOWN``: a runtime value).
    The inverse of a onesided transform (irfft) is real and ``dft_length`` long, by
    default ``2 * (d - 1)`` (the spec, and onnxruntime); a forward onesided transform
    has ``n // 2 + 1`` bins.
    """
    if length is _UNKNOWN:
        return None
    if onesided and inverse:
        if length is not None:
            return length  # type: ignore[return-value]
        return expr.mul(2, expr.sub(d, 1))
    n = d if length is None else length
    return _bins(n, onesided)  # type: ignore[arg-type]


@register("", "DFT", since=17)
def infer_dft_17(ctx: NodeContext, node: ir.Node) -> None:
    """DFT with the ``axis`` attribute (default 1)."""
    _infer_dft(ctx, ctx.attr_int("axis", 1))


@register("", "DFT", since=20)
def infer_dft_20(ctx: NodeContext, node: ir.Node) -> None:
    """DFT with the ``axis`` input (default -2)."""
    axis: int | None = -2
    if ctx.has_input(2):
        value = ctx.input_ints(2)
        axis = value[0] if value is not None and len(value) == 1 else None
    _infer_dft(ctx, axis)


@register("", "STFT", since=17)
def infer_stft(ctx: NodeContext, node: ir.Node) -> None:
    """``(B, frames, bins, 2)``: frames of ``frame_length`` every ``frame_step`` samples.

    ``frame_length`` is the input (else the window's length); ``bins`` is
    ``frame_length // 2 + 1`` when ``onesided`` (the default), else ``frame_length``.
    """
    ctx.require_input(0)
    ctx.require_input(1)
    signal = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if signal is not None:
        if len(signal) != 3:
            ctx.fail(f"signal must be [batch, length, 1 or 2], got rank {len(signal)}")
        if isinstance(signal[2], int) and signal[2] not in (1, 2):
            ctx.fail(f"the signal's last dim must be 1 or 2, got {signal[2]}")
    step = _length(ctx, 1, "frame_step")
    if isinstance(step, int) and step == 0:
        ctx.fail("frame_step must be positive")
    window = ctx.input_shape(2) if ctx.has_input(2) else None
    if window is not None and len(window) != 1:
        ctx.fail(f"window must be 1-D, got rank {len(window)}")
    frame = _length(ctx, 3, "frame_length")
    if frame is None and window is not None:
        frame = window[0]
    if (
        isinstance(frame, int)
        and window is not None
        and isinstance(window[0], int)
        and frame != window[0]
    ):
        ctx.fail(f"frame_length {frame} differs from the window length {window[0]}")
    frames: MaybeDim = None
    if signal is not None and frame is not None and step is not None:
        if isinstance(signal[1], int) and isinstance(frame, int) and signal[1] < frame:
            ctx.fail(f"signal length {signal[1]} is shorter than frame_length {frame}")
        frames = expr.add(expr.floordiv(expr.sub(signal[1], frame), step), 1)
        if isinstance(signal[1], expr.DimExpr) or isinstance(frame, expr.DimExpr):
            ctx.ctx.add_less_equal_constraint(frame, signal[1])  # the kernel fails otherwise
    onesided = bool(ctx.attr_int("onesided", 1))
    batch = signal[0] if signal is not None else None
    ctx.set_output(0, (batch, frames, _bins(frame, onesided), 2), dtype)


@register("", ("HannWindow", "HammingWindow", "BlackmanWindow"), since=17)
def infer_window(ctx: NodeContext, node: ir.Node) -> None:
    """``(size,)`` of ``output_datatype`` (default FLOAT)."""
    ctx.require_input(0)
    size = _length(ctx, 0, "size")
    ctx.set_output(0, (size,), dtype_attr(ctx, "output_datatype", ir.DataType.FLOAT))


@register("", "MelWeightMatrix", since=17)
def infer_mel_weight_matrix(ctx: NodeContext, node: ir.Node) -> None:
    """``(dft_length // 2 + 1, num_mel_bins)`` of ``output_datatype`` (default FLOAT)."""
    for i in range(5):
        ctx.require_input(i)
    mel_bins = _length(ctx, 0, "num_mel_bins")
    dft_length = _length(ctx, 1, "dft_length")
    dtype = dtype_attr(ctx, "output_datatype", ir.DataType.FLOAT)
    ctx.set_output(0, (_bins(dft_length, True), mel_bins), dtype)
