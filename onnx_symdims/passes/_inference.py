"""``SymbolicShapeInferencePass``: give every value of a model a sound symbolic shape.

How a model flows through the pass:

1. Every ``dim_param`` text (and every symbol in it) is reserved, so fresh symbols the
   engine mints never collide with a name of the model.
2. Graph inputs are read once (``parse_dim``; an empty dim becomes a fresh symbol).
   Initializers are read lazily (shape from the tensor, elements only for small integer
   tensors).
3. Nodes are visited in topological order. Each node goes to the hook registered for
   ``(domain, op_type, opset)``; without one, to ONNX's per-node inference
   (:mod:`onnx_symdims.ops._fallback`). A failing hook records an error diagnostic and
   leaves the node's outputs with unknown shapes.
4. Each output's inferred shape is merged with what the model declares and written as
   ``int`` or canonical ``ir.SymbolicDim`` text. Main-graph outputs are *anchors*
   (:mod:`onnx_symdims.shapes._anchors`): they keep their declared text and the merge
   records the equalities it implies; other declared shapes are merged by
   :mod:`onnx_symdims.shapes._merge` without recording anything.
5. Subgraphs (If branches, Loop/Scan bodies, model-local function bodies) are inferred
   by the hooks of the ops that carry them, with the enclosing values visible. Code
   there may not run, so no equality is recorded while inside one.

Per node, the hot paths read onnx-ir's slots (``node._inputs``, ``value._shape``,
``attr._type``...) rather than the properties that return them: a property read is a
Python call, about 600 machine instructions, and a node of a memoized layer costs a few
dozen reads. The slots are those of every onnx-ir release from 0.2.1 on;
``tests/engine/test_ir_slots.py`` checks that each property still returns its slot and
that the setters written through (``shape``, ``type``) only store it.
"""

from __future__ import annotations

__all__ = [
    "POLICIES",
    "Policy",
    "SymbolicShapeInferencePass",
    "SymbolicShapeInferenceResult",
]

import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

import onnx_ir as ir

from onnx_symdims import expr, ops
from onnx_symdims.passes._deep import SHALLOW, nesting_bound, run_deep
from onnx_symdims.passes._exporter_names import clear_exporter_output_names
from onnx_symdims.passes._gc import without_gc
from onnx_symdims.passes._model_dims import ModelSnapshot, topological_order
from onnx_symdims.shapes import (
    CONSTANT_INPUT_KEY,
    MISSING,
    Diagnostic,
    FactScope,
    IRDimWriter,
    NodeContext,
    NodeInferenceFailure,
    ShapeInferenceError,
    ShapesContext,
    declared_dims,
    graph_values,
    is_anonymous_dim_text,
    is_tool_minted_dim_text,
    merge_declared_shape,
    merge_with_anchor,
    new_ir_shape,
    new_tensor_type,
    node_subgraphs,
    read_int64_proto,
    same_ir_dims,
    tensor_dims,
    untracked_reads,
)

logger = logging.getLogger(__name__)


def _require_ir_slots() -> None:
    """Fails at import, with the reason, if onnx-ir no longer has the slots read below.

    A renamed slot would otherwise surface as an ``AttributeError`` deep in a node's
    inference (reads come before every write, so a shape is never silently unwritten).
    """
    needed = {
        ir.Node: ("_inputs", "_outputs", "_attributes", "_op_type", "_domain"),
        ir.Value: (
            "_shape",
            "_type",
            "_const_value",
            "_producer",
            "_is_graph_output",
            "_name",
            "_graph",
        ),
        ir.Attr: ("_type", "_value", "_ref_attr_name"),
        ir.Shape: ("_dims", "_frozen"),
        ir.TensorType: ("_dtype",),
        ir.SymbolicDim: ("_value",),
    }
    for cls, names in needed.items():
        slots = {name for base in cls.__mro__ for name in getattr(base, "__slots__", ())}
        missing = [name for name in names if name not in slots]
        if missing:
            raise ImportError(
                f"onnx-symdims reads onnx-ir's {cls.__name__} slots {missing}, which "
                f"onnx-ir {getattr(ir, '__version__', '?')} does not have: install an "
                "onnx-ir release that onnx-symdims supports"
            )


_require_ir_slots()

Dim = expr.Dim
Shape = tuple[Dim, ...]
Policy = Literal["refine", "strict", "override", "skip"]
POLICIES: tuple[str, ...] = ("refine", "strict", "override", "skip")
ProgressCallback = Callable[[int, int], None]
_LATEST_OPSET = 1000


_DEFAULT: object = object()  # "not given" for the result's optional fields


# The methods a plain ``@dataclasses.dataclass`` would generate are written out (same
# signature, repr and equality): generating them costs every process's first call (the
# cold start). It stays a dataclass (``dataclasses.fields`` works).
@dataclasses.dataclass(init=False, repr=False, eq=False)
class SymbolicShapeInferenceResult(ir.passes.PassResult):
    """The pass result, with the context holding every inferred fact.

    Attributes:
        context: The :class:`ShapesContext` (shapes, values, constraints, symbols).
        diagnostics: Diagnostics recorded during this run.
        snapshot: The model's nodes and values as walked by the pass (hand it to
            :class:`AnchorConstraintPropagationPass` to save a walk).
    """

    context: ShapesContext = dataclasses.field(default_factory=ShapesContext)
    diagnostics: list[Diagnostic] = dataclasses.field(default_factory=list)
    snapshot: ModelSnapshot | None = None

    def __init__(
        self,
        model: ir.Model,
        modified: bool,
        context: ShapesContext = _DEFAULT,  # type: ignore[assignment]
        diagnostics: list[Diagnostic] = _DEFAULT,  # type: ignore[assignment]
        snapshot: ModelSnapshot | None = None,
    ) -> None:
        self.model = model
        self.modified = modified
        self.context = ShapesContext() if context is _DEFAULT else context
        self.diagnostics = [] if diagnostics is _DEFAULT else diagnostics
        self.snapshot = snapshot

    def _fields(self) -> tuple:
        return (self.model, self.modified, self.context, self.diagnostics, self.snapshot)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, as a plain dataclass

    def __repr__(self) -> str:
        names = [f.name for f in dataclasses.fields(self)]
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({fields})"


class SymbolicShapeInferencePass(ir.passes.InPlacePass):
    """Infers symbolic shapes for every value of the model, in place.

    Args:
        policy: How inferred shapes meet declared ones: ``"refine"`` (default) keeps
            declared information that inference does not contradict and adds what is
            inferred (a provably false declared shape is replaced, with a warning);
            ``"override"`` writes the inferred shape over declared intermediate
            shapes; ``"skip"`` leaves values that already have a shape untouched.
            ``"strict"`` is ``"refine"`` with ``strict=True``. Graph outputs keep
            their declared dim text unless it is provably false.
        strict: Any ``error`` diagnostic, and any conflict between a declared and
            the inferred shape or type, raises :class:`ShapeInferenceError` naming
            the node.
        context: A :class:`ShapesContext` to use (and fill); a new one by default.
        progress: Called as ``progress(done, total)`` while walking the main graph.
        nonempty_inputs: Assume every symbol of a graph input's dims is ``>= 1``
            (the model never runs on empty inputs). Off by default: ONNX semantics
            differ at 0 (a ``Reshape`` target element 0 copies a dim), so several
            dims are only exact under this assumption. The written dims then hold for
            every run with non-empty inputs.
        symbol_ranges: Known ``(lower, upper)`` bounds of symbols (``None``: open),
            e.g. ``{"seq_len": (1, 4096)}``.
        value_info_anchors: Also treat the main graph's declared ``value_info`` shapes
            as anchors (their equalities with the inferred shapes are recorded).
        constant_initializers: Treat an initializer that is also a graph input as a
            constant (its shape and small integer contents are facts), for users who
            never feed those inputs. Models of IR version < 4 get this always: there
            every initializer must be listed as an input, and those are weights.
        known_nodes: Nodes whose outputs' facts ``context`` already holds, from an
            earlier run over this model (incremental inference, for a pipeline that
            rewrites the model between runs): only the other nodes are inferred, and
            graph inputs and names are not read again. The facts of a known node stay
            valid only if every rewrite since kept the meaning of every value it left
            in the model (a rewrite that changes what a value computes must create a
            new node). A known node whose subgraph has a new node is inferred again.
            Needs ``context``.
    """

    def __init__(
        self,
        policy: Policy = "refine",
        *,
        strict: bool = False,
        context: ShapesContext | None = None,
        progress: ProgressCallback | None = None,
        nonempty_inputs: bool = False,
        symbol_ranges: Mapping[str, tuple[int | None, int | None]] | None = None,
        value_info_anchors: bool = False,
        constant_initializers: bool = False,
        known_nodes: Collection[ir.Node] | None = None,
    ) -> None:
        super().__init__()
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if known_nodes is not None and context is None:
            raise ValueError("known_nodes needs the context that holds their facts")
        # One notion of strict: policy="strict" is refine with strict=True.
        self.policy = "refine" if policy == "strict" else policy
        self.strict = strict or policy == "strict"
        self.context = context
        self.progress = progress
        self.nonempty_inputs = nonempty_inputs
        self.symbol_ranges = checked_symbol_ranges(symbol_ranges)
        self.value_info_anchors = value_info_anchors
        self.constant_initializers = constant_initializers
        self.known_nodes = known_nodes

    def call(self, model: ir.Model) -> SymbolicShapeInferenceResult:
        with without_gc():
            return self.call_without_gc(model)

    def call_without_gc(self, model: ir.Model) -> SymbolicShapeInferenceResult:
        """:meth:`call` for a caller that has disabled the cyclic collector already."""
        # TorchScript's invented output dim names declare nothing (before the snapshot,
        # which records the declared dims).
        cleared = clear_exporter_output_names(model) if _has_axis_suffix(model) else 0
        # The snapshot's walk also finds the nesting bound (no walk of its own).
        snapshot = ModelSnapshot.of(model)
        bound = snapshot.nesting
        if bound is None:
            bound = nesting_bound(model)
        # Deeply nested valid models (hundreds of nested Ifs or function calls) get the
        # stack they need; others run here as they are (run_deep's shallow case, without
        # its call and the closure: every small model's call pays for those).
        if bound <= SHALLOW:
            result = self._call(model, snapshot)
        else:
            result = run_deep(lambda: self._call(model, snapshot), bound)
        if cleared:
            result.modified = True
        return result

    def _call(
        self, model: ir.Model, snapshot: ModelSnapshot | None = None
    ) -> SymbolicShapeInferenceResult:
        ctx = self.context if self.context is not None else ShapesContext()
        first_diagnostic = len(ctx.diagnostics)
        previous_strict = ctx.strict
        ctx.strict = self.strict
        # _mark_constant_inputs' test, inline: models of IR version >= 4 mark nothing
        # unless asked (every model's call, and a call of its own costs ~1k instructions).
        ir_version = model.ir_version
        marked = (
            _mark_constant_inputs(model, ctx, self.constant_initializers)
            if self.constant_initializers or (ir_version is not None and ir_version < 4)
            else ()
        )
        try:
            engine = InferenceEngine(
                model, ctx, self.policy, self.progress, self.value_info_anchors
            )
            engine.prepare(snapshot, reserve_names=self.known_nodes is None)
            if self.nonempty_inputs:
                for name in _input_symbols(model.graph, ctx):
                    ctx.scope.set_range(name, lower=1)
            if self.symbol_ranges:
                known = _model_symbols(engine.snapshot, ctx)
            for name, (lower, upper) in self.symbol_ranges.items():
                # A range may name an input's opaque text ("batch size"): its symbol.
                named = ctx.opaque_dim_names.get(name, name)
                if named not in known:
                    ctx.add_diagnostic(
                        None,
                        "warning",
                        f"symbol range {name!r}: no declared dim of the model uses "
                        f"{name!r}; the range constrains nothing",
                    )
                ctx.scope.set_range(named, lower=lower, upper=upper)
            engine.run(self.known_nodes)
        finally:
            ctx.strict = previous_strict
            for value in marked:
                value.meta.pop(CONSTANT_INPUT_KEY, None)
        return SymbolicShapeInferenceResult(
            model, engine.modified, ctx, ctx.diagnostics[first_diagnostic:], engine.snapshot
        )


def checked_symbol_ranges(
    ranges: Mapping[str, tuple[int | None, int | None]] | None,
) -> dict[str, tuple[int | None, int | None]]:
    """``ranges`` as a dict, each ``(lower, upper)`` with ``0 <= lower <= upper``.

    An empty range promises nothing, yet every proof would take it as a fact (``(5, 1)``
    made a slice of up to 3 elements ``[0]``), and a malformed one (the text ``"1:"``)
    would be read as something else.

    Raises:
        TypeError: a range is not a pair of ints or ``None``.
        ValueError: a range outside ``0 <= lower <= upper``.
    """
    checked = {}
    for name, bounds in (ranges or {}).items():
        if (
            not isinstance(bounds, (tuple, list))
            or len(bounds) != 2
            or not all(
                b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in bounds
            )
        ):
            raise TypeError(
                f"symbol_ranges[{name!r}] = {bounds!r}: expected (lower, upper), ints or None"
            )
        lower, upper = bounds
        if (lower is not None and lower < 0) or (
            upper is not None and (upper < 0 or (lower is not None and lower > upper))
        ):
            raise ValueError(
                f"symbol_ranges[{name!r}] = {(lower, upper)}: expected 0 <= lower <= upper"
            )
        checked[name] = (lower, upper)
    return checked


def _has_axis_suffix(model: ir.Model) -> bool:
    """Whether a dim text of a main-graph output contains ``_dim_``.

    Every name :func:`clear_exporter_output_names` clears does (``{op}{output}_dim_{axis}``):
    the usual model has none, and this check reads slots only.
    """
    for value in graph_values(model.graph.outputs):
        shape = value._shape
        if shape is not None:
            for d in shape._dims:
                if d.__class__ is not int and not isinstance(d, int):
                    text = d._value
                    if text and "_dim_" in text:
                        return True
    return False


def _has_new_inner_node(node: ir.Node, known: Collection[ir.Node]) -> bool:
    """True when a subgraph of ``node`` (at any depth) has a node not in ``known``."""
    pending = list(node_subgraphs(node))
    while pending:
        graph = pending.pop()
        for inner in graph:
            if inner not in known:
                return True
            pending.extend(node_subgraphs(inner))
    return False


def _mark_constant_inputs(model: ir.Model, ctx: ShapesContext, always: bool) -> list[ir.Value]:
    """Marks the initializer-backed graph inputs that are constants for this run.

    In IR version < 4 every initializer must also be a graph input: those are the
    model's weights, not runtime inputs. From IR 4 on such an input is an overridable
    default, a constant only when the user says so (``constant_initializers``).
    """
    if not always and (model.ir_version is None or model.ir_version >= 4):
        return []
    marked = []
    for value in model.graph.inputs:
        if value.const_value is not None and not value.meta.get(CONSTANT_INPUT_KEY):
            value.meta[CONSTANT_INPUT_KEY] = True
            ctx.constant_inputs.add(value)
            marked.append(value)
    return marked


def _model_symbols(snapshot: ModelSnapshot | None, ctx: ShapesContext) -> set[str]:
    """The symbol names of every declared dim of the model (ranges may name them)."""
    names: set[str] = set()
    for value in snapshot.values if snapshot is not None else ():
        for text in _dim_params(value.shape):
            names.update(ctx.text_symbols(text))
    return names


def _input_symbols(graph: ir.Graph, ctx: ShapesContext) -> set[str]:
    names: set[str] = set()
    for value in graph.inputs:
        for text in _dim_params(value.shape):
            names.update(ctx.text_symbols(text))
    return names


def _dim_params(shape: ir.Shape | None) -> list[str]:
    if shape is None:
        return []
    return [d.value for d in shape.dims if not isinstance(d, int) and d.value]


def _declares_nothing(d: int | ir.SymbolicDim, ctx: ShapesContext) -> bool:
    """An empty or anonymous (``?``) ``dim_param``, or a negative ``dim_value``.

    Also text that reads as a negative int (``-1``) or as nothing usable: what
    :func:`~onnx_symdims.shapes._anchors.declared_dims` reads as declaring nothing.
    """
    if isinstance(d, int):
        return d < 0
    text = d._value  # the slot: every declared dim
    if not text or is_anonymous_dim_text(text):
        return True
    parsed = ctx.read_dim_text(text)
    if isinstance(parsed, int):
        return parsed < 0
    return parsed.is_unknown


def _empty_or_exact(
    declared: Sequence[int | ir.SymbolicDim], inferred: Shape | None, ctx: ShapesContext
) -> list[bool] | None:
    """Which declared dims declare nothing, when each other one reads as the inferred dim.

    E.g. ``[N, ?, 4]`` for ``(N, 2*T, 4)``: ``[False, True, False]``. ``None`` when some
    declared dim differs from the inferred one (or the ranks do), which takes the full
    merge. Nothing in the ``[False, True, False]`` case is recorded, minted or said.
    """
    if inferred is None or len(declared) != len(inferred):
        return None
    empty = []
    for old, inf in zip(declared, inferred):
        if isinstance(old, int):
            if isinstance(inf, int) and old == inf:
                empty.append(False)
            elif old < 0:
                empty.append(True)  # some producers' "unknown"
            else:
                return None
            continue
        text = old._value  # the slot: every declared dim
        if not text or is_anonymous_dim_text(text):
            empty.append(True)
            continue
        read = ctx.read_dim_text(text)  # cached: every declared text was read before
        if read is inf or (isinstance(read, int) and isinstance(inf, int) and read == inf):
            empty.append(False)
        elif read < 0 if isinstance(read, int) else read.is_unknown:
            empty.append(True)  # text such as "-1": declares nothing either
        else:
            return None
    return empty


def _declared_written(
    declared: ir.Shape,
    inferred: Shape | None,
    anchor: bool,
    ctx: ShapesContext,
    writer: IRDimWriter,
) -> list[int | ir.SymbolicDim] | None:
    """The dims the ``refine`` merge writes on ``declared``, when it only fills or keeps.

    That is when each declared dim is the inferred int, text that reads as the inferred
    (symbolic) dim, or a dim that declares nothing (empty, ``?``, on a non-anchor a name
    another tool minted: ``unk__N``, ``Flatten_35_o0__d0``; a negative int): the merge
    (:func:`merge_declared_shape`) then keeps the
    inferred dims downstream, finds no conflict, counts no use of the declaration and
    writes the inferred dim where nothing is declared and, on a non-anchor, the
    canonical spelling of each dim (an anchor keeps its text). ``None``: any other case,
    which takes the merge.
    """
    if inferred is None:
        return None
    dims = declared._dims  # the slot (read, never changed)
    if len(dims) != len(inferred):
        return None
    written: list[int | ir.SymbolicDim] = []
    for old, inf in zip(dims, inferred):
        if isinstance(old, int):
            if old < 0:
                written.append(writer.dim(inf))  # some producers' "unknown"
            elif isinstance(inf, int) and old == inf:
                written.append(old)
            else:
                return None
            continue
        text = old._value  # the slot: every declared dim
        if (
            not text
            or is_anonymous_dim_text(text)
            or (not anchor and is_tool_minted_dim_text(text))
        ):
            written.append(writer.dim(inf))
            continue
        read = ctx.read_dim_text(text)
        if isinstance(read, int) and read < 0:
            written.append(writer.dim(inf))  # text such as "-1"
        elif read is inf and not isinstance(inf, int):
            written.append(old if anchor else writer.dim(inf))
        else:
            return None
    return written


_SCALAR_ATTRIBUTES = frozenset(
    {ir.AttributeType.INT, ir.AttributeType.FLOAT, ir.AttributeType.STRING}
)
_LIST_ATTRIBUTES = frozenset(
    {ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS}
)


#: Tuples of dims -> whether each is an int or a bare symbol (_all_plain): a property of
#: the tuple alone (dims are immutable), and layers repeat their shapes, so one lookup
#: replaces a check per dim.
_PLAIN: dict[tuple, bool] = {}


def _all_plain(dims: Sequence[Dim]) -> bool:
    """True when every dim is an int or a bare symbol (nothing to refine or record)."""
    tupled = dims.__class__ is tuple
    if tupled:
        found = _PLAIN.get(dims)  # type: ignore[call-overload]
        if found is not None:
            return found
    plain = True
    for d in dims:
        if d.__class__ is int or isinstance(d, int):
            continue
        if not d.is_symbol:
            plain = False
            break
    if tupled:
        if len(_PLAIN) > 100_000:
            _PLAIN.clear()
        _PLAIN[dims] = plain  # type: ignore[index]
    return plain


_TENSOR_ATTRIBUTE = ir.AttributeType.TENSOR
_TENSOR_TYPE = ir.TensorType
#: Whether new_tensor_type sets the two slots of a bare object (not the class's own
#: constructor, when that builds something else): the per-output loop then does it inline.
_FAST_TENSOR_TYPE = new_tensor_type is not ir.TensorType
_new_object = object.__new__
_INT64 = ir.DataType.INT64
_UNDEFINED = ir.DataType.UNDEFINED


#: The model's imports (sorted items) -> its dispatch table, valid for the registry version
#: and lookup function in _DISPATCH_STATE: a lookup depends on the registry and the opset
#: alone, and most processes infer models of one or a few imports, so each run would
#: otherwise look up every op type again. (A replaced ``ops.lookup``, as tests patch it,
#: drops the tables like a registration.)
_DISPATCH_TABLES: dict[
    tuple, dict[str | tuple[str, str], tuple[ops.Hook | None, int | None]]
] = {}
_DISPATCH_STATE: list[object] = [None]


def _shared_dispatch(
    opsets: dict[str, int],
) -> dict[str | tuple[str, str], tuple[ops.Hook | None, int | None]]:
    """The dispatch table shared by every run over models importing ``opsets``."""
    state = (ops.registry_version(), ops.lookup)
    if state != _DISPATCH_STATE[0] or len(_DISPATCH_TABLES) >= 64:
        _DISPATCH_TABLES.clear()  # a hook was registered since: answers may change
        _DISPATCH_STATE[0] = state
    key = tuple(sorted(opsets.items())) if len(opsets) > 1 else tuple(opsets.items())
    table = _DISPATCH_TABLES.get(key)
    if table is None:
        table = _DISPATCH_TABLES[key] = {}
    return table


def _stamp(ctx: ShapesContext) -> int:
    """Moves whenever a hook does more than set its outputs from its inputs' facts.

    A sum of counters that only grow: it is unchanged exactly when none moved.
    """
    return ctx.mutations + ctx.scope.version + untracked_reads() + expr.unknowns_made()


#: Misses of an op type's memo before deciding whether its keys repeat. Keys of a layered
#: model start repeating only from its second layer on, and a layer may hold dozens of
#: nodes of one type (a TorchScript decoder: ~27 Slice and ~21 Gather per layer, all
#: distinct in the first layer, 90 % hits after): deciding after 32 misses switched
#: those off for good. A chain of distinct shapes pays for 128 keys per op type.
_MEMO_TRIAL = 128


class InferenceEngine:
    """Walks a model's graphs, dispatching nodes to hooks and writing results.

    Also implements the hand-off API of :class:`NodeContext` (``fallback`` and
    ``infer_subgraph``), which hooks for control-flow ops use.

    Attributes:
        memoize: Reuse a hook's result for a node with the same op, attributes and
            input facts as an earlier one (see :meth:`_memo_key`); results are the
            same either way, only faster (tests turn it off to check that).
        memo_min_nodes: Memoize only in models whose main graph has at least this many
            nodes. The memo pays off through repeated layers; in smaller models most
            nodes are distinct and computing keys costs more than the hits save
            (measured: ~15 % slower on 120-500-node exported models, 30 % faster on
            a 3k-node decoder).
        constant_fast_path: Infer the usual ``Constant`` nodes inline (see
            :meth:`_constant_fast_path`); results are the same either way.
    """

    memoize = True
    memo_min_nodes = 1000
    #: Infer int64 ``Constant`` nodes inline (:meth:`_constant_fast_path`); same results
    #: as the hook (tests turn it off to check that).
    constant_fast_path = True

    def __init__(
        self,
        model: ir.Model,
        ctx: ShapesContext,
        policy: str = "refine",
        progress: ProgressCallback | None = None,
        value_info_anchors: bool = False,
    ) -> None:
        self.model = model
        self.value_info_anchors = value_info_anchors
        self.ctx = ctx
        self.policy = policy
        self.progress = progress
        self.modified = False
        self._writer = IRDimWriter()
        # ONNX's per-node inference, made on first use (most models send it no node).
        self._onnx_fallback: ops.OnnxFallback | None = None
        self._functions = model.functions
        # The model's imports, "ai.onnx" read as "" (most models do not spell it: a copy).
        imports = model.graph.opset_imports
        self._opsets = (
            {ops.normalize_domain(domain): version for domain, version in imports.items()}
            if "ai.onnx" in imports
            else dict(imports)
        )
        self.snapshot: ModelSnapshot | None = None
        # The tables below that most runs never use are made on first use (a small
        # model's call pays for each table it makes).
        # _memo_key(...) -> [the facts of the node's outputs, settled] (see _replay);
        # the memo tables are made by prepare, when the model is large enough.
        self._memo: dict[tuple, list]
        self._memo_hits: dict[str, int]
        self._memo_misses: dict[str, int]
        self._memo_off: set[str]  # op types whose keys do not repeat
        self._memo_on = False  # memoize, and the model is large enough (see prepare)
        # (inferred, declared texts, what, depth) -> merged anchor dims (_commit_anchor)
        self._anchor_memo: dict[tuple, tuple[Dim, ...]] | None = None
        # op_type (default domain) or (domain, op_type) -> (hook, opset): shared by the
        # runs over models with the same imports (see _shared_dispatch)
        self._dispatch_cache = _shared_dispatch(self._opsets)
        # compound dim -> the scope version after it was last noted >= 0 (see
        # _note_compound_dims), valid for _noted_scope (made with it)
        self._noted: dict[expr.DimExpr, int]
        self._noted_scope: object = None
        # shape -> (scope version, the shape settled then), elements -> (scope version,
        # the elements refined then), valid for _settled_scope (made with it, see
        # _settle_refining)
        self._settled: dict[Shape, tuple[int, Shape]]
        self._refined: dict[Shape, tuple[int, Shape]]
        self._settled_scope: object = None
        # subgraph -> its nodes in topological order, when the sort found no problem:
        # a loop body is walked once per probing round, and inference never changes a
        # graph's nodes, so the order (and the check that it is one) is found once.
        self._subgraph_orders: dict[ir.Graph, list[ir.Node]] | None = None

    # ------------------------------------------------------------------------------------
    def prepare(
        self, snapshot: ModelSnapshot | None = None, reserve_names: bool = True
    ) -> None:
        """Walks the model once and reserves its names (:meth:`run` does it if needed).

        ``snapshot``: a :class:`ModelSnapshot` of this model taken just before (saves
        the walk). ``reserve_names=False``: the context has them from an earlier run.
        """
        if self.snapshot is not None:
            return
        if snapshot is None or snapshot.model is not self.model:
            snapshot = ModelSnapshot.of(self.model)
        self.snapshot = snapshot
        if self.memoize and len(snapshot.main_nodes) >= self.memo_min_nodes:
            self._memo_on = True
            self._memo = {}
            self._memo_hits = {}
            self._memo_misses = {}
            self._memo_off = set()
        if reserve_names:
            self._reserve_model_names()

    def run(self, known: Collection[ir.Node] | None = None) -> None:
        """Infers the main graph; with ``known``, only its nodes not in ``known``.

        ``known``: nodes whose outputs' facts the context holds from an earlier run
        (see ``known_nodes`` of :class:`SymbolicShapeInferencePass`); the graph inputs
        are then not read again.
        """
        snapshot = self.snapshot
        if snapshot is None:
            self.prepare()
            snapshot = self.snapshot
        graph = self.model.graph
        if known is None:
            self._seed_inputs(graph, None, None)
            if snapshot.main_sorted:  # what _walk does then: no sort, no problem to say
                self._walk_nodes(snapshot.main_nodes, self.progress)
            else:
                self._walk(graph, self.progress, snapshot.main_nodes)
            return
        order = topological_order(graph, snapshot.main_nodes, snapshot.main_sorted)
        new = [
            node
            for node in order
            if node not in known or (snapshot.nested and _has_new_inner_node(node, known))
        ]
        self._walk(graph, self.progress, new, presorted=True)

    def _reserve_model_names(self) -> None:
        texts: set[str] = set()
        add = texts.add
        for value in self.snapshot.values:
            shape = value._shape  # slots, not properties: every value of the model
            if shape is not None:
                for d in shape._dims:  # _dim_params(shape), inline
                    if d.__class__ is not int and not isinstance(d, int):
                        text = d._value
                        if text:
                            add(text)
        self.ctx.reserve_model_texts(texts)

    def _seed_inputs(
        self,
        graph: ir.Graph,
        shapes: Sequence[Shape | None] | None,
        dtypes: Sequence[ir.DataType | None] | None,
    ) -> None:
        ctx = self.ctx
        facts = graph is self.model.graph and not ctx.conditional_depth
        constants = ctx.constant_inputs
        # ctx.set_shape, set_value and _note_dims, inline: every input of every graph
        # walked (loop bodies once per probing round).
        table = ctx._shapes
        dtype_table = ctx._dtypes
        values = ctx._values
        for i, value in enumerate(graph_values(graph.inputs)):
            if constants and shapes is None and value in constants:
                # A weight listed as an input (old IR): its tensor is the fact.
                tensor = value.const_value
                ctx.set_shape(value, tensor_dims(tensor))
                ctx.set_dtype(value, tensor.dtype)
                ctx.value_of(value)  # small integer contents, read once
                continue
            if shapes is not None and i < len(shapes):
                given = shapes[i]
                shape = table[value] = None if given is None else tuple(given)
            elif value._shape is not None:  # the slots: every graph input
                # dims_from_ir returns a tuple (or None), as set_shape stores it.
                shape = table[value] = ctx.dims_from_ir(value._shape, value._name or f"in{i}")
            else:
                ctx.set_shape(value, ctx.read_declared_shape(value))
                shape = table[value]
            if dtypes is not None and i < len(dtypes):
                dtype = dtypes[i]
                if dtype is not None:
                    dtype_table[value] = dtype  # set_dtype, inline
            # A graph input may be fed at runtime even if an initializer backs it.
            values[value] = None
            if facts and shape is not None and not (_PLAIN.get(shape) or _all_plain(shape)):
                self._note_compound_dims(shape)

    def _walk(
        self,
        graph: ir.Graph,
        progress: ProgressCallback | None = None,
        nodes: list[ir.Node] | None = None,
        presorted: bool = False,
    ) -> None:
        problems: list[tuple[ir.Node, str]] = []
        nodes = topological_order(graph, nodes, presorted, problems)
        for node, message in problems:  # strict mode raises at the first
            self.ctx.add_diagnostic(node, "error", f"invalid graph: {message}")
        self._walk_nodes(nodes, progress)

    def _walk_nodes(
        self, nodes: list[ir.Node], progress: ProgressCallback | None = None
    ) -> None:
        node_ctx = NodeContext(self.ctx, self)
        if progress is None:  # the usual call: nothing to count
            self._infer_nodes(node_ctx, nodes)
            return
        total = len(nodes)
        step = max(total // 100, 1)
        # In runs of ``step`` nodes: progress is told after every ``step``-th and the last.
        for start in range(0, total, step):
            self._infer_nodes(node_ctx, nodes[start : start + step])
            progress(min(start + step, total), total)

    # ------------------------------------------------------------------------------------
    def _dispatch(self, domain: str, op_type: str) -> tuple[ops.Hook | None, int | None]:
        """The hook and opset for ``(domain, op_type)`` in this model (cached per model)."""
        # The default domain is keyed by the op type alone (no tuple to build and hash);
        # a string key never equals a tuple key.
        cache_key = (domain, op_type) if domain else op_type
        found = self._dispatch_cache.get(cache_key)
        if found is None:
            opset = self._opsets.get(domain)
            if opset is None:
                opset = self._opsets.get(ops.normalize_domain(domain))
            found = (ops.lookup(domain, op_type, opset), opset)
            self._dispatch_cache[cache_key] = found
        return found

    def _infer_nodes(self, node_ctx: NodeContext, nodes: Sequence[ir.Node]) -> None:
        """Infers ``nodes`` in order: dispatch, the hook, then settle and commit outputs.

        One loop for a graph's nodes rather than a call per node: the engine's and the
        context's tables are read once per walk, not once per node, and neither the
        per-node call nor the commit's is made (together ~1k instructions a node). The
        tables read once are never replaced during a run (only filled); what a hook may
        change (the scope's version, the depth, the non-tensor types) is read per node.
        """
        ctx = self.ctx
        functions = self._functions
        dispatch_cache = self._dispatch_cache
        memo_on = self._memo_on
        # The Constant fast path (see _constant_fast_path), for a Constant with a hook.
        constant = self._constant_fast_path if self.constant_fast_path else None
        shapes = ctx._shapes
        dtypes = ctx._dtypes
        values = ctx._values
        writer = self._writer
        written = writer._shapes
        for node in nodes:
            # The slots behind onnx-ir's properties (see the module docstring).
            domain = node._domain
            op_type = node._op_type
            function = functions.get(node.op_identifier()) if functions else None
            # _dispatch's hit, inline
            found = dispatch_cache.get((domain, op_type) if domain else op_type)
            if found is None:
                found = self._dispatch(domain, op_type)
            if function is None:
                hook, opset = found
                if (
                    constant is not None
                    and op_type == "Constant"
                    and hook is not None
                    and not domain
                    and constant(node)
                ):
                    continue
            else:
                hook, opset = None, found[1]
            key = None
            if (
                memo_on
                and hook is not None
                and not ctx.conditional_depth
                and op_type not in self._memo_off
            ):
                key = self._memo_key(node, opset)
                if key is not None:
                    entry = self._memo.get(key)
                    if entry is not None:
                        self._memo_hits[op_type] = self._memo_hits.get(op_type, 0) + 1
                        self._replay(node, entry)
                        continue
                    stamp = _stamp(ctx)
                    self._count_miss(op_type)
            outputs = node._outputs
            # node_ctx.reset(node, opset), inline (once per node). A domain the model
            # does not import: the latest hook, seen as the latest opset.
            node_ctx.node = node
            node_ctx.opset = opset if opset is not None else _LATEST_OPSET
            node_ctx._inputs = node._inputs
            node_ctx._outputs = outputs
            node_ctx._hint = None
            try:
                if function is not None:
                    ops.infer_function_call(node_ctx, node, function)
                elif hook is None:
                    self.fallback(node_ctx)
                else:
                    hook(node_ctx, node)
            except NodeInferenceFailure as e:
                key = None
                self._forget_outputs(node)
                ctx.add_diagnostic(node, "error", str(e))
            except ShapeInferenceError:
                raise
            except Exception as e:  # a bug in a hook must not stop the whole model
                key = None
                logger.debug("hook for %s failed", node.op_type, exc_info=True)
                self._forget_outputs(node)
                ctx.add_diagnostic(
                    node, "error", f"internal error in shape hook: {type(e).__name__}: {e}"
                )
                if hook is not None:
                    self._fallback_after_bug(node_ctx)
            if key is not None and stamp == _stamp(ctx):
                self._memo[key] = [tuple(ctx.facts_of(value) for value in outputs), False]
            # Settle the outputs, then commit each (what _settle and _commit do), inline.
            # Usual: at depth 0 under a FactScope. Before any fact is recorded (nothing
            # to refine), settling reduces to noting compound dims, done here without a
            # call per output; after, _settle_refining reuses what it settled before.
            scope = ctx.scope
            if ctx.conditional_depth or scope.__class__ is not FactScope:
                if ctx.conditional_depth and scope.__class__ is FactScope:
                    # In a subgraph (_settle notes nothing there): only a shape or
                    # elements with a compound dim, under some fact, has something to
                    # refine; plain tuples (known to _PLAIN) are passed over without the
                    # call. (Tested here, not before the main graph's test: every node.)
                    if scope.version:
                        for value in outputs:
                            shape = shapes.get(value)
                            elements = values.get(value)
                            if (shape is not None and not _PLAIN.get(shape)) or (
                                elements is not None and not _PLAIN.get(elements)
                            ):
                                self._settle(node, outputs)
                                break
                else:
                    self._settle(node, outputs)
            elif scope.version:
                # _settle_refining's usual case, inline: one output whose shape and
                # elements (if any) were settled at this scope version already.
                version = scope.version
                if len(outputs) == 1 and scope is self._settled_scope:
                    value = outputs[0]
                    shape = shapes.get(value)
                    hit = None if shape is None else self._settled.get(shape)
                    elements = values.get(value)
                    found = None if elements is None else self._refined.get(elements)
                    if (shape is None or (hit is not None and hit[0] == version)) and (
                        elements is None or (found is not None and found[0] == version)
                    ):
                        if hit is not None and hit[1] is not shape:
                            shapes[value] = hit[1]
                        if found is not None and found[1] is not elements:
                            values[value] = found[1]
                    else:
                        self._settle_refining(outputs, scope)
                else:
                    self._settle_refining(outputs, scope)
            else:
                for value in outputs:  # _settle without refining: note the compound dims
                    shape = shapes.get(value)
                    if shape is not None and not (_PLAIN.get(shape) or _all_plain(shape)):
                        self._note_compound_dims(shape)
            # per node: a hook may record the run's first non-tensor type, and the
            # context makes that table on its first entry
            if ctx._other_types:
                for value in outputs:
                    self._commit(node, value)
                continue
            # _commit_outputs, inline: its common case is nothing declared (no shape, no
            # type) and only tensor types in the run.
            for value in outputs:
                if value._shape is not None or value._type is not None:
                    self._commit(node, value)
                    continue
                inferred = shapes.get(value)
                if inferred is None:
                    shapes[value] = None  # set_shape(value, None)
                dtype = dtypes.get(value)
                if dtype is None:
                    # No shape without a type: it is no valid value_info (onnx-ir 0.2
                    # writes one without a type, which onnx's checker refuses; later
                    # releases drop it).
                    continue
                # The setters' slots (an ir.Shape, a type): the setters' checks hold.
                if inferred is not None:
                    shape = written.get(inferred)
                    value._shape = writer.shape(inferred) if shape is None else shape
                if _FAST_TENSOR_TYPE:  # new_tensor_type(dtype), without its call
                    type_ = _new_object(_TENSOR_TYPE)
                    type_._dtype = dtype
                    type_.denotation = None
                    value._type = type_
                else:
                    value._type = new_tensor_type(dtype)
                self.modified = True

    def _settle_refining(self, outputs: Sequence[ir.Value], scope: FactScope) -> None:
        """:meth:`_settle` at depth 0 under a :class:`FactScope` of version > 0.

        Settling a shape (refining it, then noting its dims) or refining elements is a
        pure function of the tuple and the scope's facts, which the scope's version
        fixes: a tuple settled at a version without adding a fact settles to the same
        tuple again and adds nothing. ``_settled`` (shapes) and ``_refined`` (elements)
        keep ``tuple -> (version, result)`` for such tuples, so layers repeating a shape
        pay one lookup for it. Both hold for one scope.
        """
        if scope is not self._settled_scope:
            self._settled = {}
            self._refined = {}
            self._settled_scope = scope
        ctx = self.ctx
        shapes = ctx._shapes
        values = ctx._values
        settled = self._settled
        refined = self._refined
        for value in outputs:
            version = scope.version
            shape = shapes.get(value)
            noted = None
            if shape is not None:
                hit = settled.get(shape)
                if hit is not None and hit[0] == version:
                    if hit[1] is not shape:
                        shapes[value] = hit[1]
                elif _all_plain(shape):
                    if len(settled) > 100_000:
                        settled.clear()
                    settled[shape] = (version, shape)  # nothing to refine or note
                else:
                    noted = ctx.refine_dims(shape)
                    if noted is not shape:
                        shapes[value] = noted
            elements = values.get(value)
            if elements is not None:
                now = scope.version
                hit = refined.get(elements)
                if hit is not None and hit[0] == now:
                    if hit[1] is not elements:
                        values[value] = hit[1]
                else:
                    new = elements if _all_plain(elements) else ctx.refine_dims(elements)
                    if new is not elements:
                        values[value] = new
                    if scope.version == now:
                        if len(refined) > 100_000:
                            refined.clear()
                        refined[elements] = (now, new)
            if noted is None:
                continue
            # After the elements, as in _settle (a fact noted here is one they miss).
            if noted is shape or not _all_plain(noted):
                self._note_compound_dims(noted)
            if scope.version == version:
                if len(settled) > 100_000:
                    settled.clear()
                settled[shape] = (version, noted)

    def _commit_outputs(self, node: ir.Node, outputs: Sequence[ir.Value]) -> None:
        """:meth:`_commit` of each output; the usual one inline.

        Usual: nothing declared (no shape, no type) and only tensor types in the run.
        """
        ctx = self.ctx
        if ctx._other_types:
            for value in outputs:
                self._commit(node, value)
            return
        shapes = ctx._shapes
        written = self._writer._shapes
        dtypes = ctx._dtypes
        for value in outputs:
            if value._shape is not None or value._type is not None:
                self._commit(node, value)
                continue
            # _commit's common case: nothing declared, a plain tensor type.
            inferred = shapes.get(value)
            if inferred is None:
                shapes[value] = None  # set_shape(value, None)
            dtype = dtypes.get(value)
            if dtype is None:
                # No shape without a type: it is no valid value_info (onnx-ir 0.2 writes
                # one without a type, which onnx's checker refuses; later releases drop it).
                continue
            # The setters' slots (an ir.Shape, a type): the setters' checks hold.
            if inferred is not None:
                shape = written.get(inferred)
                value._shape = self._writer.shape(inferred) if shape is None else shape
            if _FAST_TENSOR_TYPE:  # new_tensor_type(dtype), without its call
                type_ = _new_object(_TENSOR_TYPE)
                type_._dtype = dtype
                type_.denotation = None
                value._type = type_
            else:
                value._type = new_tensor_type(dtype)
            self.modified = True

    def _constant_fast_path(self, node: ir.Node) -> bool:
        """Infers the usual ``Constant`` (an int64 ``value`` tensor) without the framework.

        Exported models carry thousands of them (TorchScript writes one per literal).
        Exactly what the ``Constant`` hook, :meth:`_settle` and :meth:`_commit` do for
        such a node: int dims and elements leave nothing to refine or record, and the
        hook never mints, records or reads anything else. ``False``: nothing was done,
        the node takes the general path.
        """
        attributes = node._attributes.data
        outputs = node._outputs
        if len(attributes) != 1 or not outputs:
            return False
        attr = attributes.get("value")
        # The slots (attr.is_ref(): two calls): every Constant of the model.
        if (
            attr is None
            or attr._type is not _TENSOR_ATTRIBUTE
            or attr._ref_attr_name is not None
        ):
            return False
        read = read_int64_proto(attr._value)
        if read is None:
            return False
        dims, elements = read
        for d in dims:
            if d < 0:
                return False  # the hook fails the node
        value = outputs[0]
        ctx = self.ctx
        ctx._shapes[value] = dims
        ctx._dtypes[value] = _INT64
        ctx._values[value] = elements
        if len(outputs) == 1 and value._shape is None and value._type is None:
            # _commit's common case, inline: nothing declared, a plain tensor type.
            shape = self._writer._shapes.get(dims)  # the writer's hit, inline
            value._shape = self._writer.shape(dims) if shape is None else shape
            if ctx._other_types:
                self._commit_type(node, value, had_shape=False)
            elif _FAST_TENSOR_TYPE:  # new_tensor_type(_INT64), without its call
                type_ = _new_object(_TENSOR_TYPE)
                type_._dtype = _INT64
                type_.denotation = None
                value._type = type_
            else:
                value._type = new_tensor_type(_INT64)
            self.modified = True
            return True
        for value in outputs:
            self._commit(node, value)
        return True

    def _replay(self, node: ir.Node, entry: list) -> None:
        """Sets the outputs of ``node`` from a memoized hook result and commits them.

        ``entry``: ``[facts of the outputs, settled]``. The first replay settles the facts
        (:meth:`_settle`) and, when that recorded nothing (the scope version stayed),
        keeps the settled facts in the entry: settling is a function of the facts and the
        scope's facts, which the version in the memo key fixes, so later replays of the
        entry would settle to the same facts and record nothing either.
        """
        ctx = self.ctx
        outputs = node._outputs
        facts, settled = entry
        if settled:
            # ctx.restore_facts for each output, inline (the usual replay of a layer).
            shapes, values, dtypes = ctx._shapes, ctx._values, ctx._dtypes
            for value, (shape, elements, dtype) in zip(outputs, facts):
                if shape is not MISSING:
                    shapes[value] = shape
                if elements is not MISSING:
                    values[value] = elements
                if dtype is not MISSING:
                    dtypes[value] = dtype
            if len(outputs) == 1 and not ctx._other_types:
                # _commit_outputs' common case, inline: one output, nothing declared (no
                # shape, no type), its facts just restored.
                value = outputs[0]
                if value._shape is None and value._type is None:
                    inferred = shapes.get(value)
                    if inferred is None:
                        shapes[value] = None  # set_shape(value, None)
                    dtype = dtypes.get(value)
                    if dtype is None:
                        return  # no valid value_info without a type (see _commit_outputs)
                    if inferred is not None:
                        writer = self._writer
                        shape = writer._shapes.get(inferred)
                        value._shape = writer.shape(inferred) if shape is None else shape
                    if _FAST_TENSOR_TYPE:  # new_tensor_type(dtype), without its call
                        type_ = _new_object(_TENSOR_TYPE)
                        type_._dtype = dtype
                        type_.denotation = None
                        value._type = type_
                    else:
                        value._type = new_tensor_type(dtype)
                    self.modified = True
                    return
            self._commit_outputs(node, outputs)
            return
        for value, value_facts in zip(outputs, facts):
            ctx.restore_facts(value, value_facts)
        version = ctx.scope.version
        self._settle(node, outputs)
        if ctx.scope.version == version:
            entry[0] = tuple(ctx.facts_of(value) for value in outputs)
            entry[1] = True
        self._commit_outputs(node, outputs)

    def _settle(self, node: ir.Node, outputs: Sequence[ir.Value] | None = None) -> None:
        """Rewrites the outputs' facts under what successful runs imply, then adds theirs.

        Dims and elements are refined with the facts known now (a case split the facts
        make unnecessary goes, see :meth:`ShapesContext.refine`); then each output's
        dims are facts from here on: a tensor that exists has dims ``>= 0``.
        """
        ctx = self.ctx
        scope = ctx.scope
        if not isinstance(scope, FactScope):
            return
        refine = scope.version > 0
        note = not ctx.conditional_depth
        if not refine and not note:
            return  # inside a subgraph before any fact: nothing to refine or note
        shapes = ctx._shapes
        values = ctx._values
        for value in node.outputs if outputs is None else outputs:
            shape = shapes.get(value)
            plain = shape is None or _all_plain(shape)
            if refine:
                if not plain:
                    new = ctx.refine_dims(shape)  # type: ignore[arg-type]
                    if new is not shape:
                        ctx.set_shape(value, new)
                        shape = shapes.get(value)
                        plain = shape is None or _all_plain(shape)
                elements = values.get(value)
                if elements is not None and not _all_plain(elements):
                    new = ctx.refine_dims(elements)
                    if new is not elements:
                        ctx.set_value(value, new)
            if note and not plain:
                self._note_compound_dims(shape)  # type: ignore[arg-type]

    def _note_dims(self, value: ir.Value) -> None:
        """Records ``d >= 0`` for each compound dim of ``value`` (it exists in the run)."""
        shape = self.ctx.peek_shape(value)
        if shape is None or _all_plain(shape):
            return
        self._note_compound_dims(shape)

    def _note_compound_dims(self, shape: Shape) -> None:
        ctx = self.ctx
        scope = ctx.scope
        # Repeated layers note the same dims again and again: a dim noted at the same
        # scope version (no fact changed since) would meet the same facts, prove the
        # same and record nothing, so the call is skipped. Only at depth 0: inside a
        # subgraph nothing is recorded, and a skip entry made there would be wrong.
        memo = None
        if not ctx.conditional_depth:
            if scope is not self._noted_scope:
                self._noted = {}
                self._noted_scope = scope
            memo = self._noted
        for d in shape:
            if not isinstance(d, int) and not d.is_symbol and not d.is_unknown:
                if memo is None:
                    ctx.note_nonneg(d)
                    continue
                if memo.get(d) == scope.version:
                    continue
                ctx.note_nonneg(d)
                if len(memo) > 100_000:
                    memo.clear()
                memo[d] = scope.version

    def _count_miss(self, op_type: str) -> None:
        """Stops keying ``op_type`` once its keys rarely repeat.

        E.g. a long chain of distinct shapes, where computing keys would only cost time.
        """
        misses = self._memo_misses[op_type] = self._memo_misses.get(op_type, 0) + 1
        if misses >= _MEMO_TRIAL and self._memo_hits.get(op_type, 0) * 4 < misses:
            self._memo_off.add(op_type)

    def _memo_key(self, node: ir.Node, opset: int | None) -> tuple | None:
        """What a hook's result can depend on, or ``None`` when it is not memoizable.

        Layers of a model repeat the same nodes on the same shapes: a hook that only
        read its inputs' shapes, values and dtypes and its attributes (and changed
        nothing else, which :meth:`_infer_nodes` checks) gives the same outputs again.
        """
        attributes: tuple = ()
        data = node._attributes.data  # the UserDict's plain dict: much faster to iterate
        if data:
            # A reference attribute (only in function bodies) has value None here;
            # function bodies are never memoized (they are inferred inside a call).
            parts = []
            add = parts.append
            for name, attr in data.items():
                kind = attr._type
                if kind in _SCALAR_ATTRIBUTES:
                    add((name, kind, attr._value))
                elif kind in _LIST_ATTRIBUTES:
                    add((name, kind, tuple(attr._value)))
                else:
                    return None  # tensors, graphs: not worth keying
            attributes = tuple(parts)
        ctx = self.ctx
        # The shape, value as shape and dtype of each input as a hook reads them, one
        # entry per input (every memoized node, so inline); the facts are interned, so
        # keys hash fast. A node with a non-tensor input (sequence, optional, map) has none.
        shapes = ctx._shapes
        values = ctx._values
        dtypes = ctx._dtypes
        others = ctx._other_types
        missing = MISSING  # a local: read twice per input
        facts: list[object] = []
        append = facts.append
        for value in node._inputs:
            if value is None:
                append(None)
                continue
            type_ = value._type
            if (type_ is not None and type_.__class__ is not _TENSOR_TYPE) or (
                others and value in others
            ):
                return None  # a sequence, optional or map: not keyed
            shape = shapes.get(value, missing)
            if shape is missing:
                shape = ctx.shape_of(value)
            elements = values.get(value, missing)
            if elements is missing:
                if value._const_value is None:
                    # What value_of finds for a value no hook gave elements to.
                    elements = values[value] = None
                else:
                    elements = ctx.value_of(value)
            dtype = dtypes.get(value)
            if dtype is None:
                # dtype_of's read of a declared dtype, inline (graph inputs, initializers:
                # read from the IR once, kept by dtype_of).
                dtype = ctx._declared_dtypes.get(value, missing)
                if dtype is missing:
                    dtype = ctx.dtype_of(value)
            append((shape, elements, dtype))
        # One tuple, built in one step (no list of the head to copy).
        return (
            node._op_type,
            node._domain,
            opset,
            ctx.scope.version,
            len(node._outputs),
            attributes,
            *facts,
        )

    def _fallback_after_bug(self, node_ctx: NodeContext) -> None:
        """Coverage never drops below ONNX's: a crashed hook hands over to the fallback."""
        try:
            self._onnx().infer(node_ctx)
        except NodeInferenceFailure:
            self._forget_outputs(node_ctx.node)
        except Exception:  # the fallback itself is defensive; stay safe anyway
            logger.debug("fallback after a hook failure failed", exc_info=True)
            self._forget_outputs(node_ctx.node)

    def _forget_outputs(self, node: ir.Node) -> None:
        for value in node.outputs:
            self.ctx.forget(value)
            self.ctx.set_shape(value, None)
            self.ctx.set_value(value, None)

    def fallback(self, node_ctx: NodeContext) -> None:
        """ONNX per-node inference for the node; subgraphs are inferred first."""
        for graph in node_subgraphs(node_ctx.node):
            self.infer_subgraph(graph, None, None)
        self._onnx().infer(node_ctx)

    def _onnx(self) -> ops.OnnxFallback:
        """ONNX's per-node inference for this model (made once, on first use)."""
        fallback = self._onnx_fallback
        if fallback is None:
            fallback = self._onnx_fallback = ops.OnnxFallback(self.model)
        return fallback

    def infer_subgraph(
        self,
        graph: ir.Graph,
        input_shapes: Sequence[Shape | None] | None,
        input_dtypes: Sequence[ir.DataType | None] | None,
    ) -> list[Shape | None]:
        """Infers ``graph`` with the values of enclosing graphs visible.

        Args:
            graph: A subgraph (attribute of a node being inferred).
            input_shapes: Shapes for the subgraph's inputs; ``None`` (or a short
                sequence) uses the declared input shapes.
            input_dtypes: Element types for the subgraph's inputs, likewise optional.

        Returns:
            The shapes of the subgraph's outputs (``None``: rank unknown).
        """
        self.ctx.enter_subgraph()
        try:
            self._seed_inputs(graph, input_shapes, input_dtypes)
            orders = self._subgraph_orders
            if orders is None:
                orders = self._subgraph_orders = {}
            nodes = orders.get(graph)
            if nodes is None:
                problems: list[tuple[ir.Node, str]] = []
                # The snapshot's walk listed the graph's nodes (a graph it did not walk,
                # e.g. one a hook made, is listed here).
                snapshot = self.snapshot
                listed = None if snapshot is None else snapshot.subgraph_nodes.get(graph)
                nodes = topological_order(graph, listed, False, problems)
                if problems:  # said again on every walk, as the graph is walked
                    for node, message in problems:  # strict mode raises at the first
                        self.ctx.add_diagnostic(node, "error", f"invalid graph: {message}")
                else:
                    orders[graph] = nodes
            self._walk_nodes(nodes)
        finally:
            self.ctx.exit_subgraph()
        # shape_of's hit, inline: a body's outputs were inferred (or seeded) just now.
        ctx = self.ctx
        table = ctx._shapes
        shapes = []
        for value in graph_values(graph.outputs):
            shape = table.get(value, MISSING)
            shapes.append(ctx.shape_of(value) if shape is MISSING else shape)
        return shapes

    # ------------------------------------------------------------------------------------
    def _commit(self, node: ir.Node, value: ir.Value) -> None:
        """Merges the inferred facts of ``value`` with the declared ones and writes them."""
        ctx = self.ctx
        inferred = ctx._shapes.get(value)  # peek_shape, inline (once per output)
        if value._shape is None:  # the common case: nothing declared, nothing to merge
            if inferred is not None:
                # The writer's hit, inline (stored shapes are tuples).
                shape = self._writer._shapes.get(inferred)
                value._shape = self._writer.shape(inferred) if shape is None else shape
                self.modified = True
            else:
                ctx._shapes[value] = None  # set_shape(value, None)
            if value._type is None and not ctx._other_types:
                # _commit_type's common case: an untyped tensor gets the inferred dtype.
                dtype = ctx._dtypes.get(value)  # peek_dtype
                if dtype is not None:
                    value._type = new_tensor_type(dtype)
                    self.modified = True
                return
            self._commit_type(node, value, had_shape=False)
            return
        anchor = value._is_graph_output  # the slots: every declared output
        if anchor or self.value_info_anchors:
            # value.graph: the slot, set for a graph's own input, output or initializer,
            # else the producer's graph (read through the property).
            owner = value._graph
            if owner is None:
                owner = value.graph
            if owner is self.model.graph:
                self._commit_anchor(node, value, inferred)
                return
        written = (
            _declared_written(value._shape, inferred, anchor, ctx, self._writer)
            if self.policy == "refine"
            else None
        )
        if written is not None:
            # What the merge below ends in for such a value (the usual subgraph output):
            # the inferred dims downstream, nothing recorded, counted or said.
            if not same_ir_dims(written, value._shape):
                value.shape = new_ir_shape(written)
                self.modified = True
            self._commit_type(node, value, had_shape=True)
            return
        merged = merge_declared_shape(
            ctx,
            self._writer,
            inferred,
            value.shape,
            policy=self.policy,
            anchor=anchor,
            hint=value.name or node.op_type,
        )
        ctx.set_shape(value, merged.dims)
        for conflict in merged.conflicts:
            replaced = merged.written is not None and not value.is_graph_output()
            diagnostic = ctx.add_diagnostic(
                node,
                "warning",
                f"output {value.name!r}: the declared shape does not hold in every run: "
                f"{conflict}" + ("; the inferred shape is written" if replaced else ""),
            )
            if ctx.strict:
                raise ShapeInferenceError(diagnostic)
        if merged.written is not None and not same_ir_dims(merged.written, value.shape):
            value.shape = new_ir_shape(merged.written)
            self.modified = True
        self._commit_type(node, value, had_shape=True)

    def _merge_anchor(
        self,
        node: ir.Node,
        value: ir.Value,
        inferred: Shape | None,
        what: str,
        conflicts: list[str],
        edge_axes: list[int],
    ) -> tuple[Dim | None, ...] | None:
        """The dims an anchored value gets (``None`` dims: unknown on both sides)."""
        ctx = self.ctx
        merged = merge_with_anchor(
            ctx,
            inferred,
            declared_dims(value.shape, ctx),
            strict=ctx.strict,
            where=f"{what} {value.name!r}",
            node=node,
            conflicts=conflicts,
            edge_axes=edge_axes,
        )
        if merged is not None and inferred is not None and len(merged) == len(inferred):
            # Downstream keeps what was computed: a declared name is only a label (the
            # renaming is the propagation pass's job), unless the computed dim is a bare
            # symbol the engine minted, which knows less than the declared one.
            merged = tuple(
                inf
                if isinstance(inf, expr.DimExpr)
                and isinstance(m, expr.DimExpr)
                and not (inf.is_symbol and ctx.is_generated(inf.name))  # type: ignore[arg-type]
                else m
                for inf, m in zip(inferred, merged)
            )
        return merged

    def _commit_anchor(self, node: ir.Node, value: ir.Value, inferred: Shape | None) -> None:
        """Merges a declared anchor: its text stays, the equalities it implies are recorded.

        Only an empty declared dim is filled with the inferred one (it declares nothing).
        """
        ctx = self.ctx
        declared = value._shape
        declared_ir = declared._dims  # the slot (read, never changed here)
        empty = _empty_or_exact(declared_ir, inferred, ctx)
        if empty is not None:
            # What the merge below ends in for such an anchor (the usual graph output):
            # it records, mints and says nothing; only empty dims are filled. The
            # context holds ``inferred`` (read from it) as the value's shape already.
            if True in empty and self.policy != "skip":
                written = list(declared_ir)
                filled = [axis for axis, nothing in enumerate(empty) if nothing]
                for axis in filled:
                    written[axis] = self._writer.dim(inferred[axis])  # type: ignore[index]
                if not same_ir_dims(written, declared):
                    value._shape = new_ir_shape(written)  # the setter's slot (a new shape)
                    self.modified = True
                    ctx.note_filled(value, filled)
            self._commit_type(node, value, had_shape=True)
            return
        what = "graph output" if value.is_graph_output() else "value_info"
        # Layers repeat the same anchors (present_key_i): the merge is memoized when it
        # minted nothing and said nothing; its equalities were recorded the first time.
        key = (
            inferred,
            tuple(d if isinstance(d, int) else d._value for d in declared_ir),
            what,
            ctx.conditional_depth,  # equalities are only recorded at depth 0
        )
        if self._anchor_memo is None:
            self._anchor_memo = {}
        merged = self._anchor_memo.get(key)
        conflicts: list[str] = []
        edge_axes: list[int] = []  # declared formulas that hold only at sizes >= 2
        if merged is None:
            diagnostics = len(ctx.diagnostics)
            merged = self._merge_anchor(node, value, inferred, what, conflicts, edge_axes)
            if (
                merged is not None
                and None not in merged
                and len(ctx.diagnostics) == diagnostics
            ):
                self._anchor_memo[key] = merged
        hint = value.name or node.op_type
        dims = tuple(ctx.new_symbol(hint) if d is None else d for d in merged or ())
        ctx.set_shape(value, dims if merged is not None else None)
        if merged is None or self.policy == "skip":
            pass
        elif conflicts and inferred is not None:
            # Provably false (two different ints, another rank): the declared text would
            # be a wrong dim on the written model. The warning names both shapes.
            written = self._writer.dims(dims)
            value.shape = new_ir_shape(written)
            self.modified = True
            ctx.note_filled(value, range(len(written)))
        elif len(merged) == len(declared):
            # The declared texts were all read when the names were reserved: asking
            # again reads the same answer.
            empty = [_declares_nothing(old, ctx) for old in declared_ir]
            for axis in edge_axes:
                empty[axis] = True  # the inferred dim holds in every run: it is written
            written = [
                self._writer.dim(d) if nothing else old
                for old, d, nothing in zip(declared_ir, dims, empty)
            ]
            if not same_ir_dims(written, declared):
                value.shape = new_ir_shape(written)
                self.modified = True
                ctx.note_filled(value, (i for i, nothing in enumerate(empty) if nothing))
        self._commit_type(node, value, had_shape=True)

    def _commit_type(self, node: ir.Node, value: ir.Value, had_shape: bool) -> None:
        ctx = self.ctx
        if ctx._other_types:  # has_non_tensor_types(), inline
            other = ctx.non_tensor_type_of(value)
            if other is not None:
                if value._type is None:
                    value.type = other
                    self.modified = True
                return
        dtype = ctx._dtypes.get(value)  # peek_dtype, inline
        if dtype is None:
            return
        type_ = value._type
        if type_ is None:
            declared = None
        elif type_.__class__ is _TENSOR_TYPE:
            declared = type_._dtype  # the slot: every declared output
        else:
            declared = type_.dtype
        if declared is None or declared is _UNDEFINED:
            if self.policy == "skip" and had_shape:
                return  # the value already had a shape: skip leaves it as it is
            # A new TensorType per value: ``Value.dtype = ...`` mutates the type in place.
            value.type = new_tensor_type(dtype)
            self.modified = True
        elif declared != dtype:
            ctx.add_diagnostic(  # an error: raises in strict mode
                node,
                "error",
                f"output {value.name!r}: declared type {declared.name} but inferred {dtype.name}",
            )
            if self.policy == "override" and not value.is_graph_output():
                value.type = new_tensor_type(dtype)
                self.modified = True
            else:
                ctx.set_dtype(value, declared)
