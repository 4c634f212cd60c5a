"""Rotary embeddings into onnxruntime's ``com.microsoft::RotaryEmbedding``, with a sound cache.

``y = x * cos + rotate_half(x) * sin`` (``rotate_half(x) = Concat(-x2, x1)`` over the two
halves of ``x``'s last axis, as ``Slice``s or one ``Split``), with ``x`` of shape
``[B, N, S, D]`` and ``cos = Unsqueeze(Cos(Concat(f, f)), [1])`` of shape ``[Bc, 1, S, D]``
(``Bc`` 1 or ``B``; ``sin`` likewise of the same ``f``), becomes
``RotaryEmbedding(x, ids, cos_cache, sin_cache)``.

onnxscript's ``cos_sin_cache`` step builds one cache per ``inv_freq`` from the *first*
rope's position ids and reuses it for every rope of that ``inv_freq``: out of range for a
key behind a KV cache, and refused by onnxruntime at batch 0. Here the cache *is* the
rope's own cos and sin, one row per (batch, position) pair, so nothing about the
positions needs proving (neither ``>= 0`` nor a maximum):

- ``Bc = 1``: ``cos_cache = Squeeze(Cos(f), [0])`` (``[S, D/2]``) and ``ids = [0]``
  (onnxruntime's "one position id" format reads row ``ids[0] + s`` for every batch);
- ``Bc = B``: ``cos_cache`` is ``Cos(f)`` flattened to ``[B*S, D/2]`` and ``ids[b, s] =
  b*S + s``; the cache gets ``S`` zero rows more, because onnxruntime's kernel refuses a
  cache of fewer rows than the sequence (``B*S < S`` at batch 0, where the original runs).

``Cos(Concat(f, f))`` is ``Concat(Cos(f), Cos(f))`` element by element, so the cache holds
the very values the original multiplies by; onnxruntime's kernel computes
``x1*c - x2*s`` and ``x2*c + x1*s`` (rounded as fused kernels round: the guard's output
check compares in onnxruntime). The guard also proves that every named value keeps its
shape (:mod:`~onnx_symdims.rewrite._guard`).

Declined: a cos or sin not proven ``Concat(c, c)`` of one half (a graph input), shapes
not proven as above (a ``cos`` broadcast over the sequence), a head size not an even
int, element types other than ``float`` (the CPU kernel's), opsets below 13 (below 15
for a cache per batch row).
"""

from __future__ import annotations

__all__ = ["fuse_rotary_embeddings"]

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import constant_tensor

_MS_DOMAIN = "com.microsoft"
#: Element types onnxruntime's CPU kernel of ``RotaryEmbedding`` is registered for that
#: the fusion writes (float16 is a GPU type there).
_TYPES = frozenset({ir.DataType.FLOAT})


def fuse_rotary_embeddings(model: ir.Model) -> int:
    """Fuses the rotary embeddings of ``model``'s main graph in place; returns how many."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    if opset is None or opset < 13:
        return 0
    graph = model.graph
    caches: dict[tuple, tuple[ir.Value, ir.Value, ir.Value]] = {}
    halves: dict[tuple[str, int], ir.Value] = {}
    count = 0
    for node in list(graph):
        match = _match(node, opset)
        if match is None:
            continue
        x, (cos_op, cos_src, _), (sin_op, sin_src, _), batch_of_cache = match
        # the ops too: Concat(c, c) and Cos(Concat(c, c)) have halves c and Cos(c)
        key = (cos_op, id(cos_src), sin_op, id(sin_src))
        if key not in caches:
            cos_half = _half(graph, node, halves, cos_op, cos_src)
            sin_half = _half(graph, node, halves, sin_op, sin_src)
            caches[key] = _cache(graph, node, x, cos_half, sin_half, batch_of_cache)
        ids, cos_cache, sin_cache = caches[key]
        rope = ir.node(
            "RotaryEmbedding",
            [x, ids, cos_cache, sin_cache],
            attributes={"interleaved": 0},
            domain=_MS_DOMAIN,
        )
        graph.insert_before(node, rope)
        old = node.outputs[0]
        new = rope.outputs[0]
        new.dtype, new.shape = x.dtype, x.shape
        name = old.name
        old.replace_all_uses_with(new, replace_graph_outputs=True)
        graph.remove(node, safe=True)
        new.name = name
        count += 1
    if count:
        model.opset_imports.setdefault(_MS_DOMAIN, 1)
    return count


def _match(add: ir.Node, opset: int):
    """``(x, cos, sin, Bc is B)`` of a rope ending in ``add``, else ``None``.

    ``cos`` and ``sin`` are ``(op, f, _)``: their half is ``op(f)`` (``op`` ``None``:
    ``f``). A cache per batch needs opset 15 (``Shape``'s ``start`` and ``end``).
    """
    if add.op_type != "Add" or add.domain != "" or len(add.inputs) != 2:
        return None
    a, b = add.inputs
    for plain, rotated in ((a, b), (b, a)):
        found = _rotated_mul(rotated)
        if found is None:
            continue
        x, sin4 = found
        cos4 = _other_operand(plain, x)
        if cos4 is None:
            continue
        cos = _repeated(cos4, "Cos")
        sin = _repeated(sin4, "Sin")
        if cos is None or sin is None:
            continue
        batch_of_cache = _fits(x, cos, sin, add.outputs[0])
        if batch_of_cache is not None and (opset >= 15 or not batch_of_cache):
            return x, cos, sin, batch_of_cache
    return None


def _rotated_mul(value: ir.Value | None):
    """``(x, sin)`` of ``value = rotate_half(x) * sin`` (either operand order)."""
    mul = _producer(value, "Mul")
    if mul is None:
        return None
    for rot, sin in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
        x = _rotate_half_of(rot)
        if x is not None and sin is not None:
            return x, sin
    return None


def _other_operand(value: ir.Value | None, x: ir.Value) -> ir.Value | None:
    """``c`` of ``value = x * c`` or ``c * x``."""
    mul = _producer(value, "Mul")
    if mul is None:
        return None
    first, second = mul.inputs
    if first is x:
        return second
    if second is x:
        return first
    return None


def _rotate_half_of(value: ir.Value | None) -> ir.Value | None:
    """``x`` of ``value = Concat(-x2, x1)`` over ``x``'s last-axis halves ``x1``, ``x2``."""
    concat = _producer(value, "Concat")
    if concat is None or len(concat.inputs) != 2:
        return None
    neg = _producer(concat.inputs[0], "Neg")
    x1 = concat.inputs[1]
    if neg is None or x1 is None:
        return None
    x2 = neg.inputs[0]
    first, second = _half_of(x1), _half_of(x2)
    if first is None or second is None or first[0] is not second[0]:
        return None
    if (first[1], second[1]) != (0, 1):
        return None
    axis = concat.attributes.get("axis")
    if axis is None or axis.value not in (-1, 3):
        return None
    return first[0]


def _half_of(value: ir.Value | None):
    """``(x, 0)`` or ``(x, 1)`` of ``value``, the first or second half of 4-D ``x``'s last axis."""
    if value is None:
        return None
    node = value.producer()
    if node is None or node.domain != "" or not node.inputs or node.inputs[0] is None:
        return None
    x = node.inputs[0]
    size = _last_size(x)
    if size is None:
        return None
    half = size // 2
    if node.op_type == "Split":
        axis = node.attributes.get("axis")
        if axis is None or axis.value not in (-1, 3) or len(node.outputs) != 2:
            return None
        if len(node.inputs) > 1 and node.inputs[1] is not None:
            split = _ints(node.inputs[1])
            if split != [half, half]:
                return None
        elif "split" in node.attributes:
            return None  # opset >= 13: the sizes are an input
        return x, node.outputs.index(value)
    if node.op_type != "Slice" or len(node.inputs) not in (4, 5):
        return None
    starts, ends, axes = (_ints(v) for v in node.inputs[1:4])
    steps = _ints(node.inputs[4]) if len(node.inputs) == 5 and node.inputs[4] else [1]
    if None in (starts, ends, axes, steps) or len(starts) != 1 or len(ends) != 1:
        return None
    if axes not in ([3], [-1]) or steps != [1]:
        return None
    start, end = starts[0], ends[0]
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    if start == 0 and end == half:
        return x, 0
    if start == half and end >= size:
        return x, 1
    return None


def _last_size(x: ir.Value) -> int | None:
    """The last dim of 4-D ``x`` when it is an even int >= 2, else ``None``."""
    shape = x.shape
    if shape is None or len(shape) != 4:
        return None
    size = shape[3]
    if not isinstance(size, int) or size < 2 or size % 2:
        return None
    return size


def _repeated(value: ir.Value, op: str):
    """``(op, f, unsqueezed)`` of ``value = [Unsqueeze(]op(Concat(f, f))[, [1])]``.

    ``(None, c, unsqueezed)`` of ``Concat(c, c)`` (or its ``Unsqueeze``); else ``None``.
    ``f``'s rank says which: 3 behind the ``Unsqueeze`` (``[Bc, S, D/2]``), else 2 or 3
    beside ``x`` (``[S, D/2]``, ``[1, S, D/2]``: broadcast over the batch and heads).
    """
    full = value
    unsqueeze = _producer(value, "Unsqueeze")
    if unsqueeze is not None:
        if len(unsqueeze.inputs) != 2 or _ints(unsqueeze.inputs[1]) != [1]:
            return None
        full = unsqueeze.inputs[0]
    applied = _producer(full, op)
    concat = _producer(applied.inputs[0] if applied else full, "Concat")
    if concat is None or len(concat.inputs) != 2 or concat.inputs[0] is not concat.inputs[1]:
        return None
    half = concat.inputs[0]
    rank = len(half.shape) if half is not None and half.shape is not None else None
    if rank not in ((3,) if unsqueeze else (2, 3)):
        return None
    axis = concat.attributes.get("axis")
    if axis is None or axis.value not in (-1, rank - 1):
        return None
    return (op if applied else None), half, unsqueeze is not None


def _fits(x: ir.Value, cos, sin, out: ir.Value) -> bool | None:
    """Whether the halves have ``x``'s batch (True) or one for all (False); else None.

    ``[B, S, D/2]`` (True) or ``[1, S, D/2]``, ``[S, D/2]`` (False) beside ``x: [B, N, S,
    D]``; ``None`` when neither is proven or a type does not fit.
    The halves' rank says whether their ``Unsqueeze`` was there (:func:`_repeated`): of
    rank 3 without it, the first dim lines up with the heads and must be 1 anyway.
    """
    shape = x.shape
    if x.dtype not in _TYPES or out.dtype != x.dtype or out.shape is None:
        return None
    if len(out.shape) != 4 or not all(map(_same, out.shape, shape)):
        return None
    half = shape[3] // 2
    halves = [f for _, f, _ in (cos, sin)]
    if any(f.dtype != x.dtype for f in halves) or cos[2] != sin[2]:
        return None
    first, second = (list(f.shape) for f in halves)
    if len(first) != len(second) or not all(map(_same, first, second)):
        return None
    if not _same(first[-2], shape[2]) or first[-1] != half:
        return None
    if len(first) == 2 or first[0] == 1:
        return False
    if cos[2] and _same(first[0], shape[0]):
        return True
    return None


def _same(a, b) -> bool:
    """Whether dims ``a`` and ``b`` are proven equal (an unknown dim equals nothing)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value is not None and a.value == b.value


def _half(graph: ir.Graph, at: ir.Node, made: dict, op: str | None, f: ir.Value) -> ir.Value:
    """``op(f)`` (one node per ``f`` and ``op``, before ``at``), or ``f`` when ``op`` is None."""
    if op is None:
        return f
    key = (op, id(f))
    if key not in made:
        node = ir.node(op, [f])
        node.outputs[0].dtype, node.outputs[0].shape = f.dtype, f.shape
        graph.insert_before(at, node)
        made[key] = node.outputs[0]
    return made[key]


def _cache(graph, at, x, cos_half, sin_half, batch_of_cache: bool):
    """``(ids, cos_cache, sin_cache)`` for ropes of these halves (nodes before ``at``)."""
    nodes: list[ir.Node] = []

    def add(op: str, inputs, **attributes) -> ir.Value:
        node = ir.node(op, inputs, attributes=attributes)
        nodes.append(node)
        return node.outputs[0]

    def const(values) -> ir.Value:
        return add("Constant", [], value=ir.tensor(np.array(values, np.int64)))

    rows_shape = const([-1, x.shape[3] // 2])
    cos_flat = add("Reshape", [cos_half, rows_shape])
    sin_flat = add("Reshape", [sin_half, rows_shape])
    if not batch_of_cache:
        # [1, S, D/2] or [S, D/2] -> [S, D/2]; row ids[0] + s for every batch
        first = const([0])
        graph.insert_before(at, nodes)
        return first, cos_flat, sin_flat
    batch_and_seq = add("Shape", [cos_half], start=0, end=2)
    rows = add("Squeeze", [add("Shape", [cos_flat], start=0, end=1)])
    positions = add("Range", [add("Constant", [], value=ir.tensor(np.int64(0))), rows,
                              add("Constant", [], value=ir.tensor(np.int64(1)))])  # fmt: skip
    # allowzero: a 0 in [B, S] is a size, not a copy of a dim (at sequence 0)
    ids = add("Reshape", [positions, batch_and_seq], allowzero=1)
    # S zero rows more: the kernel refuses a cache shorter than the sequence (batch 0)
    seq = add("Shape", [cos_half], start=1, end=2)
    pads = add("Concat", [const([0, 0]), seq, const([0])], axis=0)
    cos_cache = add("Pad", [cos_flat, pads])
    sin_cache = add("Pad", [sin_flat, pads])
    graph.insert_before(at, nodes)
    return ids, cos_cache, sin_cache


def _producer(value: ir.Value | None, op: str) -> ir.Node | None:
    if value is None:
        return None
    node = value.producer()
    if node is None or node.op_type != op or node.domain != "":
        return None
    return node


def _ints(value: ir.Value | None) -> list[int] | None:
    """The elements of a constant int tensor (of at most 8 elements), else ``None``."""
    if value is None:
        return None
    tensor = constant_tensor(value)
    if tensor is None or tensor.dtype not in (ir.DataType.INT64, ir.DataType.INT32):
        return None
    array = tensor.numpy()
    if array.size > 8:
        return None
    return [int(v) for v in array.reshape(-1)]
