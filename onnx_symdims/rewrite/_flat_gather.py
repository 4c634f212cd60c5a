"""Replaces a ``Gather`` of a flattened tensor at its own row-major offsets by the tensor.

TorchScript exports of transformers' ``vmap``-built padding mask read ``mask[b, t]`` for
every ``(b, t)`` as ``Gather(Flatten(mask), arange(B).view(B, 1, 1, 1) * T +
arange(T).view(1, 1, 1, T))``: two ``Range`` nodes with their sizes, their reshapes, a ``Mul``,
an ``Add``, the ``Flatten`` and the ``Gather``, for what is ``mask`` with size-1 axes
inserted (the dynamo exports spell the same with ``GatherND``; see :mod:`._gather`).

Proof relied on: ``F`` is ``m`` flattened in row-major order (a ``Flatten`` or ``Reshape``
of ``m`` whose first dim is proven ``prod(m.shape)`` and every other dim proven 1), so
``F[o, 0…] = m[i_0, …, i_{r-1}]`` for ``o = sum_j i_j * stride_j`` with ``stride_j`` the
product of ``m``'s dims after ``j``. The index is a sum of ``r`` terms ``R_j * c_j``, each
``R_j`` a ``Range(0, n_j, 1)`` (int64) placed on axis ``a_j`` of the index (every other dim
of it proven 1), so its value at ``i`` is ``i[a_j]``, with ``c_j`` a one-element value
proven ``stride_j``, ``n_j`` proven ``m``'s dim ``j`` and the ``a_j`` increasing with
``j``; every other axis of the index is proven 1. Then ``Gather(F, idx)[i, 0…] =
m[i[a_0], …, i[a_{r-1}]]`` with every index in range, which is ``Unsqueeze(m)`` at the
other axes (and ``F``'s trailing ones), element for element.

Example::

    >>> import onnx_ir as ir
    >>> from onnx_symdims.rewrite import GatherOfFlatIndexGridPass, analyze
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (bool[B, T] mask) => (bool[B, 1, 1, T, 1] y) {
    ...         zero = Constant<value = int64 {0}>()
    ...         one = Constant<value = int64 {1}>()
    ...         s = Shape(mask)
    ...         b = Gather(s, zero)
    ...         t = Gather(s, one)
    ...         rb = Range(zero, b, one)
    ...         rt = Range(zero, t, one)
    ...         vb = Constant<value = int64[4] {-1, 1, 1, 1}>()
    ...         vt = Constant<value = int64[4] {1, 1, 1, -1}>()
    ...         pb = Reshape(rb, vb)
    ...         pt = Reshape(rt, vt)
    ...         rows = Mul(pb, t)
    ...         idx = Add(pt, rows)
    ...         flat = Flatten<axis = 2>(mask)
    ...         y = Gather(flat, idx)
    ...     }
    ... ''')
    >>> rewrite = GatherOfFlatIndexGridPass(analyze(model))
    >>> rewrite(model).modified
    True
    >>> import onnx_ir.passes.common as common_passes
    >>> _ = common_passes.RemoveUnusedNodesPass()(model)
    >>> [n.op_type for n in model.graph if n.op_type != "Constant"]
    ['Unsqueeze']
"""

from __future__ import annotations

__all__ = ["GatherOfFlatIndexGridPass"]

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import FactsPass, int_attribute, set_type, take_over
from onnx_symdims.rewrite._gather import _constant, place_on_size_one_axes
from onnx_symdims.rewrite._values import dead_cone

logger = logging.getLogger(__name__)

Dim = expr.Dim

_FLATTENS = frozenset({"Flatten", "Reshape"})
_PLACES = frozenset({"Reshape", "Unsqueeze"})


class GatherOfFlatIndexGridPass(FactsPass):
    """Replaces ``Gather(flatten(m), sum_j Range(0, n_j) * stride_j)`` by ``m`` with size-1 axes inserted.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"gather_of_flat_index_grid": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    op_types = frozenset({"Gather"})

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        if len(node.inputs) != 2 or None in node.inputs:
            return
        flat, idx = node.inputs
        flatten = flat.producer()
        if flatten is None or flatten.domain != "" or flatten.op_type not in _FLATTENS:
            return  # most gathers: not what this rule is about, nothing to record
        if int_attribute(node, "axis", 0) != 0:
            self.declined["the Gather is not on axis 0"] += 1
            return
        plan = self._plan(flatten, flat, idx)
        if isinstance(plan, str):
            self.declined[plan] += 1
            return
        data, inserted = plan
        if graph.opset_imports.get("", 0) < 13:
            self.declined["opset before 13 (Unsqueeze axes as an attribute)"] += 1
            return
        removed = 1 + (len(flat.uses()) == 1 and not flat.is_graph_output())
        if len(idx.uses()) == 1 and not idx.is_graph_output():
            removed += sum(
                1 for n in dead_cone(idx.producer(), idx) if n.op_type != "Constant"
            )
        if removed <= 1:  # the Unsqueeze (or Identity) takes the Gather's place
            self.declined["removes no more nodes than it adds"] += 1
            return
        self._replace(graph, node, data, inserted)

    def _plan(self, flatten: ir.Node, flat: ir.Value, idx: ir.Value) -> tuple | str:
        """``(m, inserted axes)``, or why the gather is not of ``m``'s own offsets."""
        facts = self.facts
        data = flatten.inputs[0] if flatten.inputs else None
        sd, sf, si = facts.shape(data), facts.shape(flat), facts.shape(idx)
        if sd is None or sf is None or si is None or not sd or not sf:
            return "a shape is not proven"
        if not facts.same_dim(sf[0], _product(sd)) or not all(
            facts.same_dim(d, 1) for d in sf[1:]
        ):
            return "the gathered tensor is not a row-major flattening"
        if facts.dtype(idx) != ir.DataType.INT64:
            return "the index is not int64"
        terms = self._terms(idx, len(si), len(sd) + 1)
        if terms is None:
            return "the index is not a sum of placed Range terms"
        if len(terms) > len(sd):
            return "the index does not have one term per axis of the data"
        terms.sort(key=lambda t: t[0])
        axes = [axis for axis, _, _ in terms]
        if len(set(axes)) != len(axes):
            return "two terms lie on one axis"
        placed = self._match_axes(terms, sd, si)
        if isinstance(placed, str):
            return placed
        if not all(facts.same_dim(d, 1) for a, d in enumerate(si) if a not in set(placed)):
            return "the index has other axes than size 1"
        inserted = [a for a in range(len(si)) if a not in set(placed)]
        inserted += range(len(si), len(si) + len(sf) - 1)
        return data, inserted

    def _match_axes(self, terms: list[tuple], sd, si) -> list[int] | str:
        """The index axis of each data axis, in order, or why the terms do not fit.

        Term ``t`` (sorted by index axis) belongs to the next data axis ``j`` whose dim it
        spans with ``j``'s row-major stride. A data axis of size 1 may have no term: its
        offset is 0 (``Range(0, 1) * stride`` folded away when a batch is fixed at 1); it
        gets a size-1 index axis (:func:`~._gather.place_on_size_one_axes`).
        """
        facts = self.facts
        placed: list[int | None] = []
        t = 0
        for j, dim in enumerate(sd):
            if t < len(terms):
                axis, n, stride = terms[t]
                spans = facts.same_dim(n, dim) and facts.same_dim(si[axis], n)
                if spans and facts.same_dim(stride, _product(sd[j + 1 :])):
                    placed.append(axis)
                    t += 1
                    continue
                if not facts.same_dim(dim, 1):
                    return (
                        "a term's multiplier is not its axis's row-major stride"
                        if spans
                        else "a Range does not span its data axis"
                    )
            elif not facts.same_dim(dim, 1):
                return "the index does not have one term per axis of the data"
            placed.append(None)
        if t != len(terms):
            return "the index does not have one term per axis of the data"
        axes = place_on_size_one_axes(facts, placed, si)
        if axes is None:
            return "an axis of size 1 without a term has no index axis of its own"
        return axes

    def _terms(self, value: ir.Value, rank: int, budget: int) -> list[tuple] | None:
        """``[(axis, n, stride), ...]`` for ``value`` = a sum of ``Range(0, n) * stride`` placed on ``axis``."""
        if budget <= 0:
            return None
        node = value.producer()
        if (
            node is not None
            and node.domain == ""
            and len(node.inputs) == 2
            and None not in node.inputs
        ):
            if node.op_type == "Add":
                left = self._terms(node.inputs[0], rank, budget - 1)
                right = (
                    self._terms(node.inputs[1], rank, budget - 1) if left is not None else None
                )
                return None if right is None else left + right
            if node.op_type == "Mul":
                for placed, factor in (node.inputs, reversed(node.inputs)):
                    stride = self._scalar(factor, rank)
                    term = self._placed_range(placed, rank) if stride is not None else None
                    if term is not None:
                        return [(*term, stride)]
                return None
        term = self._placed_range(value, rank)
        return None if term is None else [(*term, 1)]

    def _scalar(self, value: ir.Value, rank: int) -> Dim | None:
        """The one proven element of a one-element int64 ``value`` of rank at most ``rank``."""
        facts = self.facts
        shape = facts.shape(value)
        if shape is None or len(shape) > rank or not all(facts.same_dim(d, 1) for d in shape):
            return None
        if facts.dtype(value) != ir.DataType.INT64:
            return None
        elements = facts.elements(value)
        if elements is None or len(elements) != 1:
            return None
        (element,) = elements
        if isinstance(element, expr.DimExpr) and element.is_unknown:
            return None
        return element

    def _placed_range(self, value: ir.Value, rank: int) -> tuple[int, Dim] | None:
        """``(axis, n)`` for ``value`` = ``Range(0, n, 1)`` with size-1 axes around it."""
        facts = self.facts
        shape = facts.shape(value)
        if shape is None or len(shape) > rank:
            return None
        arange = value.producer()
        if arange is not None and arange.domain == "" and arange.op_type in _PLACES:
            arange = arange.inputs[0].producer() if arange.inputs[0] is not None else None
        if arange is None or arange.domain != "" or arange.op_type != "Range":
            return None
        if facts.dtype(arange.outputs[0]) != ir.DataType.INT64:
            return None
        start, _, delta = (facts.int_elements(v) for v in arange.inputs)
        if start != (0,) or delta != (1,):
            return None
        (n,) = facts.shape(arange.outputs[0]) or (None,)
        long = [a for a, d in enumerate(shape) if not facts.same_dim(d, 1)]
        if n is None or len(long) != 1 or not facts.same_dim(shape[long[0]], n):
            return None
        return rank - len(shape) + long[0], n

    def _replace(
        self, graph: ir.Graph, node: ir.Node, data: ir.Value, inserted: list[int]
    ) -> None:
        if inserted:
            where = _constant(inserted)
            result_node = ir.node("Unsqueeze", [data, where.outputs[0]])
            new_nodes = [where, result_node]
        else:
            result_node = ir.node("Identity", [data])
            new_nodes = [result_node]
        graph.insert_before(node, new_nodes)
        out = node.outputs[0]
        result = result_node.outputs[0]
        set_type(result, self.facts.dtype(out), out.shape)
        take_over(out, result, "ungathered")
        graph.remove(node, safe=True)
        self.fired["gather_of_flat_index_grid"] += 1


def _product(dims) -> Dim:
    result: Dim = 1
    for d in dims:
        result = expr.mul(result, d)
    return result
