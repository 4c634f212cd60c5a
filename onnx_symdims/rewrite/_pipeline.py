"""The ``optimize`` pipeline: our shape-driven rules inside onnxscript's optimizer loop.

Each round analyzes the model (:func:`~onnx_symdims.rewrite.analyze`: shapes from the
inputs and ops alone; after the first round only the nodes created since), runs our
rewrites with those facts, then onnxscript's constant
folder (without its per-node ONNX shape inference: our shapes are on the model; on large
models onnxscript's time goes mostly to its quadratic ``SlicesSplit`` matcher, excluded), its default rewrite
rules, common-subexpression elimination and unused-node removal. Rounds repeat until
nothing changes. The tail is onnxscript's own (constants lifted to initializers,
duplicates merged, names fixed). With ``fusions``, onnxscript's fusions run next, guarded
(:mod:`~onnx_symdims.rewrite._guard`), and when one was kept the rounds and the tail run
again on the fused model. Then shapes are inferred once more with the declared graph
outputs restored, and the anchor pass names dims after the model's author.
"""

from __future__ import annotations

__all__ = ["OptimizePass", "OptimizeResult", "optimize"]

import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common_passes

from onnx_symdims.passes import (
    AnchorConstraintPropagationPass,
    SymbolicShapeInferencePass,
    checked_symbol_ranges,
)
from onnx_symdims.rewrite._around_elementwise import ReshapesAroundElementwisePass
from onnx_symdims.rewrite._broadcast import BroadcastScalarOperandsPass
from onnx_symdims.rewrite._expand import DropExpandBeforeBroadcastPass
from onnx_symdims.rewrite._facts import (
    ShapeFacts,
    analyze,
    clear_computed_shapes,
    constant_tensor,
    int_attribute,
    overridable_defaults_hidden,
)
from onnx_symdims.rewrite._fixed_dims import fix_dims, fixed_sizes
from onnx_symdims.rewrite._flat_gather import GatherOfFlatIndexGridPass
from onnx_symdims.rewrite._fold_range import fold_float_ranges
from onnx_symdims.rewrite._fold_split import fold_constant_splits
from onnx_symdims.rewrite._folding import (
    kept_float_weight_nodes,
    should_fold,
    should_fold_exactly,
)
from onnx_symdims.rewrite._gather import GatherNDOfIndexGridPass
from onnx_symdims.rewrite._graph_parameters import (
    inline_graph_parameter_functions,
    set_aside_graph_parameter_functions,
)
from onnx_symdims.rewrite._input_shapes import InputShapeError, apply_input_shapes
from onnx_symdims.rewrite._iota_gather import GatherOfIotaPass
from onnx_symdims.rewrite._lanes import VectorizeShapeLanesPass
from onnx_symdims.rewrite._layout import (
    CollapseReshapeChainsPass,
    FlattenConcatsPass,
    GroupedTransposePass,
)
from onnx_symdims.rewrite._leading_ones import DropLeadingOnesBeforeBroadcastPass
from onnx_symdims.rewrite._lift import LiftScalarArithmeticPass
from onnx_symdims.rewrite._onnxscript_rules import no_clobbering, onnxscript_rules
from onnx_symdims.rewrite._ort_folding import (
    FoldFloatsInOnnxruntimePass,
    onnxruntime_available,
)
from onnx_symdims.rewrite._reduce import ReduceDropsKeptAxesPass
from onnx_symdims.rewrite._reuse import ReuseEqualValuesPass
from onnx_symdims.rewrite._rules import ShapeRulesPass
from onnx_symdims.rewrite._slices import MergeDisjointSlicesPass
from onnx_symdims.rewrite._split import SlicesToSplitPass
from onnx_symdims.rewrite._transpose import TransposeThroughBinaryPass
from onnx_symdims.rewrite._values import ProvenValuesPass
from onnx_symdims.shapes import direct_subgraphs, nested_nodes, node_subgraphs

logger = logging.getLogger(__name__)

FUSIONS = (None, "ort", "onnx")


def count_nodes(graph: ir.Graph) -> Counter:
    """Main-graph nodes by op type (``domain::op`` outside the default domain)."""
    counts: Counter = Counter()
    for node in graph:
        counts[f"{node.domain}::{node.op_type}" if node.domain else node.op_type] += 1
    return counts


@dataclasses.dataclass
class OptimizeResult(ir.passes.PassResult):
    """What :class:`OptimizePass` did.

    Attributes:
        before: Main-graph nodes by op type before optimizing.
        after: The same after.
        fired: How often each of our rewrites fired, by rule name.
        declined: Why our rules declined, by ``"rule: reason"``.
        rounds: Rounds of the fixed-point loop run.
        seconds: Wall time of the pass.
        diagnostics: Diagnostics of the final shape inference.
        kept_float_nodes: Main-graph nodes left computing float math on weights alone
            because of ``exact_floats`` (:func:`~onnx_symdims.rewrite._folding.
            kept_float_weight_nodes`; 0 with ``exact_floats=False``).
    """

    before: Counter = dataclasses.field(default_factory=Counter)
    after: Counter = dataclasses.field(default_factory=Counter)
    fired: Counter = dataclasses.field(default_factory=Counter)
    declined: Counter = dataclasses.field(default_factory=Counter)
    rounds: int = 0
    seconds: float = 0.0
    diagnostics: list = dataclasses.field(default_factory=list)
    kept_float_nodes: int = 0


class OptimizePass(ir.passes.InPlacePass):
    """Optimizes a model with proven shapes, in place (see the module docstring).

    Args:
        max_rounds: Most rounds of the fixed-point loop.
        fusions: ``None``, ``"ort"`` (onnxscript's onnxruntime fusions) or ``"onnx"``
            (its ONNX-op fusions); run after the loop, with our shapes on the model.
        anchors: Name dims after the model's declared ones at the end.
        inline: Inline model-local functions first (as onnxscript's optimizer does).
        max_constant_elements: Largest ``ConstantOfShape`` output turned into a constant.
        exact_floats: Keep every float output bit for bit (the default): onnxscript's
            folder evaluates float nodes only where numpy computes what onnxruntime
            does (:mod:`~onnx_symdims.rewrite._folding`), and its BatchNormalization
            fusions, which reassociate float math, are left out. ``False`` allows both
            (smaller models, outputs equal up to float rounding).
        symbol_ranges: ``{symbol: (lower, upper)}`` (``None``: open): the sizes the
            model will run with, e.g. ``{"seq_len": (1, None)}``; outputs stay identical
            for every run within them (only). The written dims and the fusion guard
            rely on them. A range of one size (``{"batch": (1, 1)}``) fixes it: the
            graph inputs' and outputs' declared dims get the value (:mod:`~onnx_symdims.
            rewrite._fixed_dims`), every shape computed from it folds, and onnxruntime
            refuses other sizes.
        input_shapes: ``{input name: [dim, ...]}``, each dim an int, a symbol name or
            ``None`` (keep): the shapes the inputs will have (onnxsim's
            ``overwrite_input_shapes``). An int for a declared symbol fixes the symbol
            (as a one-size range); an int or a name for an anonymous dim is written on
            that dim (:mod:`~onnx_symdims.rewrite._input_shapes`). A name, rank or dim
            the model contradicts raises :class:`InputShapeError` before any change.
        verify_fusions: With ``fusions``, when onnxruntime is importable: run the model
            before and after the fusions on the same random inputs and undo a fusion
            step that changes an output beyond the kernels' rounding
            (:mod:`~onnx_symdims.rewrite._fusion_check`).
    """

    def __init__(
        self,
        *,
        max_rounds: int = 6,
        fusions: str | None = None,
        anchors: bool = True,
        inline: bool = True,
        max_constant_elements: int = 1024,
        exact_floats: bool = True,
        symbol_ranges: Mapping[str, tuple[int | None, int | None]] | None = None,
        input_shapes: Mapping[str, Sequence[int | str | None]] | None = None,
        verify_fusions: bool = True,
    ) -> None:
        super().__init__()
        if fusions not in FUSIONS:
            raise ValueError(f"fusions must be one of {FUSIONS}, got {fusions!r}")
        self.max_rounds = max_rounds
        self.fusions = fusions
        self.anchors = anchors
        self.inline = inline
        self.max_constant_elements = max_constant_elements
        self.exact_floats = exact_floats
        # an empty range promises nothing, yet every rule would take it as proven
        self.symbol_ranges = checked_symbol_ranges(symbol_ranges)
        self.input_shapes = dict(input_shapes or {})
        self.verify_fusions = verify_fusions
        # The last round's facts, which the next round's analysis builds on.
        self._facts: ShapeFacts | None = None

    def call(self, model: ir.Model) -> OptimizeResult:
        start = time.perf_counter()
        names = [v.name for v in model.graph.inputs]
        if len(set(names)) != len(names):
            # The tail's name fixing would rename one (a declared input name changed);
            # onnxruntime refuses such a model.
            twice = next(n for i, n in enumerate(names) if n in names[:i])
            raise ValueError(f"invalid model: graph input {twice!r} is declared twice")
        fixed = fixed_sizes(self.symbol_ranges)
        shapes_before = [v.shape for v in model.graph.inputs]
        for name, size in apply_input_shapes(model, self.input_shapes).items():
            lower, upper = self.symbol_ranges.get(name, (None, None))
            if (lower is not None and size < lower) or (upper is not None and size > upper):
                raise InputShapeError(
                    f"input shapes give {name} = {size}, outside its range {lower}:{upper}"
                )
            fixed[name] = size
        result = OptimizeResult(model, modified=False, before=count_nodes(model.graph))
        # Changes that count as a modification though no node changes.
        relabelled = any(
            v.shape is not old for v, old in zip(model.graph.inputs, shapes_before)
        )
        relabelled |= _spell_default_domain(model)
        relabelled |= fix_dims(model, fixed)
        relabelled |= _sort(model, result)
        # A fixed size is an int in the model now. The other ranges reach the fusion
        # guard and the dims written, not our rounds: a -1 they allow can replace a
        # Reshape whose success was the only proof of a size (a KV decoder's mask:
        # past + seq <= total), and the dims written then read broadcast(...).
        ranges = {k: v for k, v in self.symbol_ranges.items() if k not in fixed}
        declared = {v.name: v.shape for v in model.graph.outputs}
        declared_types = {v.name: v.type for v in model.graph.outputs}
        if self.inline:
            inline_graph_parameter_functions(model)  # onnx-ir's inliner refuses them
            try:
                common_passes.InlinePass()(model)
            except Exception as error:  # recursive or malformed functions: stay calls
                # onnx-ir checks recursion before inlining and clones a call's body
                # before replacing the call, so the model is whole either way.
                message = f"model-local functions not inlined: {type(error).__name__}: {error}"
                logger.warning("%s", message)
                result.diagnostics.append(message)
        # Left as calls: onnx-ir's passes fail on their bodies' graph references.
        graph_parameter_functions = set_aside_graph_parameter_functions(model)
        pool_indices = _pool_indices_at_risk(model)
        body_inputs = _set_aside_subgraph_input_shapes(model)
        self._loop(model, result)
        # The rounds' facts are not needed beyond them, but for the bounds they proved
        # on the inputs' dims (from nodes since removed, too): the fusion guard compares
        # shapes over the runs the original model succeeds on.
        bounds = self._facts.input_bounds(model) if self._facts is not None else {}
        bounds = _tighter(bounds, ranges)
        self._facts = None
        _tail(model)
        if self.fusions is not None:
            fused = _signature(model)
            verify = declared if self.verify_fusions else None
            _fuse(model, self.fusions, result, self.exact_floats, bounds, verify)
            if _signature(model) != fused:
                # A fusion leaves the layout changes around the fused node (the
                # Transpose/Reshape pairs of an SDPA made MultiHeadAttention, a
                # flattening Reshape before a Gemm made MatMul): our rules cancel them.
                self._loop(model, result)
                self._facts = None
                _tail(model)
        _restore_pool_indices(model, pool_indices)
        # The shapes written are proven by the optimized model alone: what a round
        # wrote may rest on facts of a node a later rewrite removed (they hold for the
        # original model's runs, not for every run of this one).
        inferred = _final_shapes(model, declared, declared_types, ranges)
        if ranges and _decide_branches(model, inferred.context, result):
            # The ranges decided an If the rounds could not (they do not use them): its
            # branch taken in every run within them replaces it. Left, the dead branch
            # may fail onnxruntime's load-time checks on the shapes written from the
            # ranges (TopK of k = 1 over a tensor now declared empty). The folder reads
            # the shapes on the model (its Shape evaluator, its Identity merging an
            # output's shape into the input's): those the model proves alone, as in the
            # rounds, not the declared outputs' restored above, which onnxruntime does
            # not check (a NonZero output declared [1, 3] made Shape of it [1, 3] in
            # runs with four nonzeros; found by hand).
            clear_computed_shapes(model)
            SymbolicShapeInferencePass(symbol_ranges=ranges)(model)
            fold_constants(model, self.exact_floats, result.diagnostics)
            _tail(model)
            inferred = _final_shapes(model, declared, declared_types, ranges)
        result.diagnostics.extend(inferred.diagnostics)
        if self.anchors:
            AnchorConstraintPropagationPass(inferred.context, snapshot=inferred.snapshot)(
                model
            )
        for value, shape in body_inputs:  # as declared (onnxruntime wants a Loop's i, c)
            value.shape = shape
        model.functions.update(graph_parameter_functions)  # set aside above
        result.after = count_nodes(model.graph)
        if self.exact_floats:
            result.kept_float_nodes = kept_float_weight_nodes(model.graph)
        result.modified = result.after != result.before or bool(result.fired) or relabelled
        result.seconds = time.perf_counter() - start
        return result

    def _loop(self, model: ir.Model, result: OptimizeResult) -> None:
        """Our rounds, then onnxscript's pattern rules, until nothing changes.

        onnxscript's matcher tries every rule on every node (the costly part), so its rules
        run once ours converge, and ours again if they changed something; at most
        ``max_rounds`` of ours.
        """
        onnxscript_pending = True
        self._facts = None
        rounds = 0
        while rounds < self.max_rounds:
            rounds += 1
            if self._our_round(model, result):
                onnxscript_pending = True
                continue
            if not onnxscript_pending:
                break
            onnxscript_pending = False
            if not _onnxscript_round(model, self.exact_floats, result.diagnostics):
                break
        if onnxscript_pending:
            _onnxscript_round(model, self.exact_floats, result.diagnostics)

    def _our_round(self, model: ir.Model, result: OptimizeResult) -> bool:
        """One round of our rewrites and onnxscript's folder; True when anything changed."""
        result.rounds += 1
        signature = _signature(model)
        fired_before = sum(result.fired.values())
        facts = self._facts = analyze(model, self._facts)
        # Rules first: a Reshape given a constant target or an Expand found a no-op
        # leaves the chain that computed its shape dead, with nothing to rebuild.
        rules = ShapeRulesPass(facts, exact_floats=self.exact_floats)
        rules(model)
        for rule in rules.rules:
            if rule.fired:
                result.fired[rule.name] += rule.fired
            for reason, n in rule.declined.items():
                result.declined[f"{rule.name}: {reason}"] += n
        chains = CollapseReshapeChainsPass(facts)
        chains(model)
        _merge_counts(result, chains.fired, chains.declined, "CollapseReshapeChains")
        grouped = GroupedTransposePass(facts)
        grouped(model)
        _merge_counts(result, grouped.fired, grouped.declined, "GroupedTranspose")
        moved = TransposeThroughBinaryPass(facts)
        moved(model)
        _merge_counts(result, moved.fired, moved.declined, "TransposeThroughBinary")
        relaid = ReshapesAroundElementwisePass(facts)
        relaid(model)
        _merge_counts(result, relaid.fired, relaid.declined, "ReshapesAroundElementwise")
        leading = DropLeadingOnesBeforeBroadcastPass(facts)
        leading(model)
        _merge_counts(
            result, leading.fired, leading.declined, "DropLeadingOnesBeforeBroadcast"
        )
        grids = GatherNDOfIndexGridPass(facts)
        grids(model)
        _merge_counts(result, grids.fired, grids.declined, "GatherNDOfIndexGrid")
        flat_grids = GatherOfFlatIndexGridPass(facts)
        flat_grids(model)
        _merge_counts(result, flat_grids.fired, flat_grids.declined, "GatherOfFlatIndexGrid")
        iotas = GatherOfIotaPass(facts)
        iotas(model)
        _merge_counts(result, iotas.fired, iotas.declined, "GatherOfIota")
        reduces = ReduceDropsKeptAxesPass(facts)
        reduces(model)
        _merge_counts(result, reduces.fired, reduces.declined, "ReduceDropsKeptAxes")
        slices = MergeDisjointSlicesPass(facts)
        slices(model)
        _merge_counts(result, slices.fired, slices.declined, "MergeDisjointSlices")
        scalars = BroadcastScalarOperandsPass(facts)
        scalars(model)
        _merge_counts(result, scalars.fired, scalars.declined, "BroadcastScalarOperands")
        expands = DropExpandBeforeBroadcastPass(facts, exact_floats=self.exact_floats)
        expands(model)
        _merge_counts(result, expands.fired, expands.declined, "DropExpandBeforeBroadcast")
        splits = SlicesToSplitPass(facts)
        splits(model)
        _merge_counts(result, splits.fired, splits.declined, "SlicesToSplit")
        concats = FlattenConcatsPass(facts)
        concats(model)
        _merge_counts(result, concats.fired, {}, "FlattenConcats")
        lanes = VectorizeShapeLanesPass(facts)
        lanes(model)
        _merge_counts(result, lanes.fired, lanes.declined, "VectorizeShapeLanes")
        remove_dead_nodes(model.graph)
        values = ProvenValuesPass(facts, max_constant_elements=self.max_constant_elements)
        values(model)
        _merge_counts(result, values.fired, values.declined, "ProvenValues")
        remove_dead_nodes(model.graph)
        reuse = ReuseEqualValuesPass(facts)
        reuse(model)
        _merge_counts(result, reuse.fired, reuse.declined, "ReuseEqualValues")
        lifted = LiftScalarArithmeticPass(facts)
        lifted(model)
        _merge_counts(result, lifted.fired, lifted.declined, "LiftScalarArithmetic")
        for rule, count in fold_constants(
            model, self.exact_floats, result.diagnostics
        ).items():
            if count:
                result.fired[rule] += count
        common_passes.CommonSubexpressionEliminationPass()(model)
        remove_dead_nodes(model.graph)
        return sum(result.fired.values()) != fired_before or _signature(model) != signature


def _tighter(
    bounds: Mapping[str, tuple[int | None, int | None]],
    ranges: Mapping[str, tuple[int | None, int | None]],
) -> dict[str, tuple[int | None, int | None]]:
    """Each symbol's bounds from both (the larger lower bound, the smaller upper one)."""
    out = dict(bounds)
    for name, (lower, upper) in ranges.items():
        old_lower, old_upper = out.get(name, (None, None))
        out[name] = (
            max((b for b in (lower, old_lower) if b is not None), default=None),
            min((b for b in (upper, old_upper) if b is not None), default=None),
        )
    return out


def _copy_type(type_: ir.TypeProtocol) -> ir.TypeProtocol:
    """A tensor type anew (``Value.dtype = ...`` changes a type in place), others as they are."""
    return ir.TensorType(type_.dtype) if isinstance(type_, ir.TensorType) else type_


def _sort(model: ir.Model, result: OptimizeResult) -> bool:
    """Sorts the graphs' nodes topologically (stable: a sorted graph keeps its order).

    A model whose nodes are out of order runs in onnxruntime, but onnx-ir refuses to
    clone it (the fusion guard's snapshot failed: float16 conversions append their
    ``Cast`` nodes at the end). Returns whether the order changed.
    """
    if _in_order(model.graph):
        return False  # onnx-ir's sort is stable: it would keep every graph's order
    before = [id(node) for node in nested_nodes(model.graph)]
    try:
        model.graph.sort()
    except ValueError as error:  # a cycle: the model cannot run; inference reports it
        result.diagnostics.append(f"nodes not sorted: {error}")
        return False
    return [id(node) for node in nested_nodes(model.graph)] != before


def _in_order(graph: ir.Graph) -> bool:
    """Whether onnx-ir's sort would keep the order of ``graph`` and of its subgraphs.

    As that sort orders them: a node comes after the producers of its inputs and of the
    inputs its subgraphs' nodes read from this graph (what a subgraph captures is read
    by the node that holds it). Linear in the nodes times the nesting depth.
    """
    pending = set(graph)  # this graph's nodes not visited yet
    for node in graph:
        readers = [node]
        for subgraph in node_subgraphs(node):
            readers.extend(nested_nodes(subgraph))
        for reader in readers:
            for value in reader.inputs:
                if value is not None and value.producer() in pending:
                    return False
        pending.discard(node)
    return all(_in_order(subgraph) for subgraph in direct_subgraphs(graph))


def _spell_default_domain(model: ir.Model) -> bool:
    """Writes the ``"ai.onnx"`` domain as ``""``, its other spelling, in imports and nodes.

    Our rules and onnxscript's read the default opset under ``""`` (a model importing only
    ``"ai.onnx"`` would be read as opset 0, and a ``Split`` folded with the wrong sizes),
    and onnx-ir's unused-opset removal dropped an ``"ai.onnx"`` import that nodes of
    domain ``""`` use, so the optimized model no longer loaded. Returns whether it wrote
    anything.
    """
    changed = False
    for imports in (model.opset_imports, *(f.opset_imports for f in model.functions.values())):
        if "ai.onnx" in imports:
            version = imports.pop("ai.onnx")
            imports.setdefault("", version)
            changed = True
    for graph in (model.graph, *model.functions.values()):
        # Not RecursiveGraphIterator: it fails on a function's graph-attribute reference.
        for node in nested_nodes(graph):
            if node.domain == "ai.onnx":
                node.domain = ""
                changed = True
    return changed


def fold_constants(
    model: ir.Model, exact_floats: bool = True, problems: list[str] | None = None
) -> dict[str, int]:
    """Runs onnxscript's constant folder (no ONNX shape inference: our shapes are there).

    With ``exact_floats``, float nodes are folded only where numpy equals onnxruntime.
    Without, the other float nodes are folded too: in onnxruntime's kernels when it is
    installed (:mod:`~onnx_symdims.rewrite._ort_folding`, alternating with the folder
    until neither folds more), else by the folder's numpy reference. A node the folder's
    evaluator raises on stays as it is, with a message appended to ``problems``. Then a
    ``Split`` of a constant is folded (:mod:`~onnx_symdims.rewrite._fold_split`), and a
    float ``Range`` of constants as ONNX defines it (:mod:`~onnx_symdims.rewrite.
    _fold_range`); returns how many of each were, by rule name.
    """
    guarded = _guarded_folder()
    problems = problems if problems is not None else []

    def folder(**options):
        return guarded(problems, **options)

    in_onnxruntime = not exact_floats and onnxruntime_available()
    # without onnxruntime to fold floats, numpy folds them (rounding otherwise), but
    # integers stay exact in every mode
    exactly = not exact_floats and not in_onnxruntime
    policy = {"should_fold": should_fold_exactly if exactly else should_fold}
    folder(**policy)(model)
    if in_onnxruntime:
        for _ in range(_MAX_FOLD_ALTERNATIONS):
            if not FoldFloatsInOnnxruntimePass()(model).modified:
                break
            folder(**policy)(model)
    # onnxscript's folder skips nodes of several outputs; a Split of a constant is a copy
    splits = fold_constant_splits(model)
    # its reference computes a float Range otherwise than ONNX's accumulation
    ranges = fold_float_ranges(model)
    if splits or ranges:
        folder(**policy)(model)
    return {"FoldConstantSplit": splits, "FoldFloatRange": ranges}


#: Ops whose onnxscript evaluator writes nodes in the form of this opset or later
#: (``Unsqueeze``/``Squeeze``/``Split`` with their axes or sizes as inputs: 13; ``Split``
#: with ``num_outputs``: 18), whatever the model's opset: in an older model they are left.
_EVALUATOR_OPSETS = {"ConcatFromSequence": 13, "SplitToSequence": 18}


@functools.cache
def _guarded_folder() -> type:
    """The folder pass of onnxscript, declining a node its evaluator raises on (logged).

    It also leaves the nodes of :data:`_EVALUATOR_OPSETS` in a model of an older opset.
    The folder stops the whole pass when one of its per-op evaluators raises (its
    ``SplitToSequence`` evaluator does on a scalar ``split`` that is not a constant),
    and ``optimize`` must not fail on a model that runs. Declining the node leaves it
    as it is: the folder replaces a node only after its evaluator returned.
    """
    from onnxscript.optimizer import _constant_folding

    class GuardedFoldConstantsPass(_constant_folding.FoldConstantsPass):
        def __init__(self, problems: list[str], **options: Any) -> None:
            self.problems = problems
            super().__init__(
                shape_inference=False,
                input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
                output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
                **options,
            )

        def call(self, model: ir.Model):
            self.default_opset = model.opset_imports.get("", 0)
            with overridable_defaults_hidden(model):  # the folder pops unread ones
                _initializer_shapes_from_tensors(model)
                return super().call(model)

        def process_node(self, node: ir.Node, *args: Any, **kwargs: Any):
            needed = (
                _EVALUATOR_OPSETS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            )
            if needed is not None and self.default_opset < needed:
                return None  # its evaluator writes ops in a newer opset's form
            if not _evaluator_is_sound(node):
                return None
            # the types before the evaluators touch them (its Identity merges shapes)
            expected = [(v.dtype, v.shape) for v in node.outputs]
            try:
                replacement = super().process_node(node, *args, **kwargs)
                if node.op_type in _SHAPE_VALUE_PASSERS and node.domain in ("", "ai.onnx"):
                    _forget_reshaped_shape_values(self._state, node)
                # (an If's replacement is its branch, already moved out of it: kept)
                checked = replacement is not None and node.op_type != "If"
                if checked and not _replacement_fits(replacement, expected):
                    _unregister_folded(node, replacement)
                    logger.debug("folding %s declined: not its type or shape", node.op_type)
                    return None
                return replacement
            except Exception as error:  # any evaluator bug: leave the node
                cause = error.__cause__ or error
                message = (
                    f"constant folding left node {node.name!r} ({node.op_type}) as it is: "
                    f"onnxscript's evaluator raised {type(cause).__name__}: {cause}"
                )
                logger.warning("%s", message)
                self.problems.append(message)
                return None

    return GuardedFoldConstantsPass


def _replacement_fits(replacement: Any, expected: list[tuple[Any, Any]]) -> bool:
    """Whether each folded value has the element type and static shape the output had.

    The reference evaluator may return another type than the op's: ``ReduceSumSquare``
    of ``int32`` is ``numpy.sum`` of squares, an ``int64`` array, which the folder wrote as
    an ``int64`` constant in place of the ``int32`` output (the model's output changed
    type; found by hand). Our inference gives every output its type and, where proven,
    its dims: a folded value that disagrees is not the node's result, and is declined.
    """
    for value, (dtype, shape) in zip(replacement.new_outputs, expected):
        if value is None:
            continue
        tensor = _folded_tensor(value)
        got_dtype = tensor.dtype if tensor is not None else value.dtype
        if dtype is not None and got_dtype is not None and got_dtype != dtype:
            return False
        static = tensor is not None and shape is not None and shape.is_static()
        if static and tuple(tensor.shape.numpy()) != tuple(shape.numpy()):
            return False
    return True


def _folded_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    """The tensor a folded value holds: an initializer's or its ``Constant``'s."""
    if value.const_value is not None:
        return value.const_value
    producer = value.producer()
    if producer is None or producer.op_type != "Constant" or producer.domain != "":
        return None
    try:
        return ir.convenience.get_const_tensor(value)
    except Exception:  # a Constant of value_ints etc. that is malformed: no tensor
        return None


def _unregister_folded(node: ir.Node, replacement: Any) -> None:
    """Drops the initializers the folder registered for a replacement declined after it."""
    graph = node.graph
    if graph is None:
        return
    for value in replacement.new_outputs:
        if value is not None and graph.initializers.get(value.name) is value:
            graph.initializers.pop(value.name)


def _initializer_shapes_from_tensors(model: ir.Model) -> None:
    """Gives each initializer (not a graph input) the shape of its tensor.

    onnx-ir loads a ``value_info`` entry of an initializer onto its value, and the
    folder's ``Shape``/``Size`` evaluators read the value's shape: a stale ``value_info``
    declaring ``[5]`` for a ``[3]`` weight folded ``Shape(w)`` to ``[5]`` where
    onnxruntime computes ``[3]`` (found by hand). A graph input's initializer is a
    default a feed replaces: its declared shape stands (and it is hidden here anyway).
    """
    subgraphs: list[ir.Graph] = []
    nested_nodes(model.graph, subgraphs)
    for graph in (model.graph, *subgraphs):
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is None or value.is_graph_input():
                continue
            dims = tuple(tensor.shape.numpy())
            if value.shape is None or value.shape.dims != dims:
                value.shape = ir.Shape(dims)


#: Ops whose onnxscript evaluator hands its input's shape value to its output as it is.
_SHAPE_VALUE_PASSERS = frozenset({"Reshape", "Squeeze"})


def _forget_reshaped_shape_values(state: Any, node: ir.Node) -> None:
    """Drops the shape value the folder gave an output that is not the same vector.

    onnxscript's ``Reshape`` (and ``Squeeze``) evaluator gives its output the shape value
    of its input whatever the new shape: ``Reshape(Shape(x), [2, 1])`` of ``x[N, 3]`` got
    the value ``[N, 3]``, and its ``Gather`` evaluator then folded ``Gather(r, [1])`` to
    the vector ``[3]`` where the model computes ``[[3]]`` (found by hand). The value is
    kept only on an output proven a vector of as many elements (or a scalar of one).
    """
    values = getattr(state, "_sym_value_map", None)
    if not isinstance(values, dict):
        return
    for output in node.outputs:
        value = values.get(output)
        if not isinstance(value, ir.Shape):
            continue
        shape = output.shape
        fits = shape is not None and (
            (len(shape) == 1 and shape[0] == len(value))
            or (len(shape) == 0 and len(value) == 1)
        )
        if not fits:
            del values[output]


def _evaluator_is_sound(node: ir.Node) -> bool:
    """False for a node onnxscript's folder would rewrite by an unsound partial evaluator.

    Its ``Abs`` evaluator replaces ``Abs(v)`` of any value computed from a shape by ``v``
    (``Abs(dim - 5)`` became ``dim - 5``): only a constant ``Abs`` is left to it (folded
    as a constant). Its ``SplitToSequence`` evaluator squeezes the chunks with
    ``keepdims=0`` also when a ``split`` list is given, which makes the spec and
    onnxruntime ignore ``keepdims``, and splits an empty axis into a ``Split`` of no
    outputs (an invalid model): left to it only with ``keepdims=1`` or a scalar
    ``split``, and an axis that is not empty (found by hand). Its ``CastLike`` evaluator
    writes a ``Cast`` without the node's ``saturate``: ``CastLike<saturate=0>`` to
    ``float8e4m3fn`` gives NaN for ``1e6``, the ``Cast`` it wrote 448 (found by hand):
    left to it only without attributes other than ``saturate=1``. Its ``If`` evaluator
    inlines a branch by renaming each branch output to the ``If`` output's name: a branch
    that lists one value twice (``(t, t)`` for ``y, z``) got one name for both, and the
    graph output ``y`` was renamed ``z`` (found by hand): such an ``If`` is left.
    """
    if node.domain not in ("", "ai.onnx"):
        return True
    if node.op_type == "If":
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                outputs = list(attr.value.outputs)
                if len({id(v) for v in outputs}) != len(outputs):
                    return False
        return True
    if node.op_type == "CastLike":
        return all(
            name == "saturate" and attr.type == ir.AttributeType.INT and attr.value == 1
            for name, attr in node.attributes.items()
        )
    if node.op_type == "Abs":
        return bool(node.inputs) and constant_tensor(node.inputs[0]) is not None
    if node.op_type == "SplitToSequence" and len(node.inputs) > 1:
        split, data = node.inputs[1], node.inputs[0]
        if split is None or data is None or data.shape is None:
            return False
        axis = int_attribute(node, "axis", 0)
        rank = len(data.shape)
        if not -rank <= axis < rank or data.shape[axis] == 0:
            return False
        scalar = split.shape is not None and len(split.shape) == 0
        return int_attribute(node, "keepdims", 1) == 1 or scalar
    return True


#: Bound on the folder / onnxruntime alternations of one :func:`fold_constants` call
#: (each handles the nodes whose inputs the other just made constant).
_MAX_FOLD_ALTERNATIONS = 16


def _onnxscript_round(
    model: ir.Model, exact_floats: bool = True, problems: list[str] | None = None
) -> bool:
    """Applies the default pattern rules of onnxscript once; True when they changed the model."""
    from onnxscript import rewriter

    signature = _signature(model)
    rules = onnxscript_rules(model, exact_floats)
    if rules == []:
        return False
    if rules is not None:
        rules = [no_clobbering(rule) for rule in rules]
    try:
        with overridable_defaults_hidden(model):
            rewriter.rewrite(model, pattern_rewrite_rules=rules)
    except Exception as error:  # a rule's bug must not fail optimize
        # The rewriter changes the graph only after a rule's check and replacement
        # returned, so what it applied before the error stands and is sound.
        message = f"onnxscript's rewrite rules stopped: {type(error).__name__}: {error}"
        logger.warning("%s", message)
        if problems is not None:
            problems.append(message)
    return _signature(model) != signature


def remove_dead_nodes(graph: ir.Graph) -> int:
    """Removes the nodes of ``graph`` (and its subgraphs) whose outputs nothing uses.

    onnx-ir's ``RemoveUnusedNodesPass`` does this and also trims unused optional outputs,
    looking up each live node's schema on every call: a fifth of the loop's time on a
    TorchScript decoder. The rounds sweep with this; the tail runs onnx-ir's pass once.
    Returns how many nodes went.
    """
    outputs = frozenset(graph.outputs)
    removed = 0
    for node in reversed(graph):  # consumers first: their producers then lose the use
        for value in node.outputs:
            if value in outputs or value.uses():
                break
        else:
            graph.remove(node, safe=True)
            removed += 1
            continue
        # A live node's subgraphs are swept here, before the outer producers they read
        # from are reached: a dead node inside may hold their last use.
        for subgraph in node_subgraphs(node):
            removed += remove_dead_nodes(subgraph)
    return removed


def _signature(model: ir.Model) -> tuple:
    """Cheap change detector: node count and op histogram of the main graph."""
    counts = count_nodes(model.graph)
    return (sum(counts.values()), tuple(sorted(counts.items())))


def _merge_counts(result: OptimizeResult, fired: Mapping, declined: Mapping, rule: str):
    for name, n in fired.items():
        result.fired[f"{rule}.{name}"] += n
    for reason, n in declined.items():
        result.declined[f"{rule}: {reason}"] += n


def _final_shapes(
    model: ir.Model,
    declared: Mapping[str, ir.Shape | None],
    declared_types: Mapping[str, ir.TypeProtocol | None],
    ranges: Mapping[str, tuple[int | None, int | None]],
):
    """Infers the optimized model's shapes afresh, over its outputs' declared shapes."""
    # The shapes written are proven by the optimized model alone: what a round wrote
    # may rest on facts of a node a later rewrite removed (they hold for the original
    # model's runs, not for every run of this one).
    clear_computed_shapes(model)
    for value in model.graph.outputs:
        if value.name in declared:
            if value.type is None and declared_types[value.name] is not None:
                # A rewrite handed the output to a value inference could not type (a
                # Conv window larger than its input): a graph output needs its type.
                value.type = _copy_type(declared_types[value.name])
            value.shape = declared[value.name]
    return SymbolicShapeInferencePass(symbol_ranges=ranges)(model)


def _decide_branches(model: ir.Model, context, result: OptimizeResult) -> int:
    """Gives each ``If`` whose condition ``context`` proves a constant condition.

    Proof: the condition's only element is an int in ``context`` (inferred under the
    symbol ranges), so the same branch runs in every run within them; onnxscript's
    folder then inlines it. Returns how many were decided.
    """
    decided = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.inputs:
            continue
        condition = node.inputs[0]
        if condition is None or condition.const_value is not None:
            continue
        elements = context.value_of(condition)
        if elements is None or len(elements) != 1 or not isinstance(elements[0], int):
            continue
        constant = ir.node(
            "Constant",
            [],
            attributes={"value": ir.tensor(np.array(bool(elements[0])))},
            name=f"{node.name or 'If'}_decided_condition",
        )
        node.graph.insert_before(node, constant)
        node.replace_input_with(0, constant.outputs[0])
        decided += 1
    if decided:
        result.fired["DecideIfByRanges"] += decided
    return decided


def _tail(model: ir.Model) -> None:
    """The tail of onnxscript's optimizer: dead nodes, functions, opsets out; constants lifted."""
    graph = model.graph
    _detach_discarded_nodes(graph)
    # Graph inputs that are also graph outputs, by output position, with their names; and
    # every output's declared name (one value may be several outputs).
    passed_through = {
        i: (v, v.name) for i, v in enumerate(graph.outputs) if v.is_graph_input()
    }
    declared = [v.name for v in graph.outputs]
    for tail in (
        common_passes.RemoveUnusedNodesPass(),
        common_passes.RemoveUnusedFunctionsPass(),
        common_passes.RemoveUnusedOpsetsPass(),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
        common_passes.OutputFixPass(),
        common_passes.NameFixPass(),
    ):
        with _quiet(tail):
            tail(model)
    _keep_passed_through_inputs(graph, passed_through)
    _keep_repeated_outputs(graph, declared)
    if model.ir_version is not None and model.ir_version < 4:
        _constants_as_nodes(model.graph)
    if model.opset_imports.get("", _CONSTANT_LISTS_OPSET) < _CONSTANT_LISTS_OPSET:
        _constants_as_tensor_attributes(model.graph)


def _detach_discarded_nodes(graph: ir.Graph) -> None:
    """Drops the uses main-graph values keep from nodes no longer in the model.

    onnxscript's folder inlines an ``If`` of a constant condition and discards the other
    branch, whose nodes still read the values they read: those uses kept an initializer
    or a node only the discarded branch needed.
    """
    live = None
    values = [*graph.inputs, *graph.initializers.values()]
    values.extend(output for node in graph for output in node.outputs)
    for value in values:
        for node, index in list(value.uses()):
            if node.graph is graph:
                continue
            if live is None:
                live = frozenset(ir.traversal.RecursiveGraphIterator(graph))
            if node not in live:
                node.replace_input_with(index, None)


#: First opset whose ``Constant`` takes ``value_int(s)``/``value_float(s)``: onnxscript's
#: folder writes them (a folded ``Size``, ``Shape`` slice or ``Gather`` of a shape) at any
#: opset, and a graph output or a subgraph's value keeps its ``Constant`` node.
_CONSTANT_LISTS_OPSET = 12

_CONSTANT_LIST_DTYPES = {
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_float": np.float32,
    "value_floats": np.float32,
}


def _constants_as_tensor_attributes(graph: ir.Graph) -> None:
    """Rewrites ``Constant(value_int(s)/value_float(s))`` as a ``value`` tensor.

    Before opset 12 that is ``Constant``'s only form; ``graph`` and its subgraphs.
    """
    for node in ir.traversal.RecursiveGraphIterator(graph):
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            continue
        for name, dtype in _CONSTANT_LIST_DTYPES.items():
            attr = node.attributes.get(name)
            if attr is not None:
                node.attributes.pop(name)
                array = np.array(attr.value, dtype=dtype)
                node.attributes["value"] = ir.AttrTensor("value", ir.tensor(array))


@contextlib.contextmanager
def _quiet(tail: ir.passes.PassBase) -> Iterator[None]:
    """Silences the warnings of onnx-ir's pass ``tail`` (notes for its own users, not ours).

    ``DeduplicateInitializersPass`` warns through the root logger's last-resort handler
    that it skipped an initializer which is a graph output: printed under ``-q`` too.
    """
    module = logging.getLogger(type(tail).__module__)
    level = module.level
    module.setLevel(logging.ERROR)
    try:
        yield
    finally:
        module.setLevel(level)


def _keep_passed_through_inputs(
    graph: ir.Graph, passed_through: dict[int, tuple[ir.Value, str | None]]
) -> None:
    """Puts a graph input that is also a graph output back in the output list, by its name.

    onnx-ir's ``OutputFixPass`` gives such an output an ``Identity`` and renames the input
    (``X`` -> ``X_orig``, and the outputs of an input passed through twice ``X`` and
    ``X_alias_1``): the model's declared input name changed (a caller feeding ``X`` is
    refused). The input keeps its declared name and stays the output, as in the original.
    """
    for index, (value, declared) in passed_through.items():
        if index >= len(graph.outputs):
            continue
        output = graph.outputs[index]
        node = output.producer()
        if (
            output is value
            or node is None
            or node.op_type != "Identity"
            or node.graph is not graph
            or not node.inputs
            or node.inputs[0] is not value
        ):
            continue
        graph.outputs[index] = value
        if not output.uses():
            graph.remove(node, safe=True)
        value.name = declared


def _keep_repeated_outputs(graph: ir.Graph, declared: list[str | None]) -> None:
    """Makes an output declared twice (``(Y, Y)``) one value again, under its declared name.

    onnx-ir's ``OutputFixPass`` gives the second an ``Identity`` named ``Y_alias_1``: a
    declared output name changed. Outputs of distinct names are left as they are.
    """
    first: dict[str, ir.Value] = {}
    for index, name in enumerate(declared):
        if name is None or index >= len(graph.outputs):
            continue
        output = graph.outputs[index]
        kept = first.setdefault(name, output)
        if output is kept or kept.name != name:
            continue
        node = output.producer()
        if (
            node is None
            or node.op_type != "Identity"
            or node.graph is not graph
            or not node.inputs
            or node.inputs[0] is not kept
        ):
            continue
        graph.outputs[index] = kept
        if not output.uses():
            graph.remove(node, safe=True)


def _set_aside_subgraph_input_shapes(model: ir.Model) -> list[tuple[ir.Value, ir.Shape]]:
    """Clears the declared shapes of every subgraph's inputs; returns them to restore.

    The enclosing node computes those values (a ``Loop``'s carried ones, a ``Scan``'s
    slices), and onnxruntime does not check them against what the body declares: a body
    declaring ``float[N] v`` runs on a carried ``[1]``. Our facts set such a shape aside
    (inference takes the enclosing node's), but onnxscript's folder reads the IR's:
    ``Expand(v, Shape(x))`` of equal declared shapes became ``Identity(v)``. The rounds
    run without them; the optimized model gets them back as declared.
    """
    cleared = []
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for graph in node_subgraphs(node):
            for value in graph.inputs:
                if value.shape is not None:
                    cleared.append((value, value.shape))
                    value.shape = None
    return cleared


def _pool_indices_at_risk(
    model: ir.Model,
) -> list[tuple[ir.Node, str, ir.TypeProtocol | None]]:
    """The ``MaxPool`` nodes whose ``Indices`` output must stay, with its name and type.

    onnx-ir's ``RemoveUnusedNodesPass`` (run by onnxscript's rewriter and by our tail)
    drops unused optional outputs. onnxruntime runs a ``MaxPool`` with its ``Indices``
    output on another kernel than one without, and the two differ: only the one with
    indices accepts the negative padding ``auto_pad = SAME_*`` computes when a stride
    exceeds the kernel's extent (``kernel_shape = [1], strides = [2]``: the single-output
    node fails to run where the original ran, fuzz seed 19180), and the single-output
    float kernel starts its maximum at ``-FLT_MAX`` and skips NaN (a window of ``-inf`` or
    NaN gives ``-3.4e38``, fuzz seed 233032). Every such output stays:
    :func:`_restore_pool_indices` puts it back at the end.
    """
    return [
        (node, node.outputs[1].name or "indices", node.outputs[1].type)
        for graph in (model.graph, *model.functions.values())
        for node in nested_nodes(graph)  # (RecursiveGraphIterator fails on graph references)
        if node.op_type == "MaxPool"
        and node.domain in ("", "ai.onnx")
        and len(node.outputs) > 1
    ]


def _restore_pool_indices(
    model: ir.Model, kept: list[tuple[ir.Node, str, ir.TypeProtocol | None]]
) -> None:
    """Gives each node of :func:`_pool_indices_at_risk` still in the model its output back."""
    taken: set[str] | None = None
    for node, name, type_ in kept:
        if node.graph is None or len(node.outputs) > 1:
            continue  # removed as dead, or left alone
        if taken is None:  # names the rounds gave may reuse the dropped one
            taken = {
                value.name
                for graph_node in ir.traversal.RecursiveGraphIterator(model.graph)
                for value in graph_node.outputs
            } | {value.name for value in model.graph.inputs}
        while name in taken:
            name += "_indices"
        taken.add(name)
        node.resize_outputs(2)
        restored = node.outputs[1]
        restored.name, restored.type = name, type_


def _constants_as_nodes(graph: ir.Graph) -> None:
    """Turns the initializers that are not graph inputs into ``Constant`` nodes.

    Before IR version 4 every initializer must also be a graph input (a default a feed
    replaces); the constants ``optimize`` made are not inputs of the original, so they
    become nodes rather than new inputs.
    """
    inputs = set(graph.inputs)
    constants = []
    for name, value in list(graph.initializers.items()):
        if value in inputs or value.const_value is None:
            continue
        graph.initializers.pop(name)
        tensor = value.const_value
        constants.append(
            ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)], outputs=[value])
        )
    if constants and len(graph):
        graph.insert_before(graph.node(0), constants)
    else:
        graph.extend(constants)


def _fusion_cleanup(model: ir.Model, exact_floats: bool = True) -> None:
    """What onnxscript's ``optimize()`` does after its fusions, with the sound rules only.

    Inlines the intermediate fusion functions no later fusion consumed, folds constants,
    applies onnxscript's rules minus the excluded ones, and runs the tail.
    """
    common_passes.InlinePass()(model)
    for _ in range(2):  # as onnxscript's optimize(): its rules leave Identity to the folder
        fold_constants(model, exact_floats)
        if not _onnxscript_round(model, exact_floats):
            break
    fold_constants(model, exact_floats)
    _tail(model)


def _fuse(
    model: ir.Model,
    fusions: str,
    result: OptimizeResult,
    exact_floats: bool,
    bounds: dict[str, tuple[int | None, int | None]],
    verify: Mapping[str, ir.Shape | None] | None = None,
) -> None:
    """Runs onnxscript's fusions step by step; undoes a step that changes a proven shape.

    ``verify``: the graph outputs' declared shapes, to compare the outputs in
    onnxruntime (their dims relate the input sizes); ``None``: no comparison.
    """
    from onnx_symdims.rewrite._guard import guarded_fusions

    def cleanup(model: ir.Model) -> None:
        _fusion_cleanup(model, exact_floats)

    guarded_fusions(
        model,
        fusions,
        result,
        cleanup=cleanup,
        assume=bounds,
        verify=verify is not None,
        declared_outputs=verify,
    )


def optimize(model: Any, *, fusions: str | None = None, **options: Any) -> Any:
    """Optimizes ``model`` with proven shapes, then onnxscript's optimizer passes.

    Args:
        model: An ``ir.Model`` (optimized in place and returned), an ``onnx.ModelProto``
            (a new optimized ``ModelProto`` is returned) or a path (loaded, optimized and
            returned as an ``ir.Model``).
        fusions: ``None``, ``"ort"`` or ``"onnx"``: onnxscript's fusion passes, run with
            our shapes present and guarded (a fusion that changes a proven output shape
            is undone).
        **options: Options of :class:`OptimizePass` (``max_rounds``, ``anchors``,
            ``inline``, ``max_constant_elements``, ``exact_floats``, ``symbol_ranges``,
            ``input_shapes``, ``verify_fusions``).

    Returns:
        The optimized model, of the kind described above.

    ``onnx_symdims.optimize`` is this function with a :class:`~onnx_symdims.ModelLoadError`
    naming the cause when a path or ``ModelProto`` cannot be read.

    Example::

        >>> import onnx_ir as ir
        >>> import onnx_symdims
        >>> model = ir.from_onnx_text('''
        ...     <ir_version: 10, opset_import: ["" : 18]>
        ...     g (float[N, 4] x) => (float[N, 4] y) {
        ...         s = Shape(x)
        ...         e = Expand(x, s)
        ...         y = Relu(e)
        ...     }
        ... ''')
        >>> [n.op_type for n in onnx_symdims.optimize(model).graph]
        ['Relu']
    """
    pass_ = OptimizePass(fusions=fusions, **options)
    if isinstance(model, ir.Model):
        pass_(model)
        return model
    if isinstance(model, (str, os.PathLike)):
        loaded = ir.load(model)
        pass_(loaded)
        return loaded
    import onnx

    if isinstance(model, onnx.ModelProto):
        # onnx-ir wraps the proto's tensors without copying them, and naming a lifted
        # constant writes into its TensorProto: work on a copy so the argument stays.
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        ir_model = ir.serde.deserialize_model(copy)
        pass_(ir_model)
        return ir.serde.serialize_model(ir_model)
    raise TypeError(
        f"expected an ir.Model, onnx.ModelProto or path, got {type(model).__name__}"
    )
