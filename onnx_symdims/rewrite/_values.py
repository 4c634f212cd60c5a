"""Replaces computed integer values the shapes prove by constants or by short chains.

Two rewrites share one walk of the main graph, last node first (so the value a
``Reshape`` or ``Expand`` finally consumes is rebuilt before the pieces it was
computed from, which then die):

* **publish proven values** — an integer or boolean tensor whose every element is a
  proven integer becomes a ``Constant`` (so onnxscript's folder and every later pass
  see it), as does a ``ConstantOfShape`` whose shape is proven;
* **rebuild shape chains** — a value whose elements are integers and dims of tensors
  computed before it, computed through ``Shape → Gather → Unsqueeze → Concat → ...`` (or
  through scalar arithmetic on an input's dims: SegFormer computes ``[batch, 16, (H+3)//4,
  (W+3)//4]`` from ``H`` and ``W`` when the Conv's output already has those dims), becomes
  ``Concat(Shape(tensor, start, end), constant, ...)`` when that removes more nodes than
  it adds. A dim is read from a tensor whose shape the chain reads when one has it, else
  from the first tensor (graph inputs first, then in graph order) that has it.

Proof relied on: :class:`~onnx_symdims.rewrite.ShapeFacts` elements hold in every
successful run, so the replacement computes the same tensor (same dtype, same shape,
same elements) in every run where the original succeeds.
"""

from __future__ import annotations

__all__ = ["ProvenValuesPass"]

import dataclasses
import logging
from collections import Counter

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.rewrite._facts import ShapeFacts

logger = logging.getLogger(__name__)

INTEGER_DTYPES = frozenset(
    {
        ir.DataType.INT64,
        ir.DataType.INT32,
        ir.DataType.INT16,
        ir.DataType.INT8,
        ir.DataType.UINT64,
        ir.DataType.UINT32,
        ir.DataType.UINT16,
        ir.DataType.UINT8,
        ir.DataType.BOOL,
    }
)
#: Nodes explored per candidate when counting what a rewrite would remove.
_MAX_CONE = 256


@dataclasses.dataclass
class ProvenValuesPass(ir.passes.InPlacePass):
    """Publishes proven integer values as constants and rebuilds shape chains.

    Args:
        facts: The proven facts of the model (see :func:`~onnx_symdims.rewrite.analyze`).
        max_constant_elements: Largest ``ConstantOfShape`` output made a constant.
        rebuild_chains: Also rebuild values made of graph-input dims.

    Attributes:
        fired: How often each rewrite fired in the last run (``"publish"``,
            ``"constant_of_shape"``, ``"rebuild_chain"``).
        declined: Why candidates were declined, counted by reason.
    """

    facts: ShapeFacts
    max_constant_elements: int = 1024
    rebuild_chains: bool = True
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.fired = Counter()
        self.declined = Counter()
        graph = model.graph
        opset = model.opset_imports.get("", 0)
        self._shape_nodes: dict[tuple[ir.Value, int, int], ir.Value] = {}
        self._graph = graph
        self._opset = opset
        nodes = list(graph)
        self._nodes = nodes
        self._positions = {node: i for i, node in enumerate(nodes)}
        self._holders: dict | None = None  # built when a rebuild first needs it
        outputs = frozenset(graph.outputs)
        for node in reversed(nodes):
            if node.graph is None:  # removed with a value rebuilt after it
                continue
            if node.op_type == "Constant" and node.domain == "":
                continue
            for value in node.outputs:
                if node.graph is None or value in outputs or not value.uses():
                    continue
                self._visit(node, value)
        return ir.passes.PassResult(model, modified=bool(self.fired))

    # --------------------------------------------------------------------------------
    def _visit(self, node: ir.Node, value: ir.Value) -> None:
        facts = self.facts
        dtype = facts.dtype(value)
        shape = facts.shape(value)
        if shape is None or not all(isinstance(d, int) for d in shape):
            return
        if node.op_type == "ConstantOfShape" and node.domain == "":
            self._constant_of_shape(node, value, shape, dtype)
            return
        if dtype not in INTEGER_DTYPES:
            return
        elements = facts.elements(value)
        if elements is None or len(elements) != _numel(shape):
            return
        if all(isinstance(e, int) for e in elements):
            array = _array(elements, shape, dtype)
            if array is None:
                self.declined["publish: an element does not fit the dtype"] += 1
                return
            self._replace(node, value, _constant(array, value), "publish")
            return
        if self.rebuild_chains:
            self._rebuild(node, value, shape, dtype, elements)

    def _constant_of_shape(
        self, node: ir.Node, value: ir.Value, shape: tuple[int, ...], dtype
    ) -> None:
        if _numel(shape) > self.max_constant_elements:
            self.declined["constant_of_shape: larger than max_constant_elements"] += 1
            return
        attr = node.attributes.get("value")
        if attr is None:
            fill = np.zeros((), np.float32)
        elif attr.type == ir.AttributeType.TENSOR and attr.value.size == 1:
            fill = attr.value.numpy().reshape(())
        else:
            self.declined["constant_of_shape: value is not a one-element tensor"] += 1
            return
        array = np.full(shape, fill, dtype=fill.dtype)
        self._replace(node, value, _constant(array, value), "constant_of_shape")

    def _rebuild(self, node, value, shape, dtype, elements) -> None:
        if dtype != ir.DataType.INT64 or len(shape) > 1 or self._opset < 15:
            return
        dead = dead_cone(node, value)
        pieces = _pieces(elements, self._sources(dead, node, elements))
        if pieces is None:
            self.declined[
                "rebuild_chain: an element is not a dim of a tensor computed before it"
            ] += 1
            return
        scalar = len(shape) == 0
        new_nodes = sum(
            1 for p in pieces if isinstance(p, tuple) and p not in self._shape_nodes
        )
        new_nodes += (1 if len(pieces) > 1 else 0) + (1 if scalar else 0)
        if sum(1 for n in dead if n.op_type != "Constant") <= new_nodes:
            self.declined["rebuild_chain: removes no more nodes than it adds"] += 1
            return
        parts = [self._piece_value(p, node) for p in pieces]
        if len(parts) == 1:
            result = parts[0]
        else:
            concat = ir.node("Concat", parts, attributes={"axis": 0})
            self._graph.insert_before(node, concat)
            result = concat.outputs[0]
        if scalar:
            squeeze = ir.node("Squeeze", [result])
            self._graph.insert_before(node, squeeze)
            result = squeeze.outputs[0]
        result.name = _fresh_name(value)
        result.dtype = ir.DataType.INT64
        result.shape = ir.Shape(list(shape))
        value.replace_all_uses_with(result)
        self._graph.remove(dead, safe=True)
        self.fired["rebuild_chain"] += 1

    def _sources(self, dead: set[ir.Node], node: ir.Node, elements) -> dict:
        """``dim -> (tensor, axis)`` for the symbolic ``elements`` of a value ``node`` computes.

        The tensors whose shape the dying chain reads come first: reading a dim from the
        tensor the chain read (not from another one declared with the same name) keeps
        the rewrite exact even for feeds that break the declared names (onnxruntime does
        not check that inputs sharing a dim name agree). Other dims are read from the
        first tensor that has them and is computed before ``node`` (so the new ``Shape``,
        placed right after that tensor's producer, comes before ``node``'s uses). A
        tensor computed inside the dying chain is no source.
        """
        sources: dict = {}
        for n in dead:
            if n.op_type != "Shape" or n.domain != "" or not n.inputs:
                continue
            tensor = n.inputs[0]
            if tensor is None or tensor.producer() in dead:
                continue
            for axis, d in enumerate(self.facts.shape(tensor) or ()):
                if isinstance(d, expr.DimExpr) and not d.is_unknown and d not in sources:
                    sources[d] = (tensor, axis)
        position = self._positions.get(node, -1)
        for d in elements:
            if isinstance(d, int) or d in sources:
                continue
            if self._holders is None:
                self._holders = _dim_holders(self._graph.inputs, self._nodes, self.facts)
            for tensor, axis, at in self._holders.get(d, ()):
                producer = tensor.producer()
                if at >= position:
                    break  # the holders are in graph order: none later is usable either
                if producer is None or (producer.graph is not None and producer not in dead):
                    sources[d] = (tensor, axis)
                    break
        return sources

    def _piece_value(self, piece, node: ir.Node) -> ir.Value:
        if isinstance(piece, list):
            const = _constant(np.array(piece, np.int64), None)
            self._graph.insert_before(node, const)
            return const.outputs[0]
        cached = self._shape_nodes.get(piece)
        if cached is not None:
            return cached
        source, start, end = piece
        shape_node = ir.node("Shape", [source], attributes={"start": start, "end": end})
        # Right after the tensor (or first, for a graph input): it dominates every use of
        # the tensor, so later rebuilds can share it.
        producer = source.producer()
        if producer is not None:
            self._graph.insert_after(producer, shape_node)
        else:
            self._graph.insert_before(next(iter(self._graph)), shape_node)
        out = shape_node.outputs[0]
        out.name = f"{source.name}_dims_{start}_{end}" if source.name else None
        out.dtype = ir.DataType.INT64
        out.shape = ir.Shape([end - start])
        self._shape_nodes[piece] = out
        return out

    def _replace(self, node: ir.Node, value: ir.Value, const: ir.Node, what: str) -> None:
        self._graph.insert_before(node, const)
        dead = dead_cone(node, value)
        value.replace_all_uses_with(const.outputs[0])
        self._graph.remove(dead, safe=True)
        self.fired[what] += 1


#: Tensors remembered per dim as sources for rebuilt chains (the first ones in graph order).
_MAX_HOLDERS = 4


def _dim_holders(inputs, nodes: list[ir.Node], facts: ShapeFacts) -> dict:
    """``dim -> [(tensor, axis, position), ...]``: the first tensors whose proven shape has it.

    Graph inputs first (position -1), then the values of ``nodes`` (the main graph's, in
    order, as the pass started: positions index that list; a node removed since is
    skipped by the caller).
    """
    holders: dict = {}

    def add(value: ir.Value, position: int) -> None:
        for axis, d in enumerate(facts.shape(value) or ()):
            if isinstance(d, expr.DimExpr) and not d.is_unknown:
                found = holders.setdefault(d, [])
                if len(found) < _MAX_HOLDERS and (not found or found[-1][0] is not value):
                    found.append((value, axis, position))

    for value in inputs:
        add(value, -1)
    for i, node in enumerate(nodes):
        for value in node.outputs:
            add(value, i)
    return holders


def _pieces(elements, sources: dict) -> list | None:
    """Runs of ints (a list) and of consecutive dims of one tensor (a tuple)."""
    pieces: list = []
    for e in elements:
        if isinstance(e, int):
            if pieces and isinstance(pieces[-1], list):
                pieces[-1].append(e)
            else:
                pieces.append([e])
            continue
        position = sources.get(e)
        if position is None:
            return None
        source, axis = position
        last = pieces[-1] if pieces else None
        if isinstance(last, tuple) and last[0] is source and last[2] == axis:
            pieces[-1] = (source, last[1], axis + 1)
        else:
            pieces.append((source, axis, axis + 1))
    return pieces


def dead_cone(node: ir.Node, value: ir.Value) -> set[ir.Node]:
    """The nodes (``node`` and its producers) that die when ``value`` loses every use."""
    return _dead_cone({value: 0}, [node])


def dead_cone_of(values: list[ir.Value]) -> set[ir.Node]:
    """The nodes that die when every one of ``values`` loses every use.

    :func:`dead_cone` of several values at once: a node read only by their cones dies too.
    """
    producers = [v.producer() for v in values]
    return _dead_cone(dict.fromkeys(values, 0), [p for p in producers if p is not None])


def _dead_cone(remaining: dict[ir.Value, int], stack: list[ir.Node]) -> set[ir.Node]:
    """Walks up from ``stack``; ``remaining`` counts the uses left of values (0: none)."""
    dead: set[ir.Node] = set()
    while stack and len(dead) < _MAX_CONE:
        current = stack.pop()
        if current in dead or any(
            remaining.get(out, len(out.uses())) > 0 or out.is_graph_output()
            for out in current.outputs
        ):
            continue
        dead.add(current)
        for inp in current.inputs:
            if inp is None or inp.producer() is None:
                continue
            remaining[inp] = remaining.get(inp, len(inp.uses())) - 1
            if remaining[inp] == 0:
                stack.append(inp.producer())
    return dead


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _array(elements, shape, dtype: ir.DataType) -> np.ndarray | None:
    np_dtype = dtype.numpy()
    if dtype == ir.DataType.BOOL:
        if not all(e in (0, 1) for e in elements):
            return None
    else:
        info = np.iinfo(np_dtype)
        if not all(info.min <= e <= info.max for e in elements):
            return None
    return np.array(elements, dtype=np_dtype).reshape(shape)


def _fresh_name(value: ir.Value | None) -> str | None:
    return f"{value.name}_proven" if value is not None and value.name else None


def _constant(array: np.ndarray, value: ir.Value | None) -> ir.Node:
    const = ir.node("Constant", [], attributes={"value": ir.tensor(array)})
    out = const.outputs[0]
    out.name = _fresh_name(value)
    out.dtype = ir.DataType.from_numpy(array.dtype)
    out.shape = ir.Shape(list(array.shape))
    out.const_value = ir.tensor(array)
    return const
