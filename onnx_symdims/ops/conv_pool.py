"""Sliding-window ops: convolutions, pooling, RoI pooling and ``MaxUnpool``.

Every output dim is what onnxruntime computes, checked against it on exhaustive
small cases (the tests keep a sample):

* ``Conv`` (and ``ConvInteger``, ``QLinearConv``): ``(d + pads - dil*(k-1) - 1) // stride + 1``;
  ``SAME_*``: ``ceil(d / stride)``. onnxruntime rejects inputs whose window does not fit
  (an output size below 1, ``d = 0`` under ``SAME_*``), so floor division is exact wherever
  a run succeeds, and the output size is at least 1: a fact the hook records.
* ``ConvTranspose``: ``stride*(d-1) + output_padding + dil*(k-1) + 1 - pads``; ``SAME_*``
  clamps the total padding at 0 (so ``d*stride`` only when ``output_padding +
  dil*(k-1) + 1 >= stride``); ``output_shape`` wins when given.
* Pooling (floor mode): onnxruntime *truncates* ``num / stride`` (``num = d + pads -
  dil*(k-1) - 1``), so a window that overhangs the input still yields one output:
  ``MaxPool(k=2, s=2)`` maps ``d = 1`` to 1, not ``1 // 2 = 0``. When ``num`` may be
  negative the dim is ``max(num // s + 1, min(1, max(0, num + s)))``.
  ``ceil_mode`` also drops a last window that would start in the end padding:
  ``min(ceil(num / s), (d + pad_begin - 1) // s) + 1`` (before opset 22, at an int size
  where a window is dropped: a fresh symbol, since ONNX's inference of those opsets, run
  by onnxruntime at load, keeps the window and would refuse the int). ``SAME_*`` pads by
  ``(ceil(d/s) - 1)*s + k - d`` (the *undilated* kernel, as onnxruntime does); with a
  dilation that is not ``ceil(d/s)``, the spec's size and ONNX's inference at load, so
  such a dim is a fresh symbol.

Known float32 limit of onnxruntime itself: ceil-mode pooling rounds through float32, so
for sizes beyond ``2**24`` the runtime result can differ from the exact integer formula
written here (integer dims are emulated bit-exactly). ``Resize`` and ``Upsample`` live
in :mod:`onnx_symdims.ops.resize`.
"""

from __future__ import annotations

__all__ = ["conv_spatial_dim", "infer_conv_output", "kernel_dims"]

import logging
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]

_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


# ----------------------------------------------------------------------------------------
# Window attributes
# ----------------------------------------------------------------------------------------
class Window(NamedTuple):
    """Per spatial axis: strides, dilations, begin/end pads and the ``auto_pad`` mode.

    A named tuple: every convolution and pooling node builds one, and a frozen
    dataclass costs about 1 us more to build.
    """

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    auto_pad: str


_INTS = ir.AttributeType.INTS


def _ints_attr(ctx: NodeContext, name: str) -> Sequence[int] | None:
    """``ctx.attr_ints(name)`` in one call: every convolution and pooling reads four.

    Reads the node's attribute dict through onnx-ir's slots as ``NodeContext`` does (see
    passes/_inference.py); anything but a plain ``INTS`` attribute goes to
    ``ctx.attr_ints``, which fails the node the usual way.
    """
    attr = ctx.node._attributes.data.get(name)
    if attr is None:
        return None
    if attr._ref_attr_name is None and attr._type == _INTS:
        return attr._value  # type: ignore[no-any-return]
    return ctx.attr_ints(name)


def _int_list(
    ctx: NodeContext, name: str, length: int, default: int, minimum: int
) -> tuple[int, ...]:
    values = _ints_attr(ctx, name)
    if values is None:
        return (default,) * length
    if len(values) != length:
        ctx.fail(f"attribute {name!r} has {len(values)} values, expected {length}")
    if values and min(values) < minimum:  # no generator: every conv reads three lists
        ctx.fail(f"attribute {name!r} values must be >= {minimum}, got {list(values)}")
    return tuple(values)


#: A window read before, keyed by the raw attribute values it was read from (see
#: read_window) -> the Window. Networks repeat a few windows in every layer and every
#: inference; one lookup replaces three list reads and their checks.
_WINDOWS: dict[tuple, Window] = {}
_MAX_WINDOWS = 4096
_STRING = ir.AttributeType.STRING
_NOT_PLAIN = object()


def _plain_value(attr: ir.Attr | None, kind: ir.AttributeType) -> object:
    """``attr``'s value when it is a plain ``kind`` attribute; ``None`` when absent."""
    if attr is None:
        return None
    if attr._ref_attr_name is None and attr._type == kind:
        return attr._value
    return _NOT_PLAIN


def read_window(ctx: NodeContext, spatial: int, *, pads_with_auto_pad: str) -> Window:
    """Reads ``strides``, ``dilations``, ``pads`` and ``auto_pad`` for ``spatial`` axes.

    Args:
        ctx: The node context.
        spatial: Number of spatial axes.
        pads_with_auto_pad: What explicit ``pads`` mean next to an ``auto_pad`` other
            than ``NOTSET``: ``"fail"`` (convolutions: onnxruntime rejects the node) or
            ``"ignore"`` (pooling: onnxruntime ignores them).
    """
    attributes = ctx.node._attributes.data  # the slots, as in _ints_attr
    get = attributes.get
    # The window is a pure function of these (plain attributes: the reads below return
    # exactly these values, and a window that failed a check is never kept).
    key = (
        spatial,
        pads_with_auto_pad,
        _plain_value(get("auto_pad"), _STRING),
        _plain_value(get("strides"), _INTS),
        _plain_value(get("dilations"), _INTS),
        _plain_value(get("pads"), _INTS),
    )
    window = _WINDOWS.get(key)
    if window is None:
        window = _read_window(ctx, spatial, pads_with_auto_pad, attributes)
        if _NOT_PLAIN not in key:
            if len(_WINDOWS) >= _MAX_WINDOWS:
                _WINDOWS.clear()
            _WINDOWS[key] = window
    return window


def _read_window(
    ctx: NodeContext, spatial: int, pads_with_auto_pad: str, attributes: dict
) -> Window:
    # Without the attribute (the usual node) auto_pad is NOTSET: no read to check.
    auto_pad = ctx.attr_str("auto_pad", "NOTSET") if "auto_pad" in attributes else "NOTSET"
    if auto_pad not in _AUTO_PADS:
        ctx.fail(f"unknown auto_pad {auto_pad!r}")
    strides = _int_list(ctx, "strides", spatial, 1, 1)
    dilations = _int_list(ctx, "dilations", spatial, 1, 1)
    pads = _int_list(ctx, "pads", 2 * spatial, 0, 0)
    if auto_pad != "NOTSET" and "pads" in attributes:
        if pads_with_auto_pad == "fail":
            ctx.fail(f"both auto_pad={auto_pad} and pads are given")
        pads = (0,) * (2 * spatial)
    if auto_pad == "VALID":
        pads = (0,) * (2 * spatial)
    return Window(strides, dilations, pads[:spatial], pads[spatial:], auto_pad)


def kernel_dims(
    ctx: NodeContext, weight: Shape | None, spatial: int, *, required: bool = False
) -> list[Dim | None]:
    """Kernel dims from ``kernel_shape`` or else the weight's spatial dims (``None``: unknown).

    Both given as integers must agree (onnxruntime rejects the node otherwise).
    """
    attr = _ints_attr(ctx, "kernel_shape")
    if attr is None:
        if required:
            ctx.fail("attribute 'kernel_shape' is required")
        return [None] * spatial if weight is None else list(weight[2:])
    if len(attr) != spatial:
        ctx.fail(f"kernel_shape has {len(attr)} values, expected {spatial}")
    for k in attr:  # min(attr) < 1 without the builtin's argument parsing (every conv)
        if k < 1:
            ctx.fail(f"kernel_shape values must be >= 1, got {list(attr)}")
    if weight is not None:
        for k, w in zip(attr, weight[2:]):
            if isinstance(w, int) and w != k:
                ctx.fail(
                    f"kernel_shape {list(attr)} does not match weight shape {list(weight)}"
                )
    return list(attr)


def _required_kernel(ctx: NodeContext, x: Shape | None) -> list[int]:
    """The required ``kernel_shape`` (pooling, MaxUnpool); its length fixes the rank of ``x``."""
    # One read (kernel_dims would read it again): _ints_attr fails a non-plain attribute
    # as ctx.attr_ints does, and the checks are kernel_dims' for a known length.
    attr = _ints_attr(ctx, "kernel_shape")
    if attr is None:
        ctx.fail("attribute 'kernel_shape' is required")
    if x is not None and len(x) != len(attr) + 2:
        ctx.fail(f"input rank {len(x)} does not match kernel_shape {list(attr)}")
    for k in attr:  # min(attr) < 1 without the builtin's argument parsing (every conv)
        if k < 1:
            ctx.fail(f"kernel_shape values must be >= 1, got {list(attr)}")
    return list(attr)


def _spatial_rank(ctx: NodeContext, *shapes: Shape | None) -> int | None:
    """Rank shared by the given shapes (or ``kernel_shape`` + 2); ``None`` if unknown."""
    ranks = {len(s) for s in shapes if s is not None}
    if len(ranks) > 1:
        ctx.fail(f"input ranks differ: {sorted(ranks)}")
    if ranks:
        rank = ranks.pop()
    else:
        attr = ctx.attr_ints("kernel_shape")
        if attr is None:
            return None
        rank = len(attr) + 2
    if rank < 3:
        ctx.fail(f"input must have rank >= 3 (N, C, spatial...), got {rank}")
    return rank - 2


def _fill(ctx: NodeContext, dims: Sequence[Dim | None], hint: str = "d") -> tuple[Dim, ...]:
    """Replaces unknown dims by fresh symbols (so several outputs can share them)."""
    if None not in dims:  # every dim known (the usual pool): no generator to run
        return tuple(dims)  # type: ignore[arg-type]
    return tuple(ctx.new_symbol(f"{hint}{k}") if d is None else d for k, d in enumerate(dims))


# ----------------------------------------------------------------------------------------
# Output dim formulas (pure functions of one spatial axis; ints give ints)
# ----------------------------------------------------------------------------------------
#: conv_output_dim's arguments -> its result. A pure function of them (dims are canonical
#: expressions), asked again and again: a network repeats a few geometries on a few input
#: dims, and one lookup costs a tenth of the six arithmetic steps.
_CONV_DIMS: dict[tuple, Dim | None] = {}
_MAX_CONV_DIMS = 10_000


def conv_output_dim(
    d: Dim, k: Dim, stride: int, dilation: int, pad_begin: int, pad_end: int, auto_pad: str
) -> Dim:
    """Spatial output dim of a convolution (as onnxruntime computes it)."""
    key = (d, k, stride, dilation, pad_begin, pad_end, auto_pad)
    return _memoized_dim(key, _conv_output_dim)  # type: ignore[return-value]


_MISSING = object()


def _memoized_dim(key: tuple, formula: Callable[..., Dim | None]) -> Dim | None:
    """``formula(*key)``, kept in ``_CONV_DIMS`` (a pure function of its arguments).

    The convolution's and the transposed one's keys differ in length, so they never meet.
    An unknown (overflow) is not kept, as the algebra's memo keeps none: each call mints
    its own.
    """
    found = _CONV_DIMS.get(key, _MISSING)
    if found is _MISSING:
        found = formula(*key)
        if not (isinstance(found, expr.DimExpr) and found.is_unknown):
            if len(_CONV_DIMS) >= _MAX_CONV_DIMS:
                _CONV_DIMS.clear()
            _CONV_DIMS[key] = found
    return found  # type: ignore[return-value]


def conv_spatial_dim(ctx: NodeContext, axis: int, d: Dim, k: Dim, window: Window) -> Dim:
    """:func:`conv_output_dim` of spatial ``axis``, with what a run of the node implies.

    onnxruntime refuses a convolution whose window does not fit (an output size below 1,
    also where the spec's floor would give 0): an int size without a window fails the
    node, and a symbolic one is at least 1 in every run (a fact: ``H >= 1`` under a
    padded stem, where exporters' formulas and the engine's clamps differ at ``H = 0``).
    """
    dim = conv_output_dim(
        d,
        k,
        window.strides[axis],
        window.dilations[axis],
        window.pads_begin[axis],
        window.pads_end[axis],
        window.auto_pad,
    )
    if isinstance(dim, int):
        if dim <= 0:
            ctx.fail(f"spatial axis {axis}: input size {d} is smaller than the kernel window")
    else:
        ctx.ctx.note_ge(dim, 1)
    return dim


def _conv_output_dim(
    d: Dim, k: Dim, stride: int, dilation: int, pad_begin: int, pad_end: int, auto_pad: str
) -> Dim:
    if auto_pad.startswith("SAME"):
        return expr.ceildiv(d, stride)
    effective_kernel = expr.add(expr.mul(dilation, expr.sub(k, 1)), 1)
    numerator = expr.sub(d + pad_begin + pad_end, effective_kernel)
    return expr.add(expr.floordiv(numerator, stride), 1)


def conv_transpose_output_dim(
    d: Dim,
    k: Dim,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    output_padding: int,
    auto_pad: str,
) -> Dim | None:
    """Spatial output dim of a transposed convolution (``None``: not expressible)."""
    key = (d, k, stride, dilation, pad_begin, pad_end, output_padding, auto_pad)
    return _memoized_dim(key, _conv_transpose_output_dim)


def _conv_transpose_output_dim(
    d: Dim,
    k: Dim,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    output_padding: int,
    auto_pad: str,
) -> Dim | None:
    effective_kernel = expr.add(expr.mul(dilation, expr.sub(k, 1)), 1)
    full = expr.add(expr.mul(stride, expr.sub(d, 1)), output_padding + effective_kernel)
    if not auto_pad.startswith("SAME"):
        return expr.sub(full, pad_begin + pad_end)
    # onnxruntime pads by max(0, full - d*stride): the result is min(d*stride, full).
    if isinstance(effective_kernel, int):
        return expr.mul(d, stride) if output_padding + effective_kernel >= stride else full
    if output_padding + 1 >= stride:  # effective_kernel >= 1
        return expr.mul(d, stride)
    return None


def _trunc_div(a: int, b: int) -> int:
    """C-style integer division (rounds toward zero), for ``b > 0``."""
    return a // b if a >= 0 else -((-a) // b)


def _pool_floor_dim(numerator: Dim, stride: int, scope: expr.Scope) -> Dim:
    """``trunc(numerator / stride) + 1``: onnxruntime's floor-mode pooled size.

    Truncation differs from floor division only for a negative ``numerator`` that is
    not a multiple of ``stride``: there the result is 1 for ``-stride < numerator < 0``
    and 0 for ``-2*stride < numerator <= -stride`` (onnxruntime fails below).
    """
    if isinstance(numerator, int):
        return _trunc_div(numerator, stride) + 1
    floor_dim = expr.add(expr.floordiv(numerator, stride), 1)
    lower, _ = scope.bounds(numerator)
    if expr.mod(numerator, stride) == 0 or (lower is not None and lower >= 0):
        return floor_dim
    if lower is not None and lower > -stride:
        overhang = 1  # numerator > -stride always
    else:
        overhang = expr.dmin(
            1, expr.dmax(0, expr.add(numerator, stride), scope=scope), scope=scope
        )
    return expr.dmax(floor_dim, overhang, scope=scope)


def _ceil_div_float32(a: int, b: int) -> int:
    """``ceil(float(a) / b)`` in float32, as onnxruntime computes the ceil-mode size."""
    return math.ceil(float(np.float32(a) / np.float32(b)))


def pool_output_dim(
    d: Dim,
    k: int,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    auto_pad: str,
    ceil_mode: bool,
    scope: expr.Scope,
    loader_drops: bool = True,
) -> Dim | None:
    """Spatial output dim of MaxPool/AveragePool/LpPool (``None``: not expressible).

    Follows onnxruntime's ``PoolAttributes``: ``SAME_*`` pads by
    ``(ceil(d/s) - 1)*s + k - d`` with the undilated kernel ``k``; floor mode truncates;
    ceil mode takes the float32 ceiling and then drops a last window starting at or
    past ``d + pad_begin``.

    ``loader_drops=False`` (opsets before 22): ONNX's shape inference of those opsets,
    which onnxruntime runs when it loads a model, keeps that last window (``6 -> 4`` for
    a kernel of 1 and a stride of 2 where every run gives 3). An int we wrote there would
    contradict it and onnxruntime would refuse the model, so the dim is ``None`` (a fresh
    symbol) where the window is dropped at an int size.
    """
    extra = (dilation - 1) * (k - 1)  # dilated minus undilated kernel
    effective_kernel = extra + k
    if auto_pad.startswith("SAME") and extra:
        # onnxruntime's kernel pads for the undilated kernel (d - 1 for k = 2, dilation 2,
        # stride 1) where ONNX's inference, which it runs at load, says ceil(d / s) as the
        # spec does: a size written or published from either makes onnxruntime refuse the
        # model (at load) or fail (a Split of the other size): not expressible.
        return None
    if auto_pad.startswith("SAME"):
        steps = expr.ceildiv(d, stride)
        pad_needed = expr.sub(expr.mul(expr.sub(steps, 1), stride) + k, d)
        half = (
            expr.floordiv(pad_needed, 2)
            if auto_pad == "SAME_UPPER"
            else expr.floordiv(pad_needed + 1, 2)
        )
        pad_begin = half
        numerator = expr.sub(expr.mul(expr.sub(steps, 1), stride), extra)
    else:
        numerator = expr.sub(d + pad_begin + pad_end, effective_kernel)
    if not ceil_mode:
        return _pool_floor_dim(numerator, stride, scope)
    if isinstance(numerator, int) and isinstance(d, int):
        size = _ceil_div_float32(numerator, stride) + 1
        if (size - 1) * stride >= d + pad_begin:
            return size - 1 if loader_drops else None
        return size
    ceil_steps = expr.ceildiv(numerator, stride)
    if auto_pad.startswith("SAME"):
        # pad_begin >= 0 when k >= stride, and (ceil(d/s) - 1)*s < d + pad_begin: no drop.
        return expr.add(ceil_steps, 1) if k >= stride else None
    if stride <= effective_kernel - pad_end:
        return expr.add(ceil_steps, 1)  # ceil_steps*stride < d + pad_begin always
    last_start_inside = expr.floordiv(d + pad_begin - 1, stride)
    return expr.add(expr.dmin(ceil_steps, last_start_inside, scope=scope), 1)


# ----------------------------------------------------------------------------------------
# Convolutions
# ----------------------------------------------------------------------------------------
def _check_channels(ctx: NodeContext, x_channels: Dim, w_channels: Dim, group: int) -> None:
    expected = expr.mul(w_channels, group)
    if isinstance(x_channels, int) and isinstance(expected, int) and x_channels != expected:
        ctx.fail(
            f"input channels {x_channels} != weight channels {w_channels} * group {group}"
        )


def _conv_geometry(
    ctx: NodeContext, x: Shape | None, w: Shape | None, dtype: ir.DataType | None
) -> tuple[list[Dim | None], Window] | None:
    """Kernel dims and window of a (transposed) convolution of ``x`` by ``w``.

    ``None`` when the spatial rank is unknown; output 0 is then set to an unknown rank.
    """
    if x is not None and w is not None and len(x) == len(w) and len(x) >= 3:
        spatial: int | None = len(x) - 2  # _spatial_rank of the usual pair, without a set
    else:
        spatial = _spatial_rank(ctx, x, w)
    if spatial is None:
        ctx.set_output(0, None, dtype)
        return None
    return kernel_dims(ctx, w, spatial), read_window(ctx, spatial, pads_with_auto_pad="fail")


def infer_conv_output(
    ctx: NodeContext, x_index: int, w_index: int, dtype: ir.DataType | None
) -> None:
    """Sets output 0 of a convolution of input ``x_index`` by weight ``w_index``.

    Shared by ``Conv``, ``ConvInteger``, ``QLinearConv`` and onnxruntime's fused and
    quantized convolutions: the window attributes are read from the node.
    """
    ctx.require_input(x_index)
    ctx.require_input(w_index)
    x = ctx.input_shape(x_index)
    w = ctx.input_shape(w_index)
    geometry = _conv_geometry(ctx, x, w, dtype)
    if geometry is None:
        return
    kernel, window = geometry
    spatial = len(kernel)
    group = ctx.attr_int("group", 1)
    if group < 1:
        ctx.fail(f"group must be >= 1, got {group}")
    out_channels: Dim | None = None
    if w is not None:
        out_channels = w[0]
        if isinstance(out_channels, int) and out_channels % group:
            ctx.fail(f"output channels {out_channels} are not divisible by group {group}")
        if x is not None:
            _check_channels(ctx, x[1], w[1], group)
    out: list[Dim | None] = [None if x is None else x[0], out_channels]
    for i in range(spatial):
        d, k = (None if x is None else x[i + 2]), kernel[i]
        if d is None or k is None:
            out.append(None)
            continue
        out.append(conv_spatial_dim(ctx, i, d, k, window))
    ctx.set_output(0, out, dtype)


@register("", "Conv")
def infer_conv(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, M, out...)`` from ``X (N, C, d...)`` and ``W (M, C/group, k...)``."""
    infer_conv_output(ctx, 0, 1, ctx.input_dtype(0))


@register("", "ConvInteger", since=10)
def infer_conv_integer(ctx: NodeContext, node: ir.Node) -> None:
    """Conv output shape from ``x`` (input 0) and ``w`` (input 1); int32 elements."""
    infer_conv_output(ctx, 0, 1, ir.DataType.INT32)


@register("", "QLinearConv", since=10)
def infer_qlinear_conv(ctx: NodeContext, node: ir.Node) -> None:
    """Conv output shape from ``x`` (input 0) and ``w`` (input 3); ``y_zero_point`` type."""
    infer_conv_output(ctx, 0, 3, ctx.input_dtype(7))


def _output_shape_attr(ctx: NodeContext, spatial: int) -> Sequence[int] | None:
    """The spatial part of ``output_shape`` (onnxruntime accepts spatial or full rank)."""
    values = ctx.attr_ints("output_shape")
    if values is None:
        return None
    if len(values) not in (spatial, spatial + 2):
        ctx.fail(f"output_shape has {len(values)} values, expected {spatial} or {spatial + 2}")
    values = values[len(values) - spatial :]
    if any(v < 0 for v in values):
        ctx.fail(f"output_shape values must be >= 0, got {list(values)}")
    return values


@register("", "ConvTranspose")
def infer_conv_transpose(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, W[1]*group, out...)``; ``output_shape`` when given, else the transposed size."""
    ctx.require_input(0)
    ctx.require_input(1)
    dtype = ctx.input_dtype(0)
    x = ctx.input_shape(0)
    w = ctx.input_shape(1)
    geometry = _conv_geometry(ctx, x, w, dtype)
    if geometry is None:
        return
    kernel, window = geometry
    spatial = len(kernel)
    output_padding = _int_list(ctx, "output_padding", spatial, 0, 0)
    output_shape = _output_shape_attr(ctx, spatial)
    group = ctx.attr_int("group", 1)
    if group < 1:
        ctx.fail(f"group must be >= 1, got {group}")
    out_channels: Dim | None = None
    if w is not None:
        out_channels = expr.mul(w[1], group)
        if x is not None and isinstance(x[1], int) and isinstance(w[0], int) and x[1] != w[0]:
            ctx.fail(f"input channels {x[1]} != weight dim 0 {w[0]}")
    out: list[Dim | None] = [None if x is None else x[0], out_channels]
    for i in range(spatial):
        if output_shape is not None:
            out.append(output_shape[i])
            continue
        d, k = (None if x is None else x[i + 2]), kernel[i]
        if d is None or k is None:
            out.append(None)
            continue
        out.append(
            conv_transpose_output_dim(
                d,
                k,
                window.strides[i],
                window.dilations[i],
                window.pads_begin[i],
                window.pads_end[i],
                output_padding[i],
                window.auto_pad,
            )
        )
    ctx.set_output(0, out, dtype)


# ----------------------------------------------------------------------------------------
# Pooling
# ----------------------------------------------------------------------------------------
def _pooled_dims(
    ctx: NodeContext, spatial: Shape, kernel: Sequence[int], window: Window, ceil_mode: bool
) -> list[Dim | None]:
    """:func:`pool_output_dim` of each spatial dim, kept with the facts.

    A pure function of the dims, the window and the facts (``dims_under_facts``): a
    network pools the same dims the same way in every inference, and the symbolic
    arithmetic costs more than the rest of the node.
    """
    scope = ctx.scope
    loader_drops = ctx.opset >= 22
    axes = zip(
        spatial, kernel, window.strides, window.dilations, window.pads_begin, window.pads_end
    )

    def compute() -> list[Dim | None]:
        return [
            pool_output_dim(
                d,
                k,
                stride,
                dilation,
                begin,
                end,
                window.auto_pad,
                ceil_mode,
                scope,
                loader_drops=loader_drops,
            )
            for d, k, stride, dilation, begin, end in axes
        ]

    key = ("Pool", spatial, tuple(kernel), window, ceil_mode, loader_drops)
    return ctx.ctx.dims_under_facts(key, compute)


@register("", ["MaxPool", "AveragePool", "LpPool"])
def infer_pool(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, C, out...)`` from the window attributes; MaxPool's ``Indices`` alike (int64)."""
    ctx.require_input(0)
    dtype = ctx.input_dtype(0)
    x = ctx.input_shape(0)
    kernel = _required_kernel(ctx, x)
    spatial = len(kernel)
    window = read_window(ctx, spatial, pads_with_auto_pad="ignore")
    ceil_mode = bool(ctx.attr_int("ceil_mode", 0))
    if x is None:
        out: list[Dim | None] = [None] * (spatial + 2)
    else:
        out = [x[0], x[1], *_pooled_dims(ctx, x[2:], kernel, window, ceil_mode)]
    dims = _fill(ctx, out)
    ctx.set_output(0, dims, dtype)
    if node.op_type == "MaxPool":
        ctx.set_output(1, dims, ir.DataType.INT64)


@register("", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def infer_global_pool(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, C, 1, ..., 1)``."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None and len(x) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(x)}")
    out = None if x is None else (x[0], x[1], *([1] * (len(x) - 2)))
    ctx.set_output(0, out, ctx.input_dtype(0))


def _num_rois(ctx: NodeContext, *sources: tuple[int, int]) -> Dim | None:
    """The first known ``(input, axis)`` dim, preferring an integer one."""
    found: list[Dim] = []
    for i, axis in sources:
        shape = ctx.input_shape(i)
        if shape is not None and len(shape) > axis:
            found.append(shape[axis])
    ints = {d for d in found if isinstance(d, int)}
    if len(ints) > 1:
        ctx.fail(f"number of rois differs between inputs: {sorted(ints)}")
    if ints:
        return ints.pop()
    return found[0] if found else None


@register("", "MaxRoiPool")
def infer_max_roi_pool(ctx: NodeContext, node: ir.Node) -> None:
    """``(num_rois, C, pooled_h, pooled_w)``."""
    ctx.require_input(0)
    ctx.require_input(1)
    pooled = ctx.attr_ints("pooled_shape")
    if pooled is None or len(pooled) != 2 or any(p < 0 for p in pooled):
        ctx.fail(f"pooled_shape must be two dims >= 0, got {pooled}")
    x = ctx.input_shape(0)
    if x is not None and len(x) != 4:
        ctx.fail(f"input X must be 4-D, got rank {len(x)}")
    rois = ctx.input_shape(1)
    if rois is not None and len(rois) != 2:
        ctx.fail(f"rois must be 2-D, got rank {len(rois)}")
    channels = None if x is None else x[1]
    ctx.set_output(0, [_num_rois(ctx, (1, 0)), channels, *pooled], ctx.input_dtype(0))


@register("", "RoiAlign", since=10)
def infer_roi_align(ctx: NodeContext, node: ir.Node) -> None:
    """``(num_rois, C, output_height, output_width)``."""
    for i in range(3):
        ctx.require_input(i)
    height = ctx.attr_int("output_height", 1)
    width = ctx.attr_int("output_width", 1)
    if height < 0 or width < 0:
        ctx.fail(f"output_height/output_width must be >= 0, got {height}, {width}")
    x = ctx.input_shape(0)
    if x is not None and len(x) < 2:
        ctx.fail(f"input X must have rank >= 2, got {len(x)}")
    channels = None if x is None else x[1]
    ctx.set_output(
        0, [_num_rois(ctx, (1, 0), (2, 0)), channels, height, width], ctx.input_dtype(0)
    )


@register("", "MaxUnpool", since=9)
def infer_max_unpool(ctx: NodeContext, node: ir.Node) -> None:
    """``output_shape`` (input 2) when given, else ``(d-1)*stride + k - pads`` per axis."""
    ctx.require_input(0)
    ctx.require_input(1)
    dtype = ctx.input_dtype(0)
    x = ctx.input_shape(0)
    kernel = _required_kernel(ctx, x)
    spatial = len(kernel)
    strides = _int_list(ctx, "strides", spatial, 1, 1)
    pads = _int_list(ctx, "pads", 2 * spatial, 0, 0)
    batch_channels: list[Dim | None] = [None, None] if x is None else [x[0], x[1]]
    if ctx.has_input(2):
        requested = ctx.input_value(2)
        if requested is None:
            ctx.set_output(0, [*batch_channels, *([None] * spatial)], dtype)
            return
        if len(requested) != spatial + 2:
            ctx.fail(f"output_shape has {len(requested)} values, expected {spatial + 2}")
        if any(isinstance(v, int) and v < 0 for v in requested):
            ctx.fail(f"output_shape values must be >= 0, got {list(requested)}")
        # N and C must equal X's: keep an integer when either side has one.
        for axis in (0, 1):
            if isinstance(requested[axis], int) or batch_channels[axis] is None:
                batch_channels[axis] = requested[axis]
        ctx.set_output(0, [*batch_channels, *requested[2:]], dtype)
        return
    out = list(batch_channels)
    for i in range(spatial):
        if x is None:
            out.append(None)
            continue
        full = expr.add(expr.mul(expr.sub(x[i + 2], 1), strides[i]), kernel[i])  # type: ignore[arg-type]
        out.append(expr.sub(full, pads[i] + pads[i + spatial]))
    ctx.set_output(0, out, dtype)
