"""Runs onnxscript's fusions with our shapes present, and undoes one that changes them.

onnxscript's fusion rules bind dims by name; with our shapes on the model they fire
far more often, and a misfire (a fused node that swallows a flattening ``Reshape``)
gives a model that no longer runs. The guard proves, before and after, the shape of
every graph output and of every value that survives the fusion under the same name;
when one is no longer proven equal, the whole fusion step is undone and a diagnostic
says which value changed.
"""

from __future__ import annotations

__all__ = ["guarded_fusions"]

import logging

import onnx_ir as ir

from onnx_symdims.rewrite._facts import analyze

logger = logging.getLogger(__name__)


def _named_shapes(model: ir.Model, facts) -> dict[str, tuple]:
    shapes = {}
    for node in model.graph:
        for value in node.outputs:
            if value.name:
                shapes[value.name] = facts.shape(value)
    return shapes


def _run(model: ir.Model, fusions: str) -> dict[str, int]:
    if fusions == "ort":
        from onnxscript.rewriter import ort_fusions

        _, counts = ort_fusions.optimize_for_ort(model)
        return dict(counts)
    from onnxscript.rewriter import onnx_fusions

    return dict(onnx_fusions.fuse(model))


def guarded_fusions(model: ir.Model, fusions: str, result) -> None:
    """Applies ``fusions`` to ``model`` in place unless they change a proven shape.

    Args:
        model: The model (with our shapes on it).
        fusions: ``"ort"`` or ``"onnx"``.
        result: The :class:`~onnx_symdims.rewrite.OptimizeResult` to report into
            (``fired["fusion.<name>"]``, ``diagnostics``).
    """
    before_proto = ir.serde.serialize_model(model)
    facts = analyze(model)
    before = _named_shapes(model, facts)
    outputs_before = [facts.shape(v) for v in model.graph.outputs]
    try:
        counts = _run(model, fusions)
    except Exception as e:  # a fusion pass that fails leaves the model as it was
        logger.warning("fusions %r failed (%s): undone", fusions, e)
        _restore(model, before_proto)
        result.diagnostics.append(f"fusions {fusions!r} failed and were undone: {e}")
        return
    facts_after = analyze(model)
    changed = [
        name
        for name, shape in _named_shapes(model, facts_after).items()
        if name in before and not facts_after.same_shape(before[name], shape)
    ]
    outputs_after = [facts_after.shape(v) for v in model.graph.outputs]
    if len(outputs_after) != len(outputs_before) or not all(
        facts_after.same_shape(a, b) for a, b in zip(outputs_before, outputs_after)
    ):
        changed.append("<graph outputs>")
    if changed:
        _restore(model, before_proto)
        message = (
            f"fusions {fusions!r} undone: the proven shape of {changed[0]!r} changed"
            + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else "")
        )
        logger.warning("%s", message)
        result.diagnostics.append(message)
        return
    for name, n in counts.items():
        if n:
            result.fired[f"fusion.{name}"] += n


def _restore(model: ir.Model, proto) -> None:
    restored = ir.serde.deserialize_model(proto)
    model.graph = restored.graph  # the graph carries the model's opset imports
    model.functions.clear()
    model.functions.update(restored.functions)
