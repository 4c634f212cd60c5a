"""Copies of onnxscript's fusion rules that decline the matches where the fusion is unsound.

onnxscript's fusion rules match by pattern and bind dims by name; some of their
matches change an output, or write a node onnxruntime cannot run, on inputs or types
the rule does not look at (a mask that hides a whole row, a ``Gemm`` transposing its
weight, a float16 input of a float ``RMSNormalization``, …). The output check of the
fusion guard (:mod:`~onnx_symdims.rewrite._fusion_check`) draws no such inputs, and with
``verify_fusions=False`` or no onnxruntime nothing would undo them. Each function here
builds onnxscript's own rule again with a stricter condition, whose first docstring line
says what it asks; the rest of the docstring says what the original rule did wrong.
One copy (:func:`attention_no_bias_rules`) instead widens a rule to an equally sound
case onnxscript misses.

The fusion guard (:mod:`~onnx_symdims.rewrite._guard`) puts these in place of onnxscript's
steps. Every builder returns ``None`` (or the rule unchanged) when onnxscript is laid
out otherwise, and the guard then runs onnxscript's own rule.
"""

from __future__ import annotations

__all__ = [
    "FUSED_MATMUL_TYPES",
    "attention_no_bias_rules",
    "bias_gelu_of_the_last_axis",
    "float_fused_matmul_only",
    "gqa_keeping_attention_semantics",
    "mha_scale_without_bias",
    "plain_gemm_only",
    "rms_normalization_of_one_type",
    "rotary_embedding_23_of_the_batch",
    "sdpa_keeping_nan_zeroing",
]

import copy
import logging
import math
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import constant_tensor

logger = logging.getLogger(__name__)


def sdpa_keeping_nan_zeroing() -> Callable[[ir.Model], int] | None:
    """The SDPA fusion of onnxscript, declining NaN zeroing behind a mask that may be ``-inf``.

    Its pattern takes ``Where(IsNaN(w), 0, w)`` after the ``Softmax`` as optional (the
    torch exporter writes it for a boolean mask) and drops it: where a mask hides every key
    of a query with ``-inf`` (a padding row of an attention mask all 0 made
    ``Where(m, 0, -inf)``), the original's row is 0 and onnxruntime's fused
    ``MultiHeadAttention`` gives NaN. The output check's inputs hide no whole row, so it
    kept the fusion (found by hand). This is the same rule declining that variant unless
    the mask is proven finite (:func:`_proven_finite`: HF's ``Where(m, 0, finfo.min)``),
    where with finite scores no row of weights is NaN (scores made infinite by an input
    that is, ``inf`` in a float input, still give NaN rows in the fused model only).
    ``None`` with an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import pattern
        from onnxscript.rewriter.ort_fusions.sdpa import SDPA
    except ImportError:
        return None

    class SDPAKeepingNanZeroing(SDPA):
        def check(self, context, **bindings):
            mask = bindings.get("mask")
            if mask is not None and _zeroes_nan(context.root) and not _proven_finite(mask):
                return pattern.MatchResult().fail(
                    "the weights' NaN rows are zeroed and the mask may be -inf: the fused "
                    "kernels leave those rows NaN"
                )
            return super().check(context, **bindings)

    try:
        rules = pattern.RewriteRuleSet([SDPAKeepingNanZeroing.rule()])
    except Exception as e:  # an SDPA rule whose pattern takes other parameters
        logger.debug("onnxscript's SDPA fusion differs (%s): its own rule runs", e)
        return None
    return rules.apply_to_model


def mha_scale_without_bias() -> Callable[[ir.Model], int] | None:
    """The ``mha_scale`` fusion of onnxscript, for a ``MultiHeadAttention`` without a bias.

    ``MultiHeadAttention(Mul(q, s), ...)`` -> ``MultiHeadAttention(q, ..., scale=s*scale)``
    holds when the kernel multiplies ``q`` by ``k`` as given; with a ``bias`` input it
    computes ``(s*q + b_q) k`` before, ``(q + b_q) k * s`` after (a ``MultiHeadAttention``
    already in the model: outputs off by 10 % of their scale, seen only by the output
    check; found by hand). Without a ``scale`` attribute the rule reads the head size
    as the query's last dim over the heads, right for a 3-D query only. The copy
    declines a bias, and a query not proven 3-D when the scale is the default. ``None``
    with an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import _fusion_utils, pattern
        from onnxscript.rewriter.ort_fusions.mha_scale import FuseMHAScale
    except ImportError:
        return None

    class FuseMHAScaleWithoutBias(FuseMHAScale):
        def check(self, context, **bindings):
            mha = bindings.get("mha_output")
            mha = mha.producer() if mha is not None else None
            if mha is None or (len(mha.inputs) > 3 and mha.inputs[3] is not None):
                return pattern.MatchResult().fail("MultiHeadAttention has a bias")
            query = bindings.get("query")
            if "scale" not in mha.attributes and (
                query is None or query.shape is None or len(query.shape) != 3
            ):
                return pattern.MatchResult().fail("the default scale of a query not 3-D")
            return super().check(context, **bindings)

    try:
        rules = pattern.RewriteRuleSet([FuseMHAScaleWithoutBias.rule()])
    except Exception as e:  # a FuseMHAScale taking other parameters
        logger.debug("onnxscript's mha_scale fusion differs (%s): its own runs", e)
        return None
    return _fusion_utils.apply_fusion_rules(rules)


def bias_gelu_of_the_last_axis() -> Callable[[ir.Model], int] | None:
    """The ``BiasGelu`` fusion of onnxscript, for a bias as long as the input's last axis.

    Its rule asks a 1-D bias only; onnxruntime's ``BiasGelu`` requires the bias to have
    the input's last dim, where ``Add`` broadcast an input whose last dim is 1 (``[B, n]``
    plus 8 biases with ``n`` in {1, 8}: the fused model failed at ``n = 1``; only the
    output check undid it). The copy asks the two dims proven equal. ``None`` with an
    onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import _fusion_utils, pattern
        from onnxscript.rewriter.ort_fusions.bias_gelu import BiasGeluFusion
    except ImportError:
        return None

    class BiasGeluOfTheLastAxis(BiasGeluFusion):
        def check(self, op, input=None, bias=None, **bindings):
            last = input.shape[-1] if input is not None and input.shape else None
            length = bias.shape[0] if bias is not None and bias.shape else None
            if last is None or length is None or last != length:
                return pattern.MatchResult().fail("bias not proven as long as the last axis")
            return super().check(op, input=input, bias=bias, **bindings)

    try:
        rules = pattern.RewriteRuleSet(
            [
                *BiasGeluOfTheLastAxis.rule("gelu_onnx_op", contrib_op=False).commute(),
                *BiasGeluOfTheLastAxis.rule("gelu_contrib_op", contrib_op=True).commute(),
            ]
        )
    except Exception as e:  # a BiasGeluFusion taking other parameters
        logger.debug("onnxscript's BiasGelu fusion differs (%s): its own runs", e)
        return None
    return _fusion_utils.apply_fusion_rules(rules)


def _zeroes_nan(matmul: ir.Node) -> bool:
    """Whether the weights ``matmul`` reads are ``Where(IsNaN(w), ..., w)``."""
    where = matmul.inputs[0].producer() if matmul.inputs and matmul.inputs[0] else None
    if where is None or where.op_type != "Where" or not where.inputs or not where.inputs[0]:
        return False
    condition = where.inputs[0].producer()
    return condition is not None and condition.op_type == "IsNaN"


#: Ops whose output elements are elements of their first input.
_COPYING = frozenset(
    {"Expand", "Reshape", "Unsqueeze", "Squeeze", "Slice", "Transpose", "Identity",
     "Flatten", "Tile", "Gather", "GatherElements"}
)  # fmt: skip
_WIDER_OR_SAME = {
    ir.DataType.FLOAT16: {ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE},
    ir.DataType.BFLOAT16: {ir.DataType.BFLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE},
    ir.DataType.FLOAT: {ir.DataType.FLOAT, ir.DataType.DOUBLE},
    ir.DataType.DOUBLE: {ir.DataType.DOUBLE},
}


def _proven_finite(value: ir.Value, depth: int = 0) -> bool:
    """Whether every element of ``value`` is finite in every run (a structural proof).

    Constants with finite elements, copies of finite elements (``Where``'s branches,
    layout ops, ``Concat``), and casts that cannot overflow (from a bool, from an integer
    to float or double, to a float type as wide). Arithmetic can overflow: not proven.
    """
    if depth > 24:
        return False
    tensor = constant_tensor(value)
    if tensor is not None:
        array = tensor.numpy()
        return array.dtype.kind in "biu" or bool(np.isfinite(array).all())
    node = value.producer()
    if node is None or node.domain not in ("", "ai.onnx"):
        return False
    op = node.op_type
    if op == "Where":
        operands = node.inputs[1:3]
    elif op in _COPYING:
        operands = node.inputs[:1]
    elif op == "Concat":
        operands = node.inputs
    elif op == "Cast" and node.inputs and node.inputs[0] is not None:
        source, target = node.inputs[0].dtype, value.dtype
        if source is None or target is None:
            return False
        if source == ir.DataType.BOOL or (
            source.is_integer() and target in (ir.DataType.FLOAT, ir.DataType.DOUBLE)
        ):
            return True
        if target not in _WIDER_OR_SAME.get(source, ()):
            return False
        operands = node.inputs[:1]
    else:
        return False
    return bool(operands) and all(
        v is not None and _proven_finite(v, depth + 1) for v in operands
    )


def attention_no_bias_rules():
    """The packed ``Attention`` fusion of onnxscript for a ``MultiHeadAttention`` without bias.

    onnxscript's ``AttentionFusion`` (Q, K and V ``MatMul``s of one input, or one packed
    ``MatMul`` sliced in three, feeding a ``MultiHeadAttention``) requires the bias input
    that its ``mha_bias`` step writes from the ``Add``s after the ``MatMul``s. When the
    biases are zero (``AddByZero`` removed them, e.g. a dynamo-exported Swin) or absent
    (``Linear(bias=False)``), ``mha_bias`` has nothing to fuse and the packed fusion never
    matches. This is the same rule with the bias allowed to be missing; the ``Attention``
    written has no bias either (its ``bias`` input is optional in onnxruntime's schema).
    Only the variants without ``past``; the ``MultiHeadAttention`` must carry no attribute
    but ``num_heads`` and ``scale`` (the only ones the rewrite copies). ``None`` with an
    onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import pattern
        from onnxscript.rewriter.ort_fusions.attention import AttentionFusion
    except ImportError:
        return None

    class AttentionNoBias(AttentionFusion):
        def pattern(  # the parameters of AttentionFusion's pattern but qkv_bias
            self,
            op,
            input,
            qkv_weight,
            past,
            num_heads,
            start1,
            end1,
            start2,
            end2,
            start3,
            end3,
            q_mul,
            k_mul,
            v_mul,
        ):
            no_bias = pattern.Var("qkv_bias", can_match_none=True)
            return super().pattern(
                op,
                input,
                qkv_weight,
                no_bias,
                past,
                num_heads,
                start1,
                end1,
                start2,
                end2,
                start3,
                end3,
                q_mul,
                k_mul,
                v_mul,
            )

        def check(self, context, qkv_bias=None, mha_output=None, **kwargs):
            result = pattern.MatchResult()
            if qkv_bias is not None:
                return result.fail("MultiHeadAttention has a bias: onnxscript's own rule")
            mha = mha_output.producer() if mha_output is not None else None
            if mha is None or set(mha.attributes) - {"num_heads", "scale"}:
                return result.fail("MultiHeadAttention has attributes the rewrite drops")
            return super().check(context, qkv_bias=qkv_bias, mha_output=mha_output, **kwargs)

    try:
        rules = [
            AttentionNoBias.rule(name, has_past=False, no_slice=no_slice)
            for name, no_slice in (
                ("attention_no_bias", False),
                ("attention_no_bias_no_slice", True),
            )
        ]
    except Exception as e:  # an AttentionFusion whose pattern takes other parameters
        logger.debug("onnxscript's AttentionFusion differs (%s): no attention_no_bias step", e)
        return None
    return pattern.RewriteRuleSet(rules)


def plain_gemm_only(rule):
    """The Gemm -> MatMul + Add rule of onnxscript's ort fusions, for a plain ``Gemm``.

    ``Reshape(Gemm(Reshape(a), b, c))`` -> ``MatMul(a, b) + c``: its pattern asks
    ``alpha = beta = 1`` but reads neither ``transA`` nor ``transB``: a
    ``Gemm<transB=1>`` of a square ``b`` became ``MatMul(a, b)``, the product with ``b``
    itself, with every proven shape kept (only the output check in onnxruntime undid it;
    without onnxruntime or with ``verify_fusions=False`` the fused model computed other
    outputs; found by hand). The copy's condition also asks that the ``Gemm`` transposes
    neither operand and scales by 1.
    """
    condition = getattr(rule, "_condition_function", None)
    if condition is None:
        return rule

    def plain(context, **bindings):
        gemm = context.root.inputs[0].producer() if context.root.inputs else None
        if gemm is None or gemm.op_type != "Gemm":
            return False
        for name, neutral in (("transA", 0), ("transB", 0), ("alpha", 1.0), ("beta", 1.0)):
            attr = gemm.attributes.get(name)
            if attr is not None and attr.value != neutral:
                return False
        return condition(context, **bindings)

    variant = copy.copy(rule)
    variant._condition_function = plain
    return variant


#: The element types onnxruntime's ``FusedMatMul`` kernels take.
FUSED_MATMUL_TYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE}
)
#: onnxscript's rules that write a ``FusedMatMul`` (``fused_matmul_rule_sets``).
_FUSED_MATMUL_RULES = ("FusedMatMul", "MatMulTranspose", "TransposeMatMul", "TransposeFused")


def float_fused_matmul_only(rule):
    """A ``FusedMatMul`` rule of onnxscript, for float operands and a representable ``alpha``.

    Its rules fuse ``MatMul`` of any element type, but onnxruntime's ``FusedMatMul`` takes
    float types only: an ``int32`` ``MatMul(Transpose(x), w)`` or ``MatMul(x, w) / 2``
    gave a model onnxruntime refuses (only the output check undid it). The ``Div`` rules
    write ``alpha = 1 / c`` as a float32 attribute: for a ``c`` below ``2**-128`` it
    is ``inf`` (the outputs all infinite), a subnormal ``alpha`` keeps few bits, and in
    a double model ``x @ w * alpha`` rounds otherwise than ``x @ w / c`` unless ``c`` is a
    power of 2. The copy declines these. Other rules are returned as they are.
    """
    condition = getattr(rule, "_condition_function", None)
    if condition is None or not (getattr(rule, "name", None) or "").startswith(
        _FUSED_MATMUL_RULES
    ):
        return rule

    def checked(context, **bindings):
        root = context.root
        dtype = root.outputs[0].dtype if root.outputs else None
        if dtype not in FUSED_MATMUL_TYPES:
            return False
        if root.op_type == "Div" and not _representable_alpha(root, dtype):
            return False
        return condition(context, **bindings)

    variant = copy.copy(rule)
    variant._condition_function = checked
    return variant


def _representable_alpha(div: ir.Node, dtype: ir.DataType) -> bool:
    """Whether ``alpha / c`` of ``Div((Fused)MatMul(...), c)`` is a normal float32."""
    divisor = constant_tensor(div.inputs[1]) if len(div.inputs) > 1 else None
    product = div.inputs[0].producer() if div.inputs[0] is not None else None
    if divisor is None or divisor.size != 1 or product is None:
        return False
    c = float(divisor.numpy().item())
    alpha = product.attributes.get("alpha")
    old = float(alpha.value) if alpha is not None and product.op_type != "MatMul" else 1.0
    if c == 0 or not np.isfinite(c):
        return False
    limits = np.finfo(np.float32)
    if not float(limits.tiny) <= abs(old / c) <= float(limits.max):
        return False
    return dtype != ir.DataType.DOUBLE or math.frexp(c)[0] in (0.5, -0.5)


def rms_normalization_of_one_type() -> Callable[[ir.Model], int] | None:
    """The ``RMSNormalization`` fusion of onnxscript, for an input and scale of one type.

    Its rule fuses ``Cast(x, float)`` normalized and multiplied by a float scale for a
    float16 ``x`` too; the schema types ``Y`` as the scale, but ONNX's function body of
    ``RMSNormalization`` (which onnxruntime 1.2x runs) multiplies the normalized ``X``
    type by the scale, so onnx.checker and onnxruntime reject the fused model (only the
    output check undid it; with ``verify_fusions=False`` or no onnxruntime the model
    returned did not load; found by hand). The copy declines an input whose element type
    is not the scale's. ``None`` with an onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import _fusion_utils, pattern
        from onnxscript.rewriter.rules.fusion._rms_normalization import RmsNormFusion
    except ImportError:
        return None

    class RmsNormOfOneType(RmsNormFusion):
        def check(self, op, x, scale, *args, **kwargs):
            if x is None or scale is None or x.dtype is None or x.dtype != scale.dtype:
                return pattern.MatchResult().fail("input and scale of other element types")
            return super().check(op, x, scale, *args, **kwargs)

    try:
        rules = pattern.RewriteRuleSet(
            [
                RmsNormOfOneType.rule(f"RmsNormOfOneType{order}", mul_order=order)
                for order in (True, False)
            ]
        )
    except Exception as e:  # a RmsNormFusion taking other parameters
        logger.debug("onnxscript's RMSNormalization fusion differs (%s): its own runs", e)
        return None
    return _fusion_utils.apply_fusion_rules(rules)


def gqa_keeping_attention_semantics() -> Callable[[ir.Model], int] | None:
    """The ONNX ``Attention`` GQA fusion of onnxscript, where the attention stays the same.

    It moves the key and value cache concatenation into ``Attention(..., past_key,
    past_value)`` with the node's attributes copied: an ``is_causal=1`` mask, aligned to
    the top left over the concatenated keys before, is aligned to the bottom right with
    a past in onnxruntime (outputs off by their own scale), and a ``kv_num_heads`` of
    the repeated heads no longer matches the key (onnxruntime fails); only the output
    check undid them (found by hand). The copy declines both. ``None`` with an
    onnxscript laid out otherwise.
    """
    try:
        from onnxscript.rewriter import _fusion_utils, pattern
        from onnxscript.rewriter.rules.fusion._gqa import OnnxGroupQueryAttention
    except ImportError:
        return None

    class GroupQueryAttentionKept(OnnxGroupQueryAttention):
        def check(self, context, **bindings):
            output = bindings.get("attention_BHSDh")
            attention = output.producer() if output is not None else None
            key = bindings.get("key_BHkvSD")
            if attention is None or key is None or key.shape is None or len(key.shape) != 4:
                return pattern.MatchResult().fail("no Attention or key of rank 4")
            causal = attention.attributes.get("is_causal")
            if causal is not None and causal.value != 0:
                return pattern.MatchResult().fail("is_causal aligns otherwise with a past")
            heads = attention.attributes.get("kv_num_heads")
            if heads is not None and heads.value != key.shape[1]:
                return pattern.MatchResult().fail("kv_num_heads counts the repeated heads")
            return super().check(context, **bindings)

    try:
        rules = pattern.RewriteRuleSet([GroupQueryAttentionKept.rule()])
    except Exception as e:  # an OnnxGroupQueryAttention taking other parameters
        logger.debug("onnxscript's GQA fusion differs (%s): its own runs", e)
        return None
    return _fusion_utils.apply_fusion_rules(rules)


def rotary_embedding_23_of_the_batch() -> Callable[[ir.Model], int] | None:
    """The ONNX ``RotaryEmbedding`` fusion of onnxscript, with caches of the input's batch.

    Its rule passes ``Cos(freqs)`` and ``Sin(freqs)`` as the caches, without position
    ids, whatever ``freqs``' shape: ONNX's ``RotaryEmbedding-23`` then asks for caches of
    ``(batch_size, sequence_length, head_size / 2)``, and a ``freqs`` of ``[1, S, D/2]``
    (positions shared by the batch: gemma2 and GPT-NeoX exports) beside a batch of ``B``
    broke the spec (found by hand). The copy fuses only ``freqs`` proven ``[B, S, D/2]``
    or ``[1, S, D/2]`` beside ``x: [B, N, S, D]``, of ``x``'s element type, and expands
    the caches of the second to ``x``'s batch. ``None`` with an onnxscript laid out
    otherwise.
    """
    try:
        from onnxscript.rewriter import _fusion_utils, pattern
        from onnxscript.rewriter.rules.fusion._rotary_embedding import (
            RotaryEmbedding23Fusion,
        )
    except ImportError:
        return None

    def batch_of(x, freqs) -> bool | None:
        """Whether ``freqs`` has ``x``'s batch (True) or one shared (False); else None."""
        shape, half = x.shape, freqs.shape
        if shape is None or half is None or len(shape) != 4 or len(half) != 3:
            return None
        if freqs.dtype is None or freqs.dtype != x.dtype or not isinstance(shape[3], int):
            return None
        if half[2] != shape[3] // 2 or not _same_dim(half[1], shape[2]):
            return None
        if _same_dim(half[0], shape[0]):
            return True
        return False if half[0] == 1 else None

    class RotaryEmbeddingOfTheBatch(RotaryEmbedding23Fusion):
        def check(self, op, x, *args, **kwargs):
            freqs = kwargs.get("freqs")
            if x is None or freqs is None or batch_of(x, freqs) is None:
                return pattern.MatchResult().fail("freqs not proven [B or 1, S, D/2]")
            return super().check(op, x, *args, **kwargs)

        def rewrite(self, op, x, freqs, **kwargs):
            if batch_of(x, freqs):
                return super().rewrite(op, x, freqs, **kwargs)
            # [1, S, D/2] expanded by [B, 1, 1] to [B, S, D/2]
            target = op.Concat(
                op.Shape(x, start=0, end=1), op.Constant(value_ints=[1, 1]), axis=0
            )
            return op.RotaryEmbedding(
                x,
                op.Expand(op.Cos(freqs), target),
                op.Expand(op.Sin(freqs), target),
                interleaved=0,
                num_heads=x.shape[1],
            )

    try:
        rules = pattern.RewriteRuleSet([RotaryEmbeddingOfTheBatch.rule()])
    except Exception as e:  # a RotaryEmbedding23Fusion taking other parameters
        logger.debug("onnxscript's RotaryEmbedding fusion differs (%s): its own runs", e)
        return None
    return _fusion_utils.apply_fusion_rules(rules)


def _same_dim(a, b) -> bool:
    """Whether dims ``a`` and ``b`` are proven equal (an unknown dim equals nothing)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value is not None and a.value == b.value
