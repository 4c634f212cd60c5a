"""Random ONNX graphs that compute shapes the way exporters do, valid by construction.

:func:`generate` builds a small graph (5-25 nodes, opset 18-21) over 1-3 float inputs
whose dims are symbols (``N``, ``M``, ``K``), small ints, now and then an expression
(``N+1``, ``2*M``, ``N*K``) or an anonymous dim, together with three bindings of the
symbols (sizes 0..7, 0 and 1 included regularly) and the input data of each. Some
cases declare graph-output or intermediate (``value_info``) shapes with one fresh name
per dim (true of every run, so the anchor pass may use them), or pass
``nonempty_inputs``/``symbol_ranges``/``value_info_anchors`` to the engine.

Every node is proposed by a *builder* (``Shape → Gather → Concat → Reshape``,
``Slice`` with shape-derived ends, ``TopK`` with a shape-derived ``k``, ``Conv``, …) and
run at once with the ONNX reference evaluator on the three bindings. A builder whose
nodes fail in every still-valid binding is undone; one that fails in some is kept only
now and then (the graph is then valid for the other bindings only, which exercises the
engine on models that are not valid for every size). So the final graph runs, per the
reference evaluator, for at least one binding; onnxruntime is still the oracle and runs
where it rejects a binding are skipped by the checker.

The generator never emits what would crash onnxruntime instead of failing cleanly: an
integer ``Div``/``Mod`` by zero (a SIGFPE), an empty operand of a kernel in
:data:`CRASHES_ON_EMPTY`, or a huge allocation; :func:`simulate` checks the same for
the shrinker's candidates.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
import warnings
import zlib
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

logger = logging.getLogger(__name__)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
SYMBOLS = ("N", "M", "K")
NUM_BINDINGS = 3
MAX_ELEMENTS = 2048  # per tensor, so onnxruntime runs stay fast
MAX_DATA_DIM = 48  # a size taken from data (ConstantOfShape, Range, Tile, Pad, ...)
SMALL_INT = 1 << 20  # integer operands of arithmetic stay well inside int64

#: onnxruntime kernels that kill the process (instead of failing) on an empty operand:
#: Einsum (SIGFPE, e.g. ``i,li->l`` on ``[0]`` and ``[5, 0]``) and Unique with an
#: ``axis`` (abort, e.g. axis 0 of a ``[3, 0]`` tensor).
CRASHES_ON_EMPTY = ("Einsum", "Unique")


@dataclasses.dataclass
class FuzzCase:
    """A generated model with the bindings and input data it is meant to run on.

    Attributes:
        seed: The seed it was generated from.
        model: The model; graph outputs are declared with an element type only.
        bindings: Per run, the size of every input symbol.
        feeds: Per run, the input arrays (shaped by the binding).
        value_types: Element type of every node output (to expose them to onnxruntime).
        options: Keyword options for ``infer_symbolic_shapes`` (``nonempty_inputs``,
            ``symbol_ranges``): assumptions that only some bindings satisfy.
        declared: Symbols declared on graph outputs (each names one dim, so the
            declaration holds for every run): the anchor pass may rename minted
            symbols to them.
        valid: Per binding, whether the reference evaluator runs every node: the spec
            stand-in. onnxruntime is lenient in places (a ``Concat`` of empty inputs
            whose other dims differ, ``Reshape`` with ``allowzero=1`` and both 0 and
            -1); a run only onnxruntime accepts is not one the engine must describe.
            (The reference evaluator's own departures cost coverage, not soundness.)
        unsafe: Whether running it might crash onnxruntime (see :func:`simulate`).
    """

    seed: int
    model: onnx.ModelProto
    bindings: list[dict[str, int]]
    feeds: list[dict[str, np.ndarray]]
    value_types: dict[str, int]
    options: dict[str, object] = dataclasses.field(default_factory=dict)
    declared: frozenset[str] = frozenset()
    valid: list[bool] = dataclasses.field(default_factory=list)
    unsafe: bool = False

    def applicable(self, b: int) -> bool:
        """Whether binding ``b`` is valid and satisfies the assumptions in ``options``."""
        if self.valid and not self.valid[b]:
            return False
        binding = self.bindings[b]
        used = {
            symbol
            for value in self.model.graph.input
            for k, d in enumerate(value.type.tensor_type.shape.dim)
            for symbol in dim_symbols(d, hidden_symbol(value.name, k))
        }
        if self.options.get("nonempty_inputs") and any(binding[s] < 1 for s in used):
            return False
        ranges = self.options.get("symbol_ranges", {})
        for name, (lower, upper) in ranges.items():  # type: ignore[union-attr]
            size = binding.get(name)
            if size is None:
                continue
            if (lower is not None and size < lower) or (upper is not None and size > upper):
                return False
        return True

    @property
    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))

    def text(self) -> str:
        """The model in the ONNX text syntax."""
        return onnx.printer.to_text(self.model)


ANONYMOUS = "?"  # an input dim that names nothing: each one is its own hidden size
_NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def hidden_symbol(input_name: str, axis: int) -> str:
    """The binding key of an anonymous input dim (not a name the model can use)."""
    return f"?{input_name}[{axis}]"


def dim_size(dim: onnx.TensorShapeProto.Dimension, binding: dict[str, int], key: str) -> int:
    """The size of a declared input dim under ``binding``.

    ``dim_param`` texts are the generator's own (``N``, ``N+1``, ``2*M``, ``N*K``) and
    are evaluated here independently of the engine's parser; an anonymous dim (no
    value, no text, or ``?``) takes ``binding[key]``.
    """
    if dim.HasField("dim_value"):
        return dim.dim_value
    text = dim.dim_param if dim.HasField("dim_param") else ""
    if text in ("", ANONYMOUS):
        return binding[key]
    return int(eval(text, {"__builtins__": {}}, dict(binding)))  # our own texts only


def dim_symbols(dim: onnx.TensorShapeProto.Dimension, key: str) -> set[str]:
    """The binding keys a declared input dim depends on."""
    if dim.HasField("dim_value"):
        return set()
    text = dim.dim_param if dim.HasField("dim_param") else ""
    return {key} if text in ("", ANONYMOUS) else set(_NAMES.findall(text))


def input_shape(value: onnx.ValueInfoProto, binding: dict[str, int]) -> list[int]:
    """The shape of a graph input under ``binding``."""
    dims = value.type.tensor_type.shape.dim
    return [dim_size(d, binding, hidden_symbol(value.name, k)) for k, d in enumerate(dims)]


def make_feed(name: str, shape: Sequence[int]) -> np.ndarray:
    """Deterministic float input data: small integers, a third of them zero.

    Integers keep float arithmetic exact, so data-dependent sizes (``NonZero``,
    ``Compress``) are the same for the reference evaluator and onnxruntime; the zeros
    make those sizes interesting. Only the input's name and shape matter, so a
    reproducer cut from a larger graph is fed the same data.
    """
    seed = zlib.crc32(f"{name}:{tuple(shape)}".encode())
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-2, -1, 0, 0, 1, 2], dtype=np.float32), size=tuple(shape))


class Shape(OpRun):
    """``Shape`` with ``start``/``end`` clamped as the spec says.

    The reference evaluator of onnx 1.23 slices ``shape[0 : rank + end]`` without
    clamping, so ``end=-3`` on a rank-2 tensor gives one dim instead of none.
    """

    op_domain = ""

    def _run(self, data, end=None, start=None):
        rank = data.ndim
        lower = 0 if start is None else start + rank if start < 0 else start
        upper = rank if end is None else end + rank if end < 0 else end
        lower, upper = min(max(lower, 0), rank), min(max(upper, 0), rank)
        return (np.array(data.shape[lower:upper], dtype=np.int64),)


def reference(node: onnx.NodeProto, opset: int) -> ReferenceEvaluator:
    """The reference evaluator of one node, with the spec fixes above."""
    return ReferenceEvaluator(node, opsets={"": opset}, new_ops=[Shape])


class _Reject(Exception):
    """The builder's proposal does not fit; undo it and try another."""


@dataclasses.dataclass
class _Value:
    name: str
    dtype: int
    arrays: list[np.ndarray | None]  # per binding; None once an ancestor failed there
    exact: bool = True  # the data is the same under onnxruntime (integer-exact float math)
    constant: bool = False  # a Constant or initializer: a poor source of interesting dims

    def rank(self, alive: Sequence[int]) -> int:
        return self.arrays[alive[0]].ndim

    def shapes(self, alive: Sequence[int]) -> list[tuple[int, ...]]:
        return [self.arrays[b].shape for b in alive]

    def is_int(self) -> bool:
        return self.dtype == TensorProto.INT64


def _small(array: np.ndarray) -> bool:
    """All elements within ``±SMALL_INT`` (``np.abs`` would wrap ``INT64_MIN``)."""
    return bool(np.all((array > -SMALL_INT) & (array < SMALL_INT)))


def _np_to_onnx(dtype: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class _Generator:
    """Builds one graph; see the module docstring."""

    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.opset = self.rng.choice((18, 19, 20, 21))
        self.values: list[_Value] = []
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.dead = [False] * NUM_BINDINGS
        self.counter = 0
        self.bindings = self._draw_bindings()
        self.feeds: list[dict[str, np.ndarray]] = [{} for _ in range(NUM_BINDINGS)]

    # ---------------------------------------------------------------- bindings, inputs
    def _draw_bindings(self) -> list[dict[str, int]]:
        rng = self.rng
        plenty = {s: rng.randint(2, 7) for s in SYMBOLS}
        edgy = {s: rng.choice((0, 1, 1, rng.randint(2, 7))) for s in SYMBOLS}
        anything = {s: rng.randint(0, 7) for s in SYMBOLS}
        # One binding often equals another on some symbols: dims that only agree by
        # accident are a classic source of wrong "equal" dims.
        if rng.random() < 0.3:
            anything = {s: plenty[s] if rng.random() < 0.5 else v for s, v in anything.items()}
        return [plenty, edgy, anything]

    @property
    def alive(self) -> list[int]:
        return [b for b in range(NUM_BINDINGS) if not self.dead[b]]

    def _input_dims(self) -> list[str | int]:
        rng = self.rng
        template = rng.random()
        if template < 0.25:  # image: [N, C, H, W] or [N, C, L]
            spatial = [
                rng.choice((*SYMBOLS[1:], *SYMBOLS[1:], rng.randint(1, 6)))
                for _ in range(rng.randint(1, 2))
            ]
            return [rng.choice(("N", 1, 2)), rng.choice((1, 2, 3)), *spatial]
        if template < 0.45:  # sequence: [N, M, hidden]
            return [rng.choice(("N", 1)), rng.choice(("M", "K")), rng.choice((2, 4, 6))]
        rank = rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4))
        return [
            rng.choice(SYMBOLS) if rng.random() < 0.8 else rng.randint(1, 4)
            for _ in range(rank)
        ]

    def _spell(self, dim: str | int) -> str | int | None:
        """Now and then a symbol as exporters also write dims: ``N+1``, ``2*N``, ``N*M``,
        or an anonymous dim (``None``: empty, or ``?``)."""
        rng = self.rng
        if not isinstance(dim, str):
            return dim
        roll = rng.random()
        if roll < 0.06:
            return f"{dim}+{rng.randint(1, 2)}"
        if roll < 0.1:
            return f"{rng.randint(2, 3)}*{dim}"
        if roll < 0.13:
            return f"{dim}*{rng.choice([s for s in SYMBOLS if s != dim])}"
        if roll < 0.17:
            return rng.choice((None, ANONYMOUS))
        return dim

    def _add_input(self) -> None:
        name = f"x{len(self.inputs)}"
        plain = self._input_dims()
        dims = [self._spell(d) for d in plain]
        for binding in self.bindings:
            for k, d in enumerate(dims):
                if d is None or d == ANONYMOUS:
                    binding[hidden_symbol(name, k)] = self.rng.choice(
                        (0, 1, self.rng.randint(2, 7))
                    )
        value = helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
        shapes = [input_shape(value, binding) for binding in self.bindings]
        if any(np.prod(shape) > 4 * MAX_ELEMENTS for shape in shapes):  # N*M*...: too big
            value = helper.make_tensor_value_info(name, TensorProto.FLOAT, plain)
            shapes = [input_shape(value, binding) for binding in self.bindings]
        self.inputs.append(value)
        for b, shape in enumerate(shapes):
            self.feeds[b][name] = make_feed(name, shape)
        self.values.append(_Value(name, TensorProto.FLOAT, [f[name] for f in self.feeds]))

    # ---------------------------------------------------------------- emitting nodes
    def _name(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, data: object, dtype: type = np.int64) -> _Value:
        """A constant as a ``Constant`` node (or, now and then, an initializer)."""
        array = np.array(data, dtype=dtype)
        name = self._name("c")
        roll = self.rng.random()
        if roll < 0.25:
            self.initializers.append(numpy_helper.from_array(array, name))
        elif roll < 0.4 and dtype is np.int64 and array.ndim == 1 and array.size:
            self.nodes.append(
                helper.make_node(
                    "Constant", [], [name], name=self._name("n"), value_ints=array.tolist()
                )
            )
        elif roll < 0.5 and dtype is np.int64 and array.ndim == 0:
            self.nodes.append(
                helper.make_node(
                    "Constant", [], [name], name=self._name("n"), value_int=int(array)
                )
            )
        else:
            self.nodes.append(
                helper.make_node(
                    "Constant",
                    [],
                    [name],
                    name=self._name("n"),
                    value=numpy_helper.from_array(array),
                )
            )
        value = _Value(name, _np_to_onnx(array.dtype), [array] * NUM_BINDINGS, constant=True)
        self.values.append(value)
        return value

    def emit(
        self, op: str, inputs: Sequence[_Value | None], count: int = 1, **attrs: object
    ) -> list[_Value]:
        """Appends one node and runs it on every binding where its inputs are known.

        Raises:
            _Reject: when it fails in every live binding, or an output is too large.
        """
        names = [self._name() for _ in range(count)]
        node = helper.make_node(
            op,
            [v.name if v is not None else "" for v in inputs],
            names,
            name=self._name("n"),
            **attrs,
        )
        evaluator = reference(node, self.opset)
        results: list[list[np.ndarray] | None] = []
        for b in range(NUM_BINDINGS):
            arrays = [v.arrays[b] if v is not None else None for v in inputs]
            if any(a is None for v, a in zip(inputs, arrays) if v is not None):
                results.append(None)
                continue
            feed = {v.name: a for v, a in zip(inputs, arrays) if v is not None}
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    outs = [np.asarray(o) for o in evaluator.run(None, feed)]
            except Exception:  # the node is invalid for this binding
                outs = None
            if outs is not None and any(o.size > MAX_ELEMENTS or o.ndim > 6 for o in outs):
                raise _Reject(f"{op}: output too large")
            results.append(outs)
            if outs is None and not self.dead[b]:
                self.dead[b] = True
        if not self.alive:
            raise _Reject(f"{op}: fails for every binding")
        known = next(r for r in results if r is not None)
        outputs = []
        for k, name in enumerate(names):
            arrays = [r[k] if r is not None else None for r in results]
            dtype = _np_to_onnx(known[k].dtype)
            exact = all(v.exact for v in inputs if v is not None)
            outputs.append(_Value(name, dtype, arrays, exact))
        self.nodes.append(node)
        self.values.extend(outputs)
        return outputs

    def emit1(self, op: str, inputs: Sequence[_Value | None], **attrs: object) -> _Value:
        return self.emit(op, inputs, 1, **attrs)[0]

    # ---------------------------------------------------------------- picking values
    def pick(self, predicate: Callable[[_Value], bool] = lambda v: True) -> _Value:
        """A value satisfying ``predicate``, recent values preferred (exporters chain)."""
        alive = self.alive
        candidates = [
            v
            for v in self.values
            if all(v.arrays[b] is not None for b in alive)
            and len({v.arrays[b].ndim for b in alive}) == 1  # Squeeze without axes varies
            and predicate(v)
        ]
        if not candidates:
            raise _Reject("no candidate value")
        weights = [
            (0.2 if v.constant else 1) * (1 + 4 * (i >= len(candidates) - 4))
            for i, v in enumerate(candidates)
        ]
        return self.rng.choices(candidates, weights)[0]

    def pick_float(self, min_rank: int = 0, max_rank: int = 6) -> _Value:
        alive = self.alive
        return self.pick(
            lambda v: v.dtype == TensorProto.FLOAT and min_rank <= v.rank(alive) <= max_rank
        )

    def pick_tensor(self, min_rank: int = 0) -> _Value:
        alive = self.alive
        return self.pick(
            lambda v: (
                v.dtype in (TensorProto.FLOAT, TensorProto.INT64) and v.rank(alive) >= min_rank
            )
        )

    def pick_int_vec(self, max_len: int = 6, small: bool = True) -> _Value:
        alive = self.alive

        def fits(v: _Value) -> bool:
            if not v.is_int() or v.rank(alive) != 1:
                return False
            arrays = [v.arrays[b] for b in alive]
            if any(a.size == 0 or a.size > max_len for a in arrays):
                return False
            return not small or all(_small(a) for a in arrays)

        return self.pick(fits)

    def pick_int_scalar(self) -> _Value:
        alive = self.alive
        return self.pick(
            lambda v: (
                v.is_int() and v.rank(alive) == 0 and all(_small(v.arrays[b]) for b in alive)
            )
        )

    def dims_of(self, value: _Value, axis: int) -> list[int]:
        return [value.arrays[b].shape[axis] for b in self.alive]

    # ---------------------------------------------------------------- shape pieces
    def shape_of(
        self, value: _Value, start: int | None = None, end: int | None = None
    ) -> _Value:
        attrs = {}
        if start is not None:
            attrs["start"] = start
        if end is not None:
            attrs["end"] = end
        return self.emit1("Shape", [value], **attrs)

    def dim_scalar(self, value: _Value, axis: int) -> _Value:
        """A 0-D size: ``Gather(Shape(value), axis)`` or ``Squeeze(Shape(value)[a:a+1])``."""
        rank = value.rank(self.alive)
        index = axis - rank if self.rng.random() < 0.3 else axis
        if self.rng.random() < 0.25:
            piece = self.shape_of(value, axis, axis + 1)
            axes = [self.const([0])] if self.rng.random() < 0.7 else []
            return self.emit1("Squeeze", [piece, *axes])
        return self.emit1("Gather", [self.shape_of(value), self.const(index)], axis=0)

    def dim_vec(self, value: _Value, axis: int) -> _Value:
        """A 1-D ``[size]`` of ``value`` along ``axis``, spelled as exporters do."""
        rank = value.rank(self.alive)
        roll = self.rng.random()
        if roll < 0.35:
            return self.shape_of(value, axis, axis + 1)
        if roll < 0.6:
            return self.emit1(
                "Gather",
                [self.shape_of(value), self.const([axis - rank if roll < 0.45 else axis])],
            )
        if roll < 0.8:
            return self.unsqueeze0(self.dim_scalar(value, axis))
        end = INT64_MAX if axis == rank - 1 and self.rng.random() < 0.5 else axis + 1
        return self.emit1(
            "Slice", [self.shape_of(value), self.const([axis]), self.const([end])]
        )

    def unsqueeze0(self, scalar: _Value) -> _Value:
        return self.emit1("Unsqueeze", [scalar, self.const([0])])

    def int_piece(self) -> _Value:
        """A 1-D int64 ``[n]``: a dim of some tensor, a constant, or arithmetic on them."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.15:
            return self.const([rng.choice((-1, 0, 1, 2, 3, 4))])
        source = self.pick_tensor(min_rank=1)
        piece = self.dim_vec(source, rng.randrange(source.rank(self.alive)))
        if roll < 0.7:
            return piece
        if roll < 0.8:
            other = self.pick_tensor(min_rank=1)
            return self.emit1(
                "Mul", [piece, self.dim_vec(other, rng.randrange(other.rank(self.alive)))]
            )
        op = rng.choice(("Add", "Sub", "Mul", "Div"))
        divisor = rng.choice((1, 2, 3)) if op == "Div" else rng.choice((-1, 1, 2, 3))
        return self.emit1(op, [piece, self.const([divisor])])

    # ================================================================ builders
    # Shape computations -------------------------------------------------------------
    def b_shape(self) -> None:
        value = self.pick_tensor()
        rank = value.rank(self.alive)
        attrs = {}
        if self.rng.random() < 0.5:
            for key in ("start", "end"):
                if self.rng.random() < 0.7:
                    attrs[key] = self.rng.randint(-rank - 2, rank + 2)
        self.emit1("Shape", [value], **attrs)

    def b_size(self) -> None:
        self.emit1("Size", [self.pick_tensor()])

    def b_gather_shape(self) -> None:
        data = self.pick_int_vec(small=False)
        length = min(a.size for a in (data.arrays[b] for b in self.alive))
        roll = self.rng.random()
        if roll < 0.15:
            # the last element, with an index computed from the length (sym_size style)
            count = self.emit1("Size", [data])
            indices = self.emit1("Sub", [count, self.const(self.rng.randint(1, length))])
        elif roll < 0.65:
            indices = self.const(self.rng.randint(-length, length - 1))
        else:
            indices = self.const(
                [self.rng.randint(-length, length - 1) for _ in range(self.rng.randint(1, 3))]
            )
        self.emit1("Gather", [data, indices], axis=0)

    def _slice_bound(self, extent: int, is_start: bool) -> int:
        rng = self.rng
        roll = rng.random()
        if roll < 0.15:
            return INT64_MAX if not is_start or rng.random() < 0.3 else INT64_MIN
        if roll < 0.2:
            return INT64_MIN if not is_start else -INT64_MAX
        return rng.randint(-extent - 2, extent + 2)

    def b_slice(self) -> None:
        rng = self.rng
        data = self.pick_int_vec(small=False) if rng.random() < 0.55 else self.pick_float(1)
        rank = data.rank(self.alive)
        extent = max(max(self.dims_of(data, a)) for a in range(rank))
        axes = rng.sample(range(rank), rng.randint(1, min(rank, 2)))
        steps = [rng.choice((1, 1, 1, 2, -1, -1, -2, 3)) for _ in axes]
        starts = [self._slice_bound(extent, True) for _ in axes]
        ends = [self._slice_bound(extent, False) for _ in axes]
        starts_v: _Value = self.const(starts)
        ends_v: _Value = self.const(ends)
        if len(axes) == 1 and rng.random() < 0.35:  # shape-derived bounds
            source = self.pick_tensor(min_rank=1)
            piece = self.dim_vec(source, rng.randrange(source.rank(self.alive)))
            if rng.random() < 0.4:
                piece = self.emit1(
                    rng.choice(("Sub", "Add")), [piece, self.const([rng.randint(1, 2)])]
                )
            if rng.random() < 0.5:
                ends_v = piece
            else:
                starts_v = piece
        inputs = [data, starts_v, ends_v]
        if rng.random() < 0.7 or any(s != 1 for s in steps):
            spelled = [a - rank if rng.random() < 0.4 else a for a in axes]
            inputs.append(self.const(spelled))
            if rng.random() < 0.6 or any(s != 1 for s in steps):
                inputs.append(self.const(steps))
        self.emit1("Slice", inputs)

    def b_concat_ints(self) -> None:
        pieces = []
        for _ in range(self.rng.randint(2, 4)):
            roll = self.rng.random()
            if roll < 0.3:
                pieces.append(self.pick_int_vec(max_len=4))
            elif roll < 0.45:
                pieces.append(self.unsqueeze0(self.pick_int_scalar()))
            else:
                pieces.append(self.int_piece())
        self.emit1("Concat", pieces, axis=0)

    def b_int_arith(self) -> None:
        rng = self.rng
        a = self.pick_int_scalar() if rng.random() < 0.4 else self.pick_int_vec()
        op = rng.choice(("Add", "Sub", "Mul", "Div", "Div", "Max", "Min"))
        roll = rng.random()
        if roll < 0.5:
            b = self.const(
                rng.choice((-1, 1, 2, 3)) if op != "Div" else rng.choice((1, 2, 3, 4))
            )
        elif roll < 0.7:
            b = self.const([rng.randint(1, 4)])
        else:
            b = self.pick_int_scalar() if rng.random() < 0.5 else self.pick_int_vec()
        if op == "Div":
            # An integer division by zero is a SIGFPE in onnxruntime, not an error: the
            # divisor must be known and nonzero in every binding that can reach it.
            for x, y in zip(a.arrays, b.arrays):
                if x is None or y is None:
                    continue
                if not b.exact or np.any(y == 0) or not _small(x):
                    raise _Reject("unsafe Div")
        if rng.random() < 0.3:
            a, b = b, a
            if op == "Div":
                raise _Reject("swapped Div")
        out = self.emit1(op, [a, b])
        if op == "Div" and any(np.any(x < 0) for x in (*a.arrays, *b.arrays) if x is not None):
            out.exact = False  # truncation vs floor: keep such values out of divisors

    def b_range(self) -> None:
        rng = self.rng
        if rng.random() < 0.15:  # float Range over constants
            start, limit = rng.uniform(-2, 2), rng.uniform(-2, 6)
            delta = rng.choice((0.5, 1.0, 1.5, -0.5))
            if not 0 < (limit - start) / delta <= MAX_DATA_DIM:
                raise _Reject("float range")
            self.emit1(
                "Range",
                [
                    self.const(start, np.float32),
                    self.const(limit, np.float32),
                    self.const(delta, np.float32),
                ],
            )
            return
        limit = self.pick_int_scalar()
        if rng.random() < 0.3:
            limit = self.emit1("Add", [limit, self.const(rng.randint(-2, 3))])
        start = (
            self.const(rng.choice((0, 0, 1, 2, -1)))
            if rng.random() < 0.7
            else self.pick_int_scalar()
        )
        delta = rng.choice((1, 1, 2, 3, -1, -2))
        if delta < 0:
            start, limit = limit, start
        for b in self.alive:
            count = (int(limit.arrays[b]) - int(start.arrays[b])) / delta
            if count > MAX_DATA_DIM:
                raise _Reject("range too long")
        self.emit1("Range", [start, limit, self.const(delta)])

    def b_cumsum_int(self) -> None:
        self.emit1(
            "CumSum",
            [self.pick_int_vec(), self.const(self.rng.choice((0, -1)))],
            exclusive=self.rng.randint(0, 1),
            reverse=self.rng.randint(0, 1),
        )

    def b_reduce_int(self) -> None:
        op = self.rng.choice(("ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"))
        self.emit1(op, [self.pick_int_vec()], keepdims=self.rng.randint(0, 1))

    def b_equal_where(self) -> None:
        """``Where(Equal(s, -1), 1, s)``: how exporters turn -1 into a broadcastable 1."""
        vec = self.pick_int_vec()
        probe = self.const(self.rng.choice((-1, 0, 1)))
        condition = self.emit1("Equal", [vec, probe])
        ones = self.const(self.rng.choice((1, [1])))
        args = [ones, vec] if self.rng.random() < 0.7 else [vec, ones]
        self.emit1("Where", [condition, *args])

    def b_cast_math(self) -> None:
        """``Cast(Floor(Cast(s, float) * scale), int64)``: interpolate-style sizes."""
        vec = self.pick_int_vec() if self.rng.random() < 0.7 else self.pick_int_scalar()
        as_float = self.emit1("Cast", [vec], to=TensorProto.FLOAT)
        scaled = self.emit1(
            self.rng.choice(("Mul", "Div")),
            [as_float, self.const(self.rng.choice((2.0, 0.5, 1.5)), np.float32)],
        )
        rounded = self.emit1(self.rng.choice(("Floor", "Ceil")), [scaled])
        self.emit1("Cast", [rounded], to=TensorProto.INT64)

    def b_reshape_ints(self) -> None:
        """Shape vectors reshaped, cast to int32 and back, or reversed."""
        vec = self.pick_int_vec()
        roll = self.rng.random()
        if roll < 0.35:
            self.emit1("Reshape", [vec, self.const(self.rng.choice(([-1], [1, -1], [-1, 1])))])
        elif roll < 0.6:
            narrow = self.emit1("Cast", [vec], to=TensorProto.INT32)
            self.emit1("Cast", [narrow], to=TensorProto.INT64)
        else:
            self.emit1(
                "Slice",
                [
                    vec,
                    self.const([-1]),
                    self.const([INT64_MIN]),
                    self.const([0]),
                    self.const([-1]),
                ],
            )

    def b_zero_means_copy(self) -> None:
        """``Reshape(x, Where(Equal(t, 0), Shape(x), t))``: 0 spelled out as a copy."""
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        pieces = [
            self.dim_vec(data, a) if self.rng.random() < 0.5 else self.int_piece()
            for a in range(rank)
        ]
        target = pieces[0] if rank == 1 else self.emit1("Concat", pieces, axis=0)
        shape = self.shape_of(data)
        is_zero = self.emit1("Equal", [target, self.const(0)])
        fixed = self.emit1("Where", [is_zero, shape, target])
        self.emit1("Reshape", [data, fixed])

    # Consumers of shapes ------------------------------------------------------------
    def _grouped_target(self, data: _Value, allowzero: int) -> _Value:
        """A Reshape target valid for every binding: groups of the input dims."""
        rng = self.rng
        rank = data.rank(self.alive)
        if rank == 0:
            return self.const(rng.choice(([1], [-1], [1, 1], [1, -1])))
        cuts = sorted(rng.sample(range(1, rank), rng.randint(0, rank - 1))) if rank > 1 else []
        groups = [list(range(a, b)) for a, b in zip([0, *cuts], [*cuts, rank])]
        minus_one = rng.randrange(len(groups)) if rng.random() < 0.4 else None
        pieces = []
        for k, group in enumerate(groups):
            if k == minus_one:
                pieces.append(self.const([-1]))
            elif (
                len(group) == 1
                and group[0] == len(pieces)
                and not allowzero
                and rng.random() < 0.3
            ):
                pieces.append(self.const([0]))
            elif len(group) == 1:
                pieces.append(self.dim_vec(data, group[0]))
            elif rng.random() < 0.5:
                sliced = self.shape_of(data, group[0], group[-1] + 1)
                pieces.append(self.emit1("ReduceProd", [sliced], keepdims=1))
            else:
                product = self.dim_vec(data, group[0])
                for axis in group[1:]:
                    product = self.emit1("Mul", [product, self.dim_vec(data, axis)])
                pieces.append(product)
            if rng.random() < 0.1:
                pieces.append(self.const([1]))
        return pieces[0] if len(pieces) == 1 else self.emit1("Concat", pieces, axis=0)

    def b_reshape(self) -> None:
        rng = self.rng
        data = self.pick_float()
        allowzero = 1 if rng.random() < 0.1 else 0
        roll = rng.random()
        if roll < 0.55:
            target = self._grouped_target(data, allowzero)
        elif roll < 0.75:
            target = self.pick_int_vec(max_len=5)
        else:
            pieces = [self.int_piece() for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.5:
                pieces.insert(rng.randrange(len(pieces) + 1), self.const([-1]))
            target = pieces[0] if len(pieces) == 1 else self.emit1("Concat", pieces, axis=0)
        attrs = {"allowzero": 1} if allowzero else {}
        self.emit1("Reshape", [data, target], **attrs)

    def _small_sizes(self, vec: _Value, base: int = 1) -> None:
        for b in self.alive:
            sizes = vec.arrays[b]
            if (
                np.any(sizes > MAX_DATA_DIM)
                or base * np.prod(np.maximum(sizes, 1)) > MAX_ELEMENTS
            ):
                raise _Reject("sizes too large")

    def b_constant_of_shape(self) -> None:
        vec = self.pick_int_vec()
        self._small_sizes(vec)
        attrs = {}
        if self.rng.random() < 0.6:
            attrs["value"] = numpy_helper.from_array(np.array([1.0], dtype=np.float32))
        self.emit1("ConstantOfShape", [vec], **attrs)

    def b_expand(self) -> None:
        rng = self.rng
        data = self.pick_float(max_rank=4)
        roll = rng.random()
        if roll < 0.35:
            shape = self.shape_of(self.pick_float())
        elif roll < 0.6:
            shape = self.pick_int_vec(max_len=5)
        else:
            pieces = [
                self.const([rng.choice((1, 1, 2, 3))])
                if rng.random() < 0.4
                else self.int_piece()
                for _ in range(rng.randint(1, 3))
            ]
            shape = pieces[0] if len(pieces) == 1 else self.emit1("Concat", pieces, axis=0)
        self._small_sizes(shape, 1)
        self.emit1("Expand", [data, shape])

    def b_tile(self) -> None:
        rng = self.rng
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        if rng.random() < 0.5:
            repeats = self.const([rng.choice((0, 1, 1, 2, 3)) for _ in range(rank)])
        else:
            pieces = [
                self.const([rng.choice((1, 2))]) if rng.random() < 0.5 else self.int_piece()
                for _ in range(rank)
            ]
            repeats = pieces[0] if rank == 1 else self.emit1("Concat", pieces, axis=0)
        for b in self.alive:
            if np.any(repeats.arrays[b] < 0) or np.any(repeats.arrays[b] > 8):
                raise _Reject("repeats")
        self.emit1("Tile", [data, repeats])

    def b_topk(self) -> None:
        rng = self.rng
        data = self.pick_float(1)
        axis = rng.randrange(data.rank(self.alive))
        roll = rng.random()
        if roll < 0.3:
            k = self.const([rng.randint(0, 3)])
        elif roll < 0.6:
            k = self.dim_vec(data, axis)
        else:
            k = self.emit1(
                rng.choice(("Min", "Sub", "Div")),
                [self.dim_vec(data, axis), self.const([rng.randint(1, 3)])],
            )
        spelled = axis - data.rank(self.alive) if rng.random() < 0.4 else axis
        self.emit("TopK", [data, k], 2, axis=spelled, largest=rng.randint(0, 1), sorted=1)

    def b_resize(self) -> None:
        rng = self.rng
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        mode = rng.choice(("nearest", "nearest", "linear"))
        attrs: dict[str, object] = {"mode": mode}
        if rng.random() < 0.5:
            attrs["coordinate_transformation_mode"] = rng.choice(
                ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
            )
        axes = None
        if rank >= 2 and rng.random() < 0.2:
            axes = sorted(rng.sample(range(rank), rng.randint(1, 2)))
            attrs["axes"] = axes
        count = len(axes) if axes else rank
        lead = 0 if axes else min(2, rank - 1)
        if rng.random() < 0.7:
            scales = [1.0] * lead + [
                rng.choice((0.5, 1.0, 1.5, 2.0, 0.75, 3.0)) for _ in range(count - lead)
            ]
            inputs = [data, None, self.const(scales, np.float32)]
        else:
            kept = self.shape_of(data, 0, lead) if lead and not axes else None
            new = self.const([rng.randint(1, 6) for _ in range(count - (lead if kept else 0))])
            sizes = self.emit1("Concat", [kept, new], axis=0) if kept else new
            inputs = [data, None, None, sizes]
            if rng.random() < 0.2:
                attrs["keep_aspect_ratio_policy"] = rng.choice(("not_larger", "not_smaller"))
        out = self.emit1("Resize", inputs, **attrs)
        out.exact = mode == "nearest" and out.exact

    def b_pad(self) -> None:
        rng = self.rng
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        mode = rng.choice(("constant", "constant", "constant", "edge", "reflect"))
        axes = None
        if rng.random() < 0.3:
            axes = sorted(rng.sample(range(rank), rng.randint(1, rank)))
        count = len(axes) if axes else rank
        if rng.random() < 0.7:
            pads = self.const([rng.choice((0, 0, 1, 2, 3, -1)) for _ in range(2 * count)])
        else:  # shape-derived pads: pad an axis by its own size
            pieces = [
                self.int_piece() if rng.random() < 0.3 else self.const([rng.choice((0, 1, 2))])
                for _ in range(2 * count)
            ]
            pads = self.emit1("Concat", pieces, axis=0) if len(pieces) > 1 else pieces[0]
        for b in self.alive:
            if not np.all(np.abs(pads.arrays[b].astype(float)) <= MAX_DATA_DIM // 4):
                raise _Reject("pads")
        inputs: list[_Value | None] = [data, pads]
        if axes is not None:
            spelled = [a - rank if rng.random() < 0.3 else a for a in axes]
            inputs += [None, self.const(spelled)]
        self.emit1("Pad", inputs, mode=mode)

    # Float tensor ops -----------------------------------------------------------------
    def b_unary(self) -> None:
        op = self.rng.choice(("Relu", "Neg", "Abs", "Identity", "Floor"))
        self.emit1(op, [self.pick_float()])

    def b_binary(self) -> None:
        rng = self.rng
        a = self.pick_float(max_rank=4)
        roll = rng.random()
        if roll < 0.5:
            b = self.pick_float(max_rank=4)
        elif roll < 0.7:
            b = a
        else:
            rank = a.rank(self.alive)
            dims = [rng.choice((1, 1, d)) for d in self.alive_dims(a)] if rank else []
            b = self.const(np.ones(dims[rng.randint(0, len(dims)) :]), np.float32)
        if rng.random() < 0.5:
            a, b = b, a
        self.emit1(rng.choice(("Add", "Mul", "Sub")), [a, b])

    def alive_dims(self, value: _Value) -> list[int]:
        """Dims of ``value`` equal in every live binding (else 1, which broadcasts)."""
        shapes = value.shapes(self.alive)
        return [
            shapes[0][a] if all(s[a] == shapes[0][a] for s in shapes) else 1
            for a in range(len(shapes[0]))
        ]

    def b_where(self) -> None:
        a = self.pick_float(max_rank=4)
        b = self.pick_float(max_rank=4)
        condition = self.emit1(
            self.rng.choice(("Greater", "Less")), [a, self.const(0.0, np.float32)]
        )
        self.emit1(
            "Where", [condition, b, a] if self.rng.random() < 0.5 else [condition, a, b]
        )

    def b_transpose(self) -> None:
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        if self.rng.random() < 0.2:
            self.emit1("Transpose", [data])
        else:
            self.emit1("Transpose", [data], perm=self.rng.sample(range(rank), rank))

    def b_matmul(self) -> None:
        rng = self.rng
        a = self.pick_float(1, 4)
        rank = a.rank(self.alive)
        roll = rng.random()
        if roll < 0.3 and rank >= 2:
            perm = [*range(rank - 2), rank - 1, rank - 2]
            b = self.emit1("Transpose", [a], perm=perm)
        elif roll < 0.6:
            # weights shaped from the input: ConstantOfShape(Concat(Shape(a)[-1:], [k]))
            last = self.shape_of(a, -1) if rng.random() < 0.5 else self.dim_vec(a, rank - 1)
            columns = (
                self.const([rng.randint(1, 4)]) if rng.random() < 0.6 else self.int_piece()
            )
            shape = self.emit1("Concat", [last, columns], axis=0)
            self._small_sizes(shape)
            b = self.emit1(
                "ConstantOfShape",
                [shape],
                value=numpy_helper.from_array(np.array([1.0], np.float32)),
            )
        elif roll < 0.8 and all(
            s[-1] == a.shapes(self.alive)[0][-1] for s in a.shapes(self.alive)
        ):
            inner = a.shapes(self.alive)[0][-1]
            b = self.const(
                np.ones((inner, rng.randint(1, 4))) if rng.random() < 0.7 else np.ones(inner),
                np.float32,
            )
        else:
            b = self.pick_float(1, 4)
        if rng.random() < 0.15:
            a, b = b, a
        self.emit1("MatMul", [a, b])

    def b_split(self) -> None:
        rng = self.rng
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        axis = rng.randrange(rank)
        spelled = axis - rank if rng.random() < 0.3 else axis
        sizes = self.dims_of(data, axis)
        roll = rng.random()
        if roll < 0.35:
            count = rng.randint(1, 3)
            if any(-(-d // count) * (count - 1) > d for d in sizes):
                # the last chunk would be negative: onnxruntime rejects it, and its
                # session set-up has crashed (an assertion in Slice inference) on what
                # such a Split feeds when the input is a constant.
                raise _Reject("uneven split")
            self.emit("Split", [data], count, axis=spelled, num_outputs=count)
        elif roll < 0.55 and len(set(sizes)) == 1:
            total = sizes[0]
            cut = rng.randint(0, total)
            parts = [cut, total - cut] if rng.random() < 0.7 else [total]
            self.emit("Split", [data, self.const(parts)], len(parts), axis=spelled)
        else:
            # split = [d - c, c]: exporters' "take the last c" pattern
            c = rng.randint(0, 2)
            whole = self.dim_vec(data, axis)
            head = self.emit1("Sub", [whole, self.const([c])])
            split = self.emit1("Concat", [head, self.const([c])], axis=0)
            self.emit("Split", [data, split], 2, axis=spelled)

    def b_reduce(self) -> None:
        rng = self.rng
        data = self.pick_float()
        rank = data.rank(self.alive)
        op = rng.choice(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceSumSquare"))
        attrs = {"keepdims": rng.randint(0, 1)}
        inputs: list[_Value | None] = [data]
        roll = rng.random()
        if roll < 0.7 and rank:
            axes = rng.sample(range(rank), rng.randint(1, rank))
            inputs.append(self.const([a - rank if rng.random() < 0.3 else a for a in axes]))
        elif roll < 0.85:
            inputs.append(self.const(np.zeros(0, np.int64)))
            attrs["noop_with_empty_axes"] = rng.randint(0, 1)
        out = self.emit1(op, inputs, **attrs)
        out.exact = op != "ReduceMean" and out.exact

    def _channels(self, data: _Value) -> int:
        channels = {s[1] for s in data.shapes(self.alive)}
        if len(channels) != 1 or 0 in channels:
            raise _Reject("channels vary")
        return channels.pop()

    def _window_attrs(self, spatial: int, dilations: bool) -> dict[str, object]:
        rng = self.rng
        kernel = [rng.randint(1, 3) for _ in range(spatial)]
        attrs: dict[str, object] = {}
        if rng.random() < 0.6:
            attrs["strides"] = [rng.randint(1, 3) for _ in range(spatial)]
        if dilations and rng.random() < 0.4:
            attrs["dilations"] = [rng.randint(1, 2) for _ in range(spatial)]
        if rng.random() < 0.15:
            attrs["auto_pad"] = rng.choice(("SAME_UPPER", "SAME_LOWER", "VALID"))
        elif rng.random() < 0.6:
            attrs["pads"] = [rng.randint(0, k - 1) for k in kernel * 2]
        return {"kernel_shape": kernel, **attrs}

    def b_conv(self) -> None:
        rng = self.rng
        data = self.pick_float(3, 4)
        channels = self._channels(data)
        spatial = data.rank(self.alive) - 2
        attrs = self._window_attrs(spatial, dilations=True)
        kernel = attrs.pop("kernel_shape")
        if rng.random() < 0.5:
            attrs["kernel_shape"] = kernel
        group = channels if channels > 1 and rng.random() < 0.25 else 1
        if group > 1:
            attrs["group"] = group
        out_channels = group * rng.randint(1, 2)
        weight_data = np.array(
            [
                rng.choice((-1, 0, 1))
                for _ in range(out_channels * channels // group * int(np.prod(kernel)))
            ],
            dtype=np.float32,
        ).reshape(out_channels, channels // group, *kernel)
        weight = self.const(weight_data, np.float32)
        inputs = [data, weight]
        if rng.random() < 0.3:
            inputs.append(self.const(np.ones(out_channels), np.float32))
        self.emit1("Conv", inputs, **attrs)

    def b_pool(self) -> None:
        rng = self.rng
        data = self.pick_float(3, 4)
        spatial = data.rank(self.alive) - 2
        op = rng.choice(("MaxPool", "AveragePool", "MaxPool", "GlobalAveragePool"))
        if op == "GlobalAveragePool":
            out = self.emit1(op, [data])
            out.exact = False
            return
        attrs = self._window_attrs(spatial, dilations=op == "MaxPool" or self.opset >= 19)
        if rng.random() < 0.4:
            attrs["ceil_mode"] = 1
        if op == "AveragePool" and rng.random() < 0.4:
            attrs["count_include_pad"] = 1
        outputs = self.emit(
            op, [data], 2 if op == "MaxPool" and rng.random() < 0.3 else 1, **attrs
        )
        outputs[0].exact = op == "MaxPool" and outputs[0].exact

    def b_nonzero(self) -> None:
        # Rank >= 1 only: onnxruntime departs from the spec for a scalar (spec: [0, nnz]
        # with nnz in {0, 1}; onnxruntime gives [1, nnz]) and the engine follows the spec.
        self.emit1("NonZero", [self.pick_float(1, 4)])

    def b_compress(self) -> None:
        rng = self.rng
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        if rng.random() < 0.7:
            axis = rng.randrange(rank)
            others = [a for a in range(rank) if a != axis]
            summed = (
                self.emit1("ReduceSum", [data, self.const(others)], keepdims=0)
                if others
                else data
            )
            condition = self.emit1("Greater", [summed, self.const(0.0, np.float32)])
            spelled = axis - rank if rng.random() < 0.3 else axis
            self.emit1("Compress", [data, condition], axis=spelled)
        else:
            flat = self.emit1("Reshape", [self.pick_float(), self.const([-1])])
            condition = self.emit1("Less", [flat, self.const(0.0, np.float32)])
            self.emit1("Compress", [data, condition])

    def b_cumsum(self) -> None:
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        axis = self.rng.randint(-rank, rank - 1)
        self.emit1("CumSum", [data, self.const(axis)])

    def _no_empty(self, *values: _Value) -> None:
        """Rejects unless every dim is >= 1 wherever the values can be computed.

        For the onnxruntime kernels that crash the process on empty operands (see
        :data:`CRASHES_ON_EMPTY`), no binding may reach them with one.
        """
        for value in values:
            if not value.exact:
                raise _Reject("shape may differ under onnxruntime")
            if any(a is not None and 0 in a.shape for a in value.arrays):
                raise _Reject("empty operand")

    def b_einsum(self) -> None:
        rng = self.rng
        a = self.pick_float(1, 3)
        self._no_empty(a)
        rank = a.rank(self.alive)
        letters = "ijk"[:rank]
        roll = rng.random()
        if roll < 0.35:  # a second operand sharing the last letter: a contraction
            b = self.pick_float(1, 2)
            self._no_empty(b)
            other = "l" if b.rank(self.alive) == 1 else "l" + letters[-1]
            if b.rank(self.alive) == 1:
                other = letters[-1]
            kept = [c for c in letters + other if c != letters[-1]]
            equation = f"{letters},{other}->{''.join(dict.fromkeys(kept))}"
            self.emit1("Einsum", [a, b], equation=equation)
            return
        if roll < 0.5:
            kept = "".join(rng.sample(letters, rng.randint(0, rank)))
            self.emit1("Einsum", [a, a], equation=f"{letters},{letters}->{kept}")
            return
        if roll < 0.6 and rank >= 2:
            self.emit1("Einsum", [a], equation=f"...{letters[-1]}->...")
            return
        kept = "".join(rng.sample(letters, rng.randint(0, rank)))
        explicit = rng.random() < 0.8
        self.emit1("Einsum", [a], equation=f"{letters}->{kept}" if explicit else letters)

    def b_flatten(self) -> None:
        data = self.pick_float()
        rank = data.rank(self.alive)
        self.emit1("Flatten", [data], axis=self.rng.randint(-rank, rank))

    def b_gather(self) -> None:
        rng = self.rng
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        axis = rng.randrange(rank)
        smallest = min(self.dims_of(data, axis))
        if smallest == 0:
            raise _Reject("gather from empty axis")
        shape = rng.choice(((), (1,), (2,), (2, 2)))
        indices = np.array(
            [rng.randint(-smallest, smallest - 1) for _ in range(int(np.prod(shape)))]
        )
        spelled = axis - rank if rng.random() < 0.3 else axis
        self.emit1("Gather", [data, self.const(indices.reshape(shape))], axis=spelled)

    def b_concat(self) -> None:
        rng = self.rng
        a = self.pick_float(1)
        rank = a.rank(self.alive)
        axis = rng.randrange(rank)
        roll = rng.random()
        if roll < 0.4:
            b = a
        elif roll < 0.7:
            b = self.emit1(
                "Slice",
                [
                    a,
                    self.const([rng.randint(0, 2)]),
                    self.const([INT64_MAX]),
                    self.const([axis]),
                ],
            )
        else:
            b = self.pick_float(rank, rank)
        self.emit1(
            "Concat",
            [a, b] if rng.random() < 0.5 else [b, a],
            axis=axis - rank if rng.random() < 0.3 else axis,
        )

    def b_unsqueeze(self) -> None:
        data = self.pick_tensor()
        rank = data.rank(self.alive)
        count = self.rng.randint(1, 2)
        axes = self.rng.sample(range(rank + count), count)
        spelled = [a - rank - count if self.rng.random() < 0.3 else a for a in axes]
        self.emit1("Unsqueeze", [data, self.const(spelled)])

    def b_squeeze(self) -> None:
        data = self.pick_tensor(min_rank=1)
        rank = data.rank(self.alive)
        ones = [a for a in range(rank) if all(s[a] == 1 for s in data.shapes(self.alive))]
        if self.rng.random() < 0.25 or not ones:
            self.emit1("Squeeze", [data])  # no axes: the rank depends on the sizes
            return
        axes = self.rng.sample(ones, self.rng.randint(1, len(ones)))
        self.emit1(
            "Squeeze",
            [data, self.const([a - rank if self.rng.random() < 0.3 else a for a in axes])],
        )

    # More ops whose output shape is computed ---------------------------------------
    def b_mod_int(self) -> None:
        """``Mod(s, c)`` with ``c > 0``: padding-to-a-multiple arithmetic."""
        a = self.pick_int_scalar() if self.rng.random() < 0.4 else self.pick_int_vec()
        self.emit1("Mod", [a, self.const(self.rng.choice((2, 3, 4, [2], [3])))])

    def b_arg(self) -> None:
        rng = self.rng
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        if min(min(s) for s in data.shapes(self.alive)) == 0:
            raise _Reject("ArgMax of an empty tensor")
        self.emit1(
            rng.choice(("ArgMax", "ArgMin")),
            [data],
            axis=rng.randint(-rank, rank - 1),
            keepdims=rng.randint(0, 1),
            select_last_index=rng.randint(0, 1),
        )

    def b_onehot(self) -> None:
        rng = self.rng
        indices = self.pick(lambda v: v.is_int() and v.exact and 1 <= v.rank(self.alive) <= 2)
        depth = (
            self.dim_scalar(*self._some_axis())
            if rng.random() < 0.6
            else self.const(rng.randint(1, 5))
        )
        for b in self.alive:
            if not 1 <= int(depth.arrays[b]) <= MAX_DATA_DIM:
                raise _Reject("depth")
        rank = indices.rank(self.alive)
        values = self.const([0.0, 1.0], np.float32)
        self.emit1("OneHot", [indices, depth, values], axis=rng.randint(-rank - 1, rank))

    def _some_axis(self) -> tuple[_Value, int]:
        source = self.pick_tensor(min_rank=1)
        return source, self.rng.randrange(source.rank(self.alive))

    def b_unique(self) -> None:
        rng = self.rng
        data = self.pick_float(1, 3)
        rank = data.rank(self.alive)
        attrs: dict[str, object] = {"sorted": rng.randint(0, 1)}
        if rng.random() < 0.5:
            # onnxruntime aborts ("terminate called without an active exception") on
            # Unique along an axis when another axis is 0 (axis 0 of a [3, 0] tensor).
            self._no_empty(data)
            attrs["axis"] = rng.randint(-rank, rank - 1)
        self.emit("Unique", [data], rng.randint(1, 4), **attrs)

    def b_trilu(self) -> None:
        data = self.pick_float(2)
        k = [self.const(self.rng.randint(-2, 2))] if self.rng.random() < 0.5 else []
        self.emit1("Trilu", [data, *k], upper=self.rng.randint(0, 1))

    def b_depth_space(self) -> None:
        rng = self.rng
        data = self.pick_float(4, 4)
        block = rng.choice((2, 2, 3))
        if rng.random() < 0.5:
            self._channels(data)
            attrs = {"mode": rng.choice(("DCR", "CRD"))}
            self.emit1("DepthToSpace", [data], blocksize=block, **attrs)
        else:
            self.emit1("SpaceToDepth", [data], blocksize=block)

    def b_gather_elements(self) -> None:
        """``GatherElements(x, ArgMax(x, axis, keepdims=1), axis)``: the max along an axis."""
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        if min(min(s) for s in data.shapes(self.alive)) == 0:
            raise _Reject("empty")
        axis = self.rng.randrange(rank)
        indices = self.emit1("ArgMax", [data], axis=axis, keepdims=1)
        self.emit1(
            "GatherElements",
            [data, indices],
            axis=axis - rank if self.rng.random() < 0.3 else axis,
        )

    def b_gather_nd(self) -> None:
        """``GatherND(x, Transpose(NonZero(x)))``: a boolean-mask selection."""
        data = self.pick_float(1, 3)
        rank = data.rank(self.alive)
        positions = self.emit1("Transpose", [self.emit1("NonZero", [data])], perm=[1, 0])
        if self.rng.random() < 0.5 and rank >= 2:
            # index only the leading axes: the trailing ones are kept
            positions = self.emit1(
                "Slice", [positions, self.const([0]), self.const([rank - 1]), self.const([1])]
            )
        self.emit1("GatherND", [data, positions])

    def b_variadic(self) -> None:
        inputs = [self.pick_float(max_rank=4) for _ in range(self.rng.randint(1, 3))]
        self.emit1(self.rng.choice(("Sum", "Max", "Min", "Mean")), inputs)

    def b_gemm(self) -> None:
        rng = self.rng
        a = self.pick_float(2, 2)
        trans_a, trans_b = rng.randint(0, 1), rng.randint(0, 1)
        inner = self.dim_vec(a, 0 if trans_a else 1)
        columns = self.const([rng.randint(1, 3)]) if rng.random() < 0.6 else self.int_piece()
        pieces = [columns, inner] if trans_b else [inner, columns]
        shape = self.emit1("Concat", pieces, axis=0)
        self._small_sizes(shape)
        b = self.emit1(
            "ConstantOfShape",
            [shape],
            value=numpy_helper.from_array(np.array([1.0], np.float32)),
        )
        inputs = [a, b]
        if rng.random() < 0.4:
            inputs.append(self.const(np.ones(rng.choice(((), (1,), (1, 1)))), np.float32))
        self.emit1("Gemm", inputs, transA=trans_a, transB=trans_b)

    def b_normalize(self) -> None:
        rng = self.rng
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        axis = rng.randint(-rank, rank - 1)
        if rng.random() < 0.5:
            self.emit1(rng.choice(("Softmax", "LogSoftmax", "Hardmax")), [data], axis=axis)
            return
        inner = list(self.alive_dims(data)[axis:])
        scale = self.const(np.ones(inner), np.float32)
        count = rng.choice((1, 1, 3))
        self.emit("LayerNormalization", [data, scale], count, axis=axis)

    def b_conv_transpose(self) -> None:
        rng = self.rng
        data = self.pick_float(3, 4)
        channels = self._channels(data)
        spatial = data.rank(self.alive) - 2
        kernel = [rng.randint(1, 3) for _ in range(spatial)]
        attrs: dict[str, object] = {}
        strides = [rng.randint(1, 3) for _ in range(spatial)]
        if rng.random() < 0.7:
            attrs["strides"] = strides
        else:
            strides = [1] * spatial
        if rng.random() < 0.4:
            attrs["dilations"] = [rng.randint(1, 2) for _ in range(spatial)]
        roll = rng.random()
        if roll < 0.4:
            attrs["pads"] = [rng.randint(0, k - 1) for k in kernel * 2]
        elif roll < 0.55:
            attrs["auto_pad"] = rng.choice(("SAME_UPPER", "SAME_LOWER", "VALID"))
        elif roll < 0.65:
            attrs["output_shape"] = [rng.randint(1, 9) for _ in range(spatial)]
        if rng.random() < 0.3:
            attrs["output_padding"] = [rng.randint(0, s - 1) for s in strides]
        out_channels = rng.randint(1, 2)
        weight = self.const(np.ones((channels, out_channels, *kernel)), np.float32)
        self.emit1("ConvTranspose", [data, weight], **attrs)

    def b_global_pool(self) -> None:
        data = self.pick_float(3, 4)
        op = self.rng.choice(("GlobalMaxPool", "GlobalAveragePool", "LpPool"))
        if op == "LpPool":
            attrs = self._window_attrs(data.rank(self.alive) - 2, dilations=self.opset >= 18)
            if self.rng.random() < 0.3:
                attrs["ceil_mode"] = 1
            out = self.emit1(op, [data], **attrs)
        else:
            out = self.emit1(op, [data])
        out.exact = op == "GlobalMaxPool" and out.exact

    def b_center_crop_pad(self) -> None:
        rng = self.rng
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        axes = (
            sorted(rng.sample(range(rank), rng.randint(1, rank)))
            if rng.random() < 0.5
            else None
        )
        count = len(axes) if axes else rank
        if rng.random() < 0.5:
            shape = self.const([rng.randint(0, 6) for _ in range(count)])
        else:
            pieces = [self.int_piece() for _ in range(count)]
            shape = pieces[0] if count == 1 else self.emit1("Concat", pieces, axis=0)
        self._small_sizes(shape, int(np.prod(self.alive_dims(data))))
        attrs = {"axes": axes} if axes else {}
        self.emit1("CenterCropPad", [data, shape], **attrs)

    # Exporter idioms ------------------------------------------------------------------
    def p_pad_to_multiple(self) -> None:
        """``pad = (c - d % c) % c`` on one axis, then ``Pad``."""
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        axis = self.rng.randrange(rank)
        multiple = self.const([self.rng.choice((2, 3, 4))])
        size = self.dim_vec(data, axis)
        pad = self.emit1(
            "Mod",
            [self.emit1("Sub", [multiple, self.emit1("Mod", [size, multiple])]), multiple],
        )
        before, after = rank + axis, rank - axis - 1  # zeros around the end pad of `axis`
        pieces = [self.const([0] * before), pad] + ([self.const([0] * after)] if after else [])
        pads = self.emit1("Concat", pieces, axis=0)
        self.emit1("Pad", [data, pads])

    def p_split_heads(self) -> None:
        """``[B, S, H] -> [B, S, h, H/h] -> [B, h, S, H/h]`` and back to ``[B, S, -1]``."""
        data = self.pick_float(3, 3)
        hidden = {s[2] for s in data.shapes(self.alive)}
        heads = self.rng.choice((1, 2, 3))
        if len(hidden) != 1 or hidden.pop() % heads:
            raise _Reject("hidden")
        target = self.emit1(
            "Concat",
            [
                self.dim_vec(data, 0),
                self.dim_vec(data, 1),
                self.const([heads]),
                self.const([-1]),
            ],
            axis=0,
        )
        split = self.emit1(
            "Transpose", [self.emit1("Reshape", [data, target])], perm=[0, 2, 1, 3]
        )
        merged = self.emit1("Transpose", [split], perm=[0, 2, 1, 3])
        back = (
            self.const([0, 0, -1])
            if self.rng.random() < 0.5
            else self.emit1("Concat", [self.shape_of(data, 0, 2), self.const([-1])], axis=0)
        )
        self.emit1("Reshape", [merged, back])

    def p_position_ids(self) -> None:
        """``Expand(Unsqueeze(Range(0, S, 1), 0), [B, S])``."""
        data = self.pick_float(2)
        axis = self.rng.randrange(1, data.rank(self.alive))
        limit = self.dim_scalar(data, axis)
        positions = self.emit1("Range", [self.const(0), limit, self.const(1)])
        row = self.unsqueeze0(positions)
        shape = self.emit1(
            "Concat",
            [
                self.dim_vec(data, 0),
                self.const([1]) if self.rng.random() < 0.3 else self.dim_vec(data, axis),
            ],
            axis=0,
        )
        self.emit1("Expand", [row, shape])

    def p_flatten_batch(self) -> None:
        """``Reshape(x, [-1, *x.shape[-k:]])`` and back with ``x.shape[:-k] + y.shape[1:]``."""
        data = self.pick_float(2, 4)
        rank = data.rank(self.alive)
        k = self.rng.randint(1, rank - 1)
        flat = self.emit1(
            "Reshape",
            [data, self.emit1("Concat", [self.const([-1]), self.shape_of(data, -k)], axis=0)],
        )
        flat = self.emit1(self.rng.choice(("Relu", "Neg")), [flat])
        back = self.emit1(
            "Concat", [self.shape_of(data, 0, -k), self.shape_of(flat, 1)], axis=0
        )
        self.emit1("Reshape", [flat, back])

    def p_slice_last(self) -> None:
        """``x[..., -k:]`` and ``x[..., :d-k]`` with ``k`` from another shape."""
        data = self.pick_float(1)
        rank = data.rank(self.alive)
        axis = self.rng.randrange(rank)
        source, source_axis = self._some_axis()
        k = self.dim_vec(source, source_axis)
        if self.rng.random() < 0.5:
            self.emit1(
                "Slice",
                [data, self.emit1("Neg", [k]), self.const([INT64_MAX]), self.const([axis])],
            )
        else:
            end = self.emit1("Sub", [self.dim_vec(data, axis), k])
            self.emit1("Slice", [data, self.const([0]), end, self.const([axis - rank])])

    BUILDERS: dict[str, int] = {
        "b_shape": 10,
        "b_size": 1,
        "b_gather_shape": 8,
        "b_slice": 8,
        "b_concat_ints": 6,
        "b_int_arith": 7,
        "b_range": 3,
        "b_cumsum_int": 1,
        "b_reduce_int": 2,
        "b_equal_where": 2,
        "b_cast_math": 1,
        "b_reshape_ints": 2,
        "b_zero_means_copy": 2,
        "b_reshape": 9,
        "b_constant_of_shape": 3,
        "b_expand": 4,
        "b_tile": 3,
        "b_topk": 2,
        "b_resize": 2,
        "b_pad": 3,
        "b_unary": 1,
        "b_binary": 4,
        "b_where": 2,
        "b_transpose": 3,
        "b_matmul": 4,
        "b_split": 3,
        "b_reduce": 3,
        "b_conv": 2,
        "b_pool": 3,
        "b_nonzero": 2,
        "b_compress": 2,
        "b_cumsum": 1,
        "b_einsum": 2,
        "b_flatten": 1,
        "b_gather": 2,
        "b_concat": 2,
        "b_unsqueeze": 3,
        "b_squeeze": 2,
        "b_mod_int": 2,
        "b_arg": 1,
        "b_onehot": 1,
        "b_unique": 1,
        "b_trilu": 1,
        "b_depth_space": 1,
        "b_gather_elements": 1,
        "b_gather_nd": 1,
        "b_variadic": 1,
        "b_gemm": 1,
        "b_normalize": 1,
        "b_conv_transpose": 2,
        "b_global_pool": 1,
        "b_center_crop_pad": 1,
        "p_pad_to_multiple": 2,
        "p_split_heads": 2,
        "p_position_ids": 2,
        "p_flatten_batch": 2,
        "p_slice_last": 3,
    }

    # ---------------------------------------------------------------- driver
    def _try(self, builder: str) -> bool:
        saved = (
            len(self.values),
            len(self.nodes),
            len(self.initializers),
            list(self.dead),
            self.counter,
        )
        try:
            getattr(self, builder)()
        except _Reject:
            pass
        else:
            lost = [b for b in range(NUM_BINDINGS) if self.dead[b] and not saved[3][b]]
            if not lost or self.rng.random() < 0.1:
                return True
        del self.values[saved[0] :]
        del self.nodes[saved[1] :]
        del self.initializers[saved[2] :]
        self.dead = saved[3]
        return False

    def generate(self) -> FuzzCase:
        for _ in range(self.rng.randint(1, 3)):
            self._add_input()
        target = self.rng.randint(5, 25)
        names, weights = zip(*self.BUILDERS.items())
        attempts = 0
        while self._compute_nodes() < target and attempts < 20 * target:
            attempts += 1
            self._try(self.rng.choices(names, weights)[0])
        return self._case()

    def _compute_nodes(self) -> int:
        return sum(n.op_type != "Constant" for n in self.nodes)

    def _case(self) -> FuzzCase:
        value_types = {v.name: v.dtype for v in self.values}
        produced = [o for n in self.nodes if n.op_type != "Constant" for o in n.output]
        consumed = {i for n in self.nodes for i in n.input}
        finals = [o for o in produced if o not in consumed][-2:] or produced[-1:]
        declare = self.rng.random() < 0.3
        declared: set[str] = set()
        outputs = []
        for k, name in enumerate(finals):
            value = next(v for v in self.values if v.name == name)
            ranks = {a.ndim for a in value.arrays if a is not None}
            dims = None
            if declare and len(ranks) == 1:
                dims = [f"o{k}_{axis}" for axis in range(ranks.pop())]
                declared.update(dims)
            outputs.append(helper.make_tensor_value_info(name, value_types[name], dims))
        value_info = self._value_info(set(finals), declared)
        graph = helper.make_graph(
            self.nodes,
            "fuzz",
            self.inputs,
            outputs,
            initializer=self.initializers,
            value_info=value_info,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 10
        return FuzzCase(
            self.seed,
            model,
            self.bindings,
            self.feeds,
            value_types,
            self._options(),
            frozenset(declared),
            valid=[not dead for dead in self.dead],
        )

    def _value_info(self, outputs: set[str], declared: set[str]) -> list[onnx.ValueInfoProto]:
        """Now and then, declared shapes on some intermediate values, one name per dim.

        A name used once is true of every run, so the engine may take it (policy
        ``refine`` prefers it to a minted symbol) and, with ``value_info_anchors``,
        rename minted symbols to it.
        """
        self.value_info_anchors = False
        if self.rng.random() >= 0.2:
            return []
        self.value_info_anchors = self.rng.random() < 0.5
        infos = []
        for value in self.values:
            if value.constant or value.name in outputs or value.name.startswith("x"):
                continue
            ranks = {a.ndim for a in value.arrays if a is not None}
            if len(ranks) != 1 or self.rng.random() >= 0.3:
                continue
            dims = [f"{value.name}_d{axis}" for axis in range(ranks.pop())]
            declared.update(dims)
            infos.append(helper.make_tensor_value_info(value.name, value.dtype, dims))
        return infos

    def _options(self) -> dict[str, object]:
        options: dict[str, object] = {}
        if self.value_info_anchors:
            options["value_info_anchors"] = True
        roll = self.rng.random()
        if roll < 0.2:
            options["nonempty_inputs"] = True
        elif roll < 0.3:
            name = self.rng.choice(SYMBOLS)
            lower, upper = self.rng.choice((1, 2)), self.rng.choice((None, 7))
            options["symbol_ranges"] = {name: (lower, upper)}
        return options


def generate(seed: int) -> FuzzCase:
    """A random graph with its bindings and input data, determined by ``seed``."""
    return _Generator(seed).generate()


def _crashes_onnxruntime(node: onnx.NodeProto, arrays: Sequence[np.ndarray | None]) -> bool:
    """Whether onnxruntime might kill the process on this node (``None``: input unknown)."""
    if node.op_type in ("Div", "Mod") and len(arrays) == 2:
        divisor = arrays[1]
        if divisor is None:
            return True  # might be an integer 0
        return divisor.dtype.kind in "iu" and bool(np.any(divisor == 0))
    if node.op_type in CRASHES_ON_EMPTY:
        if node.op_type == "Unique" and not any(a.name == "axis" for a in node.attribute):
            return False
        return any(a is None or a.size == 0 for a in arrays)
    return False


@dataclasses.dataclass
class Simulation:
    """The reference evaluator's view of one run of a case.

    Attributes:
        valid: Every node ran: the sizes are valid per the spec (as far as the reference
            evaluator enforces it).
        unsafe: Some node might crash onnxruntime: an integer division by zero, an empty
            operand of a kernel in :data:`CRASHES_ON_EMPTY`, an input the reference
            could not compute (onnxruntime may be more lenient and reach the node), or a
            huge output.
    """

    valid: bool
    unsafe: bool


def simulate(case: FuzzCase, b: int) -> Simulation:
    """Runs every node of ``case`` with the reference evaluator on binding ``b``."""
    constants = {t.name: numpy_helper.to_array(t) for t in case.model.graph.initializer}
    known: dict[str, np.ndarray] = {**constants, **case.feeds[b]}
    valid = True
    for node in case.model.graph.node:
        arrays = [known.get(i) if i else None for i in node.input]
        if _crashes_onnxruntime(node, arrays):
            return Simulation(False, True)
        if any(a is None for i, a in zip(node.input, arrays) if i):
            continue  # downstream of a node the reference rejected
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                evaluator = reference(node, case.opset)
                outputs = evaluator.run(None, {i: a for i, a in zip(node.input, arrays) if i})
        except Exception:
            valid = False
            continue
        for name, array in zip(node.output, outputs):
            array = np.asarray(array)
            if array.size > 16 * MAX_ELEMENTS:
                return Simulation(False, True)
            known[name] = array
    return Simulation(valid, False)
