"""Builders of float tensor ops.

Elementwise and broadcasting ops, layout (``Transpose``, ``Split``, ``Flatten``, ``Concat``,
``Squeeze``), products (``MatMul``, ``Einsum``), reductions, convolutions and pooling, and
data-dependent sizes (``NonZero``, ``Compress``).
"""

from __future__ import annotations

import logging

import numpy as np
from onnx import numpy_helper

from tests.fuzz._cases import INT64_MAX
from tests.fuzz._generator import _Reject, _Value

logger = logging.getLogger(__name__)


class FloatBuilders:
    """Mixin of :class:`tests.fuzz._generator.GeneratorCore`: float tensor ops."""

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
