"""Builders of shape computations and of the ops that consume a computed shape.

``Shape → Gather → Concat → Reshape``, integer arithmetic on dims, ``Range``, ``Slice`` with
shape-derived bounds, ``Reshape`` (``0`` copies, ``-1``), ``ConstantOfShape``, ``Expand``,
``Tile``, ``TopK``, ``Resize``, ``Pad``.
"""

from __future__ import annotations

import logging

import numpy as np
from onnx import TensorProto, numpy_helper

from tests.fuzz._cases import (
    INT64_MAX,
    INT64_MIN,
    MAX_DATA_DIM,
    MAX_ELEMENTS,
)
from tests.fuzz._generator import _Reject, _small, _Value

logger = logging.getLogger(__name__)


class ShapeBuilders:
    """Mixin of :class:`tests.fuzz._generator.GeneratorCore`: shape computations."""

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
