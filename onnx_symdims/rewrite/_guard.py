"""Runs onnxscript's fusions step by step with our shapes present, undoing a step that changes them.

onnxscript's fusion rules bind dims by name; with our shapes on the model they fire
far more often, and a misfire (a fused node that swallows a flattening ``Reshape``)
gives a model that no longer runs. The guard proves, before the fusions and after each
step (one ``fuse_*`` function of onnxscript: MultiHeadAttention, SkipLayerNormalization,
…), the shape of every graph output and of every value that survives under the same
name; when one is no longer proven equal, that step alone is undone and a diagnostic
says which value changed. The steps after it run on the model as it was before it, so a
refused attention fusion no longer costs the normalization and GELU fusions.

The steps are onnxscript's own (``ort_fusions.fuse_xformers`` and ``optimize_for_ort``,
``onnx_fusions.fuse``), in its order, with these differences:

- onnxscript's ``optimize()`` between them is replaced by the pipeline's own cleanup
  (``cleanup``: inlining of the intermediate fusion functions nothing consumed,
  constant folding, the sound subset of onnxscript's rules, dead-node removal), since
  its default rules include the ones the pipeline leaves out as unsound
  (``MaterializeReshapeShape``, ``x * 1`` on an overridable initializer);
- ``RemoveInitializersFromInputsPass`` is not run: declared graph inputs are never
  removed;
- where one of onnxscript's rules is unsound on inputs or types it does not look at,
  a stricter copy of it (:mod:`~onnx_symdims.rewrite._fusion_variants`) runs instead;
- its three rotary steps are replaced by one of ours (:mod:`~onnx_symdims.rewrite._rotary`),
  whose cache is each rope's own cos and sin.

Every step starts from our shapes (the analysis after the previous step writes them), so
a later fusion sees the shapes of the nodes an earlier one created. With an onnxscript
whose fusion module is laid out otherwise, the whole of ``optimize_for_ort`` (or
``onnx_fusions.fuse``) is one guarded step, as before.
"""

from __future__ import annotations

__all__ = ["guarded_fusions"]

import logging
import time
from collections.abc import Callable, Mapping

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common_passes

from onnx_symdims.rewrite import _fusion_variants as variants
from onnx_symdims.rewrite._attention_bias import BIAS_REASON, fit_attention_biases
from onnx_symdims.rewrite._facts import analyze, constant_tensor, overridable_defaults_hidden
from onnx_symdims.rewrite._fusion_check import (
    compare,
    onnxruntime_or_none,
    reference_runs,
    size_plan,
)
from onnx_symdims.rewrite._rotary import fuse_rotary_embeddings
from onnx_symdims.rewrite._rules import constant_reshape_target

logger = logging.getLogger(__name__)

#: A fusion step: its name and a function that applies it in place and returns how
#: many times it fired (``None`` when it cannot tell: then the model is compared).
Step = tuple[str, Callable[[ir.Model], "int | None"]]

#: onnxscript's ``fuse_xformers`` steps, in its order: (name in the counts, function
#: name in ``onnxscript.rewriter.ort_fusions._core``, keyword arguments).
_ORT_FUSE_STEPS = (
    ("erf_gelu", "fuse_erfgelu", {}),
    ("rms_normalization", "fuse_rms_normalization", {}),
    ("skip_layer_normalization", "fuse_skip_layer_normalization", {}),
    ("skip_rms_normalization", "fuse_skip_rms_normalization", {}),
    # In place of onnxscript's rotary_embedding, cos_sin_cache, partial_rotary_embedding:
    # its cos_sin_cache sizes one cos/sin cache per inv_freq from the FIRST rope's position
    # ids and reuses it for every rope of that inv_freq: a key rope whose positions run
    # past the query's (a KV cache) reads out of range, and at batch 0 onnxruntime's kernel
    # refuses the cache (tests/rewrite/test_fusion_rotary.py). Ours (rewrite/_rotary.py)
    # gives each rope its own cos and sin as the cache.
    ("rotary_embedding", None, {}),
    # onnxscript applies ONNX shape inference after this one (its rule adds nodes);
    # ours runs instead (see _with_our_shapes)
    ("sdpa", "fuse_sdpa", {}),
    # Left out: gqa (and packed_qkv_for_gqa, which consumes its nodes). Its pattern reads
    # a RotaryEmbedding's position ids as positions (seqlens_k = ReduceMax(ids)); ours are
    # cache rows (b*S + s, or [0]): a GQA the shape guard does not catch computes another
    # attention (tests/rewrite/test_fusion_rotary_hunt.py). It needs com.microsoft ropes:
    # no corpus model had one before ours.
    ("mha1", "fuse_mha1", {}),
    ("mha2", "fuse_mha2", {}),
    ("mha_scale", "fuse_mha_scale", {}),
    # these two only after an MHA fusion fired (as in onnxscript)
    ("mha_bias", "fuse_mha_bias", {}),
    ("attention", "fuse_attention", {}),
    ("gelu", "fuse_gelu", {}),
    ("bias_gelu", "fuse_bias_gelu", {}),
    ("sdpa_via_mha", "replace_sdpa_by_mha", {}),
)
_NEEDS_MHA = frozenset({"mha_bias", "attention", "attention_no_bias"})
#: The steps before which the open transaction closes. From ``sdpa`` on the steps consume
#: only the private nodes made from there on (``SDPA``): a private node still there from
#: an earlier step is undone on its own, not with the attention fusions after it. The
#: last two consume no private node.
_CLOSE_BEFORE = frozenset({"sdpa", "ort_patterns", "cleanup"})
#: Steps after which onnxscript runs ONNX shape inference (the shapes of the nodes its
#: rule adds are read by later steps).
_SHAPES_AFTER = frozenset({"sdpa"})
#: The domain of onnxscript's intermediate fusion ops (``SDPA``, ``RotaryEmbedding``):
#: no runtime implements them, a later fusion step must replace them.
_PRIVATE_DOMAIN = "ai.onnxruntime._fusion"


def _ort_steps(cleanup: Callable[[ir.Model], None]) -> list[Step] | None:
    """The onnxruntime fusions of onnxscript as separate steps; None if its layout differs."""
    try:
        from onnxscript.rewriter.ort_fusions import _core
    except ImportError:
        return None
    shape_rules = getattr(getattr(_core, "shape_optimization", None), "rules", None)
    gemm = getattr(
        getattr(_core, "_gemm_to_matmul_add", None), "gemm_to_matmul_add_rule", None
    )
    patterns = getattr(_core, "ORT_PATTERN_REWRITE_RULES", None)
    if shape_rules is None or gemm is None or patterns is None:
        return None
    steps: list[Step] = [
        ("gemm_to_matmul_add", _rule_set([variants.plain_gemm_only(gemm)])),
        ("shape_optimization", shape_rules.apply_to_model),
    ]
    for name, function_name, kwargs in _ORT_FUSE_STEPS:
        if function_name is None:  # ours
            steps.append((name, fuse_rotary_embeddings))
            continue
        function = getattr(_core, function_name, None)
        if function is None:  # an onnxscript without this fusion
            logger.debug("onnxscript has no %s: step %s skipped", function_name, name)
            continue
        step = _bind(function, kwargs)
        if name == "sdpa":
            step = _keys_heads_first(variants.sdpa_keeping_nan_zeroing() or step)
        elif name == "mha_scale":
            step = variants.mha_scale_without_bias() or step
        elif name == "bias_gelu":
            step = variants.bias_gelu_of_the_last_axis() or step
        steps.append((name, _with_our_shapes(step) if name in _SHAPES_AFTER else step))
        if name == "attention":
            no_bias = variants.attention_no_bias_rules()
            if no_bias is not None:
                steps.append(("attention_no_bias", no_bias.apply_to_model))
    # onnxscript runs its ORT pattern rules (FusedMatMul, …) after its last optimize();
    # the cleanup last here also sweeps the nodes they leave dead.
    unrunnable = {id(rule) for rule in _group_norm_rules(_core)}
    patterns = [
        variants.float_fused_matmul_only(rule)
        for rule in patterns
        if id(rule) not in unrunnable
    ]
    steps += [("ort_patterns", _rule_set(patterns)), ("cleanup", cleanup)]
    return steps


def _group_norm_rules(core) -> list:
    """The ``instance_to_group_normalization`` rules of onnxscript, which the guard never runs.

    They write ``com.microsoft::GroupNorm``, a GPU-only op of onnxruntime (1.32 has no
    CPU kernel for it): with ``verify_fusions=False`` or no onnxruntime the model
    returned did not load on CPU, and with the output check on it always undid the
    ``ort_patterns`` step, the ``FusedMatMul`` fusions of the same step with it.
    """
    module = getattr(core, "instance_to_group_normalization", None)
    return list(getattr(getattr(module, "rules", None), "rules", ()))


def _rule_set(rules) -> Callable[[ir.Model], int]:
    from onnxscript.rewriter import pattern

    return pattern.RewriteRuleSet(list(rules)).apply_to_model


def _bind(function, kwargs) -> Callable[[ir.Model], int | None]:
    return lambda model: function(model, **kwargs)


def _keys_heads_first(
    step: Callable[[ir.Model], int | None],
) -> Callable[[ir.Model], int | None]:
    """``step`` (onnxscript's SDPA fusion), then every SDPA's key given heads first.

    onnxscript's cross-attention ``MultiHeadAttention`` rule reads an SDPA's key as
    ``[B, H, Skv, Dh]`` without looking at its ``key_format`` (0.7.2): a key given as
    ``[B, Skv, H, Dh]`` (``"BSHd"``) passes its shape check when ``Skv == H`` (Perceiver's
    decoder: 8 latents and 8 heads), and the attention written mixes heads and positions.
    ``SDPA(q, Transpose(k, [0, 2, 1, 3]), v, key_format="BHSd")`` is the same attention
    in the format every later rule reads right (the non-cross rule then takes the key's
    3D input as before; a transpose pair left over cancels in the cleanup).
    """

    def run(model: ir.Model) -> int | None:
        count = step(model)
        if count:
            for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
                if node.domain == _PRIVATE_DOMAIN and node.op_type == "SDPA":
                    _give_key_heads_first(node)
        return count

    return run


def _give_key_heads_first(sdpa: ir.Node) -> None:
    key_format = sdpa.attributes.get("key_format")
    key = sdpa.inputs[1]
    if key_format is None or key_format.value != "BSHd" or key is None or sdpa.graph is None:
        return
    perm = [0, 2, 1, 3]
    transpose = ir.Node(
        "",
        "Transpose",
        [key],
        attributes=[ir.AttrInt64s("perm", perm)],
        name=f"{sdpa.name}_key",
    )
    heads_first = transpose.outputs[0]
    heads_first.dtype = key.dtype
    if key.shape is not None and len(key.shape) == 4:
        heads_first.shape = ir.Shape([key.shape[i] for i in perm])
    sdpa.graph.insert_before(sdpa, transpose)
    sdpa.replace_input_with(1, heads_first)
    sdpa.attributes["key_format"] = ir.AttrString("key_format", "BHSd")


def _with_our_shapes(
    step: Callable[[ir.Model], int | None],
) -> Callable[[ir.Model], int | None]:
    """``step``, then ONNX shape inference for the values that have no shape yet.

    onnxscript runs ONNX's shape inference after this step, always: the later steps
    read the shapes of the nodes its rule adds. Here it runs only when the step fired,
    and every shape there was before stays: ONNX's inference writes the spec's dims
    over ours where onnxruntime departs from the spec (a backward ``Slice`` ending at
    ``INT64_MAX``: empty by the spec, not in onnxruntime), and the cleanup's folder then
    published such a dim as a constant the model does not compute (fuzz seed 23167).
    When the fusions' transaction closes, the guard infers every shape afresh.
    """

    def run(model: ir.Model) -> int | None:
        count = step(model)
        if count:
            ours = [
                (value, value.shape)
                for node in ir.traversal.RecursiveGraphIterator(model.graph)
                for value in node.outputs
                if value.shape is not None
            ]
            common_passes.ShapeInferencePass()(model)
            for value, shape in ours:
                value.shape = shape
        return count

    return run


def _whole(fusions: str) -> list[Step]:
    """The fusion pass as one step (an onnxscript laid out otherwise)."""
    if fusions == "ort":

        def run(model: ir.Model) -> None:
            from onnxscript.rewriter import ort_fusions

            ort_fusions.optimize_for_ort(model)

        return [("ort", run)]

    def run_onnx(model: ir.Model) -> None:
        from onnxscript.rewriter import onnx_fusions

        onnx_fusions.fuse(model)

    return [("onnx", run_onnx)]


def _onnx_steps() -> list[Step] | None:
    """The ONNX-op fusions of onnxscript (opset 23 only, as in ``onnx_fusions.fuse``)."""
    try:
        from onnxscript.rewriter.onnx_fusions import _onnx_fusions
    except ImportError:
        return None
    version = getattr(_onnx_fusions, "_get_onnx_opset_version", None)
    if version is None:
        return None
    modules = (
        ("RMSNormalization", "_rms_normalization", "fuse_rms_normalization"),
        ("RotaryEmbedding", "_rotary_embedding", "fuse_rotary_embedding"),
        ("GQA", "_gqa", "fuse_gqa"),
    )
    steps: list[Step] = []
    for name, module_name, function_name in modules:
        function = getattr(getattr(_onnx_fusions, module_name, None), function_name, None)
        if function is None:
            return None
        if name == "RMSNormalization":
            function = variants.rms_normalization_of_one_type() or function
        elif name == "RotaryEmbedding":
            function = variants.rotary_embedding_23_of_the_batch() or function
        elif name == "GQA":
            function = variants.gqa_keeping_attention_semantics() or function
        steps.append((name, _only_at_opset_23(function, version)))
    return steps


def _only_at_opset_23(function, version) -> Callable[[ir.Model], int]:
    return lambda model: function(model) if version(model) == 23 else 0


def _named_types(model: ir.Model, facts) -> dict[str, ir.DataType | None]:
    types = {value.name: facts.dtype(value) for value in model.graph.outputs}
    for node in model.graph:
        for value in node.outputs:
            if value.name:
                types[value.name] = facts.dtype(value)
    return types


def _type_conflicts(facts) -> set:
    """The analysis' diagnostics of an inferred element type not the declared one."""
    return {
        d
        for d in facts.context.diagnostics
        if d.severity == "error" and ": declared type " in d.message
    }


def _named_shapes(model: ir.Model, facts) -> dict[str, tuple]:
    shapes = {}
    for node in model.graph:
        for value in node.outputs:
            if value.name:
                shapes[value.name] = facts.shape(value)
    return shapes


def _signature(model: ir.Model) -> tuple:
    """Cheap change detector for steps that do not count: nodes and their op types."""
    return (*((node.domain, node.op_type) for node in model.graph), len(model.functions))


def guarded_fusions(
    model: ir.Model,
    fusions: str,
    result,
    cleanup: Callable[[ir.Model], None] | None = None,
    assume: dict[str, tuple[int | None, int | None]] | None = None,
    verify: bool = True,
    declared_outputs: Mapping[str, ir.Shape | None] | None = None,
) -> None:
    """Applies ``fusions`` to ``model`` in place, step by step, keeping the steps that change no proven shape.

    A step that leaves nodes of onnxscript's private fusion domain (an ``SDPA`` that a
    later step turns into ``MultiHeadAttention``) is not a runnable model yet: it is
    checked together with the steps after it, up to the first one that leaves none,
    and undone with them. Private nodes still there at the end are undone too.

    Args:
        model: The model (with our shapes on it).
        fusions: ``"ort"`` or ``"onnx"``.
        result: The :class:`~onnx_symdims.rewrite.OptimizeResult` to report into
            (``fired["fusion.<name>"]``, ``diagnostics``).
        cleanup: Run after the fusion steps (``"ort"``) in place of onnxscript's
            ``optimize()``; it must inline model-local functions. ``None``: the
            fusions run as one step, as onnxscript's ``optimize_for_ort`` does.
        assume: Bounds of the graph inputs' dims that the original model proved
            (:meth:`~onnx_symdims.rewrite.ShapeFacts.input_bounds`): the shapes are
            compared over the runs the original succeeds on, as a rewrite must keep them
            (a ``Reshape`` our rules removed may have been what showed ``seq_len >= 1``).
        verify: When a step was kept and onnxruntime is importable, compare the fused
            model's outputs with the unfused one's in onnxruntime and undo the steps
            that change them (:func:`_check_outputs`).
        declared_outputs: The graph outputs' shapes as the model declared them: their
            dims beside the proven ones relate the input sizes for that comparison
            (``total_seq_len = past_seq_len + seq_len`` from a KV cache's output).
    """
    steps = None
    if fusions == "ort" and cleanup is not None:
        steps = _ort_steps(cleanup)
    elif fusions == "onnx":
        steps = _onnx_steps()
    if steps is None:
        steps = _whole(fusions)
    ort = onnxruntime_or_none() if verify else None
    guard = _Guard(model, fusions, result, dict(steps), assume or {})
    if ort is not None:
        guard.keep_original(declared_outputs or {})
    guard.facts = None
    _run_steps(guard, steps, 0, frozenset())
    if ort is not None and guard.history:
        start = time.perf_counter()
        try:
            _check_outputs(ort, guard, steps)
        except Exception as e:  # the check never fails optimize
            logger.warning("the fusions' output check failed: %s", e)
            result.diagnostics.append(f"fusions {fusions!r} not checked in onnxruntime: {e}")
        logger.debug("fusion output check: %.3fs", time.perf_counter() - start)


def _run_steps(guard: _Guard, steps: list[Step], start: int, refused) -> None:
    """Runs ``steps[start:]`` but the ``refused`` ones under ``guard``, and closes it."""
    for name, step in steps[start:]:
        if name in refused or (name in _NEEDS_MHA and not guard.mha_fired):
            continue
        if name in _CLOSE_BEFORE:
            # No step from here on makes runnable ops of the private ones still there:
            # undo what is waiting for one, so the steps after are kept on their own.
            guard.close()
        guard.run(name, step)
    guard.close()


#: Steps undone at most for changing the outputs before every fusion is undone.
MAX_NUMERIC_REFUSALS = 4


def _check_outputs(ort, guard: _Guard, steps: list[Step]) -> None:
    """Undoes the kept steps that change the model's outputs in onnxruntime.

    The model before the fusions and the fused one run on the same random inputs
    (:mod:`~onnx_symdims.rewrite._fusion_check`). When an output differs beyond the
    kernels' rounding, the kept transactions are bisected for the first after which the
    outputs differ; its last step is undone (the earlier steps of the transaction are
    not what failed, as in :meth:`_Guard._refuse`), the steps from that transaction on
    run again without it, and the outputs are compared again.
    """
    plan = guard.size_plan
    reference = (
        plan
        if isinstance(plan, str)
        else reference_runs(ort, guard.original, plan, guard.assume)
    )
    if isinstance(reference, str):
        guard.report(f"fusions {guard.fusions!r} not checked in onnxruntime: {reference}")
        return
    names = [name for name, _ in steps]
    refused: set[str] = set()
    for _ in range(MAX_NUMERIC_REFUSALS + 1):
        mismatch = compare(ort, guard.model, reference) if guard.history else None
        if mismatch is None:
            return
        if len(refused) == MAX_NUMERIC_REFUSALS:
            break
        # states[i] is the model before kept transaction i; states[-1] the fused model
        states = [guard.original] + [snapshot for _, snapshot in guard.history[1:]]
        states.append(guard.model)
        good, bad = 0, len(states) - 1
        while bad - good > 1:
            middle = (good + bad) // 2
            found = compare(ort, states[middle], reference)
            if found is None:
                good = middle
            else:
                bad, mismatch = middle, found
        counts, _ = guard.history[good]
        step = list(counts)[-1]
        refused.add(step)
        guard.report(
            f"fusions {guard.label(step)!r} undone: {mismatch} (in onnxruntime; "
            "every proven shape was kept)"
        )
        guard.roll_back(good)
        _run_steps(guard, steps, names.index(next(iter(counts))), refused)
    guard.report(
        f"fusions {guard.fusions!r} undone: the outputs still differ from the unfused "
        f"model's after {MAX_NUMERIC_REFUSALS} steps were undone ({mismatch})"
    )
    guard.roll_back(0)


class _Guard:
    """The open transaction of fusion steps and the proven shapes they must keep."""

    def __init__(self, model, fusions, result, steps, assume):
        self.model = model
        self.steps = steps  # name -> step, to run a transaction's steps again
        self.fusions = fusions
        self.result = result
        self.assume = assume
        facts = self.analyze(model)
        self.before = _named_shapes(model, facts)
        self.outputs_before = [facts.shape(v) for v in model.graph.outputs]
        self.types_before = _named_types(model, facts)
        self.type_conflicts = _type_conflicts(facts)
        self.facts = facts  # until keep_original reads them
        # For the output check (keep_original): the unfused model and how its inputs
        # are made, and the kept transactions: their steps' counts, the model before.
        self.original: ir.Model | None = None
        self.size_plan = None
        self.history: list[tuple[dict[str, int], ir.Model]] = []
        self.snapshot: ir.Model | None = None  # the model before the open transaction
        self.known: set[int] = set()  # ids of the nodes before the open transaction
        self.pending: dict[str, int] = {}  # the open transaction's steps and counts
        self.mha_fired = False

    def keep_original(self, declared_outputs) -> None:
        """Keeps the unfused model and its kept transactions, for the output check.

        Its input plan is read now, from the analysis of the values the fusions replace.
        """
        self.original = self.model.clone()
        self.size_plan = size_plan(self.model, self.facts, declared_outputs)

    def analyze(self, model: ir.Model):
        """The facts of ``model`` over the runs the original model succeeds on."""
        return analyze(model, assume=self.assume)

    def run(self, name: str, step) -> None:
        if self.snapshot is None:
            self.snapshot = self.model.clone()
            self.known = {
                id(node) for node in ir.traversal.RecursiveGraphIterator(self.model.graph)
            }
        signature = _signature(self.model)
        try:
            # onnxscript's fusion rules read any const_value, an input's default too
            with overridable_defaults_hidden(self.model):
                count = step(self.model)
        except Exception as e:  # a fusion step that fails leaves the model as it was
            self._refuse(name, f"failed and was undone: {e}")
            return
        if count == 0 or (count is None and _signature(self.model) == signature):
            if not self.pending:
                self.snapshot = None
            return
        self.pending[name] = count if isinstance(count, int) else 0
        if _has_private_nodes(self.model):
            return  # not runnable yet: a later step must consume them
        facts = self.analyze(self.model)
        changed = self._changed(facts)
        if changed:
            self._refuse(
                name,
                f"undone: the proven shape of {changed[0]!r} changed"
                + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""),
            )
            return
        retyped = self._retyped(facts)
        if retyped:
            self._refuse(name, f"undone: an element type changed ({retyped})")
            return
        unsafe = _pin_new_reshape_wildcards(
            self.model, self.known, facts, self.snapshot, self.assume
        )
        if unsafe:
            self._refuse(name, f"undone: the new Reshape {unsafe!r} {_WILDCARD_REASON}")
            return
        unsafe = fit_attention_biases(self.model, self.known, facts)
        if unsafe:
            self._refuse(name, f"undone: the new node {unsafe!r} {BIAS_REASON}")
            return
        unsafe = _vector_fused_matmul(self.model, self.known, facts)
        if unsafe:
            self._refuse(name, f"undone: the new node {unsafe!r} {_VECTOR_REASON}")
            return
        unsafe = _untyped_fused_node(self.model, self.known, facts)
        if unsafe:
            self._refuse(name, f"undone: the new node {unsafe} {_TYPE_REASON}")
            return
        self._commit()

    def _refuse(self, name: str, why: str) -> None:
        """Undoes the open transaction, then runs its steps before ``name`` again.

        The shapes were whole before ``name`` ran, so the earlier steps are not what
        broke them; what they made (an ``SDPA`` whose ``mha1`` fusion swallowed a
        flattening Reshape) stays for a later step (``sdpa_via_mha``) to consume, and
        is undone at the end if none does.
        """
        earlier = [step for step in self.pending if step != name]
        self.pending = {name: 0}
        self._undo(why, name)
        for step in earlier:
            self.run(step, self.steps[step])

    def close(self) -> None:
        if self.pending:
            self._undo("undone: nodes of onnxscript's private fusion domain were left", None)

    def _changed(self, facts) -> list[str]:
        changed = [
            value
            for value, shape in _named_shapes(self.model, facts).items()
            if value in self.before and not facts.same_shape(self.before[value], shape)
        ]
        outputs = [facts.shape(v) for v in self.model.graph.outputs]
        if len(outputs) != len(self.outputs_before) or not all(
            facts.same_shape(a, b) for a, b in zip(self.outputs_before, outputs)
        ):
            changed.append("<graph outputs>")
        return changed

    def _retyped(self, facts) -> str | None:
        """Which value's inferred element type is not the one it had, or ``None``.

        The shapes can all hold while a fused op computes another type than the nodes it
        replaced (ONNX's ``RMSNormalization`` of a float16 input and a float scale): a
        model onnx.checker and onnxruntime reject, which only the output check saw.
        """
        for diagnostic in _type_conflicts(facts) - self.type_conflicts:
            return diagnostic.message  # "output 'y': declared type FLOAT but inferred ..."
        peek = facts.context.peek_dtype  # a value with no declared type: the inferred one
        for node in self.model.graph:
            for value in node.outputs:
                before = self.types_before.get(value.name)
                after = peek(value)
                if before is not None and after is not None and after != before:
                    return f"{value.name!r} was {before.name}, is {after.name}"
        return None

    def _commit(self) -> None:
        for name, count in self.pending.items():
            if count and name not in ("cleanup", "ort_patterns"):
                self.result.fired[f"fusion.{name}"] += count
            if name in ("mha1", "mha2"):
                self.mha_fired = True
        if self.original is not None:
            self.history.append((dict(self.pending), self.snapshot))
        self.pending.clear()
        self.snapshot = None

    def roll_back(self, kept: int) -> None:
        """Puts the model back as it was before kept transaction ``kept``."""
        for counts, _ in self.history[kept:]:
            for name, count in counts.items():
                if count and name not in ("cleanup", "ort_patterns"):
                    self.result.fired[f"fusion.{name}"] -= count
                    if self.result.fired[f"fusion.{name}"] <= 0:
                        del self.result.fired[f"fusion.{name}"]
        _restore(self.model, self.history[kept][1])
        del self.history[kept:]
        self.mha_fired = any(
            name in ("mha1", "mha2") for counts, _ in self.history for name in counts
        )
        self.pending.clear()
        self.snapshot = None
        self.analyze(self.model)  # the restored values get our shapes back

    def label(self, step: str) -> str:
        return self.fusions if step == self.fusions else f"{self.fusions}.{step}"

    def report(self, message: str) -> None:
        logger.warning("%s", message)
        self.result.diagnostics.append(message)

    def _undo(self, why: str, name: str | None) -> None:
        steps = list(self.pending) or ([name] if name else [])
        label = ", ".join(self.label(step) for step in steps)
        message = f"fusions {label!r} {why}"
        if message not in self.result.diagnostics:  # steps run again after a roll-back
            self.report(message)
        _restore(self.model, self.snapshot)
        self.analyze(self.model)  # the restored values get our shapes back for later steps
        self.pending.clear()
        self.snapshot = None


_WILDCARD_REASON = (
    "has a -1 next to a dim not proven >= 1 (it fails on an empty tensor where the "
    "original ran) and no constant target replaces it"
)


_VECTOR_REASON = (
    "is a FusedMatMul with an operand not proven of rank >= 2 (onnxruntime's kernel "
    "computes a transposed matrix times a vector otherwise than MatMul(Transpose(x), v))"
)


_TYPE_REASON = "takes an element type its onnxruntime schema does not allow"
_HALF_OR_FLOAT = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16})
#: The element types onnxruntime's schemas allow for the first input of the ops the
#: fusions write (``T``; 1.2x). The fusions match float math of any type: a double
#: ``LayerNormalization`` became a ``SkipLayerNormalization`` no session loads.
_FUSED_INPUT_TYPES = {
    ("com.microsoft", "SkipLayerNormalization"): _HALF_OR_FLOAT,
    ("com.microsoft", "SkipSimplifiedLayerNormalization"): _HALF_OR_FLOAT,
    ("com.microsoft", "MultiHeadAttention"): _HALF_OR_FLOAT,
    ("com.microsoft", "Attention"): _HALF_OR_FLOAT,
    ("com.microsoft", "RotaryEmbedding"): _HALF_OR_FLOAT,
    ("com.microsoft", "GroupQueryAttention"): _HALF_OR_FLOAT,
    ("com.microsoft", "GroupNorm"): frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16}),
    ("com.microsoft", "Gelu"): variants.FUSED_MATMUL_TYPES,
    ("com.microsoft", "FastGelu"): variants.FUSED_MATMUL_TYPES,
    ("com.microsoft", "BiasGelu"): variants.FUSED_MATMUL_TYPES,
    ("com.microsoft", "FusedMatMul"): variants.FUSED_MATMUL_TYPES,
    ("", "SimplifiedLayerNormalization"): variants.FUSED_MATMUL_TYPES,
}


def _untyped_fused_node(model: ir.Model, known: set[int], facts) -> str | None:
    """A new fused node whose first input's element type its schema does not allow.

    Subgraphs too: onnxscript's rewriter fuses inside an ``If`` branch.
    """
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        allowed = _FUSED_INPUT_TYPES.get((node.domain, node.op_type))
        if allowed is None or id(node) in known or not node.inputs:
            continue
        dtype = facts.dtype(node.inputs[0])
        if dtype not in allowed:
            return f"{node.name or node.op_type!r} ({dtype.name if dtype else 'unknown'})"
    return None


def _vector_fused_matmul(model: ir.Model, known: set[int], facts) -> str | None:
    """The name of a new ``FusedMatMul`` whose ``A`` or ``B`` may be 1-D, else ``None``.

    onnxscript fuses ``MatMul(Transpose(x), w)`` into ``FusedMatMul<transA=1>(x, w)`` also
    for a vector ``w``; onnxruntime then gives other values (``[1, K, 4]`` by ``[K]``:
    ``[2, 8, 14, 20]`` for ``[8, 11, 14, 17]``; found by fuzzing, seed 206330). Subgraphs
    too (an ``If`` branch's fusion was not checked).
    """
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if (
            id(node) in known
            or node.domain != "com.microsoft"
            or node.op_type != "FusedMatMul"
        ):
            continue
        for value in node.inputs[:2]:
            shape = facts.shape(value)
            if shape is None or len(shape) < 2:
                return node.name or node.op_type
    return None


def _pin_new_reshape_wildcards(
    model: ir.Model, known: set[int], facts, snapshot: ir.Model, assume: dict
) -> str | None:
    """Makes the ``-1`` of the Reshapes a fusion step created safe on empty tensors.

    A fusion writes targets such as ``[0, 0, -1]``; onnxruntime, like the spec, cannot
    infer a ``-1`` when another dim is 0, so at ``batch = 0`` the fused model fails where
    the original ran. The guard's shape proofs do not see this (they describe runs that
    succeed). Each new Reshape whose constant target has a ``-1`` gets the target
    :func:`constant_reshape_target` proves from its input and output shapes (the ``-1``
    kept only next to dims proven ``>= 1``). Returns the name of a Reshape left unsafe.

    The ``>= 1`` proofs come from the model *before* the step (``snapshot``): the fused
    model's own analysis assumes its ``-1`` resolved, i.e. the very dims nonzero.
    """
    proofs = None
    for node in list(model.graph):
        if node.op_type != "Reshape" or node.domain != "" or id(node) in known:
            continue
        target = constant_tensor(node.inputs[1]) if len(node.inputs) > 1 else None
        if target is None or -1 not in target.numpy().tolist():
            continue
        if proofs is None:
            proofs = analyze(snapshot, assume=assume)
            old = {v.name: v for v in _values(snapshot.graph)}
        # The shapes as the model before the step proves them, where the values existed.
        source, result = (
            proofs.shape(old[v.name]) if v.name in old else facts.shape(v)
            for v in (node.inputs[0], node.outputs[0])
        )
        if source is None or result is None:
            return node.name
        pinned, _ = constant_reshape_target(proofs, source, result)
        if pinned is None:
            return node.name
        if pinned == target.numpy().tolist():
            continue
        const = ir.node(
            "Constant", [], attributes={"value": ir.tensor(np.array(pinned, np.int64))}
        )
        model.graph.insert_before(node, const)
        node.replace_input_with(1, const.outputs[0])
        node.attributes.pop("allowzero", None)  # 0, the default: the new target copies with 0
    return None


def _values(graph: ir.Graph):
    yield from graph.inputs
    for node in graph:
        yield from node.outputs


def _has_private_nodes(model: ir.Model) -> bool:
    return any(
        node.domain.startswith(_PRIVATE_DOMAIN)
        for node in ir.traversal.RecursiveGraphIterator(model.graph)
    )


def _restore(model: ir.Model, snapshot: ir.Model) -> None:
    """Puts ``snapshot`` (a clone of ``model``, sharing its tensors) back in place."""
    model.graph = snapshot.graph  # the graph carries the model's opset imports
    model.functions.clear()
    model.functions.update(snapshot.functions)
