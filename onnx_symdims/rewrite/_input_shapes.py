"""Input shapes a user gives by input name (onnxsim's ``--overwrite-input-shape``).

``optimize(model, input_shapes={"pixel_values": [1, 3, "height", "width"]})`` promises
that the model only runs with inputs of those shapes. Each given dim is an int, a
symbol name, or ``None`` / ``"?"`` (keep what is declared):

* an int for a declared symbol (``batch``) fixes that symbol, in every input and output
  that uses it, as ``symbol_ranges={"batch": (1, 1)}`` does (the declared name ties
  them: one ``batch`` is one size);
* an int or a name for an anonymous dim (``?``, none, ``-1``) or a declared expression
  (``2*batch``) is written on that input's dim only;
* a declared int must be given as itself, a declared symbol by its own name: the user
  names and fixes sizes, a shape the model declares stays (a different one is an error).

Input names and ranks never change.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 18]>
    ...     g (float[batch, ?, 8] x) => (float[batch, ?, 8] y) { y = Relu(x) }
    ... ''')
    >>> apply_input_shapes(model, {"x": [1, "seq", 8]})
    {'batch': 1}
    >>> model.graph.inputs[0].shape
    Shape([SymbolicDim('batch'), SymbolicDim('seq'), 8])
"""

from __future__ import annotations

__all__ = ["InputShapeError", "apply_input_shapes"]

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from onnx_symdims import expr

#: What a given dim may be: a size, a symbol name, or "keep the declared dim".
GivenDim = int | str | None


class InputShapeError(ValueError):
    """A given input shape names no input, has another rank, or contradicts the model."""


def apply_input_shapes(
    model: ir.Model, input_shapes: Mapping[str, Sequence[GivenDim]]
) -> dict[str, int]:
    """Writes ``input_shapes`` into the main graph's inputs where no symbol is fixed.

    Returns the symbols fixed by the given ints (``{"batch": 1}``), for the caller to
    write into every declared dim that uses them (:func:`~onnx_symdims.rewrite.
    _fixed_dims.fix_dims`). Everything is checked before anything is written.

    Raises:
        InputShapeError: An unknown input name, another rank than declared, a negative
            size, a text that is neither a size nor a symbol name, a declared int or
            symbol given otherwise, or one symbol given two sizes.
    """
    inputs = {value.name: value for value in model.graph.inputs}
    fixed: dict[str, int] = {}
    writes: list[tuple[ir.Value, list[int | ir.SymbolicDim | None]]] = []
    for name, given in input_shapes.items():
        value = inputs.get(name)
        if value is None:
            raise InputShapeError(
                f"input shape for {name!r}: the graph has no such input "
                f"(inputs: {', '.join(repr(n) for n in inputs) or 'none'})"
            )
        given = [_given_dim(name, d) for d in given]
        declared = list(value.shape.dims) if value.shape is not None else None
        if declared is not None and len(declared) != len(given):
            raise InputShapeError(
                f"input shape for {name!r}: {len(given)} dims given, the input has "
                f"rank {len(declared)} ({_text(value.shape)})"
            )
        dims: list[int | ir.SymbolicDim | None] = []
        for axis, new in enumerate(given):
            old = declared[axis] if declared is not None else None
            dims.append(_merged(name, axis, old, new, fixed))
        writes.append((value, dims))
    for value, dims in writes:
        if value.shape is not None and all(
            new is None or new is old for new, old in zip(dims, value.shape.dims)
        ):
            continue
        shape = value.shape
        old_dims = shape.dims if shape is not None else [None] * len(dims)
        denotations = [
            shape.get_denotation(i) if shape is not None else None for i in range(len(dims))
        ]
        value.shape = ir.Shape(
            [new if new is not None else old for new, old in zip(dims, old_dims)],
            denotations=denotations,
        )
    return fixed


def _given_dim(name: str, dim: GivenDim) -> int | str | None:
    if dim is None or (isinstance(dim, int) and not isinstance(dim, bool)):
        if isinstance(dim, int) and dim < 0:
            raise InputShapeError(f"input shape for {name!r}: negative size {dim}")
        return dim
    if isinstance(dim, str):
        text = dim.strip()
        if text in ("", "?"):
            return None
        if text.isdigit():
            return int(text)
        if text.isidentifier():
            return text
    raise InputShapeError(
        f"input shape for {name!r}: {dim!r} is neither a size, a symbol name nor '?'"
    )


def _merged(
    name: str,
    axis: int,
    old: int | ir.SymbolicDim | None,
    new: int | str | None,
    fixed: dict[str, int],
) -> int | ir.SymbolicDim | None:
    """The dim to write at ``axis`` (``None``: keep ``old``); records fixed symbols."""
    if new is None:
        return None
    where = f"input shape for {name!r}, dim {axis}"
    if isinstance(old, int) and old >= 0:
        if new != old:
            raise InputShapeError(f"{where}: the model declares {old}, {new!r} was given")
        return None
    symbol = _declared_symbol(old)
    if symbol is not None:
        if isinstance(new, str):
            if new != symbol:
                raise InputShapeError(
                    f"{where}: the model declares {symbol!r}, {new!r} was given "
                    "(a declared name is kept; give a size to fix it)"
                )
            return None
        if fixed.setdefault(symbol, new) != new:
            raise InputShapeError(
                f"{where}: {symbol!r} was given {fixed[symbol]} and {new} (one name, one size)"
            )
        return None  # written with every other use of the symbol
    # anonymous, "-1", or an expression of symbols: this input's dim only
    return new if isinstance(new, int) else ir.SymbolicDim(new)


def _declared_symbol(dim: int | ir.SymbolicDim | None) -> str | None:
    """The symbol a declared dim is, when its text is one plain symbol."""
    if dim is None or isinstance(dim, int) or not dim.value:
        return None
    try:
        parsed = expr.parse_dim(dim.value)
    except (expr.ExprError, ArithmeticError):
        return None
    if isinstance(parsed, expr.DimExpr) and not parsed.is_unknown:
        symbols = parsed.symbols()
        if len(symbols) == 1 and expr.to_onnx(parsed) == next(iter(symbols)):
            return next(iter(symbols))
    return None


def _text(shape: ir.Shape | None) -> str:
    return "[" + ", ".join(str(d) for d in shape.dims) + "]" if shape is not None else "?"
