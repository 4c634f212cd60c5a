"""Fixes the sizes a user says never vary: their symbols become ints in the graph's I/O.

``optimize(model, symbol_ranges={"batch": (1, 1)})`` promises that the model only runs
with ``batch = 1``. The declared dims of the graph inputs and outputs that use such a
symbol get its value (``[batch, seq_len]`` becomes ``[1, seq_len]``, ``2*batch`` becomes
``2``), so that every shape computed from them is a constant our rules and onnxscript's
folder remove, as ``--overwrite-input-shape`` does in onnxsim. The optimized model then
states the promise: onnxruntime refuses another size instead of computing with it.
Input names and ranks never change.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (float[batch, seq] x) => (float[batch, seq] y) { y = Relu(x) }
    ... ''')
    >>> fix_dims(model, {"batch": 1})
    True
    >>> model.graph.inputs[0].shape, model.graph.outputs[0].shape
    (Shape([1, SymbolicDim('seq')]), Shape([1, SymbolicDim('seq')]))
"""

from __future__ import annotations

__all__ = ["fix_dims", "fixed_sizes"]

from collections.abc import Mapping

import onnx_ir as ir

from onnx_symdims import expr


def fixed_sizes(ranges: Mapping[str, tuple[int | None, int | None]]) -> dict[str, int]:
    """The symbols whose range holds one size: ``{"batch": (1, 1)}`` gives ``{"batch": 1}``."""
    return {
        name: lower
        for name, (lower, upper) in ranges.items()
        if lower is not None and lower == upper
    }


def fix_dims(model: ir.Model, sizes: Mapping[str, int]) -> bool:
    """Writes ``sizes`` into the declared dims of the main graph's inputs and outputs.

    A dim whose text is a symbol of ``sizes`` (or an expression of such symbols, once
    substituted) is replaced by its value, or by the substituted canonical expression
    when other symbols remain; a negative value is left as written. Text that does not
    parse is compared as is; a key of ``sizes`` that is the text of an expression
    (``"2*seq"``) fixes nothing: it is no symbol. Returns whether any dim changed.
    """
    if not sizes:
        return False
    changed = False
    graph = model.graph
    for value in (*graph.inputs, *graph.outputs):
        shape = value.shape
        if shape is None:
            continue
        dims = [_fixed(d, sizes) for d in shape.dims]
        if any(new is not old for new, old in zip(dims, shape.dims)):
            denotations = [shape.get_denotation(i) for i in range(len(dims))]
            value.shape = ir.Shape(dims, denotations=denotations)
            changed = True
    return changed


def _fixed(dim: int | ir.SymbolicDim, sizes: Mapping[str, int]) -> int | ir.SymbolicDim:
    if isinstance(dim, int) or not dim.value:
        return dim
    try:
        parsed = expr.parse_dim(dim.value)
    except (expr.ExprError, ArithmeticError):
        # Text no parser reads: only its very name fixes it.
        return sizes.get(dim.value, dim)
    # The text as inference reads it, never as a name: a range on the text "2*seq_len"
    # (torch.export's derived dim) names no symbol; fixing the dim to its size would
    # leave seq_len free everywhere else, and the optimized model would refuse the runs
    # of seq_len the original takes.
    if not isinstance(parsed, expr.DimExpr) or parsed.is_unknown:
        return dim
    if not parsed.symbols() & sizes.keys():
        return dim
    result = expr.substitute(parsed, sizes)
    if isinstance(result, int):
        return result if result >= 0 else dim  # no run has it: leave the text to diagnose
    if isinstance(result, expr.DimExpr) and not result.is_unknown:
        return ir.SymbolicDim(expr.to_onnx(result))
    return dim
