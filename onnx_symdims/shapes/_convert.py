"""Lowering dims to ``onnx_ir`` objects, only when writing the model."""

from __future__ import annotations

__all__ = ["IRDimWriter", "same_ir_dims"]

import logging
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)


class IRDimWriter:
    """Converts dims to ``int | ir.SymbolicDim``, printing each ``DimExpr`` once.

    ``ir.SymbolicDim`` is immutable, so one object per expression is shared by every
    shape that uses it.
    """

    def __init__(self) -> None:
        self._cache: dict[expr.DimExpr, ir.SymbolicDim] = {}
        self._shapes: dict[tuple[expr.Dim, ...], ir.Shape] = {}

    def dim(self, d: expr.Dim) -> int | ir.SymbolicDim:
        """The IR form of one dim: the int itself, or the canonical ``dim_param`` text."""
        if isinstance(d, int):
            return d
        cached = self._cache.get(d)
        if cached is None:
            cached = self._cache[d] = ir.SymbolicDim(expr.to_onnx(d))
        return cached

    def dims(self, dims: Sequence[expr.Dim]) -> list[int | ir.SymbolicDim]:
        """The IR form of each dim."""
        return [self.dim(d) for d in dims]

    def shape(self, dims: Sequence[expr.Dim]) -> ir.Shape:
        """The ``ir.Shape`` of ``dims``: frozen, and shared by every value with these dims.

        Sharing is safe because a frozen shape cannot be edited in place (onnx-ir's own
        ``merge_shapes`` copies it first); most models repeat a few shapes thousands of
        times, so this saves most of the writing cost.
        """
        key = dims if dims.__class__ is tuple else tuple(dims)
        shape = self._shapes.get(key)  # type: ignore[arg-type]
        if shape is None:
            shape = self._shapes[key] = ir.Shape(self.dims(key), frozen=True)
        return shape


def same_ir_dims(written: Sequence[int | ir.SymbolicDim], shape: ir.Shape | None) -> bool:
    """True when ``shape`` already holds exactly ``written`` (ints, and dim text).

    Faster than ``ir.Shape.__eq__``, whose ``Sequence`` protocol check dominates
    large models.
    """
    if shape is None:
        return False
    current = shape.dims
    if len(current) != len(written):
        return False
    for a, b in zip(written, current):
        if a is b:
            continue
        if isinstance(a, int) or isinstance(b, int):
            if not (isinstance(a, int) and isinstance(b, int) and a == b):
                return False
        elif a.value != b.value:
            return False
    return True
