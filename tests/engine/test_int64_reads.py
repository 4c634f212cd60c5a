"""``read_int64_proto``: the read of an unnamed int64 ``TensorProto`` kept by its bytes.

Repeated literals (a TorchScript export's Constants) are read once per distinct
serialization; what is read must be what the fields say, for every message.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx import TensorProto, helper

from onnx_symdims.shapes._tensors import read_int64_proto


def _tensor(proto: TensorProto) -> ir.TensorProtocol:
    return ir.serde.TensorProtoTensor(proto)


def test_proto_tensor_raw_is_its_proto_slot():
    proto = helper.make_tensor("", TensorProto.INT64, [2], [3, 4])
    tensor = _tensor(proto)
    assert tensor._proto is tensor.raw  # the slot read instead of the property


def test_equal_unnamed_literals_read_the_same():
    a = helper.make_tensor("", TensorProto.INT64, [2], [3, -1], raw=False)
    b = helper.make_tensor("", TensorProto.INT64, [2], [3, -1], raw=False)
    assert read_int64_proto(_tensor(a)) == ((2,), (3, -1))
    assert read_int64_proto(_tensor(b)) == ((2,), (3, -1))
    raw = helper.make_tensor("", TensorProto.INT64, [], [7], raw=False)
    raw.raw_data = (7).to_bytes(8, "little")
    del raw.int64_data[:]
    assert read_int64_proto(_tensor(raw)) == ((), (7,))


def test_each_message_reads_its_own_fields():
    # Same elements, other dims; same dims, other elements; a named one.
    assert read_int64_proto(
        _tensor(helper.make_tensor("", TensorProto.INT64, [1, 2], [3, 4]))
    ) == (
        (1, 2),
        (3, 4),
    )
    assert read_int64_proto(
        _tensor(helper.make_tensor("", TensorProto.INT64, [2], [4, 3]))
    ) == (
        (2,),
        (4, 3),
    )
    named = helper.make_tensor("shape_0", TensorProto.INT64, [2], [5, 6])
    assert read_int64_proto(_tensor(named)) == ((2,), (5, 6))


def test_unreadable_messages_read_nothing_every_time():
    external = helper.make_tensor("", TensorProto.INT64, [2], [3, 4])
    external.data_location = TensorProto.EXTERNAL
    short = helper.make_tensor("", TensorProto.INT64, [2], [3, 4], raw=False)
    short.dims[0] = 3  # 2 elements of 3
    floats = helper.make_tensor("", TensorProto.FLOAT, [1], [1.0])
    for proto in (external, short, floats):
        for _ in range(2):  # the second read comes from the kept result
            assert read_int64_proto(_tensor(proto)) is None
