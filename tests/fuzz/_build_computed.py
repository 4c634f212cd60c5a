"""Builders of more ops whose output shape is computed.

``Mod`` on ints, ``ArgMax``/``ArgMin``, ``OneHot``, ``Unique``, ``Trilu``, ``DepthToSpace``,
``GatherElements``, ``GatherND``, variadic ops, ``Gemm``, normalizations, ``ConvTranspose``,
global pooling, ``CenterCropPad``.
"""

from __future__ import annotations

import logging

import numpy as np
from onnx import numpy_helper

from tests.fuzz._cases import MAX_DATA_DIM
from tests.fuzz._generator import _Reject, _Value

logger = logging.getLogger(__name__)


class ComputedBuilders:
    """Mixin of :class:`tests.fuzz._generator.GeneratorCore`: more computed shapes."""

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
