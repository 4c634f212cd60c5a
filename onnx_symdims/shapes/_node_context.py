"""``NodeContext``: the per-node view an op hook reads inputs from and writes outputs to.

An op hook is ``def infer_x(ctx: NodeContext, node: ir.Node) -> None``. It reads input
shapes (tuples of dims, ``None`` for an unknown rank), values-as-shape and attributes,
and writes each output's shape, dtype and (for shape computations) value. It never sees
``ir.SymbolicDim`` strings: the driver converts when reading and writing the model.

Example hook::

    @register("", "Relu")
    def infer_relu(ctx: NodeContext, node: ir.Node) -> None:
        ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))

On malformed input a hook calls :meth:`NodeContext.fail`, which records an ``error``
diagnostic for the node and leaves its outputs with unknown shapes.
"""

from __future__ import annotations

__all__ = ["NodeContext", "SubgraphEngine", "broadcast_dims"]

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, Protocol

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes._context import MAX_VALUE_ELEMENTS, MISSING, sanitize_symbol_name
from onnx_symdims.shapes._diagnostics import NodeInferenceFailure

if TYPE_CHECKING:
    from onnx_symdims.shapes._context import ShapesContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]


def _one_forces_one(s: expr.DimExpr, other: Dim) -> bool:
    """True when ``s`` is a bare symbol and ``other`` is 1 whenever ``s`` is 1."""
    if not s.is_symbol:
        return False
    try:
        return expr.substitute(other, {s.name: 1}) == 1  # type: ignore[dict-item]
    except (ArithmeticError, expr.ExprError):
        return False  # e.g. an exact division that is inexact at s == 1: no proof


def broadcast_dims(a: Dim, b: Dim) -> Dim:
    """The numpy broadcast of two dims, as precise as soundness allows.

    Besides :func:`expr.broadcast`, one case is decided here: ``broadcast(s, b)`` is
    ``s`` when ``b`` is 1 whenever ``s`` is 1 (e.g. ``b = min(64, s)``): in a valid run
    either ``b == s``, or ``b == 1`` (result ``s``), or ``s == 1`` and then ``b == 1``.

    Raises:
        expr.BroadcastError: two different ints, neither 1.
    """
    if isinstance(a, expr.DimExpr) and isinstance(b, expr.DimExpr):
        if _one_forces_one(a, b):
            return a
        if _one_forces_one(b, a):
            return b
    return expr.broadcast(a, b)


_DIM_EXPR = expr.DimExpr


def _valid_dim(d: Dim | None) -> bool:
    """True when ``d`` is an int ``>= 0`` or a known ``DimExpr``."""
    if isinstance(d, int):
        return d >= 0
    return d is not None and d.unknown_reason is None


def _valid_dims(dims: Sequence[Dim | None]) -> bool:
    """True when every dim is an int ``>= 0`` or a known ``DimExpr`` (the usual case)."""
    for d in dims:
        if isinstance(d, int):
            if d < 0:
                return False
        elif d is None or d.unknown_reason is not None:
            return False
    return True


class SubgraphEngine(Protocol):
    """What the inference driver offers to hooks (implemented by the pass)."""

    def fallback(self, ctx: NodeContext) -> None:
        """Infers the node's outputs with ONNX's own per-node inference."""
        ...

    def infer_subgraph(
        self,
        graph: ir.Graph,
        input_shapes: Sequence[Shape | None] | None,
        input_dtypes: Sequence[ir.DataType | None] | None,
    ) -> list[Shape | None]:
        """Infers a subgraph (outer values visible) and returns its output shapes."""
        ...


#: Ranges of the integer dtypes other than int64 whose values the engine tracks. The
#: arithmetic on elements is exact (unbounded); the tensor's elements wrap. An element
#: outside its dtype's range, or a symbolic one (a dim) in a dtype of 16 bits or fewer,
#: is unknown: its runtime value is not the computed one. int32 keeps symbolic
#: elements that are small sums of dims (:func:`_fits_32_bits`): a dim of 2**31 or more is
#: not a tensor this engine meets, but a large multiple of one wraps. The unsigned types
#: keep a symbolic element only where it is proven ``>= 0``: ``N - 5`` is
#: ``2**64 - 3`` in uint64 at ``N = 2``, and ``Less`` of it against 3 is false there.
_INT64 = ir.DataType.INT64
#: Shapes (tuples of ints and interned ``DimExpr``) that passed set_output's check: a
#: shape's validity is a function of its dims, and hooks pass the same tuples again
#: (an elementwise op its input's). A tuple lookup is one C call; the check, a Python
#: loop over the dims.
_VALID_SHAPES: set[tuple] = set()

#: Elements of int64 values that passed set_output_value's check (each an int or a
#: _fits_64_bits element): like _VALID_SHAPES, one lookup for the tuples that flow from
#: node to node instead of a check per element.
_EXACT_INT64_ELEMENTS: set[tuple] = set()

_NARROW_INT_RANGES = {
    ir.DataType.INT32: (-(2**31), 2**31 - 1, "32"),
    ir.DataType.UINT32: (0, 2**32 - 1, "u32"),
    ir.DataType.UINT64: (0, 2**64 - 1, "u64"),
    ir.DataType.INT16: (-(2**15), 2**15 - 1, None),
    ir.DataType.UINT16: (0, 2**16 - 1, None),
    ir.DataType.INT8: (-128, 127, None),
    ir.DataType.UINT8: (0, 255, None),
}


#: A symbolic 32-bit element is kept as a sum of dims with coefficients below this:
#: ``N * 65536`` wraps in int32 from ``N = 32768`` on, ``15*N`` from 143M on, a plain dim
#: or ``N + M - 1`` only beyond sizes no tensor has.
_NARROW_COEFFICIENT = 1 << 4


def _fits_32_bits(e: expr.DimExpr) -> bool:
    """Whether a symbolic int32 element stays in range wherever its dims are tensor sizes."""
    if e.is_unknown:
        return True
    monomials, constant = e.coefficients()
    return abs(constant) < _NARROW_COEFFICIENT and all(
        m.is_symbol and abs(c) < _NARROW_COEFFICIENT for m, c in monomials.items()
    )


#: The sizes :func:`_fits_64_bits` assumes: a dim below 2**32, a product of dims (a
#: tensor's element count) below 2**48. Beyond them no tensor this engine meets exists.
_DIM_BOUND = 1 << 32
_PRODUCT_BOUND = 1 << 48
#: A factor bounded below this is a count (a size, an element count, such a count plus or
#: minus small terms): a product of counts is capped at ``_PRODUCT_BOUND``. A factor
#: beyond it (``floor(N*2**24/3)``) is a multiple of one, and the product is not capped.
_COUNT_FACTOR = 1 << 56
_INT64_LIMIT = 1 << 63


def _magnitude(e: expr.DimExpr | int) -> int:
    """An upper bound on ``|e|`` wherever its symbols are tensor sizes (see ``_DIM_BOUND``)."""
    if isinstance(e, int):
        return abs(e)
    total = abs(e.const)
    for mono, c in e.terms:
        bound = 1
        counts = True  # every factor at most an element count: so is the product
        for atom in mono:
            # A symbol is a size; floor, mod, max and min are no larger than their largest
            # argument.
            args = atom.args
            factor = max(_DIM_BOUND, *(_magnitude(a) for a in args)) if args else _DIM_BOUND
            counts = counts and factor < _COUNT_FACTOR
            bound *= factor
        if counts and len(mono) > 1:
            bound = min(bound, _PRODUCT_BOUND)
        total += abs(c) * bound
    return total


#: _fits_64_bits's answers: a pure function of the interned element, asked again for the
#: same elements node after node (a shape computation's values flow through many nodes),
#: while _magnitude walks the whole expression each time.
_FITS_64_BITS: dict[expr.DimExpr, bool] = {}
_MAX_FITS_64_BITS = 50_000


def _fits_64_bits(e: expr.DimExpr) -> bool:
    """Whether a symbolic int64 element stays in range wherever its dims are tensor sizes.

    ``N * 2**40`` is ``0`` in int64 from ``N = 2**24`` on (a 64 MB float tensor): the
    element the engine computes is not the tensor's there, so it is unknown.
    """
    fits = _FITS_64_BITS.get(e)
    if fits is None:
        fits = e.is_symbol or e.is_unknown or _magnitude(e) < _INT64_LIMIT
        if len(_FITS_64_BITS) >= _MAX_FITS_64_BITS:
            _FITS_64_BITS.clear()
        _FITS_64_BITS[e] = fits
    return fits


def _symbolic_fits(e: expr.DimExpr, kind: str | None, scope: expr.Scope) -> bool:
    """Whether a symbolic element of a dtype of ``kind`` (see ``_NARROW_INT_RANGES``) is exact."""
    if e.is_unknown:
        return True
    if kind == "32":
        return _fits_32_bits(e)
    if kind == "u32":
        return _fits_32_bits(e) and scope.prove_nonneg(e)
    if kind == "u64":
        return _fits_64_bits(e) and scope.prove_nonneg(e)
    return False


def _within(
    elements: Sequence[Dim], bounds: tuple[int, int, str | None], scope: expr.Scope
) -> tuple[Dim, ...]:
    low, high, kind = bounds
    return tuple(
        e
        if (low <= e <= high if isinstance(e, int) else _symbolic_fits(e, kind, scope))
        else expr.unknown("value")
        for e in elements
    )


# The attribute kinds, read once (an enum member read through its class is a lookup in
# the enum's metaclass, on every attribute a hook reads).
_INT = ir.AttributeType.INT
_INTS = ir.AttributeType.INTS
_FLOAT = ir.AttributeType.FLOAT
_FLOATS = ir.AttributeType.FLOATS
_STRING = ir.AttributeType.STRING
_TENSOR = ir.AttributeType.TENSOR


class NodeContext:
    """A cheap, reusable view of one node for op hooks.

    The driver keeps one instance per graph walk and calls :meth:`reset` before each
    node, so hooks must not keep a reference to it.

    Attributes:
        ctx: The model's :class:`ShapesContext` (constraints, bounds, tables).
        node: The node being inferred.
        opset: The opset version of the node's domain (as imported by the model).
    """

    __slots__ = (
        "_dtypes",
        "_engine",
        "_hint",
        "_inputs",
        "_outputs",
        "_shapes",
        "_values",
        "ctx",
        "node",
        "opset",
    )

    def __init__(self, ctx: ShapesContext, engine: SubgraphEngine | None = None) -> None:
        self.ctx = ctx
        # The context's tables (never replaced, only filled), read by the accessors
        # below on every input and output a hook reads or sets: one attribute read each.
        self._shapes = ctx._shapes
        self._dtypes = ctx._dtypes
        self._values = ctx._values
        self._engine = engine
        self.node: ir.Node = None  # type: ignore[assignment]
        self.opset = 0
        self._inputs: Sequence[ir.Value | None] = ()
        self._outputs: Sequence[ir.Value] = ()
        self._hint: str | None = None

    def reset(self, node: ir.Node, opset: int) -> None:
        """Points the view at ``node`` (the engine does the same inline: keep in step)."""
        self.node = node
        self.opset = opset
        self._inputs = node._inputs  # the properties' slots (see passes/_inference.py)
        self._outputs = node._outputs
        self._hint = None

    # ------------------------------------------------------------------------------------
    # Node facts
    # ------------------------------------------------------------------------------------
    @property
    def scope(self) -> expr.Scope:
        """The assumption scope (all symbols are dims, hence ``>= 0``)."""
        return self.ctx.scope

    @property
    def num_inputs(self) -> int:
        """Number of input slots, including omitted optional ones."""
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        """Number of output slots."""
        return len(self._outputs)

    # ------------------------------------------------------------------------------------
    # Inputs
    # ------------------------------------------------------------------------------------
    # The accessors below read ``_inputs`` and the context's tables directly: hooks call
    # them for nearly every input of every node.
    def input(self, i: int) -> ir.Value | None:
        """The ``i``-th input value, or ``None`` when absent (omitted optional input)."""
        inputs = self._inputs
        return inputs[i] if i < len(inputs) else None

    def has_input(self, i: int) -> bool:
        """True when input ``i`` is present (an omitted optional input is absent)."""
        inputs = self._inputs
        return i < len(inputs) and inputs[i] is not None

    def require_input(self, i: int) -> ir.Value:
        """The ``i``-th input; fails the node when it is absent."""
        inputs = self._inputs
        value = inputs[i] if i < len(inputs) else None
        if value is None:
            self.fail(f"required input {i} is missing")
        return value

    def require_two_inputs(self) -> tuple[ir.Value, ir.Value]:
        """Inputs 0 and 1; fails the node when either is absent.

        The two-input hooks' slow path: they unpack ``node._inputs`` themselves (one
        unpacking, no call) and come here when it has another length or holds a None.
        """
        return self.require_input(0), self.require_input(1)

    def input_shape(self, i: int) -> Shape | None:
        """The dims of input ``i``; ``None`` when its rank is unknown or it is absent."""
        inputs = self._inputs
        value = inputs[i] if i < len(inputs) else None
        if value is None:
            return None
        shape = self._shapes.get(value, MISSING)  # shape_of's hit, inline
        if shape is not MISSING:
            return shape  # type: ignore[return-value]
        # shape_of's miss for a value, inline (an initializer, read once per run).
        shape = self._shapes[value] = self.ctx.read_declared_shape(value)
        return shape

    def input_rank(self, i: int) -> int | None:
        """The rank of input ``i`` (``None`` if unknown or absent)."""
        shape = self.input_shape(i)
        return None if shape is None else len(shape)

    def input_value(self, i: int) -> Shape | None:
        """The symbolic elements of input ``i`` (value as shape), flattened, or ``None``.

        Small integer constants (initializers, ``Constant`` outputs) are read lazily;
        elements may be unknown ``DimExpr`` when only part of the value is known.
        """
        inputs = self._inputs
        value = inputs[i] if i < len(inputs) else None
        if value is None:
            return None
        elements = self._values.get(value, MISSING)  # value_of's hit, inline
        if elements is not MISSING:
            return elements  # type: ignore[return-value]
        # value_of's miss for a value, inline (a constant, read once per run).
        elements = self._values[value] = self.ctx._read_constant_elements(value)
        return elements

    def input_ints(self, i: int) -> tuple[int, ...] | None:
        """The elements of input ``i`` when all are known ints, else ``None``."""
        elements = self.input_value(i)
        if elements is None or not all(isinstance(e, int) for e in elements):
            return None
        return elements  # type: ignore[return-value]

    def input_dtype(self, i: int) -> ir.DataType | None:
        """The element type of input ``i`` (``None`` if unknown or absent)."""
        inputs = self._inputs
        value = inputs[i] if i < len(inputs) else None
        if value is None:
            return None
        dtype = self._dtypes.get(value)  # dtype_of's hit, inline
        if dtype is not None:
            return dtype
        return self.ctx.dtype_of(value)

    # ------------------------------------------------------------------------------------
    # Attributes (a wrongly typed attribute fails the node)
    # ------------------------------------------------------------------------------------
    # The attribute accessors read onnx-ir's slots (``node._attributes``, ``attr._type``,
    # ``attr._value``) rather than the properties, a Python call each (see
    # passes/_inference.py; tests/engine/test_ir_slots.py checks them).
    def has_attr(self, name: str) -> bool:
        """True when the node carries attribute ``name``."""
        return name in self.node._attributes.data

    def _attr(self, name: str, kind: ir.AttributeType) -> ir.Attr | None:
        attr = self.node._attributes.data.get(name)  # the UserDict's dict: faster
        if attr is None:
            return None
        if attr._ref_attr_name is not None:  # attr.is_ref(), one call less
            self.fail(f"attribute {name!r} refers to a function attribute")
        if attr._type != kind:
            self.fail(f"attribute {name!r} must be {kind.name}, got {attr.type.name}")
        return attr

    def attr_int(self, name: str, default: int | None = None) -> int | None:
        """Integer attribute ``name`` or ``default``."""
        # _attr's lookup and its checks' usual outcome inline (a plain INT attribute):
        # every Concat, Gather, Softmax... reads one. Anything else goes through _attr.
        attr = self.node._attributes.data.get(name)
        if attr is None:
            return default
        if attr._ref_attr_name is None and attr._type is _INT:
            return attr._value  # type: ignore[no-any-return]
        return self._attr(name, _INT)._value  # type: ignore[union-attr]

    def attr_ints(
        self, name: str, default: Sequence[int] | None = None
    ) -> Sequence[int] | None:
        """Integer list attribute ``name`` or ``default``."""
        attr = self.node._attributes.data.get(name)  # as in attr_int
        if attr is None:
            return default
        if attr._ref_attr_name is None and attr._type is _INTS:
            return tuple(attr._value)
        return tuple(self._attr(name, _INTS)._value)  # type: ignore[union-attr]

    def attr_float(self, name: str, default: float | None = None) -> float | None:
        """Float attribute ``name`` or ``default``."""
        attr = self._attr(name, _FLOAT)
        return default if attr is None else attr._value

    def attr_floats(
        self, name: str, default: Sequence[float] | None = None
    ) -> Sequence[float] | None:
        """Float list attribute ``name`` or ``default``."""
        attr = self._attr(name, _FLOATS)
        return default if attr is None else tuple(attr._value)

    def attr_str(self, name: str, default: str | None = None) -> str | None:
        """String attribute ``name`` or ``default``."""
        attr = self._attr(name, _STRING)
        return default if attr is None else attr._value

    def attr_tensor(self, name: str) -> ir.TensorProtocol | None:
        """Tensor attribute ``name`` or ``None``."""
        attr = self._attr(name, _TENSOR)
        return None if attr is None else attr._value

    # ------------------------------------------------------------------------------------
    # Outputs
    # ------------------------------------------------------------------------------------
    def set_output(
        self, i: int, dims: Sequence[Dim | None] | None, dtype: ir.DataType | None = None
    ) -> None:
        """Sets the shape (and optionally dtype) of output ``i``.

        Args:
            i: Output index; an index past the node's outputs is ignored (optional
                trailing outputs).
            dims: The dims, or ``None`` for an unknown rank. A ``None`` dim or an unknown
                ``DimExpr`` becomes a fresh symbol; a negative int fails the node.
            dtype: The element type; ``None`` keeps whatever is known already.
        """
        try:
            value = self._outputs[i]
        except IndexError:  # (rare: a hook setting an absent optional output)
            return
        if dims.__class__ is tuple and dims in _VALID_SHAPES:
            # A tuple checked before (the usual shape): stored as it is.
            self._shapes[value] = dims  # type: ignore[assignment]  # set_shape
            if dtype is not None:
                self._dtypes[value] = dtype  # set_dtype
            return
        if dims is None:
            self._shapes[value] = None  # set_shape, inline (every hook calls this)
            if dtype is not None:
                self._dtypes[value] = dtype
            return
        valid = True
        if dims.__class__ is not tuple:
            dims = tuple(dims)  # many hooks build lists: the tuple is stored, and hits below
        if dims not in _VALID_SHAPES:
            exact = True  # every dim an int or a DimExpr (not a subclass): cacheable
            for d in dims:  # _valid_dims(dims), inline (every hook sets its outputs)
                cls = d.__class__
                if cls is int:
                    if d < 0:
                        valid = False
                        break
                elif cls is _DIM_EXPR:
                    if d.unknown_reason is not None:  # type: ignore[union-attr]
                        valid = False
                        break
                else:
                    exact = False
                    if not _valid_dim(d):
                        valid = False
                        break
            if valid and exact:
                if len(_VALID_SHAPES) > 100_000:
                    _VALID_SHAPES.clear()
                _VALID_SHAPES.add(dims)
        if not valid:
            checked: list[Dim] = []
            for k, d in enumerate(dims):
                if isinstance(d, int):
                    if d < 0:
                        self.fail(f"output {i} would have negative dim {d} at axis {k}")
                    checked.append(d)
                elif d is None or d.is_unknown:
                    checked.append(self.new_symbol(f"o{i}_d{k}"))
                else:
                    checked.append(d)
            dims = tuple(checked)
        self._shapes[value] = dims  # set_shape
        if dtype is not None:
            self._dtypes[value] = dtype  # set_dtype

    def set_output_value(self, i: int, elements: Sequence[Dim] | None) -> None:
        """Sets the symbolic elements (value as shape) of output ``i``.

        Only for small integer tensors: more than ``MAX_VALUE_ELEMENTS`` elements are
        dropped. Elements may be unknown ``DimExpr`` for partially known values.
        """
        try:
            value = self._outputs[i]
        except IndexError:  # (rare: a hook setting an absent optional output)
            return
        if (
            elements.__class__ is tuple
            and self._dtypes.get(value) is _INT64
            and elements in _EXACT_INT64_ELEMENTS
        ):
            # int64 elements checked before (a Shape's dims, a constant): as they are.
            self._values[value] = elements  # type: ignore[assignment]
            return
        if elements is None or len(elements) > MAX_VALUE_ELEMENTS:
            self._values[value] = None  # set_value, inline (most hooks call this)
            return
        if elements.__class__ is not tuple:
            elements = tuple(elements)
        dtype = self._dtypes.get(value)
        if dtype is _INT64:
            if elements not in _EXACT_INT64_ELEMENTS:
                if all(e.__class__ is int or _fits_64_bits(e) for e in elements):
                    if len(_EXACT_INT64_ELEMENTS) > 100_000:
                        _EXACT_INT64_ELEMENTS.clear()
                    _EXACT_INT64_ELEMENTS.add(elements)
                else:
                    elements = tuple(
                        e if e.__class__ is int or _fits_64_bits(e) else expr.unknown("value")
                        for e in elements
                    )
        else:
            bounds = _NARROW_INT_RANGES.get(dtype)  # type: ignore[arg-type]
            if bounds is not None:
                elements = _within(elements, bounds, self.ctx.scope)
        self._values[value] = elements

    def set_output_type(self, i: int, type_: ir.TypeProtocol) -> None:
        """Sets a non-tensor type (sequence, optional, map) for output ``i``."""
        if i < len(self._outputs):
            self.ctx.set_non_tensor_type(self._outputs[i], type_)

    def output(self, i: int) -> ir.Value | None:
        """The ``i``-th output value (``None`` past the end)."""
        return self._outputs[i] if i < len(self._outputs) else None

    # ------------------------------------------------------------------------------------
    # Symbols and failure
    # ------------------------------------------------------------------------------------
    def _hint_base(self) -> str:
        if self._hint is None:
            node = self.node
            base = sanitize_symbol_name(node.name) if node.name else node.op_type
            if node.op_type not in base:
                base = f"{node.op_type}_{base}"
            self._hint = base
        return self._hint

    def new_symbol(self, hint: str = "d") -> expr.DimExpr:
        """A fresh symbol named ``{node name or op_type}_{hint}`` (e.g. ``NonZero_nz_nnz``)."""
        return self.ctx.new_symbol(f"{self._hint_base()}_{hint}")

    def fresh_shape(self, rank: int, hint: str = "d") -> Shape:
        """A shape of ``rank`` fresh symbols."""
        return tuple(self.new_symbol(f"{hint}{k}") for k in range(rank))

    def fail(self, message: str) -> NoReturn:
        """Aborts the hook: records an ``error`` diagnostic; outputs get unknown shapes."""
        raise NodeInferenceFailure(message)

    def warn(self, message: str) -> None:
        """Records a ``warning`` diagnostic for the node without aborting the hook."""
        self.ctx.add_diagnostic(self.node, "warning", message)

    # ------------------------------------------------------------------------------------
    # Helpers for common patterns
    # ------------------------------------------------------------------------------------
    def normalize_axis(self, axis: int, rank: int) -> int:
        """Maps ``axis`` in ``[-rank, rank)`` to ``[0, rank)``; fails the node otherwise."""
        if not -rank <= axis < rank:
            self.fail(f"axis {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def normalize_axes(self, axes: Sequence[int], rank: int) -> list[int]:
        """Normalizes every axis; fails the node on a repeated axis."""
        result = [self.normalize_axis(a, rank) for a in axes]
        if len(set(result)) != len(result):
            self.fail(f"repeated axis in {list(axes)}")
        return result

    def broadcast_shapes(self, *shapes: Shape | None) -> Shape | None:
        """Numpy (multidirectional) broadcasting of shapes; ``None`` if a rank is unknown.

        Per dim: equal dims stay; ``1`` yields to the other; an int ``n != 1`` against a
        symbol gives ``n`` (the symbol is 1 or n, no equality recorded); two different
        symbolic dims give ``broadcast(a, b)`` unless :func:`broadcast_dims` decides it;
        two different ints other than 1 fail.
        """
        result = shapes[0] if shapes else ()
        for shape in shapes[1:]:
            if result is None or shape is None:
                return None
            if shape == result:
                continue
            if len(shape) > len(result):
                result, shape = shape, result
            offset = len(result) - len(shape)
            if result[offset:] == shape:
                continue  # the shorter shape is the other's tail (a bias): nothing changes
            merged = list(result)
            for k, b in enumerate(shape):
                a = merged[offset + k]
                if a is b or a == b:  # ints compare by value, DimExpr by identity
                    continue
                if isinstance(a, _DIM_EXPR) and isinstance(b, _DIM_EXPR):
                    # One may be written before a fact the other was built under: the
                    # facts known now (a symbol's range) can make them the same.
                    a, b = self.ctx.refine(a), self.ctx.refine(b)
                    if a is b:
                        merged[offset + k] = a
                        continue
                try:
                    merged[offset + k] = broadcast_dims(a, b)
                except expr.BroadcastError:
                    self.fail(f"cannot broadcast dims {a} and {b} at axis {offset + k}")
            result = tuple(merged)
        return result

    # ------------------------------------------------------------------------------------
    # Hand-off to the driver
    # ------------------------------------------------------------------------------------
    def fallback(self) -> None:
        """Infers this node with ONNX's per-node inference instead (for partial hooks)."""
        if self._engine is None:
            self.fail("no ONNX fallback available outside the inference pass")
        self.ctx.mutations += 1  # reads everything about the node: never memoized
        self._engine.fallback(self)

    def infer_subgraph(
        self,
        graph: ir.Graph,
        input_shapes: Sequence[Shape | None] | None = None,
        input_dtypes: Sequence[ir.DataType | None] | None = None,
    ) -> list[Shape | None]:
        """Infers ``graph`` (a subgraph attribute of this node) and returns output shapes.

        Values of enclosing graphs are visible. Without ``input_shapes`` the subgraph's
        inputs keep their declared shapes (empty dims become fresh symbols).
        """
        if self._engine is None:
            self.fail("no subgraph inference available outside the inference pass")
        self.ctx.mutations += 1
        return self._engine.infer_subgraph(graph, input_shapes, input_dtypes)
