"""``ai.onnx.ml`` ops whose ONNX inference loses the batch dim (or gives no shape at all).

ONNX has no shape inference for LinearRegressor, Normalizer, Scaler, Imputer,
FeatureVectorizer, SVMClassifier and SVMRegressor; the others (LinearClassifier, the tree
ensembles, OneHotEncoder, LabelEncoder, ...) keep their dims through the fallback.
Shapes follow onnxruntime's CPU kernels, which treat a 1-D input as one row ``(1, C)``:

* LinearRegressor ``(N, targets)``, SVMRegressor ``(N, 1)``;
* Normalizer, Scaler, Imputer: the input's shape, FLOAT (Imputer keeps its type);
* FeatureVectorizer ``(N, sum(inputdimensions))``;
* SVMClassifier: labels ``(N,)`` and scores ``(N, k)`` for ``k`` classes, except the
  SVC mode without probabilities, which scores each pair of classes
  (``k (k - 1) / 2`` columns, 2 when ``k == 2``).
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

ML = "ai.onnx.ml"

Dim = expr.Dim
MaybeDim = Dim | None

FLOAT = ir.DataType.FLOAT


def _rows(ctx: NodeContext, i: int = 0) -> MaybeDim:
    """The number of rows of 1-D or 2-D input ``i`` (a 1-D input is one row)."""
    shape = ctx.input_shape(i)
    if shape is None:
        return None
    if len(shape) not in (1, 2):
        ctx.fail(f"input {i} must be 1-D or 2-D, got rank {len(shape)}")
    return 1 if len(shape) == 1 else shape[0]


def _class_count(ctx: NodeContext) -> int | None:
    """The number of class labels (int or string labels)."""
    for name in ("classlabels_ints", "classlabels_int64s"):
        labels = ctx.attr_ints(name)
        if labels is not None:
            return len(labels)
    attr = ctx.node.attributes.get("classlabels_strings")
    if attr is not None and attr.type == ir.AttributeType.STRINGS:
        return len(attr.value)
    return None


def _label_dtype(ctx: NodeContext) -> ir.DataType:
    strings = ctx.node.attributes.get("classlabels_strings")
    return ir.DataType.STRING if strings is not None else ir.DataType.INT64


@register(ML, "LinearRegressor", since=1)
def infer_linear_regressor(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, targets)`` FLOAT (``targets`` defaults to 1)."""
    ctx.require_input(0)
    targets = ctx.attr_int("targets", 1)
    if targets is None or targets < 1:
        ctx.fail(f"targets must be positive, got {targets}")
    ctx.set_output(0, (_rows(ctx), targets), FLOAT)


@register(ML, "SVMRegressor", since=1)
def infer_svm_regressor(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, 1)`` FLOAT."""
    ctx.require_input(0)
    ctx.set_output(0, (_rows(ctx), 1), FLOAT)


@register(ML, ("Normalizer", "Scaler"), since=1)
def infer_normalizer(ctx: NodeContext, node: ir.Node) -> None:
    """The input's shape, FLOAT."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), FLOAT)


@register(ML, "Imputer", since=1)
def infer_imputer(ctx: NodeContext, node: ir.Node) -> None:
    """The input's shape and type."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))


@register(ML, "FeatureVectorizer", since=1)
def infer_feature_vectorizer(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, sum(inputdimensions))`` FLOAT: each input is cut or zero-padded to its width."""
    widths = ctx.attr_ints("inputdimensions")
    if widths is None or len(widths) != len(node.inputs) or any(w < 0 for w in widths):
        ctx.fail("inputdimensions must give one non-negative width per input")
    rows = [_rows(ctx, i) for i in range(len(node.inputs))]
    known = [r for r in rows if r is not None]
    batch = known[0] if known else None
    ints = {r for r in known if isinstance(r, int)}
    if len(ints) > 1:
        ctx.fail(f"inputs have different batch sizes {sorted(ints)}")
    if ints:
        batch = ints.pop()
    ctx.set_output(0, (batch, sum(widths)), FLOAT)


@register(ML, "SVMClassifier", since=1)
def infer_svm_classifier(ctx: NodeContext, node: ir.Node) -> None:
    """Labels ``(N,)``; scores ``(N, k)``, or pairwise ``(N, k (k - 1) / 2)`` in SVC mode."""
    ctx.require_input(0)
    rows = _rows(ctx)
    classes = _class_count(ctx)
    ctx.set_output(0, (rows,), _label_dtype(ctx))
    per_class = ctx.attr_ints("vectors_per_class")
    svc = per_class is not None and sum(per_class) > 0  # the kernel's SVC mode
    proba = bool(ctx.attr_floats("prob_a"))
    scores: MaybeDim = classes
    if classes is not None and svc and not proba:
        scores = 2 if classes <= 2 else classes * (classes - 1) // 2
    ctx.set_output(1, (rows, scores), FLOAT)
