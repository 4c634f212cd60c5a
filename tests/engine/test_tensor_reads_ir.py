"""Constants of an in-memory model (``ir.Tensor`` over a numpy array) read as the long way."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims.shapes import _tensors
from onnx_symdims.shapes._tensors import (
    INTEGER_DTYPES,
    MAX_VALUE_ELEMENTS,
    int_elements,
    tensor_dims,
)


def _long_way(tensor: ir.TensorProtocol) -> tuple[int, ...] | None:
    """What int_elements read before the ir.Tensor shortcut (the generic read)."""
    dims = tuple(int(d) for d in tensor.shape)
    if tensor.dtype not in INTEGER_DTYPES or math.prod(dims) > MAX_VALUE_ELEMENTS:
        return None
    return tuple(int(x) for x in tensor.numpy().reshape(-1).tolist())


_ARRAYS = [
    np.array([1, -2, 3], dtype=np.int64),
    np.array(7, dtype=np.int64),
    np.array([], dtype=np.int64),
    np.array([[1, 2], [3, 4]], dtype=np.int32),
    np.array([2**63 - 1, 0], dtype=np.uint64),
    np.array([2**64 - 1], dtype=np.uint64),
    np.array([-128, 127], dtype=np.int8),
    np.array([65535], dtype=np.uint16),
    np.array([True, False, True]),
    np.array(True),
    np.array([[True], [False]]),
    np.arange(MAX_VALUE_ELEMENTS, dtype=np.int64),
    np.arange(MAX_VALUE_ELEMENTS + 1, dtype=np.int64),
    np.arange(12, dtype=np.int64).reshape(3, 4)[:, 1],  # not contiguous
    np.zeros((2, 3), dtype=np.float32),
    np.array([1.5], dtype=np.float64),
    np.array([1.0], dtype=np.float16),
]


def test_ir_tensor_slots_are_where_the_shortcut_reads():
    assert _tensors._IR_TENSOR_SLOTS
    tensor = ir.Tensor(np.array([[1, 2]], dtype=np.int64))
    assert tensor._raw is tensor.numpy() and tensor._dtype is tensor.dtype
    assert tensor._shape is tensor.shape and tensor._shape._dims == [1, 2]


@pytest.mark.parametrize("array", _ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_int_elements_of_an_ir_tensor_reads_as_the_long_way(array):
    tensor = ir.Tensor(array)
    read = int_elements(tensor)
    assert read == _long_way(tensor)
    assert read is None or all(type(e) is int for e in read)  # bools read as 0/1 ints
    assert tensor_dims(tensor) == tuple(array.shape)


def test_int_elements_of_an_ir_tensor_with_a_given_shape_flattens_its_array():
    # The declared shape sizes the read; the array's own layout is flattened.
    tensor = ir.Tensor(np.array([1, 2, 3, 4], dtype=np.int64), shape=ir.Shape([2, 2]))
    assert int_elements(tensor) == _long_way(tensor) == (1, 2, 3, 4)
    assert tensor_dims(tensor) == (2, 2)


class _ArrayLike:
    """An array-compatible object that is not a numpy array (as a torch tensor is)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)


def test_int_elements_of_an_ir_tensor_over_another_array_reads_the_generic_way():
    tensor = ir.Tensor(_ArrayLike(np.array([4, 5], dtype=np.int64)), dtype=ir.DataType.INT64)
    assert not isinstance(tensor.raw, np.ndarray)
    assert int_elements(tensor) == _long_way(tensor) == (4, 5)
    assert tensor_dims(tensor) == (2,)


def test_ir_tensor_subclasses_read_the_generic_way():
    class Sub(ir.Tensor):
        __slots__ = ()

    tensor = Sub(np.array([3, 4], dtype=np.int32))
    assert int_elements(tensor) == (3, 4)
    assert tensor_dims(tensor) == (2,)


def test_a_constant_of_an_in_memory_model_reads_the_same_as_from_its_proto():
    """An in-memory model and its serialized copy infer the same shapes."""
    import onnx_symdims

    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 12] x) => (y) {
        s = Constant <value = int64[3] {0, 3, -1}> ()
        y = Reshape(x, s)
    }
    """
    model = ir.from_onnx_text(text)
    (node,) = [n for n in model.graph if n.op_type == "Constant"]
    node.attributes["value"] = ir.AttrTensor(
        "value", ir.Tensor(np.array([0, 3, -1], dtype=np.int64))
    )
    from_proto = ir.from_proto(ir.to_proto(model))
    onnx_symdims.infer_symbolic_shapes(model)
    onnx_symdims.infer_symbolic_shapes(from_proto)
    assert str(model.graph.outputs[0].shape) == str(from_proto.graph.outputs[0].shape)
    assert str(model.graph.outputs[0].shape) == "[N,3,4]"
