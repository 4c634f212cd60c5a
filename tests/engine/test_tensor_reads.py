"""The reads of ``shapes/_tensors.py``: the onnx-ir slots they use, and what they return.

``constant_tensor`` reads ``Value._const_value`` and ``Value._is_graph_input`` (the
property and the method cost a Python call each), ``int_elements`` answers ``None`` for a
non-integer ``TensorProto`` from its element-type code. An onnx-ir release that changes
a slot fails here, not in a wrong shape.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from onnx_symdims.shapes import _tensors
from onnx_symdims.shapes._tensors import (
    CONSTANT_INPUT_KEY,
    INTEGER_DTYPES,
    constant_tensor,
    int_elements,
    tensor_dims,
)


def test_value_slots_are_what_the_property_and_the_method_return():
    assert _tensors._VALUE_SLOTS  # the installed onnx-ir has them: the fast path runs
    tensor = ir.tensor(np.array([1, 2], dtype=np.int64))
    value = ir.Value(name="c", const_value=tensor)
    assert value._const_value is value.const_value is tensor
    assert value._is_graph_input is value.is_graph_input() is False
    graph = ir.Graph([value], [], nodes=[])
    assert value._is_graph_input is value.is_graph_input() is True
    assert graph.inputs[0] is value


def test_constant_tensor_of_plain_values_initializers_and_inputs():
    tensor = ir.tensor(np.array([3], dtype=np.int64))
    assert constant_tensor(ir.Value(name="x")) is None
    constant = ir.Value(name="c", const_value=tensor)
    assert constant_tensor(constant) is tensor
    # An initializer that is also a graph input is a default, not a constant...
    fed = ir.Value(name="f", const_value=tensor)
    ir.Graph([fed], [], nodes=[])
    assert constant_tensor(fed) is None
    # ...unless the pass marked it constant.
    fed.meta[CONSTANT_INPUT_KEY] = True
    assert constant_tensor(fed) is tensor


def test_constant_tensor_counts_every_read_as_untracked():
    before = _tensors.untracked_reads()
    constant_tensor(ir.Value(name="x"))
    constant_tensor(ir.Value(name="c", const_value=ir.tensor(np.array([1]))))
    assert _tensors.untracked_reads() == before + 2


def test_constant_tensor_without_the_slots_reads_the_same(monkeypatch):
    tensor = ir.tensor(np.array([3], dtype=np.int64))
    values = [ir.Value(name="x"), ir.Value(name="c", const_value=tensor)]
    fed = ir.Value(name="f", const_value=tensor)
    ir.Graph([fed], [], nodes=[])
    values.append(fed)
    fast = [constant_tensor(v) for v in values]
    monkeypatch.setattr(_tensors, "_VALUE_SLOTS", False)
    assert [constant_tensor(v) for v in values] == fast == [None, tensor, None]


_ALL_CODES = [int(t) for t in ir.DataType]


@pytest.mark.parametrize("code", _ALL_CODES)
def test_non_integer_codes_are_the_types_outside_integer_dtypes(code):
    assert (code in _tensors._NON_INTEGER_CODES) == (ir.DataType(code) not in INTEGER_DTYPES)


@pytest.mark.parametrize(
    ("data_type", "values", "expected"),
    [
        (TensorProto.FLOAT, [1.0, 2.0], None),
        (TensorProto.DOUBLE, [1.5], None),
        (TensorProto.FLOAT16, [1.0], None),
        (TensorProto.INT64, [4, -1], (4, -1)),
        (TensorProto.INT32, [7, 8], (7, 8)),
        (TensorProto.INT8, [-3, 2], (-3, 2)),
        (TensorProto.UINT16, [5], (5,)),
        (TensorProto.BOOL, [True, False], (1, 0)),
    ],
)
def test_int_elements_of_proto_tensors(data_type, values, expected):
    proto = helper.make_tensor("t", data_type, [len(values)], values)
    tensor = ir.serde.TensorProtoTensor(proto)
    assert int_elements(tensor) == expected
    assert tensor_dims(tensor) == (len(values),)


def test_int_elements_of_a_float_external_tensor_reads_nothing():
    proto = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    proto.data_location = TensorProto.EXTERNAL
    del proto.external_data[:]
    entry = proto.external_data.add()
    entry.key, entry.value = "location", "missing.bin"
    assert int_elements(ir.serde.TensorProtoTensor(proto)) is None  # no file opened


def test_int_elements_of_an_unknown_type_code_still_fails_the_generic_way():
    proto = helper.make_tensor("t", TensorProto.INT64, [1], [1])
    proto.data_type = 999  # no such DataType: its read raises (reported by the context)
    assert 999 not in _tensors._NON_INTEGER_CODES
    with pytest.raises(ValueError):
        int_elements(ir.serde.TensorProtoTensor(proto))
