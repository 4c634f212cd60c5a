"""Constant reads kept by their serialization: named messages, long ones, a full table.

``read_int64_proto`` and ``int_elements`` key what they read from an int64
``TensorProto`` by its bytes; whatever is kept, a read must be what the fields say
(``onnx.numpy_helper.to_array`` is the reference).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_symdims.shapes import _tensors
from onnx_symdims.shapes._tensors import int_elements, read_int64_proto


def _tensor(proto: TensorProto) -> ir.TensorProtocol:
    return ir.serde.TensorProtoTensor(proto)


def _expected(proto: TensorProto) -> tuple[tuple[int, ...], tuple[int, ...]]:
    array = numpy_helper.to_array(proto)
    return tuple(array.shape), tuple(int(x) for x in array.reshape(-1))


def _int64(name: str, dims: list[int], values: list[int], raw: bool) -> TensorProto:
    if raw:
        data = np.array(values, dtype="<i8").tobytes()
        return helper.make_tensor(name, TensorProto.INT64, dims, data, raw=True)
    return helper.make_tensor(name, TensorProto.INT64, dims, values)


@pytest.mark.parametrize("raw", [True, False])
def test_named_messages_read_their_own_fields_every_time(raw):
    # Same name, other contents (two models, or a model edited between runs).
    first = _int64("shape", [2], [5, 6], raw)
    other = _int64("shape", [1, 2], [5, 6], raw)
    third = _int64("shape", [2], [6, 5], raw)
    for _ in range(2):  # the second read comes from the kept result
        for proto in (first, other, third):
            assert read_int64_proto(_tensor(proto)) == _expected(proto)
            assert int_elements(_tensor(proto)) == _expected(proto)[1]


def test_long_messages_are_read_from_their_fields():
    values = list(range(-40, 40))  # 640 bytes of raw data: never kept by its bytes
    proto = _int64("", [8, 10], values, raw=True)
    assert len(proto.SerializeToString()) > _tensors._SERIALIZED_BYTES
    before = len(_tensors._SERIALIZED_READS)
    for _ in range(2):
        assert read_int64_proto(_tensor(proto)) == ((8, 10), tuple(values))
    assert len(_tensors._SERIALIZED_READS) == before
    large = _int64("w", [2048], [0] * 2048, raw=True)
    assert read_int64_proto(_tensor(large)) == ((2048,), None)  # past MAX_VALUE_ELEMENTS
    assert int_elements(_tensor(large)) is None


def test_a_full_table_starts_over_and_reads_stay_right(monkeypatch):
    monkeypatch.setattr(_tensors, "_SERIALIZED_READS", {})
    monkeypatch.setattr(_tensors, "_SERIALIZED_MAX", 4)
    protos = [helper.make_tensor(f"c{k}", TensorProto.INT64, [1], [k]) for k in range(10)]
    for _ in range(2):
        for k, proto in enumerate(protos):
            assert read_int64_proto(_tensor(proto)) == ((1,), (k,))
            assert len(_tensors._SERIALIZED_READS) <= 4


def test_unreadable_named_messages_read_nothing():
    external = helper.make_tensor("ext", TensorProto.INT64, [2], [3, 4])
    external.data_location = TensorProto.EXTERNAL
    short = helper.make_tensor("short", TensorProto.INT64, [2], [3, 4], raw=False)
    short.dims[0] = 3  # 2 elements of 3
    for proto in (external, short):
        for _ in range(2):
            assert read_int64_proto(_tensor(proto)) is None


@pytest.mark.parametrize(
    ("data_type", "values"),
    [(TensorProto.INT32, [3, -4]), (TensorProto.BOOL, [1, 0]), (TensorProto.INT64, [7, -1])],
)
def test_int_elements_reads_each_integer_type_once_per_message(data_type, values):
    proto = helper.make_tensor("v", data_type, [2], values)
    for _ in range(2):
        assert int_elements(_tensor(proto)) == tuple(values)
