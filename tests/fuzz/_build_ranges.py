"""Builders of the idioms of fixed sizes and of bounds proved in subgraphs.

Drawn by the generator of ``graph_gen.generate(seed, ranges=True)``, whose bindings keep
some symbols at one size (often 1): the masks a static batch leaves (``Range(0, 1)``
folded to a constant 0, the ``Expand``/``Unsqueeze`` chain of a placed ``Range``
collapsed to one ``Reshape``), ``Reshape`` dropping or inserting size-1 axes, and
``If``/``Loop`` whose branch or body holds an op that proves a bound (``TopK``'s
``k <= dim``, a ``Slice`` end, ``NonZero``'s count) only where that code runs.
"""

from __future__ import annotations

import logging

import numpy as np
from onnx import TensorProto, helper

from tests.fuzz._generator import _Reject, _Value

logger = logging.getLogger(__name__)


class RangeBuilders:
    """Mixin of :class:`tests.fuzz._generator.GeneratorCore`: static-size idioms, subgraphs."""

    def _ones_everywhere(self, value: _Value, axis: int) -> bool:
        return all(d == 1 for d in self.dims_of(value, axis))

    def _arange(self, limit: _Value) -> _Value:
        """``Range(0, limit, 1)`` of a 0-D int64 ``limit``."""
        return self.emit1("Range", [self.const(0), limit, self.const(1)])

    # Static-batch masks ---------------------------------------------------------------
    def p_static_mask_gather(self) -> None:
        """transformers' vmap mask ``GatherND(m, idx)`` over ``[B, 1, 1, T]`` as a static batch leaves it.

        A component on a size-1 axis is often a constant 0 (``Range(0, 1)`` folded) or a
        ``Range`` reshaped straight to the grid (the chain collapsed); now and then the
        kv ``Range`` is another tensor's size (a prefix) or ``+ offset``.
        """
        rng = self.rng
        data = self.pick_float(2, 2)
        # now and then row 0 only, of a batch that may be larger (a rule must decline)
        first_row = rng.random() < 0.15
        single = all(d == 1 for d in self.dims_of(data, 0))
        zero_first = first_row or (single and rng.random() < 0.5)
        batch = self.const([1]) if first_row else self.dim_vec(data, 0)
        if zero_first and rng.random() < 0.4:  # a mask of one row spread over another batch
            batch = self.dim_vec(*self._some_axis())
        grid = [batch, self.const([1]), self.const([1]), self.dim_vec(data, 1)]
        roll = rng.random()
        if roll < 0.3:
            source, axis = self._some_axis()
            kv_limit = self.dim_scalar(source, axis)
            grid[3] = self.unsqueeze0(kv_limit)
        elif roll < 0.4:  # a limit that may be negative: an empty Range, a Slice from the back
            kv_limit = self.emit1(
                "Sub", [self.dim_scalar(data, 1), self.const(rng.randint(1, 2))]
            )
            grid[3] = self.emit1("Max", [self.unsqueeze0(kv_limit), self.const([0])])
        else:
            kv_limit = self.dim_scalar(data, 1)
        shape = self.emit1("Concat", grid, axis=0)
        views = ([-1, 1, 1, 1], [1, 1, 1, -1])
        limits = [self.dim_scalar(data, 0), kv_limit]
        parts = []
        for j in range(2):
            if j == 0 and zero_first:
                component = self.const(np.zeros((1, 1, 1, 1), np.int64))
                if rng.random() < 0.3:  # the lift folded too: a [1, 1, 1, 1, 1] zero
                    parts.append(self.const(np.zeros((1, 1, 1, 1, 1), np.int64)))
                    continue
            else:
                arange = self._arange(limits[j])
                if j == 1 and rng.random() < 0.2:
                    arange = self.emit1("Add", [arange, self.const(rng.randint(0, 1))])
                if j == 1 and rng.random() < 0.3:  # Reshape straight to the grid + [1]
                    parts.append(self.emit1("Reshape", [arange, self.const([1, 1, 1, -1, 1])]))
                    continue
                component = self.emit1("Reshape", [arange, self.const(views[j])])
            spread = self.emit1("Expand", [component, shape])
            parts.append(self.emit1("Unsqueeze", [spread, self.const([-1])]))
        idx = self.emit1("Concat", parts, axis=-1)
        self.emit1("GatherND", [data, idx])

    def p_static_flat_gather(self) -> None:
        """TorchScript's mask ``Gather(flatten(m), rows * T + cols)``, the batch term often dropped."""
        rng = self.rng
        data = self.pick_float(2, 2)
        length = self.dim_scalar(data, 1)
        cols = self.emit1("Reshape", [self._arange(length), self.const([1, 1, 1, -1])])
        if (self._ones_everywhere(data, 0) and rng.random() < 0.6) or rng.random() < 0.1:
            offsets = cols  # Range(0, 1) * T folded to 0 and the Add dropped (or row 0 only)
        else:
            rows = self.emit1(
                "Reshape", [self._arange(self.dim_scalar(data, 0)), self.const([-1, 1, 1, 1])]
            )
            offsets = self.emit1("Add", [self.emit1("Mul", [rows, length]), cols])
        if rng.random() < 0.5:
            flat = self.emit1("Flatten", [data], axis=2)
        else:
            flat = self.emit1("Reshape", [data, self.const([-1])])
        self.emit1("Gather", [flat, offsets], axis=0)

    def p_reshape_ones(self) -> None:
        """A ``Reshape`` that drops a tensor's size-1 axes or inserts some, by a computed target."""
        rng = self.rng
        data = self.pick_tensor(min_rank=1)
        rank = data.rank(self.alive)
        pieces = []
        for axis in range(rank):
            if self._ones_everywhere(data, axis) and rng.random() < 0.7:
                continue
            pieces.append(self.dim_vec(data, axis) if rng.random() < 0.7 else self.const([0]))
            if rng.random() < 0.2:
                pieces.append(self.const([1]))
        if not pieces or rng.random() < 0.2:
            pieces.append(self.const([rng.choice((1, -1))]))
        target = self.emit1("Concat", pieces, axis=0) if len(pieces) > 1 else pieces[0]
        self.emit1("Reshape", [data, target])

    # Subgraphs proving bounds ----------------------------------------------------------
    def _branch(
        self,
        name: str,
        nodes: list,
        outputs: list[tuple[str, int]],
        inputs: list | None = None,
    ):
        return helper.make_graph(
            nodes,
            name,
            inputs or [],
            [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        )

    def _bounded_code(
        self, data: _Value, axis: int, k: _Value
    ) -> tuple[list, str, int, _Value | None]:
        """Nodes of a branch proving a bound only where they run, their output and dtype,
        and the ``[n]`` that ``k <= n`` is proved of (``None``: ``data``'s dim on ``axis``)."""
        rng = self.rng
        out = self._name("s")
        roll = rng.random()
        if roll < 0.4 and self.opset >= 17:  # STFT: frame_length <= signal length
            if any(int(k.arrays[b][0]) < 1 for b in self.alive):
                raise _Reject("an STFT frame of 0")  # onnxruntime might crash on it
            signal = self.emit1("Reshape", [data, self.const([1, -1, 1])])
            window = self.emit1(
                "ConstantOfShape", [k], value=helper.make_tensor("", 1, [1], [1.0])
            )
            length = self.emit1("Squeeze", [k, self.const([0])])
            step = self.const(1)
            nodes = [
                helper.make_node(
                    "STFT", [signal.name, step.name, window.name, length.name], [out]
                )
            ]
            return nodes, out, TensorProto.FLOAT, self.dim_vec(signal, 1)
        if roll < 0.6:  # TopK: k <= dim(data, axis)
            nodes = [
                helper.make_node(
                    "TopK", [data.name, k.name], [out, self._name("s")], axis=axis, sorted=1
                )
            ]
            return nodes, out, TensorProto.FLOAT, None
        if roll < 0.8:  # a Slice to k: min(k, dim)
            nodes = [
                helper.make_node(
                    "Slice",
                    [data.name, self.const([0]).name, k.name, self.const([axis]).name],
                    [out],
                )
            ]
            return nodes, out, TensorProto.FLOAT, None
        nodes = [helper.make_node("NonZero", [data.name], [out])]  # nnz <= numel(data)
        return nodes, out, TensorProto.INT64, None

    def _other_code(self, data: _Value, dtype: int) -> tuple[list, str]:
        out = self._name("s")
        if dtype == TensorProto.INT64:
            neg = self._name("s")
            return [
                helper.make_node("Neg", [data.name], [neg]),
                helper.make_node("NonZero", [neg], [out]),
            ], out
        return [helper.make_node("Identity", [data.name], [out])], out

    def _use_min(self, data: _Value, axis: int, k: _Value, size: _Value | None) -> None:
        """After the subgraph: code whose shape is ``min(k, size)`` (a wrong bound shows)."""
        rng = self.rng
        size = size or self.dim_vec(data, axis)
        least = self.emit1("Min", [k, size])
        roll = rng.random()
        if roll < 0.4:
            used = self.emit1("Slice", [data, self.const([0]), least, self.const([axis])])
        elif roll < 0.7:
            used = self.emit1("ConstantOfShape", [least])
        else:
            used = self.emit1("Sub", [size, least])
        self.keep_output(used)

    def keep_output(self, value: _Value) -> None:
        """Makes ``value`` a graph output (so that what computes it is not dead code)."""
        if not hasattr(self, "kept_outputs"):
            self.kept_outputs: list[str] = []
        self.kept_outputs.append(value.name)

    def p_if_bound(self) -> None:
        """``If`` whose then branch proves ``k <= dim`` (``TopK``, ``Slice``) or mints a count."""
        rng = self.rng
        data = self.pick_float(1, 3)
        axis = rng.randrange(data.rank(self.alive))
        source, source_axis = self._some_axis()
        k = self.dim_vec(source, source_axis)
        then_nodes, then_out, dtype, bounded = self._bounded_code(data, axis, k)
        size = bounded or self.dim_vec(data, axis)
        roll = rng.random()
        if roll < 0.5:  # the then branch runs exactly where it is valid
            cond = self.emit1("LessOrEqual", [k, size])
        elif roll < 0.7:
            cond = self.emit1("Greater", [k, size])
        else:
            cond = self.const(rng.random() < 0.5, np.bool_)
        if rng.random() < 0.5:
            cond = self.emit1("Squeeze", [cond]) if cond.arrays[self.alive[0]].ndim else cond
        else_nodes, else_out = self._other_code(data, dtype)
        if rng.random() < 0.5:
            then_nodes, then_out, else_nodes, else_out = (
                else_nodes,
                else_out,
                then_nodes,
                then_out,
            )
        (result,) = self.emit(
            "If",
            [cond],
            1,
            outer=[data, k, *self._constants_in(then_nodes + else_nodes)],
            then_branch=self._branch("then", then_nodes, [(then_out, dtype)]),
            else_branch=self._branch("else", else_nodes, [(else_out, dtype)]),
        )
        if rng.random() < 0.5:
            self.keep_output(result)
        self._use_min(data, axis, k, bounded)

    def p_loop_bound(self) -> None:
        """``Loop`` whose body proves a bound; the trip count may be 0 (the body never runs)."""
        rng = self.rng
        data = self.pick_float(1, 3)
        axis = rng.randrange(data.rank(self.alive))
        source, source_axis = self._some_axis()
        k = self.dim_vec(source, source_axis)
        trip_source, trip_axis = self._some_axis()
        trip = self.dim_scalar(trip_source, trip_axis)
        if any(t > 4 for t in (int(trip.arrays[b]) for b in self.alive)):
            raise _Reject("many iterations")
        nodes, out, dtype, bounded = self._bounded_code(data, axis, k)
        i, c_in, c_out = self._name("i"), self._name("c"), self._name("c")
        carried_in, carried_out = self._name("a"), self._name("a")
        nodes = [
            *nodes,
            helper.make_node("Identity", [c_in], [c_out]),
            helper.make_node("Identity", [carried_in], [carried_out]),
        ]
        scanned = dtype != TensorProto.INT64 and rng.random() < 0.5  # same shape each time
        if self.SPEC_LOOP and any(int(trip.arrays[b]) == 0 for b in self.alive):
            scanned = False  # no iteration: the scan output's dims are onnxruntime's choice
        body = helper.make_graph(
            nodes,
            "body",
            [
                helper.make_tensor_value_info(i, TensorProto.INT64, []),
                helper.make_tensor_value_info(c_in, TensorProto.BOOL, []),
                helper.make_tensor_value_info(carried_in, TensorProto.INT64, None),
            ],
            [
                helper.make_tensor_value_info(c_out, TensorProto.BOOL, []),
                helper.make_tensor_value_info(carried_out, TensorProto.INT64, None),
                *([helper.make_tensor_value_info(out, dtype, None)] if scanned else []),
            ],
        )
        initial = self.dim_vec(data, axis)
        self.emit(
            "Loop",
            [trip, None, initial],
            1 + scanned,
            outer=[data, k, *self._constants_in(nodes)],
            body=body,
        )
        self._use_min(data, axis, k, bounded)

    def _constants_in(self, nodes: list) -> list[_Value]:
        """The generator's values read by ``nodes`` (constants made for a branch)."""
        names = {i for n in nodes for i in n.input}
        return [v for v in self.values if v.name in names]
