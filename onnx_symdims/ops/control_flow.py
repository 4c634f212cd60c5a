"""Control flow: ``If``, ``Loop`` and ``Scan``.

Subgraphs are inferred through :meth:`NodeContext.infer_subgraph` (values of enclosing
graphs are visible). The soundness rules, which the peers get wrong:

* ``If``: a dim that differs between the branches becomes a fresh symbol bounded by
  ``max(then, else)``; with a known constant condition the taken branch is exact.
* ``Loop``/``Scan`` carried values: the body is inferred with the initial carried
  shapes; a carried dim that comes back changed is widened to a fresh symbol, and the
  body is re-inferred, leaving no trace, until every kept dim comes back unchanged (a
  fixed point). Only then is the real body inferred (and annotated) with those shapes, so
  a carried tensor that grows is never reported with its first-iteration shape (the
  inference that reached the fixed point is kept as that one when the body's declared
  shapes changed nothing in it: it is the same inference). A dim
  that grows by the same loop-invariant ``delta`` each time ends as
  ``initial + count*delta``; other widened dims end as fresh symbols.
* ``Loop`` scan outputs: the iteration count is a fresh symbol bounded by the trip count
  ``M`` (``cond`` may stop the loop early), exactly ``M`` only when nothing can stop it.
  When the loop may run zero times, the spec leaves the per-iteration dims undefined and
  onnxruntime takes them from the body output's static type as its inference knows it
  (0 where it knows no int; it types a body with the carried inputs' initial shapes, so
  it may know more than holds), so a dim ``d`` that is not a static int there is written
  ``d*r + e*(1-r)`` with ``r = min(1, count)`` and ``e`` fresh.

Sequence ops live in :mod:`onnx_symdims.ops.sequences`, calls of model-local functions in
:mod:`onnx_symdims.ops.functions`.
"""

from __future__ import annotations

__all__ = ["body_values", "copy_type"]

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import final

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    default_domain_producer,
    fresh_at_most,
    non_tensor_type,
    output_name,
    same_dim,
    single_element,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.sequences import is_empty_sequence
from onnx_symdims.shapes import (
    NodeContext,
    graph_values,
    is_fully_unknown,
    nested_nodes,
    unknown_element,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64
BOOL = ir.DataType.BOOL

#: Probing rounds before carried shapes are given up (rank unknown). Each round widens
#: at least one more dim, so real bodies converge in two or three.
MAX_PROBE_ROUNDS = 4

#: How far back a chain of ``Identity`` nodes is followed from a body's output.
MAX_IDENTITY_CHAIN = 64

_DIM_EXPR = expr.DimExpr


# ----------------------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------------------
def _graph_attr(ctx: NodeContext, name: str) -> ir.Graph:
    # Slots, not properties (see _require_ir_slots); the UserDict's dict: a C lookup.
    attr = ctx.node._attributes.data.get(name)
    if attr is None:
        ctx.fail(f"missing graph attribute {name!r}")
    if attr._type != ir.AttributeType.GRAPH:
        ctx.fail(f"attribute {name!r} must be GRAPH, got {attr._type.name}")
    return attr._value


def copy_type(ctx: NodeContext, i: int, source: ir.Value) -> None:
    """Gives output ``i`` the non-tensor type of ``source`` (sequences, optionals)."""
    other = non_tensor_type(ctx.ctx, source)
    if other is not None:
        ctx.set_output_type(i, other)


def _constant_bool(ctx: NodeContext, i: int) -> bool | None:
    """The value of a present boolean scalar input when known, else ``None``."""
    element = single_element(ctx.input_value(i))
    if isinstance(element, int):
        return element != 0
    return None


def body_values(graph: ir.Graph) -> Iterator[ir.Value]:
    """Every value defined in ``graph`` and its nested subgraphs."""
    return iter(_Body(graph).values)


class _Body:
    """A loop body's nodes and values at any depth, listed once per inference of the node.

    Inference adds no node or value to a body, so one listing serves every inference of
    it (each transaction saves and restores these values).

    Attributes:
        graph: The body.
        nodes: Its nodes and those of its subgraphs (:func:`_nested_nodes`).
        values: Every value defined in it (:func:`body_values`).
        outputs: The outputs of :attr:`nodes` (the values a probe drops declarations of).
    """

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        subgraphs: list[ir.Graph] = []
        self.nodes = nested_nodes(graph, subgraphs)
        # The slot (see _require_ir_slots); a comprehension costs less than chain/map.
        self.outputs = [value for node in self.nodes for value in node._outputs]
        self.values = [*graph_values(graph.inputs), *self.outputs]
        for sub in subgraphs:
            self.values.extend(graph_values(sub.inputs))


@final
class _Transaction:
    """Facts recorded while inferring a body, undone unless :attr:`keep` is set.

    A body inferred with carried shapes that hold in *some* iterations only must leave
    no trace: no equality (e.g. from a Reshape), bound, diagnostic or annotation. Used
    as ``with _Transaction(ctx, body) as transaction:``.

    Attributes:
        keep: Set to True to keep what the block recorded.
    """

    def __init__(self, ctx: NodeContext, body: _Body) -> None:
        self.keep = False
        shapes = self._shapes = ctx.ctx
        self._marks = shapes.marks()  # constraints and diagnostics
        self._values = body.values
        # The slots (see _require_ir_slots): a body's every value, every probe round.
        # A comprehension: half the cost of zip over two attrgetter maps.
        self._annotations = [(value, value._type, value._shape) for value in body.values]

    def __enter__(self) -> _Transaction:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finish()

    def finish(self) -> None:
        """Undoes everything recorded since the start, unless :attr:`keep` is set."""
        if self.keep:
            return
        shapes = self._shapes
        shapes.roll_back_to(self._marks)
        # Inference adds no value to the body: the values saved at the start are all.
        for value, type_, shape in self._annotations:
            value._type = type_  # what the setters store: the values read at the start
            value._shape = shape
        shapes.forget_many(self._values)


def _probe(
    ctx: NodeContext,
    body: _Body,
    shapes: Sequence[Shape | None],
    dtypes: Sequence[ir.DataType | None],
) -> list[Shape | None]:
    """Infers ``body`` in a transaction and returns its output shapes; the model is untouched.

    Declared shapes of the intermediate values are dropped while it runs: they describe
    every iteration, and merging them with one iteration's shapes would derive false
    facts. The transaction puts them back (in place of inferring a clone of the body,
    which costs more than the inference itself).
    """
    with _Transaction(ctx, body):
        for value in body.outputs:
            value._shape = None  # the slot (the setter stores it): every probe round
        return ctx.infer_subgraph(body.graph, shapes, dtypes)


class _Widening:
    """Carried shapes being generalised towards a loop fixed point.

    Attributes:
        initial: The carried shapes before the first iteration.
        shapes: The carried shapes fed to the body (``None``: rank unknown).
        widened: Symbols minted for dims that change between iterations.
        body: The loop body's listing.
    """

    def __init__(self, initial: Sequence[Shape | None], body: _Body) -> None:
        self.body = body
        self.initial: list[Shape | None] = list(initial)
        self.shapes: list[Shape | None] = list(initial)
        self.widened: set[expr.DimExpr] = set()
        #: The carried outputs of the final body inference, fed :attr:`shapes`.
        self.returned: list[Shape | None] = [None] * len(self.shapes)

    def step(self, ctx: NodeContext, outputs: Sequence[Shape | None]) -> bool:
        """Widens every fed dim that the body changes; returns whether any changed.

        A dim already widened to a fresh symbol stands for any size, so whatever comes
        back for it is covered and counts as no change.
        """
        changed = False
        for k, (fed, out) in enumerate(zip(self.shapes, outputs)):
            # Dims are ints or hash-consed DimExprs (equal only when identical): equal
            # tuples are same_dim everywhere, the usual case.
            if fed is None or fed == out:
                continue
            if out is None or len(out) != len(fed):
                self.shapes[k] = None
                changed = True
                continue
            dims = list(fed)
            for d, (a, b) in enumerate(zip(fed, out)):
                if same_dim(a, b) or a in self.widened:
                    continue
                dims[d] = ctx.new_symbol(f"carried{k}_d{d}")
                self.widened.add(dims[d])
                changed = True
            self.shapes[k] = tuple(dims)
        return changed


def _infer_carried(
    ctx: NodeContext,
    body: ir.Graph,
    before: Sequence[Shape | None],
    initial: Sequence[Shape | None],
    after: Sequence[Shape | None],
    dtypes: Sequence[ir.DataType | None],
    first_state_output: int,
) -> tuple[_Widening, list[Shape | None]]:
    """Finds loop-invariant carried shapes, then infers (and annotates) the real body.

    Body inferences: one when the carried shapes do not change; else one more per
    widening round, the last of which is kept when the body's declared shapes changed
    nothing (else probes and a final inference, one more).

    Args:
        ctx: The node's context.
        body: The loop body.
        before: Shapes of the body inputs before the carried ones (Loop: iteration
            number and condition).
        initial: Initial carried shapes.
        after: Shapes of the body inputs after the carried ones (Scan: slices).
        dtypes: Element types of all body inputs.
        first_state_output: Index of the first carried output of the body.

    Returns:
        The widening (fixed-point carried shapes and widened symbols) and the shapes of
        the body outputs from the final inference.
    """
    listing = _Body(body)
    state = _Widening(initial, listing)
    count = len(initial)
    carried = slice(first_state_output, first_state_output + count)
    shapes = ctx.ctx
    # Most loops keep their carried shapes: try the real body first, and keep the result
    # when nothing changes (by induction the annotations then hold in every iteration).
    used = shapes.declarations_used
    with _Transaction(ctx, listing) as attempt:
        outputs = ctx.infer_subgraph(body, [*before, *state.shapes, *after], dtypes)
        attempt.keep = not state.step(ctx, outputs[carried])
    if attempt.keep:
        state.returned = list(outputs[carried])
        return state, outputs
    # While the body's declared shapes change nothing (ShapesContext.declarations_used
    # does not move), an inference of the real body gives every value the facts the
    # probe (which drops them) would: it is the probe, and when it converges it is the
    # final inference as well (the same check, on the same shapes), so it is kept.
    # A declaration that changes something sends the rest through probes and a final
    # inference, as before.
    real = shapes.declarations_used == used
    converged = False
    for _ in range(MAX_PROBE_ROUNDS):
        feeds = [*before, *state.shapes, *after]
        if real:
            with _Transaction(ctx, listing) as round_:
                used = shapes.declarations_used
                outputs = ctx.infer_subgraph(body, feeds, dtypes)
                real = shapes.declarations_used == used
                if real:
                    converged = not state.step(ctx, outputs[carried])
                    round_.keep = converged
            if converged:
                state.returned = list(outputs[carried])
                return state, outputs
            if real:
                continue
        outputs = _probe(ctx, listing, feeds, dtypes)
        converged = not state.step(ctx, outputs[carried])
        if converged:
            break
    if not converged:
        ctx.warn("carried shapes did not reach a fixed point; their rank is left unknown")
        state.shapes = [None] * count
    outputs = ctx.infer_subgraph(body, [*before, *state.shapes, *after], dtypes)
    final = outputs[carried]
    for fed, out in zip(state.shapes, final):
        if fed is None:
            continue
        if (
            out is None
            or len(out) != len(fed)
            or not all(same_dim(a, b) or a in state.widened for a, b in zip(fed, out))
        ):
            # Declared body shapes disagreed with the probe: keep the outer graph sound.
            ctx.warn("loop body annotations disagree with the carried-shape fixed point")
            state.shapes = [
                None if s is None else ctx.fresh_shape(len(s), "state") for s in state.shapes
            ]
            return state, outputs
    state.returned = list(final)
    return state, outputs


def _affine_final(
    fed: Dim, out: Dim, start: Dim, count: Dim, invariant: Callable[[], frozenset[str]]
) -> Dim | None:
    """``start + count*delta`` when each iteration adds the same ``delta`` to a dim.

    The body was inferred for any size ``fed`` (a widened symbol), so ``out - fed`` is
    the growth of every iteration when all its symbols are ``invariant()`` (sizes from
    outside the body; not widened ones, not ones the body mints or declares), which is
    computed only for a ``delta`` with symbols (most loops grow by a constant).
    """
    delta = expr.sub(out, fed)
    if isinstance(delta, expr.DimExpr) and (
        delta.is_unknown or not delta.symbols() <= invariant()
    ):
        return None
    return expr.add(start, expr.mul(count, delta))


def _add_symbols(names: set[str], dims: Sequence[Dim] | None) -> None:
    """Adds the symbols of ``dims`` to ``names`` (ints and unknown dims have none)."""
    if dims:
        for d in dims:
            # The int test first: values are mostly ints, and it is the cheaper one.
            if d.__class__ is not int and isinstance(d, _DIM_EXPR) and not d.is_unknown:
                names |= d.symbols()


def _outer_symbols(ctx: NodeContext, body: _Body) -> frozenset[str]:
    """Symbols of the sizes and values the node and its body read from outside the body."""
    shapes = ctx.ctx
    names: set[str] = set()
    for i in range(ctx.num_inputs):
        _add_symbols(names, ctx.input_shape(i))
        _add_symbols(names, ctx.input_value(i))
    inner = set(body.values)
    # Each outer value once, in the order first read (a body often reads one value in
    # several nodes); the slot: every input of every node of the body.
    outer = {
        value: None for node in body.nodes for value in node._inputs if value not in inner
    }
    outer.pop(None, None)  # omitted optional inputs
    for value in outer:
        _add_symbols(names, shapes.shape_of(value))
        _add_symbols(names, shapes.value_of(value))
    return frozenset(names)


def _final_state(
    ctx: NodeContext,
    k: int,
    state: _Widening,
    count: Callable[[], Dim | None],
    invariant: Callable[[], frozenset[str]],
) -> Shape | None:
    """The shape of carried value ``k`` after the loop.

    A kept dim is the initial dim (right even with zero iterations); a widened one is
    ``initial + count*delta`` for a constant growth, else a fresh symbol.
    """
    fed, out, start = state.shapes[k], state.returned[k], state.initial[k]
    if fed is None:
        return None
    widened = state.widened
    if not widened or fed is start:  # kept as it came in: nothing to generalise
        return fed
    dims: list[Dim] = []
    for d, dim in enumerate(fed):
        if dim not in widened:
            dims.append(dim)
            continue
        final = None
        if out is not None and start is not None and (n := count()) is not None:
            final = _affine_final(dim, out[d], start[d], n, invariant)
        if final is None:
            final = ctx.new_symbol(f"{_output_hint(ctx, k)}_d{d}")
        dims.append(final)
    return tuple(dims)


def _output_hint(ctx: NodeContext, i: int) -> str:
    return output_name(ctx, i, f"o{i}")


def _set_state_outputs(
    ctx: NodeContext,
    state: _Widening,
    body: ir.Graph,
    offset: int,
    first_output: int,
    count: Callable[[], Dim | None],
    wrap: Sequence[Dim] = (),
) -> None:
    """Sets the carried outputs ``0..N-1`` (with leading ``wrap`` dims, Scan-8 batch).

    Args:
        ctx: The node's context.
        state: The carried shapes at the fixed point.
        body: The loop body.
        offset: Index of the first carried input of the node.
        first_output: Index of the first carried output of the body.
        count: Gives the number of iterations (``None``: not usable), called lazily.
        wrap: Dims put before every carried shape.
    """
    symbols: list[frozenset[str]] = []

    def invariant() -> frozenset[str]:
        if not symbols:
            symbols.append(_outer_symbols(ctx, state.body))
        return symbols[0]

    outputs = graph_values(body.outputs)
    for k in range(len(state.shapes)):
        shape = _final_state(ctx, k, state, count, invariant)
        source = outputs[first_output + k]
        dtype = ctx.input_dtype(offset + k) or ctx.ctx.dtype_of(source)
        ctx.set_output(k, None if shape is None else (*wrap, *shape), dtype)
        copy_type(ctx, k, source)


# ----------------------------------------------------------------------------------------
# If
# ----------------------------------------------------------------------------------------
def _select(ctx: NodeContext, cond: Dim | None, a: Dim, b: Dim) -> Dim | None:
    """``a if cond else b`` exactly, for a symbolic 0/1 condition; None when not sound.

    Only dims over names known outside the branches qualify: a symbol minted inside a
    branch means nothing when the other branch runs.
    """
    if not isinstance(cond, expr.DimExpr) or cond.is_unknown:
        return None
    generated = ctx.ctx.is_generated
    for d in (a, b):
        if isinstance(d, expr.DimExpr) and (
            d.is_unknown or any(generated(s) for s in d.symbols())
        ):
            return None
    return expr.add(expr.mul(cond, a), expr.mul(expr.sub(1, cond), b))


def _merge_branch_shapes(
    ctx: NodeContext,
    then_shape: Shape | None,
    else_shape: Shape | None,
    hint: str,
    cond: Dim | None,
) -> Shape | None:
    if then_shape is None or else_shape is None or len(then_shape) != len(else_shape):
        return None
    dims: list[Dim] = []
    for d, (a, b) in enumerate(zip(then_shape, else_shape)):
        if same_dim(a, b):
            dims.append(a)
            continue
        selected = _select(ctx, cond, a, b)
        if selected is not None:
            dims.append(selected)
            continue
        dims.append(fresh_at_most(ctx, f"{hint}_d{d}", expr.dmax(a, b, scope=ctx.scope)))
    return tuple(dims)


def _merge_branch_values(
    ctx: NodeContext, then_value: Shape | None, else_value: Shape | None, cond: Dim | None
) -> tuple[Dim, ...] | None:
    if then_value is None or else_value is None or len(then_value) != len(else_value):
        return None
    merged = []
    for a, b in zip(then_value, else_value):
        if same_dim(a, b) and not (isinstance(a, expr.DimExpr) and a.is_unknown):
            merged.append(a)
        else:
            selected = _select(ctx, cond, a, b)
            merged.append(unknown_element() if selected is None else selected)
    return None if is_fully_unknown(merged) else tuple(merged)


@register("", "If", since=1)
def infer_if(ctx: NodeContext, node: ir.Node) -> None:
    """Both branches inferred; differing dims are selected exactly or bounded.

    A symbolic 0/1 condition ``c`` selects ``c*then + (1-c)*else``; otherwise a differing
    dim becomes a fresh symbol bounded by the max of the two.
    """
    ctx.require_input(0)
    then_graph = _graph_attr(ctx, "then_branch")
    else_graph = _graph_attr(ctx, "else_branch")
    then_shapes = ctx.infer_subgraph(then_graph)
    else_shapes = ctx.infer_subgraph(else_graph)
    count = ctx.num_outputs
    then_outputs = graph_values(then_graph.outputs)
    else_outputs = graph_values(else_graph.outputs)
    if len(then_outputs) != count or len(else_outputs) != count:
        ctx.fail(
            f"branches have {len(then_outputs)} and {len(else_outputs)} "
            f"outputs, the node has {count}"
        )
    taken = _constant_bool(ctx, 0)
    cond = single_element(ctx.input_value(0))  # a 0/1 element when symbolic
    shapes = ctx.ctx
    for i in range(count):
        then_out, else_out = then_outputs[i], else_outputs[i]
        if taken is not None:
            source = then_out if taken else else_out
            shape = then_shapes[i] if taken else else_shapes[i]
            element_values = shapes.value_of(source)
        else:
            source = then_out
            shape = _merge_branch_shapes(
                ctx, then_shapes[i], else_shapes[i], _output_hint(ctx, i), cond
            )
            element_values = _merge_branch_values(
                ctx, shapes.value_of(then_out), shapes.value_of(else_out), cond
            )
        dtype = shapes.dtype_of(source) or shapes.dtype_of(else_out)
        ctx.set_output(i, shape, dtype)
        ctx.set_output_value(i, element_values)
        copy_type(ctx, i, source)


# ----------------------------------------------------------------------------------------
# Loop
# ----------------------------------------------------------------------------------------
def _passes_condition_through(body: ir.Graph) -> bool:
    """True when the body's condition output is its condition input (maybe via Identity)."""
    return _through_identities(graph_values(body.outputs)[0]) is graph_values(body.inputs)[1]


def _body_never_stops(ctx: NodeContext, body: ir.Graph) -> bool:
    """True when the body's condition output is always true (given a true start)."""
    if _passes_condition_through(body):
        return True
    element = single_element(ctx.ctx.value_of(graph_values(body.outputs)[0]))
    return isinstance(element, int) and element != 0


def _constant_element(ctx: NodeContext, value: ir.Value | None, body: ir.Graph) -> Dim | None:
    """The single element of ``value`` when it is the same in every iteration.

    A value of an enclosing graph, or a constant of the body; a body input or another
    body node's output may change between iterations.
    """
    if value is None:
        return None
    producer = value.producer()
    inside = value.graph is body or (producer is not None and producer.graph is body)
    if inside and (
        producer is None or producer.op_type != "Constant" or producer.domain != ""
    ):
        return None
    element = single_element(ctx.ctx.value_of(value))
    if element is None or (isinstance(element, expr.DimExpr) and element.is_unknown):
        return None
    return element


def _first_false_iteration(ctx: NodeContext, body: ir.Graph) -> Dim | None:
    """``max(c - k, 0)`` when the body's condition output is ``i + k < c``, else None.

    ``i`` is the iteration number, ``k`` and ``c`` are the same in every iteration
    (``Greater(c, i + k)`` too): iteration ``j`` computes ``j + k < c``, false first at
    ``j = max(c - k, 0)``.
    """
    outputs = graph_values(body.outputs)
    node = outputs[0].producer() if outputs else None
    if node is None or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return None
    if node.op_type == "Less":
        left, right = node.inputs
    elif node.op_type == "Greater":
        right, left = node.inputs
    else:
        return None
    index = graph_values(body.inputs)[0]
    if left is index:
        offset: Dim | None = 0
    else:
        add = left.producer() if left is not None else None
        if add is None or add.op_type != "Add" or add.domain != "" or len(add.inputs) != 2:
            return None
        a, b = add.inputs
        other = b if a is index else a if b is index else None
        offset = _constant_element(ctx, other, body) if other is not None else None
    bound = _constant_element(ctx, right, body)
    if offset is None or bound is None:
        return None
    return expr.dmax(expr.sub(bound, offset), 0, scope=ctx.scope)


def _iteration_count(ctx: NodeContext, body: ir.Graph) -> Dim:
    """The number of iterations: exact when nothing or ``i + k < c`` can stop the loop.

    onnxruntime honours the body's condition output even when the ``cond`` input is
    omitted, so exactness needs a body condition that is always true, or one that turns
    false at a known iteration: ``min(M, j + 1)`` for the first false iteration ``j``
    (a loop stopped by its index, torch's ``for i in range(n): if i >= 2: break``).
    """
    has_trip = ctx.has_input(0)
    trip = single_element(ctx.input_value(0)) if has_trip else None
    starts = _constant_bool(ctx, 1) if ctx.has_input(1) else True
    if starts is False or (isinstance(trip, int) and trip <= 0):
        return 0
    limit = None if trip is None else expr.dmax(trip, 0, scope=ctx.scope)
    if limit is not None and starts and _body_never_stops(ctx, body):
        return limit
    if starts and (trip is not None or not has_trip):
        last = _first_false_iteration(ctx, body)
        if last is not None:
            runs = expr.add(last, 1)
            return runs if limit is None else expr.dmin(limit, runs, scope=ctx.scope)
    count = fresh_at_most(ctx, "iterations", limit)
    if starts and (not has_trip or (trip is not None and ctx.scope.prove_ge(trip, 1))):
        ctx.scope.set_range(count.name, lower=1)  # type: ignore[arg-type]
    return count


def _scan_output_shape(
    ctx: NodeContext,
    per_iteration: Shape | None,
    source: ir.Value,
    count: Dim,
) -> Shape | None:
    """``[count, *per_iteration]``, exact even when the loop runs zero times.

    With zero iterations the spec leaves the dims past the first undefined; onnxruntime
    builds the output from the body output's *static* type as its load-time inference
    knows it: an int dim stays, any other dim is 0, and without a shape the result is
    ``[0]``. An int the body output's type holds (written by this inference) is that int.
    Any other dim ``d`` is ``d*r + e*(1-r)``, ``r = min(1, count)``, ``e`` fresh: ``d``
    whenever an iteration runs, the runtime's choice when none does. onnxruntime's choice
    is not ours to predict: its load-time inference types a loop body once, with the
    carried inputs' initial shapes, so it may know an int where the size grows (rewrite
    fuzz ``--ranges`` seed 902105: a carried ``[2]`` that grows, passed through as a scan
    output, gives ``[0, 2]``), and carries such ints on to later loops (seed 904363: ``4``
    for a dim the first loop's declared output names ``o2_1``, written 0 as
    ``o2_1*min(1, count)``).
    """
    if per_iteration is None:
        return None
    if ctx.scope.prove_ge(count, 1):
        return (count, *per_iteration)
    declared = source.shape
    if declared is None or len(declared) != len(per_iteration):
        return None
    ran = expr.dmin(count, 1, scope=ctx.scope)
    dims: list[Dim] = []
    idle = expr.sub(1, ran)
    for k, d in enumerate(per_iteration):
        if isinstance(d, int) and declared.dims[k] == d:
            dims.append(d)
            continue
        chosen = ctx.new_symbol(f"empty_d{k + 1}")
        dims.append(expr.add(expr.mul(d, ran), expr.mul(chosen, idle)))
    return (count, *dims)


def _appended_element(ctx: NodeContext, body: _Body, k: int) -> Shape | None:
    """The shape shared by the tensors a loop appends to its empty carried sequence ``k``.

    When the body's carried output ``k`` is ``SequenceInsert(s, t)`` of its carried input
    ``s`` (through ``Identity``), the sequence after the loop holds exactly the ``t`` of
    the iterations (none: then any shape holds). A dim of ``t`` over sizes read from
    outside the body (or an int) is the same in every iteration; any other dim (the
    length of ``x[:, i:i+1]``, a widened size) is left unknown, a fresh size per element.
    ``None`` when the body has another shape or ``t``'s rank is unknown.
    """
    graph = body.graph
    carried_input = graph.inputs[2 + k]
    inserted = _through_identities(graph.outputs[1 + k])
    producer = default_domain_producer(inserted)
    if (
        producer is None
        or producer.op_type != "SequenceInsert"
        or len(producer.inputs) < 2
        or _through_identities(producer.inputs[0]) is not carried_input
        or producer.inputs[1] is None
    ):
        return None
    shape = ctx.ctx.shape_of(producer.inputs[1])
    if shape is None:
        return None
    outer = _outer_symbols(ctx, body)
    return tuple(
        d if isinstance(d, int) or (not d.is_unknown and d.symbols() <= outer) else None  # type: ignore[misc]  # set_output mints a symbol read as any size
        for d in shape
    )


def _through_identities(value: ir.Value | None) -> ir.Value | None:
    """``value``, or the input of the ``Identity`` chain that produced it."""
    for _ in range(MAX_IDENTITY_CHAIN):
        producer = default_domain_producer(value, "Identity")
        if producer is None or not producer.inputs:
            return value
        value = producer.inputs[0]
    return value


@register("", "Loop", since=1)
def infer_loop(ctx: NodeContext, node: ir.Node) -> None:
    """Carried shapes at a fixed point; scan outputs get a fresh (bounded) iteration count."""
    body = _graph_attr(ctx, "body")
    carried = max(ctx.num_inputs - 2, 0)
    inputs = len(graph_values(body.inputs))
    if inputs != carried + 2:
        ctx.fail(f"body has {inputs} inputs, expected {carried + 2}")
    body_outputs = graph_values(body.outputs)
    scans = len(body_outputs) - 1 - carried
    if scans < 0 or ctx.num_outputs > carried + scans:
        ctx.fail(f"body has {len(body_outputs)} outputs for {carried} carried values")
    initial = [ctx.input_shape(2 + k) for k in range(carried)]
    dtypes = [INT64, BOOL, *(ctx.input_dtype(2 + k) for k in range(carried))]
    state, outputs = _infer_carried(ctx, body, [(), ()], initial, [], dtypes, 1)
    counted: list[Dim] = []

    def count() -> Dim:
        if not counted:  # minted once, shared by carried and scan outputs
            counted.append(_iteration_count(ctx, body))
        return counted[0]

    _set_state_outputs(ctx, state, body, 2, 1, count)
    for k in range(carried):
        if state.shapes[k] is None and is_empty_sequence(ctx.ctx, node.inputs[2 + k]):
            element = _appended_element(ctx, state.body, k)
            if element is not None:
                ctx.set_output(k, element)  # a sequence's shape: its elements' one
    if scans == 0 or ctx.num_outputs <= carried:
        return
    for j in range(scans):
        source = body_outputs[1 + carried + j]
        shape = _scan_output_shape(ctx, outputs[1 + carried + j], source, count())
        ctx.set_output(carried + j, shape, ctx.ctx.dtype_of(source))


# ----------------------------------------------------------------------------------------
# Scan
# ----------------------------------------------------------------------------------------
def _scan_length(lengths: Sequence[Dim]) -> Dim:
    """The common length of the scanned axes (the runtime requires them equal)."""
    for d in lengths:
        if isinstance(d, int):
            return d
    return lengths[0]


def _scan_attrs(ctx: NodeContext) -> tuple[ir.Graph, int]:
    """The ``body`` and the required ``num_scan_inputs`` attributes."""
    body = _graph_attr(ctx, "body")
    scans = ctx.attr_int("num_scan_inputs")
    if scans is None:
        ctx.fail("missing attribute 'num_scan_inputs'")
    return body, scans


def _scan_counts(ctx: NodeContext, body: ir.Graph, states: int, scans: int) -> int:
    if scans < 1:
        ctx.fail(f"num_scan_inputs must be >= 1, got {scans}")
    if states < 0:
        ctx.fail(f"num_scan_inputs={scans} exceeds the number of inputs")
    inputs = len(graph_values(body.inputs))
    if inputs != states + scans:
        ctx.fail(f"body has {inputs} inputs, expected {states + scans}")
    total = len(graph_values(body.outputs))
    outputs = total - states
    if outputs < 0 or ctx.num_outputs > states + outputs:
        ctx.fail(f"body has {total} outputs for {states} states")
    return outputs


@register("", "Scan", since=9)
def infer_scan(ctx: NodeContext, node: ir.Node) -> None:
    """Slices without the scan axis; the length is inserted at ``scan_output_axes``."""
    body, scans = _scan_attrs(ctx)
    states = ctx.num_inputs - scans
    outputs_count = _scan_counts(ctx, body, states, scans)
    input_axes = ctx.attr_ints("scan_input_axes", [0] * scans)
    output_axes = ctx.attr_ints("scan_output_axes", [0] * outputs_count)
    if len(input_axes) != scans or len(output_axes) != outputs_count:
        ctx.fail("scan_input_axes/scan_output_axes length does not match the inputs/outputs")
    slices: list[Shape | None] = []
    lengths: list[Dim] = []
    for m in range(scans):
        shape = ctx.input_shape(states + m)
        if shape is None:
            slices.append(None)
            continue
        if not shape:
            ctx.fail(f"scan input {m} is a scalar")
        axis = ctx.normalize_axis(input_axes[m], len(shape))
        lengths.append(shape[axis])
        slices.append(shape[:axis] + shape[axis + 1 :])
    length = _scan_length(lengths) if lengths else ctx.new_symbol("length")
    initial = [ctx.input_shape(k) for k in range(states)]
    dtypes = [ctx.input_dtype(i) for i in range(ctx.num_inputs)]
    state, outputs = _infer_carried(ctx, body, [], initial, slices, dtypes, 0)
    _set_state_outputs(ctx, state, body, 0, 0, lambda: length)
    body_outputs = graph_values(body.outputs)
    for j in range(outputs_count):
        source = body_outputs[states + j]
        per_iteration = outputs[states + j]
        shape = None
        if per_iteration is not None:
            axis = ctx.normalize_axis(output_axes[j], len(per_iteration) + 1)
            shape = (*per_iteration[:axis], length, *per_iteration[axis:])
        ctx.set_output(states + j, shape, ctx.ctx.dtype_of(source))


@register("", "Scan", since=8)
def infer_scan_8(ctx: NodeContext, node: ir.Node) -> None:
    """Opset 8: every input has a batch axis 0; scan inputs scan along axis 1."""
    body, scans = _scan_attrs(ctx)
    states = ctx.num_inputs - 1 - scans
    outputs_count = _scan_counts(ctx, body, states, scans)
    batches: list[Dim] = []
    lengths: list[Dim] = []
    slices: list[Shape | None] = []
    for m in range(scans):
        shape = ctx.input_shape(1 + states + m)
        if shape is None:
            slices.append(None)
            continue
        if len(shape) < 2:
            ctx.fail(f"scan input {m} needs batch and sequence axes, has rank {len(shape)}")
        batches.append(shape[0])
        lengths.append(shape[1])
        slices.append(shape[2:])
    initial: list[Shape | None] = []
    for k in range(states):
        shape = ctx.input_shape(1 + k)
        if shape is not None and not shape:
            ctx.fail(f"state {k} needs a batch axis")
        if shape is not None:
            batches.append(shape[0])
        initial.append(None if shape is None else shape[1:])
    batch = _scan_length(batches) if batches else ctx.new_symbol("batch")
    length = _scan_length(lengths) if lengths else ctx.new_symbol("length")
    dtypes = [ctx.input_dtype(1 + i) for i in range(states + scans)]
    state, outputs = _infer_carried(ctx, body, [], initial, slices, dtypes, 0)
    # With sequence_lens, batch entries run different numbers of iterations.
    steps = None if ctx.has_input(0) else length
    _set_state_outputs(ctx, state, body, 1, 0, lambda: steps, (batch,))
    body_outputs = graph_values(body.outputs)
    for j in range(outputs_count):
        source = body_outputs[states + j]
        per_iteration = outputs[states + j]
        shape = None if per_iteration is None else (batch, length, *per_iteration)
        ctx.set_output(states + j, shape, ctx.ctx.dtype_of(source))
