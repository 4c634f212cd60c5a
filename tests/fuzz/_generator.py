"""The generator's core: the graph under construction, emitting and picking values, the driver.

A builder (a method ``b_*`` or ``p_*`` of the mixins in ``_build_*``) proposes nodes through
:meth:`GeneratorCore.emit`, which runs them at once with the reference evaluator on every
binding; the driver undoes a proposal that fails (see :mod:`tests.fuzz.graph_gen`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.fuzz._cases import (
    ANONYMOUS,
    INT64_MAX,
    MAX_ELEMENTS,
    NUM_BINDINGS,
    SMALL_INT,
    SYMBOLS,
    FuzzCase,
    hidden_symbol,
    input_shape,
    make_feed,
    reference,
)

logger = logging.getLogger(__name__)


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


class GeneratorCore:
    """State, emitting, picking and the driver; the builders come from the mixins."""

    #: builder method name -> weight (set by the assembled generator in graph_gen)
    BUILDERS: dict[str, int] = {}
    #: Run ``Loop`` as the spec says (see ``_cases.Loop``); off for the older seeds.
    SPEC_LOOP = False

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
        self,
        op: str,
        inputs: Sequence[_Value | None],
        count: int = 1,
        outer: Sequence[_Value] = (),
        **attrs: object,
    ) -> list[_Value]:
        """Appends one node and runs it on every binding where its inputs are known.

        ``outer`` are the values a subgraph attribute (an ``If`` branch, a ``Loop`` body)
        reads from the enclosing graph: fed to the reference evaluator, not node inputs.

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
        evaluator = reference(node, self.opset, spec_loop=self.SPEC_LOOP)
        results: list[list[np.ndarray] | None] = []
        read = [*inputs, *outer]
        for b in range(NUM_BINDINGS):
            arrays = [v.arrays[b] if v is not None else None for v in read]
            if any(a is None for v, a in zip(read, arrays) if v is not None):
                results.append(None)
                continue
            feed = {v.name: a for v, a in zip(read, arrays) if v is not None}
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
            exact = all(v.exact for v in read if v is not None)
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
        finals += [
            o for o in getattr(self, "kept_outputs", ()) if o in produced and o not in finals
        ]
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
