"""Builders of graphs the first generators never drew (seeds from ``WIDE_FROM``).

- Tables of small ints (2-D and more) made from shapes and flowing through ``Concat`` on
  axis 1, ``Transpose``, ``Slice`` with a negative step, ``Flatten``, ``Tile``,
  ``CumSum``, ``Gather`` with 2-D indices, then used as ``Pad`` pads (torch's ``F.pad``
  table), ``Reshape``/``Expand`` targets or ``Slice`` bounds.
- int64 arithmetic near wrap: a dim times ``2**40`` or ``2**62`` and divided back, sums
  that overflow at some sizes, a big size cast to int32, ``Div``/``Mod`` of negatives
  (truncating division, ``Mod``'s ``fmod`` 0 and 1).
- ``Loop`` with carried tensors that grow, declared body shapes (true for the first
  iteration only, or for none), scan outputs, trip counts of 0; ``Scan`` with state and
  scan outputs; ``If`` whose branches differ in rank or dims.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from tests.fuzz._cases import MAX_DATA_DIM
from tests.fuzz._generator import _Reject, _Value


class WideBuilders:
    """Mixin of :class:`tests.fuzz._generator.GeneratorCore`: int tables, wrap, subgraphs."""

    #: Whether a ``Loop`` that may run no iteration gets scan outputs too (the seeds of
    #: ``graph_gen.ZERO_TRIPS_FROM`` on; the earlier seeds keep the graphs they drew).
    ZERO_TRIP_SCANS = False

    # Tables of small ints ----------------------------------------------------------
    def _pad_amount(self) -> _Value:
        """A ``[1]`` pad amount: a constant, a dim, or a dim minus a constant."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.4:
            return self.const([rng.choice((0, 0, 1, 2, -1))])
        source, axis = self._some_axis()
        piece = self.dim_vec(source, axis)
        if roll < 0.7:
            return piece
        return self.emit1("Sub", [piece, self.const([rng.randint(1, 3)])])

    def p_torch_pad_table(self) -> None:
        """torch's ``F.pad``: ``[l_last, r_last, l_prev, ...]`` -> ``[-1, 2]`` table, reversed
        rows, transposed, flattened: ONNX's ``[begins..., ends...]``."""
        rng = self.rng
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        padded = rng.randint(1, rank)
        pieces = [self._pad_amount() for _ in range(2 * padded)]
        if padded < rank:
            pieces.append(self.const([0] * (2 * (rank - padded))))
        flat = self.emit1("Concat", pieces, axis=0)
        table = self.emit1("Reshape", [flat, self.const([-1, 2])])
        rows = self.emit1(
            "Slice",
            [
                table,
                self.const([-1]),
                self.const([-(2**63)]),
                self.const([0]),
                self.const([-1]),
            ],
        )
        roll = rng.random()
        if roll < 0.6:
            swapped = self.emit1("Transpose", [rows], perm=[1, 0])
            pads = self.emit1("Reshape", [swapped, self.const([-1])])
        elif roll < 0.8:  # the same, through Flatten then a squeeze of the leading 1
            swapped = self.emit1("Transpose", [rows], perm=[1, 0])
            pads = self.emit1(
                "Squeeze", [self.emit1("Flatten", [swapped], axis=0), self.const([0])]
            )
        else:  # Concat of the two columns, each [rank, 1], on axis 0 then flattened
            begins = self.emit1(
                "Slice", [rows, self.const([0]), self.const([1]), self.const([1])]
            )
            ends = self.emit1(
                "Slice", [rows, self.const([1]), self.const([2]), self.const([1])]
            )
            both = self.emit1("Concat", [begins, ends], axis=1)
            pads = self.emit1(
                "Reshape", [self.emit1("Transpose", [both], perm=[1, 0]), self.const([-1])]
            )
        self._bounded(pads)
        mode = rng.choice(("constant", "constant", "edge", "reflect"))
        self.emit1("Pad", [data, pads], mode=mode)

    def _bounded(self, value: _Value, limit: int = MAX_DATA_DIM // 4) -> None:
        for b in self.alive:
            if not np.all(np.abs(value.arrays[b].astype(float)) <= limit):
                raise _Reject("a table entry is large")

    def p_int_table(self) -> None:
        """A 2-D table of dims (``Concat`` on axis 1, ``Tile``, ``CumSum``, ``Gather`` with 2-D
        indices) flattened into a ``Reshape``/``Expand`` target or ``Slice`` bounds."""
        rng = self.rng
        data = self.pick_tensor(min_rank=1)
        rank = data.rank(self.alive)
        shape = self.shape_of(data)
        roll = rng.random()
        if roll < 0.3:  # Gather with 2-D indices: [[i, j], ...] rows of the shape
            rows = rng.randint(1, 2)
            indices = [[rng.randrange(-rank, rank) for _ in range(2)] for _ in range(rows)]
            table = self.emit1("Gather", [shape, self.const(indices)], axis=0)
        elif roll < 0.55:  # columns side by side: [rank, 2] of (dim, 1) or (dim, dim - 1)
            column = self.emit1("Unsqueeze", [shape, self.const([1])])
            other = (
                self.emit1("Sub", [column, self.const([[1]])])
                if rng.random() < 0.5
                else self.emit1("Mul", [column, self.const([[0]])])
            )
            table = self.emit1(
                "Concat", [column, other] if rng.random() < 0.5 else [other, column], axis=1
            )
        elif roll < 0.75:  # a tiled row
            row = self.emit1("Unsqueeze", [shape, self.const([0])])
            table = self.emit1("Tile", [row, self.const([rng.randint(1, 2), 1])])
        else:  # a running product of ones and dims
            row = self.emit1("Unsqueeze", [shape, self.const([0])])
            table = self.emit1(
                "CumSum",
                [row, self.const(rng.choice((0, 1, -1)))],
                exclusive=rng.randint(0, 1),
                reverse=rng.randint(0, 1),
            )
        if rng.random() < 0.4:
            table = self.emit1("Transpose", [table], perm=[1, 0])
        if rng.random() < 0.3:
            table = self.emit1(
                "Slice",
                [
                    table,
                    self.const([-1]),
                    self.const([-(2**63)]),
                    self.const([1]),
                    self.const([-1]),
                ],
            )
        flat = (
            self.emit1("Reshape", [table, self.const([-1])])
            if rng.random() < 0.6
            else self.emit1(
                "Squeeze", [self.emit1("Flatten", [table], axis=0), self.const([0])]
            )
        )
        use = rng.random()
        if use < 0.35:
            target = self.pick_tensor(min_rank=1)
            self.emit1("Reshape", [target, flat])
        elif use < 0.6:
            self._bounded(flat, MAX_DATA_DIM)
            self.emit1("Expand", [self.pick_tensor(), flat])
        elif use < 0.8:
            size = flat.arrays[self.alive[0]].size
            target = self.pick(lambda v: v.rank(self.alive) == size and size > 0)
            self.emit1("Slice", [target, self.const([0] * size), flat])
        else:
            self._bounded(flat, MAX_DATA_DIM)
            self.emit1("ConstantOfShape", [flat])

    # int64 arithmetic near wrap ----------------------------------------------------
    def p_int_wrap(self) -> None:
        """A dim through int64 math that wraps at some sizes, or ``Div``/``Mod`` of negatives,
        then used as a size (``Reshape`` target, ``Slice`` end) or added to the dim."""
        rng = self.rng
        source, axis = self._some_axis()
        d = self.dim_vec(source, axis)
        roll = rng.random()
        if roll < 0.25:  # d * 2**k / 2**k: d until it wraps (k = 62: from d = 2)
            big = self.const([1 << rng.choice((40, 60, 61, 62))])
            result = self.emit1("Div", [self.emit1("Mul", [d, big]), big])
        elif roll < 0.4:  # (d * c + d * c) / c: overflows at some d
            c = self.const([rng.choice((2**62, 2**61 + 1, 3 * 2**60, 2**40))])
            product = self.emit1("Mul", [d, c])
            result = self.emit1("Div", [self.emit1("Add", [product, product]), c])
        elif roll < 0.55:  # a big size cast to int32 (wraps mod 2**32) and back
            c = self.const([rng.choice((2**32 + 1, 2**31, 2**32 - 1, 3 * 2**30))])
            narrow = self.emit1("Cast", [self.emit1("Mul", [d, c])], to=TensorProto.INT32)
            result = self.emit1("Cast", [narrow], to=TensorProto.INT64)
        elif roll < 0.8:  # Div / Mod of a negative: truncation, the divisor's sign
            shifted = self.emit1("Sub", [d, self.const([rng.randint(1, 5)])])
            divisor = self.const([rng.choice((2, 3, -2, -3, 5, -5))])
            op = rng.choice(("Div", "Mod", "Mod"))
            attrs = {"fmod": 1} if op == "Mod" and rng.random() < 0.3 else {}
            result = self.emit1(op, [shifted, divisor], **attrs)
        else:  # Neg / Abs of a wrapped product
            wrapped = self.emit1("Mul", [d, self.const([-(2**62)])])
            result = self.emit1(
                rng.choice(("Abs", "Neg")), [self.emit1("Div", [wrapped, self.const([2**61])])]
            )
        use = rng.random()
        if use < 0.3:
            self.emit1("Add", [result, d])
        elif use < 0.6:
            data = self.pick_tensor(min_rank=1)
            self.emit1(
                "Slice",
                [
                    data,
                    self.const([0]),
                    result,
                    self.const([rng.randrange(data.rank(self.alive))]),
                ],
            )
        elif use < 0.8:
            self._bounded(result, MAX_DATA_DIM)
            self.emit1("ConstantOfShape", [self.emit1("Max", [result, self.const([0])])])
        else:
            data = self.pick_tensor(min_rank=1)
            self.emit1(
                "Reshape", [data, self.emit1("Concat", [result, self.const([-1])], axis=0)]
            )

    # Subgraphs ---------------------------------------------------------------------
    def _declared(self, name: str, dtype: int, value: _Value | None, how: str):
        """A body value's declaration: none, its rank, its dims, or one name per dim.

        ``ints`` declares the dims ``value`` has in every binding (a name where they
        differ): true of a branch's output, of a ``Loop``'s carried tensor in its first
        iteration only where it grows. (A declared int false in some runs is trusted where
        inference minted a symbol, as onnxruntime's own folding of ``Shape`` trusts it:
        a policy, reported apart, not drawn here.)
        """
        if how == "none" or value is None:
            return helper.make_tensor_value_info(name, dtype, None)
        shapes = value.shapes(self.alive)
        if how == "rank":
            return helper.make_tensor_value_info(name, dtype, [None] * len(shapes[0]))
        dims = [f"{name}_{k}" for k in range(len(shapes[0]))]
        if how == "ints":
            dims = [
                sizes[0] if len(set(sizes)) == 1 else dims[k]
                for k, sizes in enumerate(zip(*shapes))
            ]
        return helper.make_tensor_value_info(name, dtype, dims)

    def p_loop_carried(self) -> None:
        """``Loop`` whose carried tensor grows (or not), with declared body shapes, a counter
        and scan outputs; the trip count may be 0 or come from a dim, the condition may stop
        it early."""
        rng = self.rng
        data = self.pick_float(1, 3)
        rank = data.rank(self.alive)
        axis = rng.randrange(rank)
        roll = rng.random()
        if roll < 0.2:
            trip = self.const(0)
        elif roll < 0.5:
            trip = self.const(rng.randint(1, 3))
        else:
            trip = self.dim_scalar(*self._some_axis())
        if any(int(trip.arrays[b]) > 4 for b in self.alive):
            raise _Reject("many iterations")
        i, c_in, c_out = self._name("i"), self._name("c"), self._name("c")
        v_in, v_out = self._name("a"), self._name("a")
        n_in, n_out = self._name("a"), self._name("a")
        grows = rng.random() < 0.6
        head = self._name("s")
        one, zero, ax = self.const([1]), self.const([0]), self.const([axis])
        nodes = []
        if grows:  # v := Concat(v, v[:1] along axis): one more each iteration
            nodes += [
                helper.make_node("Slice", [v_in, zero.name, one.name, ax.name], [head]),
                helper.make_node("Concat", [v_in, head], [v_out], axis=axis),
            ]
        else:
            nodes.append(helper.make_node("Relu", [v_in], [v_out]))
        shape = self._name("s")
        nodes += [
            helper.make_node("Shape", [v_in], [shape]),
            helper.make_node("Add", [n_in, shape], [n_out]),
        ]
        early = rng.random() < 0.3
        if early:  # stop once i reaches a dim of data: cond = i + 1 < dim
            limit = self.dim_scalar(data, axis)
            step, nxt = self.const(1), self._name("s")
            nodes += [
                helper.make_node("Add", [i, step.name], [nxt]),
                helper.make_node("Less", [nxt, limit.name], [c_out]),
            ]
        else:
            nodes.append(helper.make_node("Identity", [c_in], [c_out]))
        scans = []
        # Where the loop may run no iteration, a scan output's dims past the first are
        # onnxruntime's choice (the body output's shape as its load-time inference knows
        # it, unknown dims 0, an unknown rank giving [0]), which the shapes written change:
        # the oracles compare those runs' other outputs (tests/fuzz/oracle.py).
        never = any(int(trip.arrays[b]) == 0 for b in self.alive)
        scan_roll = 1.0 if never and not self.ZERO_TRIP_SCANS else rng.random()
        if scan_roll < 0.4:
            scans.append((shape, TensorProto.INT64))  # same shape each iteration
        elif scan_roll < 0.6:
            scans.append((v_in, TensorProto.FLOAT))  # varies where it grows: runs fail
        elif scan_roll < 0.75:
            row = self._name("s")
            nodes.append(helper.make_node("ReduceSum", [v_in], [row], keepdims=0))
            scans.append((row, TensorProto.FLOAT))
        how_in = rng.choice(("none", "rank", "ints", "names"))
        how_out = rng.choice(("none", "rank", "ints", "names", "same"))
        v_info = self._declared(v_in, TensorProto.FLOAT, data, how_in)
        v_out_info = (
            helper.make_tensor_value_info(v_out, TensorProto.FLOAT, None)
            if how_out == "none"
            else helper.ValueInfoProto()
        )
        if how_out != "none":
            v_out_info.CopyFrom(
                v_info
                if how_out == "same"
                else self._declared(v_out, TensorProto.FLOAT, data, how_out)
            )
            v_out_info.name = v_out
        counter = self.shape_of(data)
        n_how = rng.choice(("none", "ints", "names"))
        scan_infos = []
        for name, dtype in scans:
            declared = rng.choice(("none", "rank", "ints"))
            known = data if name == v_in else counter if name == shape else None
            scan_infos.append(self._declared(name, dtype, known, declared))
        body = helper.make_graph(
            nodes,
            "body",
            [
                helper.make_tensor_value_info(i, TensorProto.INT64, []),
                helper.make_tensor_value_info(c_in, TensorProto.BOOL, []),
                v_info,
                self._declared(n_in, TensorProto.INT64, counter, n_how),
            ],
            [
                helper.make_tensor_value_info(c_out, TensorProto.BOOL, []),
                v_out_info,
                self._declared(n_out, TensorProto.INT64, counter, n_how),
                *scan_infos,
            ],
        )
        cond = self.const(True, np.bool_) if early or rng.random() < 0.3 else None
        outer = [data, *self._constants_in(nodes)]
        outs = self.emit(
            "Loop", [trip, cond, data, counter], 2 + len(scans), outer=outer, body=body
        )
        for out in outs:
            self.keep_output(out)
        for out in outs[2:] if never else ():
            # Its rank where no iteration runs is the runtime's choice too (onnxruntime:
            # 1 when its inference does not know the body output's): nothing reads it.
            out.arrays = [
                None if trip.arrays[b] is None or int(trip.arrays[b]) == 0 else a
                for b, a in enumerate(out.arrays)
            ]
        final = outs[0]
        if rng.random() < 0.6:  # the grown dim used: a Reshape to it, a Shape
            self.emit1("Reshape", [final, self.emit1("Shape", [final])])

    def p_scan(self) -> None:
        """``Scan`` over an axis of a tensor with a running state and scan outputs."""
        rng = self.rng
        data = self.pick_float(1, 3)
        rank = data.rank(self.alive)
        axis = 0  # the reference evaluator scans axis 0 only
        if any(d > 6 for d in self.dims_of(data, axis)):
            raise _Reject("many iterations")
        step_shape = [s[:axis] + s[axis + 1 :] for s in data.shapes(self.alive)]
        state_in, state_out, x_t = self._name("a"), self._name("a"), self._name("a")
        y_t, z_t = self._name("s"), self._name("s")
        nodes = [
            helper.make_node("Add", [state_in, x_t], [state_out]),
            helper.make_node("Mul", [state_in, x_t], [y_t]),
            helper.make_node("Shape", [x_t], [z_t]),
        ]
        initial = self.emit1("ReduceMax", [data, self.const([axis])], keepdims=0)
        how = rng.choice(("none", "rank", "ints", "names"))
        step = _Value("", TensorProto.FLOAT, [None] * len(data.arrays))
        for b, s in zip(self.alive, step_shape):
            step.arrays[b] = np.zeros(s, np.float32)
        body = helper.make_graph(
            nodes,
            "scan_body",
            [
                self._declared(state_in, TensorProto.FLOAT, step, how),
                self._declared(
                    x_t, TensorProto.FLOAT, step, rng.choice(("none", "rank", "ints", "names"))
                ),
            ],
            [
                self._declared(state_out, TensorProto.FLOAT, step, how),
                self._declared(
                    y_t, TensorProto.FLOAT, step, rng.choice(("none", "rank", "ints"))
                ),
                helper.make_tensor_value_info(z_t, TensorProto.INT64, None),
            ],
        )
        attrs: dict[str, object] = {"num_scan_inputs": 1, "body": body}
        if rng.random() < 0.3:
            attrs["scan_input_axes"] = [axis]
        if rng.random() < 0.3:
            attrs["scan_output_axes"] = [rng.randint(0, rank - 1), 0]
        if rng.random() < 0.2:  # the reference evaluator scans forward only
            attrs["scan_input_directions"] = [0]
        outs = self.emit("Scan", [initial, data], 3, **attrs)
        for out in outs:
            self.keep_output(out)

    def p_if_ranks(self) -> None:
        """``If`` whose branches give other ranks or dims; the condition compares dims."""
        rng = self.rng
        data = self.pick_float(1, 3)
        rank = data.rank(self.alive)
        axis = rng.randrange(rank)
        size = self.dim_scalar(data, axis)
        cond = self.emit1(
            rng.choice(("Greater", "Less", "Equal")), [size, self.const(rng.randint(0, 3))]
        )

        def branch(kind: str) -> tuple[list, str]:
            out = self._name("s")
            if kind == "flat":
                minus = self.const([-1])
                return [helper.make_node("Reshape", [data.name, minus.name], [out])], out
            if kind == "head":
                z, o, a = self.const([0]), self.const([1]), self.const([axis])
                return [
                    helper.make_node("Slice", [data.name, z.name, o.name, a.name], [out])
                ], out
            if kind == "lift":
                if self.opset < 13:
                    return [helper.make_node("Unsqueeze", [data.name], [out], axes=[0])], out
                z = self.const([0])
                return [helper.make_node("Unsqueeze", [data.name, z.name], [out])], out
            return [helper.make_node("Identity", [data.name], [out])], out

        kinds = ("flat", "head", "lift", "same")
        then_kind, else_kind = rng.choice(kinds), rng.choice(kinds)
        then_nodes, then_out = branch(then_kind)
        else_nodes, else_out = branch(else_kind)

        def branch_output(kind: str) -> _Value:
            """What the branch computes, per binding (to declare its true shape)."""
            out = _Value("", TensorProto.FLOAT, [None] * len(data.arrays))
            for b in self.alive:
                array = data.arrays[b]
                out.arrays[b] = {
                    "flat": lambda a: a.reshape(-1),
                    "head": lambda a: np.take(a, range(min(1, a.shape[axis])), axis=axis),
                    "lift": lambda a: a[None],
                    "same": lambda a: a,
                }[kind](array)
            return out

        def declared(name: str, kind: str) -> object:
            roll = rng.random()
            if roll < 0.5:
                return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
            how = "names" if roll < 0.75 else "ints"
            return self._declared(name, TensorProto.FLOAT, branch_output(kind), how)

        (result,) = self.emit(
            "If",
            [cond],
            1,
            outer=[data, *self._constants_in(then_nodes + else_nodes)],
            then_branch=helper.make_graph(
                then_nodes, "then", [], [declared(then_out, then_kind)]
            ),
            else_branch=helper.make_graph(
                else_nodes, "else", [], [declared(else_out, else_kind)]
            ),
        )
        self.keep_output(result)
        use = rng.random()
        if use < 0.4:
            self.keep_output(self.emit1("Shape", [result]))
        elif use < 0.7:
            self.keep_output(self.emit1("Flatten", [result], axis=0))
        else:
            self.keep_output(self.emit1("Size", [result]))
