"""onnxscript's default pattern rules as ``optimize`` runs them, guarded where unsound.

Which rules are left out, and sound variants of the ones whose checks are weaker than
their rewrites. Every variant's docstring states what the original check leaves out and
how it was found (``tests/rewrite/test_onnxscript_rules_edges.py`` shows each one firing
and declining). :func:`onnxscript_rules` is the rule list of a round; :func:`no_clobbering`
wraps a rule so that it never stores a new initializer over a same-named one still read
elsewhere.
"""

from __future__ import annotations

import copy
import functools
import logging

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import (
    constant_tensor,
    int_attribute,
)

__all__ = ["no_clobbering", "onnxscript_rules"]

logger = logging.getLogger(__name__)


#: onnxscript rules left out, and why (most replaced by a sound rule of ours).
_EXCLUDED_ONNXSCRIPT_RULES = {
    # Writes -1 for the one symbolic dim next to any int dims with allowzero=1: when an
    # int dim is 0, onnxruntime cannot infer the -1 and the model fails where the
    # original ran. MaterializeReshapeTarget covers the sound cases.
    "MaterializeReshapeShape",
    # Its two-node pattern is matched in time quadratic in the graph (1.2 s of 2.1 s of
    # all onnxscript rules on an 8-layer TorchScript decoder); SlicesToSplitPass does
    # the same and more (any partition of any axis) in linear time.
    "SlicesSplit",
    # Writes the output's int dims into the target with allowzero=0, where a 0 copies an
    # input dim instead (Flatten of an empty tensor: [1, 0], an invalid target for a
    # rank-1 input, which onnxruntime refuses to load). CollapseReshapeChains collapses
    # chains with a Flatten in them to a sound target; a lone Flatten stays.
    "Flatten2Reshape",
    # Clip(Clip(x, a, b), c, d) -> Clip(x, max(a, c), min(b, d)) and Relu(Clip(x, a, b))
    # -> Clip(x, max(a, 0), b): for disjoint ranges the merged min exceeds the max, and
    # Clip then gives the max everywhere (the spec, onnxruntime), where the original
    # gave c (0): Relu(Clip(x, -2, -1)) is 0, Clip(x, 0, -1) is -1. Clip(Relu(x), a, b)
    # (FuseSuccessiveClipRelu) gives b there as the original does, and stays.
    "FuseSuccessiveClip",
    "FuseSuccessiveReluClip",
}

#: onnxscript rules that reassociate float math (scale and shift folded into the
#: weights): outputs equal up to rounding, not bit for bit. Run only with
#: ``exact_floats=False``.
_FLOAT_REASSOCIATING_RULES = {
    "FuseBatchNormIntoConv",
    "FuseBatchNormIntoConvTranspose",
    "FuseBatchNormIntoGemm",
}


def onnxscript_rules(model: ir.Model | None = None, exact_floats: bool = True):
    """The default pattern rules of onnxscript, minus the excluded ones.

    With ``exact_floats``, also minus the rules that reassociate float math.

    With ``model``, also minus the rules whose pattern needs an op the model does not
    have (they cannot match; onnxscript's matcher would still try them on every node).
    """
    from onnxscript import rewriter

    rules = getattr(rewriter, "_DEFAULT_REWRITE_RULES", None)
    if rules is None:  # a later onnxscript: its defaults, as its public API gives them
        return None
    excluded = _excluded_unnamed_rules()
    if excluded is None:  # cannot tell the unsound no-op rules apart: run none of them
        return []
    names = _EXCLUDED_ONNXSCRIPT_RULES | (
        _FLOAT_REASSOCIATING_RULES if exact_floats else set()
    )
    unnamed = _sound_unnamed_variants()
    kept = [
        _SOUND_VARIANTS[r.name]()
        if getattr(r, "name", "") in _SOUND_VARIANTS
        else unnamed.get(id(r), r)
        for r in rules
        if getattr(r, "name", "") not in names and id(r) not in excluded
    ]
    kept = [r for r in kept if r is not None]
    if model is None:
        return kept
    present = {
        (node.domain, node.op_type)
        for node in ir.traversal.RecursiveGraphIterator(model.graph)
    }
    return [r for r in kept if _can_match(r, present)]


#: Element types whose every value a ``float`` holds exactly.
_EXACT_IN_FLOAT = frozenset(
    {
        ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.BOOL,
        ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT16, ir.DataType.UINT16,
        ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
        ir.DataType.FLOAT8E5M2FNUZ,
    }
)  # fmt: skip


@functools.cache
def _sound_cast_cast():
    """The ``CastCast`` rule of onnxscript where the first cast (to ``float``) is exact.

    ``Cast(Cast(x, FLOAT), FLOAT16)`` is ``Cast(x, FLOAT16)`` for a ``float16`` or
    ``bfloat16`` ``x`` (mixed-precision exports). For a ``double`` it rounds twice: ``1 +
    2**-11 + 2**-40`` is ``1.001`` directly but ``1.0`` through ``float`` (the spec and
    its reference; onnxruntime converts a double to float16 through float anyway), and
    an int32 above ``2**24`` rounds twice to ``bfloat16``. ``None`` (the rule is left
    out) for an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter.rules.common._basic_rules import CastCast
    except ImportError:
        return None

    class SoundCastCast(CastCast):
        def check(self, context, x, to, to_ignored):
            result = super().check(context, x, to, to_ignored)
            if result and x.dtype not in _EXACT_IN_FLOAT:
                return result.fail("the first cast to float may round")
            return result

    return SoundCastCast.rule()


@functools.cache
def _sound_scatter_all_static():
    """The ``ScatterAllStatic`` rule of onnxscript for a ``ScatterND`` without reduction.

    ``ScatterND(x, [[0], [1], …, [n-1]], u)`` is ``u``; with ``reduction="add"`` it is
    ``x + u`` (``mul``, ``max``, ``min`` alike), but onnxscript's pattern does not read the
    attribute and replaced it by ``u`` too (found by hand). ``None`` (the rule is left
    out) for an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common._redundant_scatter_nd import ScatterAllStatic
    except ImportError:
        return None

    class SoundScatterAllStatic(ScatterAllStatic):
        def check(self, context, data, indices, updates, **rest):
            reduction = context.root.attributes.get("reduction")
            if reduction is not None and reduction.value != "none":
                return MatchResult().fail(
                    "a ScatterND with a reduction combines data and updates"
                )
            if data.shape is None or not data.shape or not isinstance(data.shape[0], int):
                # its check ranges over data.shape[0]: a symbolic dim raised TypeError,
                # which stopped every rule of the round
                return MatchResult().fail("the first dim of data is not known")
            return super().check(context, data, indices, updates, **rest)

    return SoundScatterAllStatic.rule()


@functools.cache
def _sound_clip_fusions() -> dict[str, object]:
    """The ``Min``/``Max`` to ``Clip`` fusions of onnxscript where ``Clip`` computes the same.

    ``Min(Max(x, lo), hi)`` -> ``Clip(x, lo, hi)`` (and ``Max(Min(...))``) reads every
    one-element constant as a scalar, but a ``[1, 1]`` bound broadcasts ``x[N]`` to ``[1,
    N]`` where ``Clip`` keeps ``[N]``; ``Max(x, NaN)`` is NaN everywhere where ``Clip``
    with a NaN bound is not; and before opset 11 ``Clip`` takes its bounds as attributes
    (the fused node was invalid), before 12 only for floats (found by hand). The
    variants also ask that every bound's rank is at most ``x``'s proven rank, that no
    bound is NaN, and an opset whose ``Clip`` takes the type. Empty when onnxscript is
    laid out otherwise (the two rules are then left out).
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common import _min_max_to_clip as module
    except ImportError:
        return {}

    def bounds_fit(context, x, out1, out2) -> str | None:
        opset = context.model.opset_imports.get("", context.model.opset_imports.get("ai.onnx"))
        floating = x.dtype is not None and x.dtype.is_floating_point()
        if opset is None or opset < 11 or (opset < 12 and not floating):
            return "Clip of this type takes its bounds as inputs from a later opset"
        if x.shape is None:
            return "the rank of x is not known"
        for bound in [*out1.producer().inputs[1:], *out2.producer().inputs[1:]]:
            array = bound.const_value.numpy()
            if array.ndim > len(x.shape):
                return "a bound of a higher rank broadcasts x"
            if array.dtype.kind in "fc" and np.isnan(array).any():
                return "a NaN bound gives NaN everywhere, Clip does not"
        return None

    variants = {}
    for name in ("FuseMaxMinToClip", "FuseMinMaxToClip"):
        base = getattr(module, name, None)
        if base is None:
            continue

        class Sound(base):
            def check(self, context, out1, out2, **rest):
                result = super().check(context, out1, out2, **rest)
                if not result:
                    return result
                why = bounds_fit(context, rest["x"], out1, out2)
                return MatchResult().fail(why) if why else result

        Sound.__name__ = f"Sound{name}"
        variants[name] = Sound().rule()
    return variants


@functools.cache
def _sound_conv_integer_pad():
    """The ``ConvInteger(Pad(x))`` -> ``ConvInteger(x, pads)`` rule of onnxscript, where alike.

    ``Pad`` writes zeros, which ``ConvInteger`` then shifts by ``-x_zero_point``; its own
    padding is the zero point itself (it contributes nothing): with ``x_zero_point = 5``
    the fused node computed other sums on the border (found by hand). The variant asks
    for no ``x_zero_point`` or a constant one of zeros. ``None`` (the rule is left out)
    for an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common._fuse_pad_into_conv import FuseConvIntegerPad
    except ImportError:
        return None

    class SoundFuseConvIntegerPad(FuseConvIntegerPad):
        def check(self, context, x, pad, conv, **rest):
            if len(pad.producer().inputs) < 2:  # a Pad of opset 2: its check raised
                return MatchResult().fail("the Pad takes its pads as an attribute")
            inputs = conv.producer().inputs
            point = inputs[2] if len(inputs) > 2 else None
            tensor = constant_tensor(point) if point is not None else None
            if point is not None and (tensor is None or tensor.numpy().any()):
                return MatchResult().fail("ConvInteger pads with its x_zero_point, Pad with 0")
            return super().check(context, x, pad, conv, **rest)

    return SoundFuseConvIntegerPad.rule()


@functools.cache
def _sound_clip_relu():
    """The ``Clip(Relu(x), lo, hi)`` -> ``Clip(x, max(lo, 0), hi)`` rule of onnxscript, where alike.

    It reads the bounds from ``Clip``'s inputs only: before opset 11 they are attributes,
    and the fused ``Clip(x, 0)`` dropped ``max=6`` (an invalid model at those opsets, whose
    ``Clip`` takes one input); and it computes ``max(lo, 0)`` through a ``float``, which
    rounds an int64 bound past ``2**53`` (``Clip(Relu(x), 2**53 + 1)`` became ``Clip(x,
    2**53)``; found by hand). The variant asks for no attribute on the ``Clip`` and a
    lower bound that the conversion keeps. ``None`` (the rule is left out) for an
    onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common._fuse_relus_clips import FuseSuccessiveClipRelu
    except ImportError:
        return None

    def bound_kept(clip: ir.Node) -> bool:
        if len(clip.inputs) < 2 or clip.inputs[1] is None:
            return True
        dtype = clip.inputs[0].dtype
        if dtype is None:
            return False
        low = np.asarray(clip.inputs[1].const_value.numpy())
        with np.errstate(all="ignore"):
            written = np.array(np.maximum(0.0, low), dtype=dtype.numpy())
        wanted = np.maximum(low, np.zeros((), low.dtype))
        if wanted.dtype.kind in "fc":
            return bool(np.all((wanted == written) | (np.isnan(wanted) & np.isnan(written))))
        return bool(np.all(wanted == written))

    class SoundFuseSuccessiveClipRelu(FuseSuccessiveClipRelu):
        def check(self, context, **kwargs):
            clip = kwargs["out_first_clip"].producer()
            if clip.attributes:
                return MatchResult().fail("the Clip has attributes the fused node drops")
            result = super().check(context, **kwargs)
            if result and not bound_kept(clip):
                return MatchResult().fail("max(lo, 0) through a float rounds lo")
            return result

    return SoundFuseSuccessiveClipRelu().rule()


@functools.cache
def _sound_scatter_all_dynamic():
    """The ``ScatterAllDynamic`` rule of onnxscript where the range spans what it checks.

    It replaces ``ScatterND(t, Unsqueeze(Range(0, Gather(Shape(data), axis), 1), -1), u)``
    by ``u`` when ``data.shape[axis]`` is ``t.shape[0]``, but its pattern matches a
    ``Shape`` with an ``end`` too: with ``Shape<end=1>`` and ``axis = -1`` the range
    spans ``data.shape[0]``, fewer rows than ``t``, and the ``[5, 3]`` result became the
    ``[2, 3]`` updates (found by hand). The variant reads the dim the ``Gather`` picks
    from the ``Shape``'s slice (ONNX clamps ``start`` and ``end`` as Python slices do).
    ``None`` (the rule is left out) for an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common._redundant_scatter_nd import ScatterAllDynamic
    except ImportError:
        return None

    def picked_dim(root: ir.Node):
        unsqueeze = root.inputs[1].producer() if len(root.inputs) > 1 else None
        ranged = unsqueeze.inputs[0].producer() if unsqueeze is not None else None
        gather = ranged.inputs[1].producer() if ranged is not None else None
        shape = gather.inputs[0].producer() if gather is not None else None
        if shape is None or shape.op_type != "Shape" or shape.inputs[0].shape is None:
            return None
        index = constant_tensor(gather.inputs[1])
        if index is None or index.numpy().size != 1:
            return None
        end = shape.attributes.get("end")
        dims = list(shape.inputs[0].shape)[
            int_attribute(shape, "start", 0) : None if end is None else end.as_int()
        ]
        position = int(index.numpy().reshape(()))
        return dims[position] if -len(dims) <= position < len(dims) else None

    class SoundScatterAllDynamic(ScatterAllDynamic):
        def check(self, context, data, axis, transposed_data, **rest):
            result = super().check(context, data, axis, transposed_data, **rest)
            if not result:
                return result
            dim = picked_dim(context.root)
            rows = transposed_data.shape[0]
            if dim is None or dim != rows:
                return MatchResult().fail("the range does not span the rows of the data")
            return result

    return SoundScatterAllDynamic.rule()


@functools.cache
def _sound_gemm_bias():
    """The ``RemoveOptionalBiasFromGemm`` rule of onnxscript, for a finite ``beta``.

    ``Gemm(a, b, zeros, beta=inf)`` adds ``inf * 0``, NaN everywhere; the rule dropped the
    bias and the NaN with it (found by hand). ``None`` (the rule is left out) for an
    onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common._remove_optional_bias import (
            RemoveOptionalBiasFromGemm,
        )
    except ImportError:
        return None

    class SoundRemoveOptionalBiasFromGemm(RemoveOptionalBiasFromGemm):
        def check(self, context, b, **rest):
            beta = context.root.attributes.get("beta")
            if beta is not None and not np.isfinite(beta.value):
                return MatchResult().fail("beta * 0 is NaN for an infinite or NaN beta")
            return super().check(context, b, **rest)

    return SoundRemoveOptionalBiasFromGemm().rule()


@functools.cache
def _sound_conv_pad():
    """The ``Conv(Pad(x))`` -> ``Conv(x, pads)`` rule of onnxscript, for a ``Pad`` of opset 11+.

    Its check reads the pads from ``Pad``'s second input: a ``Pad`` of opset 2 (pads as
    an attribute) raised ``IndexError``, which stopped every rule of the round (found by
    hand). ``None`` (the rule is left out) for an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common._fuse_pad_into_conv import FuseConvPad
    except ImportError:
        return None

    class SoundFuseConvPad(FuseConvPad):
        def check(self, context, x, pad, conv, **rest):
            if len(pad.producer().inputs) < 2:
                return MatchResult().fail("the Pad takes its pads as an attribute")
            return super().check(context, x, pad, conv, **rest)

    return SoundFuseConvPad.rule()


@functools.cache
def _sound_normalize_pad_format() -> dict[str, object]:
    """The ``auto_pad`` -> explicit ``pads`` rules of onnxscript, for an int kernel size.

    Without a ``kernel_shape`` attribute they read the kernel size from the weight's
    shape: a symbolic one raised ``TypeError`` in their arithmetic, which stopped every
    rule of the round (found by hand). Empty when onnxscript is laid out otherwise (the
    rules are then left out).
    """
    try:
        from onnxscript.rewriter import MatchResult
        from onnxscript.rewriter.rules.common import _fuse_pad_into_conv as module
    except ImportError:
        return {}

    variants = {}
    for name in ("NormalizePadFormatConv", "NormalizePadFormatConvInteger"):
        base = getattr(module, name, None)
        if base is None:
            continue

        class Sound(base):
            def check(self, context, conv, **rest):
                node = conv.producer()
                if "kernel_shape" not in node.attributes:
                    weight = node.inputs[1].shape if len(node.inputs) > 1 else None
                    if weight is None or not all(isinstance(d, int) for d in weight[2:]):
                        return MatchResult().fail("the kernel size is not known")
                return super().check(context, conv, **rest)

        Sound.__name__ = f"Sound{name}"
        variants[name] = Sound.rule()
    return variants


#: onnxscript rules replaced by a variant whose check adds what soundness needs.
_SOUND_VARIANTS = {
    "NormalizePadFormatConv": lambda: _sound_normalize_pad_format().get(
        "NormalizePadFormatConv"
    ),
    "NormalizePadFormatConvInteger": lambda: _sound_normalize_pad_format().get(
        "NormalizePadFormatConvInteger"
    ),
    "RemoveOptionalBiasFromGemm": _sound_gemm_bias,
    "FuseConvPad": _sound_conv_pad,
    "FuseSuccessiveClipRelu": _sound_clip_relu,
    "ScatterAllDynamic": _sound_scatter_all_dynamic,
    "FuseConvIntegerPad": _sound_conv_integer_pad,
    "CastCast": _sound_cast_cast,
    "ScatterAllStatic": _sound_scatter_all_static,
    "FuseMaxMinToClip": lambda: _sound_clip_fusions().get("FuseMaxMinToClip"),
    "FuseMinMaxToClip": lambda: _sound_clip_fusions().get("FuseMinMaxToClip"),
}


@functools.cache
def _sound_unnamed_variants() -> dict[int, object]:
    """The unnamed rules of onnxscript replaced by a variant adding what soundness needs, by id.

    Its ``Reshape(MatMul(Reshape(a), b), c)`` -> ``MatMul(a, b)`` rules (``b`` reshaped
    too, or not) check only that ``c`` is ``MatMul(a, b)``'s shape, never what the
    reshapes did: a reshaped ``b`` multiplies other elements, and batch axes the reshape
    of ``a`` adds broadcast against ``b``'s batch in another order (``a[2, 1]`` viewed
    as ``[2, 1, 1, 1]`` times ``b[2, 1, 1]`` lays out ``a[i] * b[j]`` at ``2i + j``,
    ``MatMul(a, b)`` at ``2j + i``; found by brute force over small shapes). The variant
    also asks that ``b`` is a matrix or a vector that reaches the ``MatMul`` in its own
    shape and that the reshape of ``a`` keeps its last dim: the ``MatMul`` then multiplies
    every row of ``a`` by ``b`` alone, and the rows keep their row-major order. Left out
    (``None``) for an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter.rules.common import _broadcast_to_matmul as module

        rules = [
            module.two_reshapes_matmul_reshape_rule,
            module.one_reshape_matmul_reshape_rule,
        ]
        original = module.check_if_not_need_reshape
        for rule in rules:
            if rule._condition_function is not original:
                raise AttributeError("another condition")
    except (ImportError, AttributeError):
        return {
            **_cast_constant_of_shape_variants(),
            **{id(r): None for r in _matmul_reshape_rules_or_none()},
        }

    def rows_kept(context, **bindings):
        if not original(context, **bindings):
            return False
        matmul = context.root.inputs[0].producer()
        if matmul is None or matmul.op_type != "MatMul" or len(matmul.inputs) != 2:
            return False
        a, b = bindings["input_a"].shape, bindings["input_b"].shape
        left, right = matmul.inputs[0].shape, matmul.inputs[1].shape
        if a is None or b is None or left is None or right is None:
            return False
        if not all(isinstance(d, int) for d in (*a, *b, *left, *right)):
            return False
        return len(b) <= 2 and list(right) == list(b) and len(a) and left[-1] == a[-1]

    variants = _cast_constant_of_shape_variants()
    for rule in rules:
        variant = copy.copy(rule)
        variant._condition_function = rows_kept
        variants[id(rule)] = variant
    return variants


#: The element types of ``ConstantOfShape`` at every opset (and in onnxruntime's kernel).
_CONSTANT_OF_SHAPE_TYPES = frozenset(
    {
        ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.BOOL,
        ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
    }
)  # fmt: skip


def _cast_is_exact(value: np.ndarray, to: ir.DataType) -> bool:
    """Whether numpy converts the one element ``value`` to ``to`` as ``Cast`` defines it.

    To ``bool``: non-zero is true in both. A float to ``float`` or ``double``: one IEEE
    rounding to nearest. A float to an integer type: truncation, when finite and in range
    (beyond, ``Cast`` is undefined and numpy raises or wraps). Otherwise only where the
    element round-trips exactly (``double`` to ``float16``: onnxruntime rounds twice,
    through ``float``).
    """
    if to == ir.DataType.BOOL:
        return True
    if value.dtype.kind == "f" and to in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
        return True  # one IEEE rounding to nearest in both (inf and NaN kept)
    target = to.numpy()
    with np.errstate(all="ignore"):
        if value.dtype.kind == "f" and np.issubdtype(target, np.integer):
            if not np.isfinite(value).all():
                return False
            limits = np.iinfo(target)
            return bool(
                limits.min <= np.trunc(value).min() and np.trunc(value).max() <= limits.max
            )
        try:
            return bool((value.astype(target).astype(value.dtype) == value).all())
        except (OverflowError, ValueError):
            return False


def _cast_constant_of_shape_variants() -> dict[int, object]:
    """The ``Cast(ConstantOfShape(s, v), to)`` -> ``ConstantOfShape(s, to(v))`` rules, guarded.

    onnxscript's rules wrote a ``ConstantOfShape`` of any type: ``float8``, ``int4``
    (invalid before opset 20, refused by onnxruntime at every opset: a model that ran no
    longer loaded), ``string`` (``optimize`` failed to serialize the model); they convert
    ``v`` with numpy, which raises on an int64 ``257`` to ``uint8`` (stopping every rule
    of the round) where ``Cast`` wraps; and the rule for a ``ConstantOfShape`` without
    ``value`` (zeros) matches one with a value too, and wrote zeros where the first rule
    declined. The variants take only ``ConstantOfShape``'s own types, a value numpy
    converts as ``Cast`` does, and no value for the second (found by hand).
    """
    try:
        from onnxscript.rewriter.rules.common import _cast_constant_of_shape as module

        with_value = module.cast_constant_of_shape_rule
        without_value = module.cast_constant_of_shape_without_value_rule
        with_value._condition_function  # noqa: B018 (laid out as expected)
    except (ImportError, AttributeError):
        return {}

    def value_fits(context, scalar=None, dtype=None, **_):
        to = ir.DataType(dtype.as_int())
        if to not in _CONSTANT_OF_SHAPE_TYPES:
            return False
        if scalar is None:  # the pattern without a value matches one with a value too
            source = context.root.inputs[0].producer()
            return source is not None and "value" not in source.attributes
        return _cast_is_exact(np.asarray(scalar.value.numpy()), to)

    variants = {}
    for rule in (with_value, without_value):
        variant = copy.copy(rule)
        variant._condition_function = value_fits
        variants[id(rule)] = variant
    return variants


def _matmul_reshape_rules_or_none() -> list:
    try:
        from onnxscript.rewriter.rules.common import _broadcast_to_matmul as module
    except ImportError:
        return []
    return [
        getattr(module, name)
        for name in ("two_reshapes_matmul_reshape_rule", "one_reshape_matmul_reshape_rule")
        if hasattr(module, name)
    ]


def _excluded_unnamed_rules() -> set[int] | None:
    """The ``x * 1``, ``x + 0``, ``x - 0``, ``x / 1`` rules of onnxscript (they have no names).

    They read an initializer that is also a graph input as a constant, though a feed
    replaces it; ``NeutralElement`` does the same soundly.
    """
    try:
        from onnxscript.rewriter.rules.common import _no_op
    except ImportError:  # an onnxscript laid out otherwise: None, so no rule runs unchecked
        return None
    keep = {id(_no_op.dropout_zero_rule), id(_no_op.dropout_inference_rule)}
    return {id(r) for r in _no_op.rules.rules} - keep


def _can_match(rule, present: set[tuple[str, str]]) -> bool:
    try:
        needed = {
            (domain, op) for domain, op, _ in (n.op_identifier() for n in rule._target_pattern)
        }
    except Exception:  # the pattern's internals changed: keep the rule
        return True
    return needed <= present


def no_clobbering(rule):
    """``rule`` declining a rewrite whose new initializer replaces one still read.

    onnxscript's rewriter stores a rule's new initializers by name over the graph's own:
    ``Min(Min(x, 5), 1)`` wrote its bound as ``x_min``, and an initializer ``x_min`` the
    model had already was dropped from the graph while a node still read it (onnxruntime
    refused the model; found by hand). An initializer that only the replaced nodes read
    (a weight that ``FuseBatchNormIntoConv`` rewrites under its own name) may go. ``rule``
    itself when it cannot be wrapped.
    """
    try_rewrite = getattr(rule, "try_rewrite", None)
    if try_rewrite is None:
        return rule

    def guarded(model, graph_or_function, *args, **kwargs):
        delta = try_rewrite(model, graph_or_function, *args, **kwargs)
        names = getattr(graph_or_function, "initializers", None)
        new = getattr(delta, "new_initializers", None) or ()
        if names is None or not new:
            return delta
        replaced = set(getattr(getattr(delta, "match", None), "nodes", ()))
        for value in new:
            old = names.get(value.name)
            if old is None or old is value:
                continue
            if old.is_graph_input() or old.is_graph_output():
                return None
            if any(use.node not in replaced for use in old.uses()):
                return None  # read elsewhere: it must stay
        return delta

    variant = copy.copy(rule)
    variant.try_rewrite = guarded
    return variant
