"""Replaces a ``GatherND`` over a grid of ``Range(0, n)`` indices by a slice of its data.

transformers builds its attention masks with ``vmap``; exported, the padding mask reads
``mask[b, t]`` for every ``(b, t)`` through ``GatherND(mask, idx)``, where ``idx`` stacks
``Expand(arange(batch).view(B, 1, 1, 1), S)`` and ``Expand(arange(kv).view(1, 1, 1, T), S)``
on a last axis: nine nodes (the aranges, expands, unsqueezes, a concat, the grid's shape)
for what is ``mask[:, :T]`` with two axes of 1 inserted.

Proof relied on: with ``batch_dims = 0`` and as many index components as ``data`` has
axes, ``out[i] = data[idx[i, 0], ..., idx[i, k-1]]``. Component ``j`` is
``Expand(R_j, S)[i]``, where ``R_j`` is a ``Range(0, n_j, 1)`` reshaped so that only axis
``a_j`` has ``n_j`` elements (every other dim proven 1) and ``S[a_j]`` is proven
``n_j``: its value at ``i`` is ``i[a_j]``. So ``out[i] = data[i[a_0], ..., i[a_{k-1}]]``,
with each index below ``n_j`` (an index past ``data``'s dim fails the original). When the
``a_j`` increase and every other axis of ``S`` is proven 1, that is
``data[:n_0, ..., :n_{k-1}]`` with size-1 axes inserted at the other positions, element for
element in row-major order; a ``Slice`` is written only for the axes whose ``n_j`` is not
proven equal to ``data``'s dim (its end is the ``Range``'s own limit, proven ``>= 0``: a
negative limit gives an empty ``Range`` but a ``Slice`` end counted from the back). A
sliding window's kv positions ``Range(0, n) + offset``, with the scalar ``offset`` proven
``>= 0`` (a negative one would wrap the indices around), read ``data[offset:offset+n]``.
An empty grid (a batch of 0) gathers nothing and fails nowhere, so its axis keeps ``n_j``
even where ``n_j`` exceeds ``data``'s dim and the ``Slice`` clamps: unless the window is
proven to fit (``offset + n_j <= dim``) or every other axis of the grid is proven
nonempty, the result is a ``Reshape`` (``allowzero``) to the grid's own shape, an
``Expand`` target of the grid proven equal to the output shape; with elements, the
gather fails where the ``Slice`` would clamp, so the ``Reshape`` only inserts the 1s.
"""

from __future__ import annotations

__all__ = ["GatherNDOfIndexGridPass"]

import logging

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import FactsPass, int_attribute, set_type, take_over
from onnx_symdims.rewrite._values import dead_cone, dead_cone_of

logger = logging.getLogger(__name__)

_RESHAPES = frozenset({"Reshape", "Unsqueeze"})
#: Nodes followed up or down from a grid (as ``rewrite._values.dead_cone``).
_MAX_CONE = 256


class GatherNDOfIndexGridPass(FactsPass):
    """Replaces ``GatherND(data, grid of Range(0, n) indices)`` by a slice of ``data`` with size-1 axes inserted.

    Args:
        facts: The proven facts of the model.

    Attributes:
        fired: ``{"gather_nd_of_index_grid": n}``.
        declined: Why candidates were kept, counted by reason.
    """

    op_types = frozenset({"GatherND"})

    def visit(self, graph: ir.Graph, node: ir.Node) -> None:
        plan = self._plan(graph, node)
        if plan is None:
            return
        # Index grids are shared (whisper's decoder gathers two masks with one grid): the
        # grid's nodes die only when every gather reading it is rewritten.
        idx = node.inputs[1]
        group = [node]
        plans = [plan]
        uses = idx.uses()
        if not idx.is_graph_output() and all(
            u.idx == 1
            and u.node.op_type == "GatherND"
            and u.node.domain == ""
            and u.node.graph is graph  # a gather in a branch is not replaced from here
            for u in uses
        ):
            others = list(dict.fromkeys(u.node for u in uses if u.node is not node))
            other_plans = [self._plan(graph, other) for other in others]
            if all(p is not None for p in other_plans):
                group += others
                plans += other_plans
        if not self._pays(group, plans):
            # Grids of their own may share components: with the batch fixed at 1, the
            # masks of a sliding-window and a full layer stack one batch component each
            # beside their own kv positions, and that component dies with both gathers.
            wider = self._sharing(graph, group)
            if wider is None or not self._pays(group + wider[0], plans + wider[1]):
                self.declined["removes no more nodes than it adds"] += 1
                return
            group += wider[0]
            plans += wider[1]
        for gather, p in zip(group, plans):
            self._replace(graph, gather, *p)

    def _pays(self, group: list[ir.Node], plans: list[tuple]) -> bool:
        """True when rewriting every gather of ``group`` removes more nodes than it adds."""
        members = set(group)
        grids = list(dict.fromkeys(g.inputs[1] for g in group))
        # A grid read by anything but these gathers stays, and so do its producers.
        dying = [
            v
            for v in grids
            if not v.is_graph_output() and all(u.node in members for u in v.uses())
        ]
        cone = dead_cone_of(dying)
        removed = len(group) + sum(1 for n in cone if n.op_type != "Constant")
        # A Reshape to the grid's shape keeps the nodes computing that shape alive.
        kept: set[ir.Node] = set()
        for *_, target in plans:
            if target is not None and target.producer() is not None:
                kept |= dead_cone(target.producer(), target) & cone
        added = sum(_cost(self.facts, *p) for p in plans)
        added += sum(1 for n in kept if n.op_type != "Constant")
        return removed > added

    def _sharing(
        self, graph: ir.Graph, group: list[ir.Node]
    ) -> tuple[list[ir.Node], list[tuple]] | None:
        """The other rewritable gathers whose grids share a node with ``group``'s, or ``None``."""
        mine = set().union(*(_producers(g.inputs[1]) for g in group))
        others = [
            n
            for n in graph
            if n.op_type == "GatherND"
            and n.domain == ""
            and n not in group
            and len(n.inputs) == 2
            and n.inputs[1] is not None
            and _producers(n.inputs[1]) & mine
        ]
        plans = [self._plan(graph, n) for n in others]
        if not others or any(p is None for p in plans):
            return None
        return others, plans  # type: ignore[return-value]

    def _plan(self, graph: ir.Graph, node: ir.Node) -> tuple | None:
        """``(data, sliced axes, inserted axes, grid)`` for a rewritable gather, or ``None``."""
        if len(node.inputs) != 2 or node.inputs[0] is None or node.inputs[1] is None:
            return None
        if int_attribute(node, "batch_dims", 0) != 0:
            self.declined["batch_dims is not 0"] += 1
            return None
        data, idx = node.inputs
        facts = self.facts
        sd, si, so = facts.shape(data), facts.shape(idx), facts.shape(node.outputs[0])
        if sd is None or si is None or so is None or not si or si[-1] != len(sd) or not sd:
            self.declined["the index does not address every axis of the data"] += 1
            return None
        grid = self._grid(idx, si)
        if grid is None:
            return None
        axes = [axis for axis, _, _ in grid]
        if axes != sorted(set(axes)):
            self.declined["the grid's axes are not in increasing order"] += 1
            return None
        if not facts.same_shape(so, si[:-1]) or not all(
            facts.same_dim(d, 1) for a, d in enumerate(so) if a not in axes
        ):
            self.declined["the grid has other axes than size 1"] += 1
            return None
        if graph.opset_imports.get("", 0) < 13:
            self.declined["opset before 13 (Unsqueeze axes as an attribute)"] += 1
            return None
        if any(
            arange is None and not facts.same_dim(sd[j], 1)
            for j, (_, arange, _) in enumerate(grid)
        ):
            self.declined[
                "a constant index component on a data axis not proven of size 1"
            ] += 1
            return None
        sliced = [
            j
            for j, (_, arange, offset) in enumerate(grid)
            if arange is not None
            and (
                offset is not None
                or not facts.same_dim(facts.shape(arange.outputs[0])[0], sd[j])
            )
        ]
        for j in sliced:
            # A negative limit gives an empty Range, but a Slice end counted from the back.
            limit = facts.elements(grid[j][1].inputs[1])
            if limit is None or len(limit) != 1 or not facts.at_least(limit[0], 0):
                self.declined["a Range's limit is not proven >= 0"] += 1
                return None
        target = None
        if not all(self._slice_keeps_length(grid, j, sd[j]) for j in sliced):
            # An empty grid keeps n_j where the Slice may give fewer: a Reshape to the
            # grid's shape (allowzero) gives n_j then, and the same dims otherwise.
            target = self._grid_target(node.inputs[1], so)
            if target is None or graph.opset_imports.get("", 0) < 14:
                self.declined[
                    "a Range may run past its data axis while the grid is empty"
                ] += 1
                return None
        inserted = [a for a in range(len(so)) if a not in set(axes)]
        return data, sliced, inserted, grid, target

    def _slice_keeps_length(self, grid: list[tuple], j: int, dim) -> bool:
        """True when the ``Slice`` on axis ``j`` keeps the grid's length ``n_j`` in every run.

        A ``Slice`` clamps at ``data``'s dim where the ``Range`` runs past it. When the grid
        has elements, such an index fails the original; but an empty grid (another axis of
        length 0: a batch of 0) gathers nothing and gives ``n_j`` elements on axis ``j``
        where the ``Slice`` would give fewer. So either the window is proven to fit
        (``offset + n_j <= dim``), or every other axis of the grid is proven nonempty.
        """
        facts = self.facts
        _, arange, offset = grid[j]
        (n,) = facts.shape(arange.outputs[0])
        end = n
        if offset is not None:
            shift = facts.elements(offset)
            end = None if shift is None or len(shift) != 1 else expr.add(n, shift[0])
        if end is not None and (
            (isinstance(end, int) and isinstance(dim, int) and end <= dim)
            or facts.at_least(expr.sub(dim, end), 0)
        ):
            return True
        return all(
            facts.at_least(facts.shape(other.outputs[0])[0], 1)
            for k, (_, other, _) in enumerate(grid)
            if k != j and other is not None  # a constant 0 component has length 1
        )

    def _grid_target(self, idx: ir.Value, so) -> ir.Value | None:
        """An ``Expand`` target of the grid whose elements are proven the output shape ``so``."""
        facts = self.facts
        concat = idx.producer()
        parts = (
            list(concat.inputs) if concat is not None and concat.op_type == "Concat" else [idx]
        )
        for part in parts:
            lift = part.producer() if part is not None else None
            spread = lift.inputs[0] if lift is not None and lift.inputs else None
            expand = spread.producer() if spread is not None else None
            if expand is None or expand.op_type != "Expand" or len(expand.inputs) != 2:
                continue
            target = expand.inputs[1]
            if target is not None and facts.same_shape(facts.elements(target), so):
                return target
        return None

    def _grid(self, idx: ir.Value, si) -> list[tuple] | None:
        """``[(a_j, range_j, offset_j), ...]`` for the components of ``idx``, or ``None``."""
        rank = len(si) - 1
        concat = idx.producer()
        if concat is None:
            return None
        if concat.op_type == "Concat" and concat.domain == "":
            axis = int_attribute(concat, "axis")
            if axis is None or (axis if axis >= 0 else axis + rank + 1) != rank:
                self.declined["the index is not stacked on its last axis"] += 1
                return None
            parts = list(concat.inputs)
        else:
            parts = [idx]
        if len(parts) != si[-1]:
            self.declined["the index is not stacked from one component per axis"] += 1
            return None
        grid = []
        for part in parts:
            component = self._component(part, si[:-1])
            if component is None:
                return None
            grid.append(component)
        return self._place_zero_components(grid, si[:-1])

    def _place_zero_components(self, grid: list[tuple], grid_shape) -> list[tuple] | None:
        """Gives each constant-0 component (``Range(0, 1)`` folded) a size-1 grid axis."""
        axes = place_on_size_one_axes(self.facts, [c[0] for c in grid], grid_shape)
        if axes is None:
            self.declined["a constant index component has no size-1 axis of its own"] += 1
            return None
        return [(axis, arange, offset) for axis, (_, arange, offset) in zip(axes, grid)]

    def _component(self, part: ir.Value | None, grid_shape) -> tuple | None:
        """``(a, Range node, offset)`` for ``part`` spreading ``Range(0, n) [+ offset]`` on axis ``a``.

        ``offset`` is a scalar proven ``>= 0``, or ``None``. ``(None, None, None)`` for a
        spread constant 0 (see :meth:`_place_zero_components`).
        """
        facts = self.facts
        lift = part.producer() if part is not None else None
        if (
            lift is None
            or lift.domain != ""
            or lift.op_type not in _RESHAPES
            or not facts.same_shape(facts.shape(part), (*grid_shape, 1))
        ):
            self.declined["an index component is not a grid with a trailing axis"] += 1
            return None
        spread = lift.inputs[0]
        if facts.same_shape(facts.shape(spread), grid_shape):
            expand = spread.producer()
            placed = (
                expand.inputs[0]
                if expand is not None and expand.op_type == "Expand"
                else spread
            )
            shape = facts.shape(placed)
            place = placed.producer() if placed is not None else None
            if shape is not None and _is_zero(facts, placed, shape):
                # A Range(0, 1) that the folder made a constant (a batch fixed at 1): its
                # axis is placed once the others' are known.
                return None, None, None
            if (
                shape is None
                or len(shape) != len(grid_shape)
                or place is None
                or place.domain != ""
                or place.op_type not in _RESHAPES
            ):
                self.declined["an index component is not a reshaped Range"] += 1
                return None
            ranged = place.inputs[0]
        elif lift.op_type == "Reshape" and len(facts.shape(spread) or ()) == 1:
            # The Range placed, spread and given the trailing axis by one Reshape: a chain
            # collapsed where every other axis of the grid has size 1.
            shape, ranged = grid_shape, spread
        else:
            self.declined["an index component is not a grid with a trailing axis"] += 1
            return None
        long = [a for a, d in enumerate(shape) if not facts.same_dim(d, 1)]
        arange, offset = self._shifted_range(ranged)
        if len(long) != 1 or arange is None:
            self.declined["an index component is not a reshaped Range"] += 1
            return None
        (axis,) = long
        if facts.dtype(arange.outputs[0]) != ir.DataType.INT64:
            self.declined["a Range is not int64 (its limit becomes a Slice end)"] += 1
            return None
        start, _, delta = (facts.int_elements(v) for v in arange.inputs)
        if start != (0,) or delta != (1,):
            self.declined["a Range does not start at 0 with step 1"] += 1
            return None
        (n,) = facts.shape(arange.outputs[0]) or (None,)
        if (
            n is None
            or not facts.same_dim(shape[axis], n)
            or not facts.same_dim(grid_shape[axis], n)
        ):
            self.declined["a Range is not spread along its whole axis"] += 1
            return None
        return axis, arange, offset

    def _shifted_range(self, value: ir.Value | None) -> tuple[ir.Node | None, ir.Value | None]:
        """``(Range node, offset)`` for ``Range(...)`` or ``Range(...) + offset``.

        A sliding window's kv positions are ``arange(n) + max(past - window, 0)``: the offset
        is a scalar proven ``>= 0`` (a negative one would wrap GatherND's indices around).
        """
        producer = value.producer() if value is not None else None
        if producer is None or producer.domain != "":
            return None, None
        if producer.op_type == "Range":
            return producer, None
        if producer.op_type != "Add" or len(producer.inputs) != 2:
            return None, None
        facts = self.facts
        for arange_out, offset in (producer.inputs, reversed(producer.inputs)):
            arange = arange_out.producer() if arange_out is not None else None
            if arange is None or arange.op_type != "Range" or arange.domain != "":
                continue
            shift = facts.elements(offset)
            if (
                facts.shape(offset) in ((), (1,))
                and facts.dtype(offset) == ir.DataType.INT64
                and shift is not None
                and len(shift) == 1
                and facts.at_least(shift[0], 0)
                and facts.same_shape(facts.shape(value), facts.shape(arange_out))
            ):
                return arange, offset
        return None, None

    def _replace(self, graph, node, data, sliced_axes, inserted, grid, target) -> None:
        facts = self.facts
        new_nodes: list[ir.Node] = []
        result = data
        if sliced_axes:
            starts, ends = [], []
            for j in sliced_axes:
                _, arange, offset = grid[j]
                end = _as_vector(arange.inputs[1], facts, new_nodes)
                if offset is None:
                    start = _constant([0])
                    new_nodes.append(start)
                    starts.append(start.outputs[0])
                else:
                    start = _as_vector(offset, facts, new_nodes)
                    shifted = ir.node("Add", [start, end])
                    new_nodes.append(shifted)
                    starts.append(start)
                    end = shifted.outputs[0]
                ends.append(end)
            if len(sliced_axes) > 1:
                starts_node = ir.node("Concat", starts, attributes={"axis": 0})
                ends_node = ir.node("Concat", ends, attributes={"axis": 0})
                new_nodes += [starts_node, ends_node]
                starts, ends = [starts_node.outputs[0]], [ends_node.outputs[0]]
            axes = _constant(sliced_axes)
            sliced = ir.node("Slice", [data, starts[0], ends[0], axes.outputs[0]])
            new_nodes += [axes, sliced]
            result = sliced.outputs[0]
        if target is not None:
            reshape = ir.node("Reshape", [result, target], attributes={"allowzero": 1})
            new_nodes.append(reshape)
            result = reshape.outputs[0]
        elif inserted:
            where = _constant(inserted)
            unsqueeze = ir.node("Unsqueeze", [result, where.outputs[0]])
            new_nodes += [where, unsqueeze]
            result = unsqueeze.outputs[0]
        if result is data:  # a grid over all of data's axes in order: data itself
            result_node = ir.node("Identity", [data])
            new_nodes.append(result_node)
            result = result_node.outputs[0]
        graph.insert_before(node, new_nodes)
        out = node.outputs[0]
        set_type(result, facts.dtype(out), out.shape)
        take_over(out, result, "sliced")
        graph.remove(node, safe=True)  # now unused; a gather sharing its grid is next
        self.fired["gather_nd_of_index_grid"] += 1


def _producers(value: ir.Value) -> set[ir.Node]:
    """The non-constant nodes ``value`` is computed from (at most ``_MAX_CONE`` of them)."""
    seen: set[ir.Node] = set()
    stack = [value.producer()]
    while stack and len(seen) < _MAX_CONE:
        node = stack.pop()
        if node is None or node in seen or node.op_type == "Constant":
            continue
        seen.add(node)
        stack.extend(v.producer() for v in node.inputs if v is not None)
    return seen


def place_on_size_one_axes(facts, axes: list[int | None], dims) -> list[int] | None:
    """``axes`` (increasing where given) with each ``None`` made a size-1 axis of ``dims``.

    An index component that is constant 0 (``Range(0, 1)`` folded, a batch fixed at 1)
    reads along any axis of size 1 as ``Range(0, 1)`` placed there would; the first
    proven size-1 axis between its neighbours' is taken. ``None`` when there is none.
    """
    placed: list[int] = []
    for j, axis in enumerate(axes):
        if axis is None:
            previous = placed[-1] if placed else -1
            following = next((a for a in axes[j + 1 :] if a is not None), len(dims))
            axis = next(
                (a for a in range(previous + 1, following) if facts.same_dim(dims[a], 1)),
                None,
            )
            if axis is None:
                return None
        placed.append(axis)
    return placed


def _is_zero(facts, value: ir.Value, shape) -> bool:
    """True when ``value`` is proven a one-element int64 tensor holding 0."""
    if not all(facts.same_dim(d, 1) for d in shape):
        return False
    return facts.dtype(value) == ir.DataType.INT64 and facts.int_elements(value) == (0,)


def _cost(facts, data, sliced: list[int], inserted: list[int], grid, target) -> int:
    """Nodes (not counting constants) the rewrite of one gather adds.

    A ``target`` (the grid's shape) takes a ``Reshape`` in the ``Unsqueeze``'s place; the
    nodes it keeps alive are counted by the caller, once for a group sharing the grid.
    """
    added = 0 if target is None or inserted else 1
    for j in sliced:
        _, arange, offset = grid[j]
        added += facts.shape(arange.inputs[1]) != (1,)  # the end as a vector
        if offset is not None:
            added += (facts.shape(offset) != (1,)) + 1  # the start, and start + limit
    if sliced:
        added += 1 + (2 if len(sliced) > 1 else 0)  # the Slice, Concats of starts and ends
    added += 1 if inserted else 0
    return added if added else 1  # an Identity when nothing is left to do


def _as_vector(value: ir.Value, facts, new_nodes: list[ir.Node]) -> ir.Value:
    """``value`` (a scalar or a one-element vector) as a one-element vector."""
    if facts.shape(value) == (1,):
        return value
    zero = _constant([0])
    lifted = ir.node("Unsqueeze", [value, zero.outputs[0]])
    new_nodes += [zero, lifted]
    return lifted.outputs[0]


def _constant(values: list[int]) -> ir.Node:
    array = np.array(values, np.int64)
    const = ir.node("Constant", [], attributes={"value": ir.tensor(array)})
    const.outputs[0].dtype = ir.DataType.INT64
    const.outputs[0].shape = ir.Shape([len(values)])
    const.outputs[0].const_value = ir.tensor(array)
    return const
