"""Lowering dims to ``onnx_ir`` objects, only when writing the model."""

from __future__ import annotations

__all__ = ["IRDimWriter", "new_ir_shape", "new_tensor_type", "same_ir_dims"]

import logging
from collections.abc import Callable, Sequence

import onnx_ir as ir

from onnx_symdims import expr

logger = logging.getLogger(__name__)


def _state(obj: object) -> tuple:
    """Every attribute of ``obj`` (slots and ``__dict__``), to compare two objects."""
    slots = []
    for cls in type(obj).__mro__:
        names = cls.__dict__.get("__slots__", ())
        slots.extend(
            (name, getattr(obj, name, _ABSENT))
            for name in ((names,) if isinstance(names, str) else names)
        )
    return tuple(slots), dict(getattr(obj, "__dict__", {}))


_ABSENT = object()


def _shape_maker(frozen: bool) -> Callable[[list[int | ir.SymbolicDim]], ir.Shape] | None:
    """A constructor of ``ir.Shape`` (``frozen`` or not) from ready dims (ints, ``SymbolicDim``).

    ``ir.Shape(dims)`` converts each dim again (several checks per dim) and is most of the
    cost of writing a new shape. The fast constructor sets what it would set; it is used
    only when it builds exactly the object ``ir.Shape`` builds (checked once, here:
    another onnx-ir version may store a shape differently).
    """
    new = object.__new__
    cls = ir.Shape

    def make(dims: list[int | ir.SymbolicDim]) -> ir.Shape:
        shape = new(cls)
        shape._dims = dims  # type: ignore[attr-defined]
        shape._denotations = [None] * len(dims)  # type: ignore[attr-defined]
        shape._frozen = frozen  # type: ignore[attr-defined]
        return shape

    try:
        probe = [3, ir.SymbolicDim("d")]
        expected = ir.Shape(list(probe), frozen=frozen)
        made = make(list(probe))
        if (
            _state(made) == _state(expected)
            and made.frozen == frozen
            and made.dims == expected.dims
        ):
            return make
    except Exception:  # any surprise: the constructor, as before
        logger.debug("fast ir.Shape construction unavailable", exc_info=True)
    return None


_MAKE_FROZEN_SHAPE = _shape_maker(frozen=True)
_MAKE_SHAPE = _shape_maker(frozen=False)
_SYMBOLIC_DIM = ir.SymbolicDim


def _tensor_type_maker() -> Callable[[ir.DataType], ir.TensorType]:
    """A constructor of ``ir.TensorType(dtype)``, built directly when that is the same.

    The inference pass types nearly every value; the class's ``Protocol`` base makes
    its constructor about twice the cost of setting the two slots. As for shapes, the
    fast constructor is used only when it builds exactly what ``ir.TensorType`` builds.
    """
    new = object.__new__
    cls = ir.TensorType

    def make(dtype: ir.DataType) -> ir.TensorType:
        tensor_type = new(cls)
        tensor_type._dtype = dtype  # type: ignore[attr-defined]
        tensor_type.denotation = None
        return tensor_type

    try:
        made, expected = make(ir.DataType.FLOAT), cls(ir.DataType.FLOAT)
        if (
            _state(made) == _state(expected)
            and made == expected
            and made.dtype is expected.dtype
        ):
            return make
    except Exception:  # any surprise: the constructor
        logger.debug("fast ir.TensorType construction unavailable", exc_info=True)
    return cls


#: ``new_tensor_type(dtype)``: a new ``ir.TensorType(dtype)`` (each value gets its own:
#: ``Value.dtype = ...`` changes the type object in place).
new_tensor_type = _tensor_type_maker()


def new_ir_shape(dims: Sequence[int | ir.SymbolicDim]) -> ir.Shape:
    """``ir.Shape(dims)`` (a new, unfrozen shape), built directly when ``dims`` are ready.

    Ready: exact ints and ``ir.SymbolicDim`` objects, which ``ir.Shape`` stores as they
    are (a declared shape's own dims and :class:`IRDimWriter` output).
    """
    if _MAKE_SHAPE is not None:
        for d in dims:
            cls = d.__class__
            if cls is not int and cls is not _SYMBOLIC_DIM:
                return ir.Shape(dims)
        return _MAKE_SHAPE(list(dims))
    return ir.Shape(dims)


#: Interned expression -> its ``ir.SymbolicDim`` (immutable, so one object serves every
#: model), shared by the writers.
_IR_DIMS: dict[expr.DimExpr, ir.SymbolicDim] = {}
#: Dims -> their frozen ``ir.Shape``, likewise shared: a frozen shape cannot be edited in
#: place, and models (and runs over one model) repeat the same shapes.
_IR_SHAPES: dict[tuple[expr.Dim, ...], ir.Shape] = {}
#: Every symbol name of every expression a writer of this process has printed (never
#: emptied, unlike the caches above: a dim printed before a cache was emptied may still be
#: on a live model). Past _MAX_WRITTEN names, it stops growing and every name counts as
#: written (_ALL_WRITTEN).
_WRITTEN_SYMBOLS: set[str] = set()
_MAX_WRITTEN = 100_000
_ALL_WRITTEN = False


class IRDimWriter:
    """Converts dims to ``int | ir.SymbolicDim``, printing each ``DimExpr`` once.

    ``ir.SymbolicDim`` is immutable, so one object per expression is shared by every
    shape that uses it.
    """

    def __init__(self) -> None:
        # Shared by every writer: the text of an interned expression never changes, and
        # each run of a small model would otherwise print and wrap its dims again.
        if len(_IR_DIMS) > 100_000:
            _IR_DIMS.clear()
        if len(_IR_SHAPES) > 100_000:
            _IR_SHAPES.clear()
        self._cache: dict[expr.DimExpr, ir.SymbolicDim] = _IR_DIMS
        self._shapes: dict[tuple[expr.Dim, ...], ir.Shape] = _IR_SHAPES

    def dim(self, d: expr.Dim) -> int | ir.SymbolicDim:
        """The IR form of one dim: the int itself, or the canonical ``dim_param`` text."""
        if isinstance(d, int):
            return d
        cached = self._cache.get(d)
        if cached is None:
            _note_written(d)  # before the dim can be on any model
            cached = self._cache[d] = ir.SymbolicDim(expr.to_onnx(d))
        return cached

    @staticmethod
    def never_wrote(name: str) -> bool:
        """True when no writer of this process has written a dim holding symbol ``name``.

        Every dim the engine writes is printed by a writer: a symbol the context minted
        (so no declared dim names it) that no writer wrote is on no value of the model.
        """
        return not _ALL_WRITTEN and name not in _WRITTEN_SYMBOLS

    def dims(self, dims: Sequence[expr.Dim]) -> list[int | ir.SymbolicDim]:
        """The IR form of each dim."""
        return [self.dim(d) for d in dims]

    def shape(self, dims: Sequence[expr.Dim]) -> ir.Shape:
        """The ``ir.Shape`` of ``dims``: frozen, and shared by every value with these dims.

        Sharing is safe because a frozen shape cannot be edited in place (onnx-ir's own
        ``merge_shapes`` copies it first); most models repeat a few shapes thousands of
        times, so this saves most of the writing cost. Shared by every writer, as the
        dims' texts are.
        """
        key = dims if dims.__class__ is tuple else tuple(dims)
        shape = self._shapes.get(key)  # type: ignore[arg-type]
        if shape is None:
            if _MAKE_FROZEN_SHAPE is None:
                shape = ir.Shape(self.dims(key), frozen=True)
            else:
                # What ir.Shape stores for each dim: an int as an exact int.
                shape = _MAKE_FROZEN_SHAPE(
                    [
                        d
                        if d.__class__ is int
                        else int(d)
                        if isinstance(d, int)
                        else self.dim(d)
                        for d in key
                    ]
                )
            self._shapes[key] = shape
        return shape


def _note_written(d: expr.DimExpr) -> None:
    """Records the symbols of ``d``, which a writer is about to print (once per process)."""
    global _ALL_WRITTEN
    if len(_WRITTEN_SYMBOLS) >= _MAX_WRITTEN:
        _ALL_WRITTEN = True
    else:
        _WRITTEN_SYMBOLS.update(d.symbols())


def same_ir_dims(written: Sequence[int | ir.SymbolicDim], shape: ir.Shape | None) -> bool:
    """True when ``shape`` already holds exactly ``written`` (ints, and dim text).

    Faster than ``ir.Shape.__eq__``, whose ``Sequence`` protocol check dominates
    large models.
    """
    if shape is None:
        return False
    current = shape._dims  # the slots of shape.dims and d.value (read only)
    if len(current) != len(written):
        return False
    for a, b in zip(written, current):
        if a is b:
            continue
        if isinstance(a, int) or isinstance(b, int):
            if not (isinstance(a, int) and isinstance(b, int) and a == b):
                return False
        elif a._value != b._value:
            return False
    return True
