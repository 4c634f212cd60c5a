"""Graphs at older opsets (11, 13, 17): the builders' nodes spelled as those opsets want them.

Every builder writes the current forms (axes and split sizes as inputs, ``Shape`` with
``start``/``end``, ``Split`` with ``num_outputs``). :class:`OldOpsetForms` rewrites each
proposed node into the form of the graph's opset before it runs (axes of
``Squeeze``/``Unsqueeze``/``ReduceSum``/``Split`` as attributes before 13, of the other
reductions before 18; ``Shape`` sliced by a ``Slice`` before 15; ``Resize``'s ``roi`` and
``scales`` present, if empty, before 13) and refuses what the opset cannot say (a
computed axes input, ``Pad``'s ``axes``, ``Resize``'s ``antialias``/``axes``/policy,
``noop_with_empty_axes`` where it does not exist), checked against the ONNX schema of that
opset. It also adds the builders of ops whose semantics moved between versions: ``Clip``
with optional bounds, pools with ``ceil_mode``, ``Resize`` coordinate modes, reductions
with empty axes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tests.fuzz._generator import _Reject, _Value

#: First opset where these ops take their axes (or split sizes) as an input.
_AXES_AS_INPUT = {
    "Squeeze": 13,
    "Unsqueeze": 13,
    "ReduceSum": 13,
    "Split": 13,
    "ReduceMean": 18,
    "ReduceMax": 18,
    "ReduceMin": 18,
    "ReduceProd": 18,
    "ReduceSumSquare": 18,
    "ReduceL1": 18,
    "ReduceL2": 18,
    "ReduceLogSum": 18,
    "ReduceLogSumExp": 18,
}


def _type_str(dtype: int) -> str:
    """The schema's spelling of a tensor type: ``tensor(int64)``."""
    return f"tensor({_SCHEMA_NAMES.get(dtype, '?')})"


_SCHEMA_NAMES = {
    onnx.TensorProto.FLOAT: "float",
    onnx.TensorProto.DOUBLE: "double",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.BOOL: "bool",
}


class SpecPoolWindows:
    """Mixin placed before the generator core: no ceil-mode pool that departs before 22.

    Before opset 22 the spec's ceil-mode output size counts a last window that starts in
    the right padding (``ceil((6 - 1) / 2 + 1) = 4`` for kernel 1, stride 2); onnxruntime's
    kernel and the reference evaluator drop it (3), as opset 22 does, while onnxruntime's
    load-time inference follows the spec. Such a model runs only by that departure, and a
    constant folded next to the pool (a ``Reshape`` target) makes it fail to load (ranges
    seed 850832): those pools are not drawn. (These generators also run ``Loop`` as the
    spec says: ``SPEC_LOOP``.)
    """

    SPEC_LOOP = True

    def emit(self, op: str, inputs, count: int = 1, outer=(), **attrs: object) -> list[_Value]:
        outputs = super().emit(op, inputs, count, outer, **attrs)
        if (
            op in ("MaxPool", "AveragePool", "LpPool")
            and attrs.get("ceil_mode")
            and self.opset < 22
            and attrs.get("auto_pad", "NOTSET") == "NOTSET"
        ):
            kernel = attrs["kernel_shape"]
            spatial = len(kernel)
            strides = attrs.get("strides", [1] * spatial)
            dilations = attrs.get("dilations", [1] * spatial)
            pads = attrs.get("pads", [0] * 2 * spatial)
            for b in self.alive:
                shape = inputs[0].arrays[b].shape[2:]
                spec = [
                    -(
                        -(
                            size
                            + pads[i]
                            + pads[i + spatial]
                            - dilations[i] * (kernel[i] - 1)
                            - 1
                        )
                        // strides[i]
                    )
                    + 1
                    for i, size in enumerate(shape)
                ]
                if list(outputs[0].arrays[b].shape[2:]) != spec:
                    raise _Reject(f"{op}: a last window in the padding before opset 22")
        return outputs


class OldOpsetForms:
    """Mixin placed before the generator core: node forms of an opset in 11, 13, 17."""

    OLD_OPSETS = (11, 13, 17)

    def __init__(self, seed: int):
        super().__init__(seed)
        self.opset = self.rng.choice(self.OLD_OPSETS)

    def const(self, data: object, dtype: type = np.int64) -> _Value:
        value = super().const(data, dtype)
        node = self.nodes[-1] if self.nodes else None
        if (
            self.opset < 12
            and node is not None
            and node.output[0] == value.name
            and node.attribute[0].name != "value"
        ):  # value_int(s) are from Constant-12
            array = np.array(data, dtype=dtype)
            self.nodes[-1] = helper.make_node(
                "Constant",
                [],
                [value.name],
                name=node.name,
                value=numpy_helper.from_array(array),
            )
        return value

    def emit(
        self,
        op: str,
        inputs,
        count: int = 1,
        outer=(),
        **attrs: object,
    ) -> list[_Value]:
        inputs = list(inputs)
        if op == "Shape" and self.opset < 15 and ("start" in attrs or "end" in attrs):
            (whole,) = super().emit("Shape", [inputs[0]])
            start = attrs.get("start", 0)
            end = attrs.get("end", 2**63 - 1)
            return super().emit("Slice", [whole, self.const([start]), self.const([end])])
        first = _AXES_AS_INPUT.get(op)
        if first is not None and self.opset < first and len(inputs) > 1:
            axes = inputs[1]
            if axes is not None:
                if not axes.constant:
                    raise _Reject(f"{op}: computed axes at opset {self.opset}")
                listed = [int(a) for a in np.asarray(axes.arrays[0]).reshape(-1)]
                if listed or op != "Split":
                    if listed:
                        attrs["axes" if op != "Split" else "split"] = listed
                    elif attrs.pop("noop_with_empty_axes", 0):
                        raise _Reject(f"{op}: noop_with_empty_axes at opset {self.opset}")
            inputs = inputs[:1]
        if op == "Split" and self.opset < 18 and "num_outputs" in attrs:
            attrs.pop("num_outputs")  # an even split then, which onnxruntime checks at load
            axis = int(attrs.get("axis", 0))
            if any(s[axis] % count for s in inputs[0].shapes(self.alive)):
                raise _Reject("an uneven Split before 18")
        if op == "Resize" and self.opset < 13:
            while len(inputs) < 3:
                inputs.append(None)
            if inputs[1] is None:
                inputs[1] = self.const(np.zeros(0, np.float32), np.float32)
            if inputs[2] is None:
                inputs[2] = self.const(np.zeros(0, np.float32), np.float32)
        self._check_schema(op, inputs, attrs)
        return super().emit(op, inputs, count, outer, **attrs)

    def _check_schema(self, op: str, inputs: list, attrs: dict) -> None:
        try:
            schema = onnx.defs.get_schema(op, self.opset)
        except onnx.defs.SchemaError as error:
            raise _Reject(f"{op} does not exist at opset {self.opset}") from error
        unknown = set(attrs) - set(schema.attributes)
        if unknown:
            raise _Reject(f"{op} at opset {self.opset} has no {sorted(unknown)}")
        for formal, value in zip(schema.inputs, inputs):
            allowed = next(
                (
                    c.allowed_type_strs
                    for c in schema.type_constraints
                    if c.type_param_str == formal.type_str
                ),
                None,
            )
            if (
                value is not None
                and allowed is not None
                and _type_str(value.dtype) not in allowed
            ):
                raise _Reject(f"{op} at opset {self.opset} takes no {_type_str(value.dtype)}")
        variadic = schema.inputs and schema.inputs[-1].option.name == "Variadic"
        if not variadic and len(inputs) > len(schema.inputs):
            raise _Reject(f"{op} at opset {self.opset} takes {len(schema.inputs)} inputs")
        if op == "Pad" and len(inputs) > 3 and self.opset < 18:
            raise _Reject("Pad axes")

    # Ops whose semantics moved between versions ------------------------------------
    def b_clip(self) -> None:
        """``Clip`` with no bound, one or two (inputs from 11; a computed int bound)."""
        rng = self.rng
        data = self.pick_tensor()
        dtype = np.float32 if data.dtype == onnx.TensorProto.FLOAT else np.int64
        if dtype is np.int64 and self.opset < 12:
            raise _Reject("int Clip from 12")
        low = self.const(rng.choice((-1, 0, 1)), dtype) if rng.random() < 0.7 else None
        high = self.const(rng.choice((0, 2, 3, 5)), dtype) if rng.random() < 0.6 else None
        inputs = [data, low, high] if high is not None else [data, low]
        self.emit1("Clip", inputs if low is not None or high is not None else [data])

    def b_ceil_pool(self) -> None:
        """A pool with ``ceil_mode=1`` whose last window starts in the padding (pre-19 rules)."""
        rng = self.rng
        data = self.pick_float(3, 4)
        spatial = data.rank(self.alive) - 2
        kernel = [rng.randint(1, 3) for _ in range(spatial)]
        strides = [rng.randint(1, 3) for _ in range(spatial)]
        pads = [rng.randint(0, k - 1) for k in kernel] * 2
        op = rng.choice(("MaxPool", "AveragePool", "LpPool"))
        attrs: dict[str, object] = {"kernel_shape": kernel, "strides": strides, "pads": pads}
        if op != "LpPool":
            attrs["ceil_mode"] = 1
        elif self.opset < 18:
            pass
        else:
            attrs["ceil_mode"] = 1
        if op == "AveragePool" and rng.random() < 0.5:
            attrs["count_include_pad"] = 1
        out = self.emit1(op, [data], **attrs)
        out.exact = op == "MaxPool" and out.exact
