"""Builders of exporter idioms.

Pad to a multiple, split heads, position ids, flatten a batch, slice the last ``k``: the
shape computations exporters emit around those.
"""

from __future__ import annotations

import logging

import numpy as np
from onnx import TensorProto

from tests.fuzz._cases import INT64_MAX
from tests.fuzz._generator import _Reject

logger = logging.getLogger(__name__)


class IdiomBuilders:
    """Mixin of :class:`tests.fuzz._generator.GeneratorCore`: exporter idioms."""

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

    # Idioms the optimizer rewrites (seeds from REWRITE_IDIOMS_FROM) ----------------------
    def p_expand_into_broadcast(self) -> None:
        """``data + f(Expand(c, Shape(data)))``: a constant spread, then broadcast back.

        ``f`` is ``Neg``, a ``Where`` on its sign, or a ``Gather`` from a table with the
        spread constant as the index (an index past the table fails every binding where
        ``data`` has elements, and runs where it is empty).
        """
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        ones = [1] * self.rng.randint(1, rank)
        kind = self.rng.choice(("neg", "where", "gather"))
        if kind == "gather":
            index = self.const(np.full(ones, self.rng.choice((0, 3, 4, 7))))
            spread = self.emit1("Expand", [index, self.shape_of(data)])
            table = self.const(np.arange(4, dtype=np.float32) + 0.5, dtype=np.float32)
            part = self.emit1("Gather", [table, spread], axis=0)
        else:
            value = self.const(np.full(ones, self.rng.choice((-1.5, 2.0))), dtype=np.float32)
            spread = self.emit1("Expand", [value, self.shape_of(data)])
            if kind == "neg":
                part = self.emit1("Neg", [spread])
            else:
                zero = self.const(0.0, dtype=np.float32)
                positive = self.emit1("Greater", [spread, zero])
                part = self.emit1("Where", [positive, spread, zero])
        self.emit1(self.rng.choice(("Add", "Mul")), [data, part])

    def p_arange_mask(self) -> None:
        """``data + Where(cmp(arange, c), a, b)``: a mask decided or not by the arange's bounds.

        ``arange`` runs along ``data``'s last axis from ``start`` by ``step`` (either
        sign); ``c`` is just below, at or above ``start`` on either side of the
        comparison, so the mask is all ``a``, all ``b`` or mixed. Now and then the
        comparison is and-ed/or-ed with ``data > 0``, and ``a`` is ``-0.0``.
        """
        data = self.pick_float(1, 4)
        rank = data.rank(self.alive)
        length = self.dim_scalar(data, rank - 1)
        start_value = self.rng.choice((0, 1, -2))
        step_value = self.rng.choice((1, 2, -1))
        start, step = self.const(start_value), self.const(step_value)
        limit = self.emit1("Add", [start, self.emit1("Mul", [length, step])])
        arange = self.emit1("Range", [start, limit, step])
        c = self.const(start_value + self.rng.choice((-1, 0, 1)))
        op = self.rng.choice(("GreaterOrEqual", "Greater", "Less", "LessOrEqual", "Equal"))
        pair = [arange, c] if self.rng.random() < 0.7 else [c, arange]
        condition = self.emit1(op, pair)
        if self.rng.random() < 0.3:
            positive = self.emit1("Greater", [data, self.const(0.0, dtype=np.float32)])
            joined = (
                [condition, positive] if self.rng.random() < 0.5 else [positive, condition]
            )
            condition = self.emit1(self.rng.choice(("And", "Or")), joined)
        a = self.const(self.rng.choice((0.0, -0.0, 1.0)), dtype=np.float32)
        b = self.const(self.rng.choice((-1e9, 0.0, 2.5)), dtype=np.float32)
        mask = self.emit1("Where", [condition, a, b])
        self.emit1(self.rng.choice(("Add", "Mul", "Sub")), [data, mask])

    def p_flat_index_grid(self) -> None:
        """``Gather(flatten(m), arange(B)[:, None] * T + arange(T'))`` (TorchScript masks).

        ``T'`` is ``m``'s own length or another tensor's size (a prefix: the rule must
        decline, an empty batch gathers nothing).
        """
        data = self.pick_float(2, 2)
        batch = self.dim_scalar(data, 0)
        length = self.dim_scalar(data, 1)
        if self.rng.random() < 0.3:
            source, axis = self._some_axis()
            limit = self.dim_scalar(source, axis)
        else:
            limit = length
        zero, one = self.const(0), self.const(1)
        rows = self.emit1("Range", [zero, batch, one])
        cols = self.emit1("Range", [zero, limit, one])
        column = self.emit1("Unsqueeze", [rows, self.const([1])])
        offsets = self.emit1("Add", [self.emit1("Mul", [column, length]), cols])
        if self.rng.random() < 0.5:
            flat = self.emit1("Flatten", [data], axis=2)
        else:
            flat = self.emit1("Reshape", [data, self.const([-1])])
        self.emit1("Gather", [flat, offsets], axis=0)

    # Integers onnxruntime does not compute as Python ints (seeds from AUDIT_IDIOMS_FROM) -
    def p_wide_integers(self) -> None:
        """A dim through integer math that is not exact: a big int64 ``Pow``, a narrow wrap.

        onnxruntime's integer ``Pow`` goes through a ``double`` (inexact beyond ``2**53``:
        ``3**39``, ``99**8``); a dim cast to int32 or int8, times a large constant and
        divided back, wraps. The result is added to the dim (an int output).
        """
        rng = self.rng
        source, axis = self._some_axis()
        d = self.dim_vec(source, axis)
        if rng.random() < 0.5:
            zero = self.emit1("Sub", [d, d])
            base = self.emit1("Add", [zero, self.const([rng.choice((3, 99, -5, 7))])])
            exponent = self.const([rng.choice((2, 3, 8, 39))])
            result = self.emit1("Pow", [base, exponent])
        else:
            to, dtype, factor = rng.choice(
                (
                    (TensorProto.INT32, np.int32, 1 << 30),
                    (TensorProto.INT32, np.int32, 1 << 29),
                    (TensorProto.INT8, np.int8, 64),
                    (TensorProto.INT8, np.int8, 32),
                )
            )
            narrow = self.emit1("Cast", [d], to=to)
            c = self.const([factor], dtype=dtype)
            back = self.emit1("Div", [self.emit1("Mul", [narrow, c]), c])
            result = self.emit1("Cast", [back], to=TensorProto.INT64)
        self.emit1("Add", [result, d])
