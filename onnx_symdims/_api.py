"""The one-call API, :func:`infer_symbolic_shapes` (re-exported by the package)."""

from __future__ import annotations

__all__ = ["infer_symbolic_shapes", "optimize"]

import gc
import logging
import os
from typing import TYPE_CHECKING, Any, overload

import onnx_ir as ir

from onnx_symdims.passes import SymbolicShapeInferencePass, without_gc

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

#: The pass with the default options, for calls that pass none (the usual call): the
#: pass keeps its options only (every run makes its own context, engine and result), so
#: one instance serves every such call, and a small model's call does not pay for the
#: constructor (about 5 % of a one-node model's call).
_DEFAULT_PASS = SymbolicShapeInferencePass()


def _infer(model: ir.Model, anchors: bool, options: dict[str, Any]) -> None:
    # without_gc, inline (not between the passes either, see without_gc): every call
    # enters it, and the manager's object and two method calls cost more than this.
    enabled = gc.isenabled()
    gc.disable()
    try:
        _run_passes(model, anchors, options)
    finally:
        if enabled:
            gc.enable()


def _run_passes(model: ir.Model, anchors: bool, options: dict[str, Any]) -> None:
    # ``call_without_gc`` rather than ``__call__``: the pass infrastructure's checks (no
    # pre- or post-conditions, in place, a PassResult) hold by construction here, the
    # collector is off already (see _infer), and both cost every small model's run.
    inference = SymbolicShapeInferencePass(**options) if options else _DEFAULT_PASS
    inferred = inference.call_without_gc(model)
    # Without a recorded equality the anchor pass renames and reports nothing: it is
    # not run (most models record none; building and running it costs 30-60k
    # instructions, a few percent of a small model's call).
    if anchors and inferred.context.constraints_size():
        # Imported on use (see passes.__getattr__): the cold start does not load it.
        from onnx_symdims.passes import AnchorConstraintPropagationPass

        strict = bool(options.get("strict")) or options.get("policy") == "strict"
        AnchorConstraintPropagationPass(
            inferred.context,
            strict=strict,
            snapshot=inferred.snapshot,
            # The context is dropped here unless the caller passed in their own.
            rewrite_context=options.get("context") is not None,
            # Else the context is this run's own (and known_nodes needs a context).
            fresh_context=options.get("context") is None,
        ).call_without_gc(model)


@overload
def infer_symbolic_shapes(
    model: ir.Model, *, anchors: bool = ..., **options: Any
) -> ir.Model: ...
@overload
def infer_symbolic_shapes(
    model: onnx.ModelProto, *, anchors: bool = ..., **options: Any
) -> onnx.ModelProto: ...
@overload
def infer_symbolic_shapes(
    model: str | os.PathLike, *, anchors: bool = ..., **options: Any
) -> ir.Model: ...


def infer_symbolic_shapes(model, *, anchors: bool = True, **options):
    """Infers symbolic shapes for every value of ``model``.

    Args:
        model: An ``ir.Model`` (updated in place and returned), an ``onnx.ModelProto``
            (a new, inferred ``ModelProto`` is returned; the argument is not changed) or a
            path (loaded without reading external weights; the ``ir.Model`` is returned).
        anchors: After inference, run :class:`AnchorConstraintPropagationPass`, which
            renames engine-made symbols to the names the model declares (``total_seq``
            for ``past_seq+seq``) where the recorded equalities prove them equal.
        **options: Keyword options of :class:`SymbolicShapeInferencePass`: ``policy``,
            ``strict``, ``context``, ``progress``, ``nonempty_inputs``,
            ``symbol_ranges``, ``value_info_anchors``.

    Returns:
        The inferred model, of the kind described above.

    Raises:
        ModelLoadError: ``model`` is a path that is not a loadable ONNX file, or a
            ``ModelProto`` onnx-ir cannot read (e.g. two nodes with the same output
            name); the message names the real cause.
        ShapeInferenceError: in strict mode, on the first error diagnostic.
    """
    if isinstance(model, ir.Model):
        _infer(model, anchors, options)
        return model
    # Imported here: a caller passing an ir.Model (the common, in-process case) does not
    # pay for loading the model I/O module in its first call (the cold start).
    from onnx_symdims._modelio import deserialize_proto, load_model

    # Loading and serializing build as many long-lived objects as the model has parts:
    # with the collector on, its full scans make them superlinear (measured on a
    # 100k-node model: ir.load 6.9 s with it, 2.4 s without).
    if isinstance(model, (str, os.PathLike)):
        with without_gc():
            loaded = load_model(model)
            _infer(loaded, anchors, options)
        return loaded
    import onnx

    if isinstance(model, onnx.ModelProto):
        with without_gc():
            ir_model = deserialize_proto(model)
            _infer(ir_model, anchors, options)
            return ir.serde.serialize_model(ir_model)
    raise TypeError(
        f"expected an ir.Model, onnx.ModelProto or path, got {type(model).__name__}"
    )


def _optimized(
    model: ir.Model, fusions: str | None, options: dict[str, Any], path: Any = None
) -> ir.Model:
    """``rewrite.optimize``; a failure caused by a weight that cannot be read names it."""
    from onnx_symdims import rewrite

    try:
        return rewrite.optimize(model, fusions=fusions, **options)
    except Exception as e:
        # Data that does not fill its shape fails wherever a rule reads the weight, with
        # an error naming neither; the scan runs only after a failure (no weight read).
        from onnx_symdims._modelio import ModelLoadError, unreadable_initializer

        broken = unreadable_initializer(model)
        if broken is None:
            raise
        if path is not None:
            raise ModelLoadError(path, broken) from e
        raise ValueError(broken) from e


def optimize(model: Any, *, fusions: str | None = None, **options: Any) -> Any:
    """Optimizes ``model`` with proven shapes (:func:`onnx_symdims.rewrite.optimize`).

    Args:
        model: An ``ir.Model`` (optimized in place and returned), an ``onnx.ModelProto``
            (a new optimized ``ModelProto`` is returned) or a path (loaded, optimized and
            returned as an ``ir.Model``).
        fusions: ``None``, ``"ort"`` or ``"onnx"``: onnxscript's fusions, guarded.
        **options: Options of :class:`~onnx_symdims.OptimizePass`.

    Returns:
        The optimized model, of the kind described above.

    Raises:
        ModelLoadError: ``model`` is a path that is not a loadable ONNX file, or a
            ``ModelProto`` onnx-ir cannot read (two nodes with the same output name), or
            a weight's data does not fill its shape (the message names the weight; a
            ``ValueError`` for a model given as an ``ir.Model`` or ``ModelProto``), or
            two graph inputs have one name (a ``ValueError`` for an ``ir.Model``).

    Example::

        >>> import onnx_symdims
        >>> model = onnx_symdims.optimize(onnx_symdims.data_path("tiny_decoder.onnx"))
        >>> sum(1 for _ in model.graph) < 212
        True
    """
    if isinstance(model, ir.Model):
        return _optimized(model, fusions, options)  # OptimizePass refuses duplicate inputs
    from onnx_symdims._modelio import deserialize_proto, load_model

    if isinstance(model, (str, os.PathLike)):
        return _optimized(load_model(model), fusions, options, model)
    import onnx

    if isinstance(model, onnx.ModelProto):
        # a copy: onnx-ir wraps the proto's tensors, and optimizing writes into them
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        optimized = _optimized(deserialize_proto(copy), fusions, options)
        return ir.serde.serialize_model(optimized)
    raise TypeError(
        f"expected an ir.Model, onnx.ModelProto or path, got {type(model).__name__}"
    )
