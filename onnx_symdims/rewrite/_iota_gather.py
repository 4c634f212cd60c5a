"""Turns a ``Gather`` of every index in order into the ``Reshape`` it is.

With the batch fixed, TorchScript's padding mask ``Gather(Flatten(mask), b * T + t)``
(see :mod:`~onnx_symdims.rewrite._flat_gather`) reads its index grid as a constant,
``[[[[0, 1, ..., T-1]]]]``: every row of the flattened mask once, in order. That is a
``Reshape``, which the reshape-chain rules then merge with the ``Flatten`` before it and
the view after it (and which copies nothing at run time).

Proof relied on: ``Gather(data, idx, axis)`` is ``out[a, i, b] = data[a, idx[i], b]``
(``a`` the axes before ``axis``, ``b`` those after). With ``idx``'s proven elements
``0, 1, ..., n-1`` in row-major order and ``data``'s dim on ``axis`` proven ``n``, the
elements of ``out`` are those of ``data`` in the same row-major order, in the shape
``data[:axis] + idx.shape + data[axis+1:]``: a ``Reshape``. Every index is in range, so
the original never fails where the ``Reshape`` runs.
"""

from __future__ import annotations

__all__ = ["GatherOfIotaPass"]

import logging

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import FactsPass, int_attribute, set_type, take_over

logger = logging.getLogger(__name__)

#: Largest index tensor compared element by element.
_MAX_INDICES = 1 << 16


class GatherOfIotaPass(FactsPass):
    """Replaces ``Gather(data, idx)`` by ``Reshape(data, t)`` when ``idx`` is ``0..n-1`` in order.

    ``idx``'s elements are proven ints ``0, 1, ..., n-1`` (row-major, any shape without a
    0), ``n >= 1`` is ``data``'s proven dim on the gathered axis; the target ``t`` is
    ``data``'s dims before the axis (ints, or ``0`` to copy a symbolic one at its own
    position), ``idx``'s dims, then ``data``'s dims after the axis (ints, or ``0`` copies
    when ``idx`` has rank 1 and positions do not move).

    Example::

        >>> import onnx_ir as ir
        >>> from onnx_symdims.rewrite import GatherOfIotaPass, analyze
        >>> model = ir.from_onnx_text('''
        ...     <ir_version: 10, opset_import: ["" : 18]>
        ...     g (float[B, 6] x) => (float[B, 1, 2, 3] y) {
        ...         i = Constant<value = int64[1, 2, 3] {0, 1, 2, 3, 4, 5}>()
        ...         y = Gather<axis = 1>(x, i)
        ...     }''')
        >>> GatherOfIotaPass(analyze(model))(model).modified
        True
        >>> [n.op_type for n in model.graph if n.op_type != "Constant"]
        ['Reshape']

    Attributes:
        fired: ``{"gather_of_iota": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    op_types = frozenset({"Gather"})

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        if len(node.inputs) != 2 or node.inputs[0] is None or node.inputs[1] is None:
            return
        data, idx = node.inputs
        idx_shape = self.facts.shape(idx)
        if idx_shape is None or not all(isinstance(d, int) for d in idx_shape):
            return
        n = int(np.prod(idx_shape, dtype=np.int64))
        if n == 0 or n > _MAX_INDICES:
            return
        elements = self.facts.int_elements(idx)
        if elements is None or elements != tuple(range(n)):
            return
        shape = self.facts.shape(data)
        axis = int_attribute(node, "axis", 0)
        if shape is None or axis is None or not -len(shape) <= axis < len(shape):
            self.declined["data rank or axis not proven"] += 1
            return
        axis %= len(shape)
        if not self.facts.same_dim(shape[axis], n):
            self.declined["the indices do not cover the axis"] += 1
            return
        # Before the axis positions do not move: a 0 copies the dim (an int 0 copies a 0).
        target = [d if isinstance(d, int) else 0 for d in shape[:axis]]
        target += list(idx_shape)
        for d in shape[axis + 1 :]:
            if isinstance(d, int) and d != 0:
                target.append(d)
            elif len(idx_shape) == 1:
                target.append(0)  # position j is unchanged: copy
            else:
                self.declined["a symbolic dim after the axis moves"] += 1
                return
        value = ir.tensor(np.array(target, np.int64))
        const = ir.node("Constant", [], attributes={"value": value})
        reshape = ir.node("Reshape", [data, const.outputs[0]])
        graph.insert_before(node, [const, reshape])
        out = reshape.outputs[0]
        set_type(out, self.facts.dtype(node.outputs[0]), node.outputs[0].shape)
        take_over(node.outputs[0], out, "reshaped")
        graph.remove(node, safe=True)
        self.fired["gather_of_iota"] += 1
