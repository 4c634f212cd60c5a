"""Gives a fused attention node the ``attention_bias`` shape onnxruntime's kernel accepts.

onnxruntime checks ``attention_bias`` (input 5 of ``com.microsoft`` ``Attention`` and
``MultiHeadAttention``) exactly: dims 0 and 1 are the batch and the heads or 1, dims 2
and 3 the query's length and the total (past + new) key length, and nothing is
broadcast. The subgraph a fusion replaced added the bias to the scores with
broadcasting, so a padding mask ``[B, 1, S, 1]`` or ``[1, 1, 1, T]`` ran there and fails
in the kernel. The fused node's output shapes do not show this.

For each new attention node the guard calls :func:`fit_attention_biases`: a bias whose
dims are proven as the kernel wants stays; otherwise it is broadcast explicitly by an
``Expand`` to the kernel's lengths (read with ``Shape`` from the query and the key),
when that is sound:

- dim 2 must be proven the query's length or 1: then the Expand gives exactly the
  query's length;
- dim 3 may be any length ``a``: the replaced subgraph combined the bias with scores
  whose last dim is the key length ``L`` and multiplied the softmax by values of ``L``
  rows (onnxscript's SDPA patterns: ``MatMul(Softmax(scores + bias), V)``), so in every
  run that succeeded ``broadcast(L, a) == L``, which is what ``Expand`` to ``L`` gives.
  This needs the key and value lengths proven equal (the kernel requires it; the
  replaced subgraph only required ``broadcast(L, a)`` to be the value length);
- a key cache fused into the node (``past_key``) is not fitted: the total length is a
  sum no single ``Shape`` reads.

Anything else is refused, and the guard undoes the step.
"""

from __future__ import annotations

__all__ = ["BIAS_REASON", "fit_attention_biases"]

import logging

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import int_attribute

logger = logging.getLogger(__name__)

BIAS_REASON = (
    "has an attention_bias not proven [batch or 1, num_heads or 1, sequence_length, "
    "total_sequence_length] and no Expand can make it so (onnxruntime's kernel "
    "refuses any other, broadcasting none)"
)

#: ``Shape`` with ``start``/``end``, which the fitted target is read with.
_SHAPE_SLICE_OPSET = 15


def fit_attention_biases(model: ir.Model, known: set[int], facts) -> str | None:
    """Fits the bias of every new attention node; returns the name of one it could not fit.

    Args:
        model: The model after a fusion step.
        known: Ids of the nodes that were there before the step (not checked again).
        facts: The :class:`~onnx_symdims.rewrite.ShapeFacts` of ``model``.
    """
    for node in list(model.graph):
        if (
            id(node) in known
            or node.domain != "com.microsoft"
            or node.op_type not in ("Attention", "MultiHeadAttention")
            or len(node.inputs) < 6
            or node.inputs[5] is None
        ):
            continue
        if not _fit(model, node, facts):
            return node.name or node.op_type
    return None


def _fit(model: ir.Model, node: ir.Node, facts) -> bool:
    """Whether ``node``'s bias is proven right or was made right by an inserted Expand."""
    bias = facts.shape(node.inputs[5])
    query = facts.shape(node.inputs[0])
    heads = int_attribute(node, "num_heads")
    if bias is None or len(bias) != 4 or query is None or len(query) != 3 or heads is None:
        return False
    total = _total_length(node, facts)
    if total is None:
        return False
    length, key_axis = total
    one = facts.same_dim
    batch, seq = query[0], query[1]
    if not (one(bias[0], 1) or one(bias[0], batch)) or not (
        one(bias[1], 1) or one(bias[1], heads)
    ):
        return False
    rows_fit = one(bias[2], seq)
    if not rows_fit and not one(bias[2], 1):
        return False
    columns_fit = one(bias[3], length) or _broadcast_with(facts, bias[3], length)
    if rows_fit and columns_fit:
        return True
    if key_axis is None or model.opset_imports.get("", 0) < _SHAPE_SLICE_OPSET:
        return False
    _expand_bias(
        model, node, None if rows_fit else node.inputs[0], None if columns_fit else key_axis
    )
    return True


def _total_length(node: ir.Node, facts) -> tuple[expr.Dim, tuple[ir.Value, int] | None] | None:
    """The kernel's total key length and where a ``Shape`` reads it (``None``: a sum).

    ``None`` when the key and value lengths are not proven equal (the kernel requires
    them equal; the replaced subgraph did not when a broadcast bias stood between).
    """
    if (
        node.op_type == "Attention"
    ):  # packed projections: keys and values have the query's rows
        seq = facts.shape(node.inputs[0])[1]
        if len(node.inputs) < 5 or node.inputs[4] is None:
            return seq, (node.inputs[0], 1)
        past = facts.shape(node.inputs[4])  # (2, B, N, P, H)
        if past is None or len(past) != 5:
            return None
        return expr.add(past[3], seq), None
    key, value = (node.inputs[i] if len(node.inputs) > i else None for i in (1, 2))
    lengths = [_sequence_axis(v, facts) for v in (key, value)]
    if None in lengths:
        return None  # packed QKV or KV: not checked here, refused
    (key_length, key_axis), (value_length, _) = lengths
    if not facts.same_dim(key_length, value_length):
        return None
    if len(node.inputs) > 6 and node.inputs[6] is not None:  # past_key (B, N, P, H)
        past = facts.shape(node.inputs[6])
        if past is None or len(past) != 4:
            return None
        return expr.add(past[2], key_length), None
    return key_length, (key, key_axis)


def _sequence_axis(value: ir.Value | None, facts) -> tuple[expr.Dim, int] | None:
    """The length of a key or value input ``[B, L, D]`` or ``[B, N, L, H]`` and its axis."""
    shape = facts.shape(value) if value is not None else None
    if shape is None or len(shape) not in (3, 4):
        return None
    axis = 1 if len(shape) == 3 else 2
    return shape[axis], axis


def _broadcast_with(facts, d, total) -> bool:
    """Whether ``d`` is ``broadcast(total, ...)``, so equal to ``total`` in every successful run.

    Its value is ``total`` unless ``total`` is 1 and another argument is not; the fused
    subgraph then added the bias to scores of last dim ``total`` and multiplied the
    result by values of ``total`` rows, which fails on that other length. A KV decoder's
    padding mask reads ``broadcast(past+seq, min(past+seq, total_seq_len))`` so.
    """
    return (
        isinstance(d, expr.DimExpr)
        and d.function == "broadcast"
        and any(facts.same_dim(arg, total) for arg in d.args)
    )


def _expand_bias(
    model: ir.Model,
    node: ir.Node,
    query: ir.Value | None,
    key_axis: tuple[ir.Value, int] | None,
) -> None:
    """Inserts ``Expand(bias, target)`` before ``node``.

    ``target`` is ``[S, L]``, ``[S, 1]`` or ``[L]``: the query's length ``S`` when
    ``query`` is given, and the key length ``L`` read at ``key_axis`` when it is given.
    """
    parts = []
    if query is not None:
        parts.append(_shape_slice(query, 1))
    if key_axis is not None:
        parts.append(_shape_slice(*key_axis))
    elif parts:
        parts.append(
            ir.node("Constant", [], attributes={"value": ir.tensor(np.array([1], np.int64))})
        )
    new = list(parts)
    target = parts[0].outputs[0]
    if len(parts) == 2:
        concat = ir.node("Concat", [p.outputs[0] for p in parts], attributes={"axis": 0})
        new.append(concat)
        target = concat.outputs[0]
    expand = ir.node("Expand", [node.inputs[5], target])
    new.append(expand)
    model.graph.insert_before(node, new)
    node.replace_input_with(5, expand.outputs[0])
    logger.debug("broadcast the attention_bias of %s explicitly", node.name)


def _shape_slice(value: ir.Value, axis: int) -> ir.Node:
    return ir.node("Shape", [value], attributes={"start": axis, "end": axis + 1})
