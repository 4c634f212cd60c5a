"""Collapses chains of reshape-like ops (Reshape, Squeeze, Unsqueeze, Flatten).

Each of these ops keeps the row-major order of the elements, so a chain of them is one
reshape of the chain's first input ``r``. For the last value ``y`` of a chain:

* when ``y``'s shape is proven equal to ``r``'s, ``y`` is ``r`` (``Unsqueeze(Squeeze(x))``
  pairs that cancel, ``Reshape(Reshape(x, a), shape(x))``);
* otherwise, when a constant target exists (:func:`constant_reshape_target`), the chain
  becomes one ``Reshape(r, target)`` (``Reshape∘Reshape``);
* otherwise, when the last op is a ``Reshape(m, t)`` whose target reads the same against
  ``r`` as against ``m`` (``allowzero=1``, or no element of ``t`` that may be ``0`` sits
  where ``m``'s and ``r``'s dims may differ), it becomes ``Reshape(r, t)`` in place
  (Swin's window reverse: ``view(-1, Wh, Ww, C)`` then ``view(B, H*W, C)``).

A ``Transpose`` that moves only axes of size 1 (proven), keeping the other axes in order,
keeps the row-major order too and joins chains (a multi-query attention's single KV head:
``view(b, s, 1, d).transpose(1, 2)``).

Proof relied on: the proven shapes of ``r`` and ``y``
(:class:`~onnx_symdims.rewrite.ShapeFacts`) and the order-keeping semantics of the ops.
An element's row-major index is a sum of its indices times the products of the later
dims; an index on a size-1 axis is 0 and the axis multiplies those products by 1, so
moving such an axis changes no element's index.
"""

from __future__ import annotations

__all__ = ["CollapseReshapeChainsPass", "FlattenConcatsPass", "GroupedTransposePass"]

import dataclasses
import logging
from collections import Counter

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import (
    ShapeFacts,
    int_attribute,
    ints_attribute,
    is_literal_one,
    set_type,
    shape_slice,
    take_over,
)
from onnx_symdims.rewrite._rules import constant_reshape_target

logger = logging.getLogger(__name__)

_RESHAPE_LIKE = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_MAX_CHAIN = 16


def _is_reshape_like(node: ir.Node | None) -> bool:
    # allowzero only changes how a Reshape target reads; the op still keeps the order.
    return node is not None and node.domain == "" and node.op_type in _RESHAPE_LIKE


@dataclasses.dataclass
class CollapseReshapeChainsPass(ir.passes.InPlacePass):
    """Replaces a chain of reshape-like ops by its input or by one ``Reshape`` of it.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: How often each rewrite fired (``"chain_to_input"``, ``"chain_to_reshape"``,
            ``"chain_to_last_target"``).
        declined: Why chains were not collapsed, counted by reason.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        outputs = frozenset(graph.outputs)
        for node in list(graph):
            if node.graph is None or not self._relabels(node):
                continue
            y = node.outputs[0]
            root, length = node.inputs[0], 1
            while length < _MAX_CHAIN and self._relabels(root.producer() if root else None):
                root = root.producer().inputs[0]  # type: ignore[union-attr]
                length += 1
            if root is None or length < 2:
                continue
            self._collapse(graph, node, root, y, y in outputs)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _relabels(self, node: ir.Node | None) -> bool:
        """Reshape-like, or a ``Transpose`` moving only axes proven of size 1."""
        if _is_reshape_like(node):
            return True
        if node is None or node.op_type != "Transpose" or node.domain != "" or not node.inputs:
            return False
        shape = self.facts.shape(node.inputs[0])
        if shape is None:
            return False
        perm = ints_attribute(node, "perm")
        if perm is None:
            if "perm" in node.attributes:
                return False  # malformed
            perm = tuple(reversed(range(len(shape))))  # the spec's default
        if sorted(perm) != list(range(len(shape))):
            return False
        moved = [
            axis for axis in perm if not (isinstance(shape[axis], int) and shape[axis] == 1)
        ]
        return moved == sorted(moved)

    def _collapse(
        self, graph: ir.Graph, node: ir.Node, root: ir.Value, y: ir.Value, is_output: bool
    ) -> None:
        """Collapses the chain ending at ``node``; a graph output ``y`` keeps its node."""
        facts = self.facts
        source, result = facts.shape(root), facts.shape(y)
        if is_output:
            # The graph output stays the value of this very node: only its input moves.
            if node.op_type == "Reshape" and self._reads_target_alike(node, root):
                node.replace_input_with(0, root)
                self.fired["chain_to_last_target"] += 1
            else:
                self.declined[
                    "a graph output whose Reshape cannot read the chain's input"
                ] += 1
            return
        if source is None or result is None or facts.dtype(root) != facts.dtype(y):
            self.declined["rank or dtype of the chain's ends not proven"] += 1
            return
        if facts.same_shape(source, result):
            y.replace_all_uses_with(root)
            self.fired["chain_to_input"] += 1
            return
        target, reason = constant_reshape_target(facts, source, result)
        if target is None:
            if node.op_type == "Reshape" and self._reads_target_alike(node, root):
                node.replace_input_with(0, root)  # y keeps its value: no new node
                self.fired["chain_to_last_target"] += 1
                return
            if self._to_size_one_axes(graph, node, root, y, source, result):
                return
            self.declined[reason] += 1
            return
        const = ir.node(
            "Constant", [], attributes={"value": ir.tensor(np.array(target, np.int64))}
        )
        reshape = ir.node("Reshape", [root, const.outputs[0]])
        graph.insert_before(node, [const, reshape])
        new = reshape.outputs[0]
        new.name = f"{y.name}_collapsed" if y.name else None
        set_type(new, facts.dtype(y), y.shape)
        y.replace_all_uses_with(new)
        self.fired["chain_to_reshape"] += 1

    def _to_size_one_axes(
        self,
        graph: ir.Graph,
        node: ir.Node,
        root: ir.Value,
        y: ir.Value,
        source: tuple,
        result: tuple,
    ) -> bool:
        """Replaces the chain by one ``Unsqueeze`` or ``Squeeze`` of ``root``, if it can.

        No ``-1`` is needed (a target with one next to a dim that may be 0 cannot be
        read): see :func:`size_one_axes`.
        """
        plan = size_one_axes(self.facts, source, result)
        if plan is None:
            return False
        new_nodes = size_one_axes_nodes(graph, root, plan)
        graph.insert_before(node, new_nodes)
        new = new_nodes[-1].outputs[0]
        new.name = f"{y.name}_collapsed" if y.name else None
        set_type(new, self.facts.dtype(y), y.shape)
        y.replace_all_uses_with(new)
        self.fired["chain_to_size_one_axes"] += 1
        return True

    def _reads_target_alike(self, node: ir.Node, root: ir.Value) -> bool:
        """True when ``node``'s target gives the same shape read against ``root``.

        With ``allowzero=1`` every target element is literal (a ``-1`` is inferred from
        the element count, which every op of the chain keeps). With ``allowzero=0`` an
        element ``0`` copies the input dim at its position: each element must be proven
        non-zero, or that dim of the chain's last input proven equal to ``root``'s (or
        missing: a ``0`` there fails the original).
        """
        facts = self.facts
        allowzero = int_attribute(node, "allowzero", 0)
        if allowzero is None:
            return False  # malformed: no proof
        if allowzero != 0:
            return True
        elements = facts.elements(node.inputs[1]) if len(node.inputs) > 1 else None
        mid, source = facts.shape(node.inputs[0]), facts.shape(root)
        if elements is None or mid is None or source is None:
            return False
        for j, e in enumerate(elements):
            if (isinstance(e, int) and e != 0) or facts.at_least(e, 1) or j >= len(mid):
                continue  # literal, or a 0 the original could not read (it failed)
            if j >= len(source) or not facts.same_dim(mid[j], source[j]):
                return False
        return True


def size_one_axes(
    facts: ShapeFacts, source: tuple, result: tuple
) -> tuple[str, list[int]] | None:
    """``("Unsqueeze", axes)`` or ``("Squeeze", axes)`` that reshapes ``source`` to ``result``.

    Only when ``result`` only inserts, or only removes, axes of size 1 (``[b, s, d]`` to
    ``[b, 1, s, d]``): the dims other than literal 1s are proven equal pair by pair, in
    order, so the op keeps every element at its row-major position. ``None`` otherwise.
    """
    kept_source = [j for j, d in enumerate(source) if not is_literal_one(d)]
    kept_result = [j for j, d in enumerate(result) if not is_literal_one(d)]
    if len(kept_source) != len(kept_result) or not all(
        facts.same_dim(source[a], result[b]) for a, b in zip(kept_source, kept_result)
    ):
        return None
    removed = [j for j, d in enumerate(source) if is_literal_one(d)]
    inserted = [j for j, d in enumerate(result) if is_literal_one(d)]
    if len(source) < len(result) and not removed:
        return "Unsqueeze", inserted
    if len(source) > len(result) and not inserted:
        return "Squeeze", removed
    return None


def size_one_axes_nodes(
    graph: ir.Graph, x: ir.Value, plan: tuple[str, list[int]]
) -> list[ir.Node]:
    """The nodes (not inserted) applying :func:`size_one_axes`'s ``plan`` to ``x``.

    The last one computes the result (axes as an input from opset 13, an attribute before).
    """
    op, axes = plan
    if graph.opset_imports.get("", 0) >= 13:
        value = ir.tensor(np.array(axes, np.int64))
        const = ir.node("Constant", [], attributes={"value": value})
        return [const, ir.node(op, [x, const.outputs[0]])]
    return [ir.node(op, [x], attributes={"axes": axes})]


@dataclasses.dataclass
class FlattenConcatsPass(ir.passes.InPlacePass):
    """Replaces ``Concat(a, Concat(b, c), d)`` by ``Concat(a, b, c, d)`` on one axis.

    Concatenation along one axis is associative. On axis 0, adjacent inputs
    ``Shape(x, a, b)``, ``Shape(x, b, c)`` become one ``Shape(x, a, c)`` (opset >= 15). The inner ``Concat`` must have no
    other use (else nothing is saved) and the same axis once negative axes are read
    against the proven rank.

    Attributes:
        fired: ``{"flatten_concat": n, "merge_shapes": m}``.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        graph = model.graph
        self._opset = model.opset_imports.get("", 0)
        for node in list(graph):
            if node.op_type != "Concat" or node.domain != "" or node.graph is None:
                continue
            axis = self._axis(node)
            if axis is None:
                continue
            flat: list[ir.Value | None] = []
            merged = []
            for value in node.inputs:
                inner = value.producer() if value is not None else None
                if (
                    inner is not None
                    and inner.op_type == "Concat"
                    and inner.domain == ""
                    and inner.graph is graph
                    and len(value.uses()) == 1
                    and not value.is_graph_output()
                    and self._axis(inner) == axis
                ):
                    flat.extend(inner.inputs)
                    merged.append(inner)
                else:
                    flat.append(value)
            shapes = 0
            if axis == 0 and self._opset >= 15:
                flat, shapes = self._merge_shapes(graph, node, flat)
            if not merged and not shapes:
                continue
            concat = ir.node("Concat", flat, attributes={"axis": axis})
            graph.insert_before(node, concat)
            out = node.outputs[0]
            set_type(concat.outputs[0], out.dtype, out.shape)
            if out.is_graph_output():
                graph.remove(concat, safe=True)
                continue
            out.replace_all_uses_with(concat.outputs[0])
            concat.outputs[0].name = out.name
            out.name = None
            if merged:
                self.fired["flatten_concat"] += len(merged)
            if shapes:
                self.fired["merge_shapes"] += shapes
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _merge_shapes(self, graph, node, inputs: list) -> tuple[list, int]:
        """Merges adjacent ``Shape(x, a, b)``, ``Shape(x, b, c)`` inputs into ``Shape(x, a, c)``.

        ``Shape(x, a, b)`` is dims ``a..b-1`` of ``x`` (bounds read against ``x``'s proven
        rank and clamped, as the spec says), so two adjacent runs of one tensor are one run.
        Only pieces used by this ``Concat`` alone merge, so each merge removes a node.
        """
        out: list = []
        runs: list = []  # (x, start, end) of out's entries, or None
        merges = 0
        for value in inputs:
            run = self._shape_run(value)
            last = runs[-1] if runs else None
            if (
                run is not None
                and last is not None
                and last[0] is run[0]
                and last[2] == run[1]
                # Both pieces die with the merge (else it adds a node and saves none); a
                # piece merged here before has no use yet.
                and len(value.uses()) == 1
                and len(out[-1].uses()) <= 1
                and not value.is_graph_output()
                and not out[-1].is_graph_output()
            ):
                x, start, end = last[0], last[1], run[2]
                shape = ir.node("Shape", [x], attributes={"start": start, "end": end})
                graph.insert_before(node, shape)
                shape.outputs[0].dtype = ir.DataType.INT64
                shape.outputs[0].shape = ir.Shape([end - start])
                out[-1] = shape.outputs[0]
                runs[-1] = (x, start, end)
                merges += 1
                continue
            out.append(value)
            runs.append(run)
        return out, merges

    def _shape_run(self, value) -> tuple | None:
        """``(x, start, end)`` of a non-empty ``Shape`` output, bounds normalized."""
        return shape_slice(value.producer() if value is not None else None, self.facts)

    def _axis(self, node: ir.Node) -> int | None:
        axis = int_attribute(node, "axis")
        if axis is None:
            return None
        if axis >= 0:
            return axis
        shape = self.facts.shape(node.outputs[0])
        return None if shape is None else axis + len(shape)


@dataclasses.dataclass
class GroupedTransposePass(ir.passes.InPlacePass):
    """Replaces ``Reshape(Transpose(Reshape(x)))`` by ``Transpose(x)`` when the reshapes only group axes.

    The first reshape-like op merges consecutive axes of ``x`` into groups (each mid dim
    proven equal to the product of a run of ``x``'s dims), the ``Transpose`` permutes the
    groups, and the last one splits each group back into the same dims (its output
    shape proven equal to the groups' dims in permuted order). A row-major reshape that
    merges (or splits) consecutive axes keeps every element's linear index, so the chain
    moves each group of axes as a block: it is ``Transpose(x, perm)`` with ``perm`` the
    groups' axes in permuted order (whisper's ``k.transpose(-1, -2)`` through
    ``[B*H, T, D]``).

    When ``x``'s groups split otherwise than ``y``'s (a GQA key ``[b, 2, 2, T, 8]``
    merged to ``[2*2*b, T, 8]``, transposed, split to ``[b, 4, 8, T]``), the transposed
    ``x`` has ``y``'s elements in ``y``'s order: a ``Reshape`` (``allowzero=1``) to the
    last target, proven equal to ``y``'s dims, shapes it (``"regrouped"``).

    Attributes:
        fired: ``{"grouped_transpose": n, "regrouped": n}``.
        declined: Why candidate chains were kept, counted by reason.
    """

    facts: ShapeFacts
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        for node in list(graph):
            if node.graph is None or not _is_reshape_like(node):
                continue
            t = node.inputs[0]
            transpose = t.producer() if t is not None else None
            if transpose is None or transpose.op_type != "Transpose" or transpose.domain != "":
                continue
            m = transpose.inputs[0]
            first = m.producer() if m is not None else None
            if not _is_reshape_like(first) or first.graph is not graph:  # type: ignore[union-attr]
                continue
            if len(t.uses()) != 1 or t.is_graph_output():
                self.declined["an intermediate value has other uses or is a graph output"] += 1
                continue
            x, y = first.inputs[0], node.outputs[0]  # type: ignore[union-attr]
            regroup = self._regroup_target(graph, node)
            perm = self._perm(x, m, y, transpose, regrouped=regroup is not None)
            if perm is None:
                continue
            new = ir.node("Transpose", [x], attributes={"perm": perm})
            graph.insert_before(node, new)
            out = new.outputs[0]
            dtype = self.facts.dtype(y)
            set_type(out, dtype)
            sx = self.facts.shape(x)
            if not self.facts.same_shape([sx[a] for a in perm], self.facts.shape(y)):  # type: ignore[index]
                # x's groups split otherwise than y's (a GQA key [b, 2, 2, T, 8] merged
                # to [4b, T, 8], transposed, split to [b, 4, 8, T]): the transposed x has
                # the elements in y's order, and y's own dims, as literals, shape them.
                shaped = ir.node("Reshape", [out, regroup], attributes={"allowzero": 1})
                graph.insert_before(node, shaped)
                set_type(shaped.outputs[0], dtype)
                out = shaped.outputs[0]
            set_type(out, dtype, y.shape)
            take_over(y, out, "transposed")
            self.fired["grouped_transpose" if out.producer() is new else "regrouped"] += 1
        return ir.passes.PassResult(model, modified=bool(self.fired))

    def _regroup_target(self, graph: ir.Graph, last: ir.Node) -> ir.Value | None:
        """The last ``Reshape``'s target when its elements are proven ``y``'s dims, or ``None``.

        Read literally (``allowzero=1``, opset 14) it then gives ``y``'s shape to any
        tensor of as many elements: a ``0`` copied an input dim that was 0 as well.
        """
        if last.op_type != "Reshape" or len(last.inputs) != 2 or last.inputs[1] is None:
            return None
        if graph.opset_imports.get("", 0) < 14:
            return None
        facts = self.facts
        target = last.inputs[1]
        elements = facts.elements(target)
        sy = facts.shape(last.outputs[0])
        if elements is None or sy is None or not facts.same_shape(elements, sy):
            return None
        return target

    def _perm(self, x, m, y, transpose: ir.Node, regrouped: bool = False) -> list[int] | None:
        """The permutation of ``x``'s axes the chain computes, or ``None`` (reason recorded).

        With ``regrouped`` (the last target is proven ``y``'s dims) the permuted ``x`` may
        split its groups otherwise than ``y``: its dims need only group into ``y``'s.
        """
        facts = self.facts
        sx, sm, sy = facts.shape(x), facts.shape(m), facts.shape(y)
        if sx is None or sm is None or sy is None or not sm:
            self.declined["a rank in the chain is not proven"] += 1
            return None
        if facts.dtype(x) is None or facts.dtype(x) != facts.dtype(y):
            self.declined["input and output dtypes are not proven equal"] += 1
            return None
        perm = ints_attribute(transpose, "perm", tuple(range(len(sm)))[::-1])
        p = list(perm) if perm is not None else []
        if sorted(p) != list(range(len(sm))):
            self.declined["the perm is not a permutation of the mid axes"] += 1
            return None
        # The grouping matters only for the elements, so only in the runs where x has
        # some (every dim >= 1: an attention reshape's 4*b*min(1,s) is 4*b); the empty
        # runs agree through the output shape, proven below without that assumption.
        groups = self._groups(sx, sm) or self._groups(
            facts.if_nonempty(sx, sx), facts.if_nonempty(sm, sx)
        )
        if groups is None:
            self.declined["the first reshape does not group consecutive axes"] += 1
            return None
        perm = [a for k in p for a in groups[k]]
        permuted = [sx[a] for a in perm]
        if not facts.same_shape(permuted, sy) and not (
            regrouped
            and (self._groups(sy, permuted) or self._groups(permuted, sy)) is not None
        ):
            self.declined["the last reshape does not split the groups back"] += 1
            return None
        return perm

    def _groups(self, sx, sm) -> list[list[int]] | None:
        """Runs of ``sx``'s axes whose dim products are proven equal to ``sm``'s dims."""
        facts = self.facts
        groups: list[list[int]] = []
        i = 0
        for d in sm:
            group: list[int] = []
            product: expr.Dim = 1
            while not facts.same_dim(product, d):
                if i == len(sx):
                    return None
                product = product * sx[i]
                group.append(i)
                i += 1
            groups.append(group)
        # Trailing axes proven 1 belong to the last group (its product is unchanged).
        while i < len(sx):
            if sx[i] != 1:
                return None
            groups[-1].append(i)
            i += 1
        return groups
